"""`agentLsp.fork`: a new session whose history is another's as it stood before one of its runs
(CONTRACT "Conversation (turn 4)", Decisions 51 and 77). Files are not touched and the parent
stays as it was."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from agent_lsp.agent.state.session import RunRecord, Session, new_id
from agent_lsp.agent.state.sessions import SessionError, SessionStore, title_of
from agent_lsp.agent.state.transcript import Redactor, Transcript

FORK_SUFFIX = " (fork)"


class RunNotInSession(SessionError):
    """The run to fork before is not a run of that session (-32602)."""


async def fork_session(
    store: SessionStore, parent: Session, run_id: str, transcripts: Path
) -> Session:
    """The fork, saved: its model history is the parent's before `run_id` (replayed from the
    parent's transcripts, compactions and rewinds included) copied into the fork's own base
    record, a transcript under `transcripts`; it lists the parent's earlier runs read-only
    (`forkedFrom`). The parent may be running (its runs before `run_id` have ended)."""
    index = next(
        (i for i, r in enumerate(parent.runs) if r.run_id == run_id and r.kind == "run"), None
    )
    if index is None:
        raise RunNotInSession(
            f"run {run_id!r} is not a run of session {parent.id} (see agentLsp.history)"
        )
    before = parent.runs[:index]
    history, spills = await asyncio.to_thread(store.rebuild, before)
    fork = Session(
        title=title_of(parent.title + FORK_SUFFIX),  # cut after adding (Decision 77)
        model=parent.model,
        code_intel=parent.code_intel,
        reasoning_effort=parent.reasoning_effort,
        history=history,
        spill_files=spills,
    )
    fork.runs = [_listed(record, parent.id) for record in before]
    base_id = new_id("b")
    transcript = Transcript(transcripts / f"{base_id}.jsonl", base_id, Redactor([]))
    # what session rebuilds replay: the history from nothing, and the spill files it names
    await transcript.write("main", 0, "history", op="truncate", length=0)
    await transcript.write(
        "main", 0, "history", op="append", entries=[e.to_record() for e in history]
    )
    await transcript.write(
        "main",
        0,
        "fork",
        sessionId=parent.id,
        beforeRun=run_id,
        spills=sorted(str(p) for p in spills),
    )
    await transcript.close()
    fork.runs.append(
        RunRecord(
            base_id,
            str(transcript.path),
            time.time(),
            f"fork of session {parent.id} before run {run_id}",
            "done",
            kind="base",
        )
    )
    await store.save(fork)  # persisted even when empty (a fork before the first run)
    return fork


def _listed(record: RunRecord, parent_id: str) -> RunRecord:
    """A copy of a parent's run for the fork's list: its own changes object (the fork never
    writes to the parent's), marked with the session that ran it."""
    copy = RunRecord.from_dict(record.to_dict())
    copy.forked_from = record.forked_from or parent_id
    copy.reached = record.reached
    copy.events = record.events  # what history shows of it: the same, read once
    return copy
