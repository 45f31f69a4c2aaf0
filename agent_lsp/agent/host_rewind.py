"""Rewind as the host does it: a run's files put back (agent/state/rewind.py), then the session's
history cut at that run with a note for the model and the rewound runs marked, live and on
disk; and the one rule for "the last rewindable run". A part AgentHost holds, given only what it
needs of the host."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent_lsp.agent.fs.shared_read import SharedRead
from agent_lsp.agent.state.changes import RunChanges
from agent_lsp.agent.state.checkpoints import CheckpointStore
from agent_lsp.agent.state.rewind import (
    RewindError,
    RewindResult,
    RunNotFinished,
    rewind,
    rewound_by,
)
from agent_lsp.agent.state.session import Entry, RunRecord, Session
from agent_lsp.agent.state.sessions import SessionError, SessionStore
from agent_lsp.agent.state.transcript import Redactor, Transcript
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)


class HostRewinds:
    """The host's rewind: its stores, its sessions (live or loaded once) and its runs in flight
    (a run of the session blocks its rewind)."""

    def __init__(
        self,
        *,
        checkpoints: Callable[[list[Path]], CheckpointStore],
        sessions: Callable[[list[Path]], SessionStore],
        live: Callable[[str], tuple[Session, SessionStore] | None],
        load: Callable[[SessionStore, str], Awaitable[tuple[Session, SessionStore]]],
        in_flight: Callable[[str], bool],
    ):
        self.checkpoint_store = checkpoints
        self.store = sessions
        self.live = live
        self._load_once = load
        self.in_flight = in_flight
        self._listings = SharedRead()  # concurrent code actions share one listing

    async def rewind(
        self,
        roots: list[Path],
        workspace: Any,
        run_id: str,
        *,
        force: bool = False,
        include_later: bool = False,
        binary_ok: bool = True,
        settings: Settings | None = None,
    ) -> RewindResult:
        """Rewind a run's files (and with include_later the session's later runs that touched
        them), then drop that run and every later one from the session's history with a note
        for the model. The rewind's transcript goes where the runs' go (the settings'
        `transcriptDir`). RewindError (a ValueError) for an unknown or running run."""
        store = self.checkpoint_store(roots)
        try:
            manifest = await asyncio.to_thread(store.load, run_id)
        except OSError as exc:
            raise RewindError(str(exc)) from None
        if manifest is None:
            raise RewindError(
                f"unknown runId {run_id!r}: no checkpoint of that run in this workspace "
                "(a run that changed no file has none)"
            )
        live = self.live(manifest.session_id)
        if self.in_flight(run_id) or (live is not None and live[0].running):
            raise RunNotFinished(
                f"a run of session {manifest.session_id} is still running; "
                "wait for it or cancel it before rewinding"
            )
        try:
            result = await rewind(
                store,
                workspace,
                workspace,
                run_id,
                force=force,
                include_later=include_later,
                binary_ok=binary_ok,
            )
        except OSError as exc:
            raise RewindError(
                f"the checkpoint store cannot be used ({exc}); nothing was changed"
            ) from None
        transcripts = settings.transcript_path() if settings is not None else state_dir() / "runs"
        await self._forget_rewound(roots, manifest.session_id, result, transcripts)
        return result

    async def _forget_rewound(
        self, roots: list[Path], session_id: str, result: RewindResult, transcripts: Path
    ) -> None:
        """The session's history drops the rewound run and every later one; a note tells the
        model."""
        sessions = self.store(roots)
        live = self.live(session_id)
        try:
            session = (
                live[0] if live is not None else (await self._load_once(sessions, session_id))[0]
            )
        except SessionError as exc:
            log.info(
                "rewind: the session %s is not resumable (%s); its files were restored anyway",
                session_id,
                exc,
            )
            return
        rewound = set(result.runs)
        ids = [r.run_id for r in session.runs if r.kind == "run"]
        first = min((ids.index(r) for r in rewound if r in ids), default=None)
        if first is None:  # a rewind of a rewind: files only
            dropped: set[str] = set()
        else:
            dropped = set(ids[first:])
        cut = next(
            (i for i, e in enumerate(session.history) if e.run_id in dropped), len(session.history)
        )
        shown = ", ".join(PathGuard(roots).display(p) for p in result.restored) or "none"
        note = Entry(
            {
                "role": "user",
                "content": "[The user rewound "
                f"{'run ' + ', '.join(sorted(rewound)) if dropped else 'an earlier rewind'}: "
                f"these files were restored to their state before it: {shown}. "
                "What was said and done in that run and after it is gone from this conversation; "
                "read the files again before relying on them.]",
            },
            "note",
            result.rewind_id,
        )
        del session.history[cut:]
        session.history.append(note)
        # their files leave the session's edited files (Session.edited reads these)
        for record in session.runs:
            if record.run_id in dropped:
                record.rewound = True
        transcript = Transcript(
            transcripts / f"{result.rewind_id}.jsonl", result.rewind_id, Redactor([])
        )
        await transcript.write("main", 0, "history", op="truncate", length=cut)
        await transcript.write("main", 0, "history", op="append", entries=[note.to_record()])
        await transcript.write("main", 0, "rewind", result=result.to_dict(), runs=sorted(rewound))
        await transcript.close()
        session.runs.append(
            RunRecord(
                result.rewind_id,
                str(transcript.path),
                time.time(),
                f"rewind of {', '.join(sorted(rewound))}",
                "done",
                RunChanges.of(result.restored),
                kind="rewind",
            )
        )
        session.updated = time.time()
        await sessions.save(session)

    async def last_rewindable(
        self, roots: list[Path], session_id: str | None = None
    ) -> tuple[str, int] | None:
        """The newest finished run of the workspace that changed files and was not rewound:
        (its id, how many files it can restore). The one rule (CONTRACT "Rewind", Decision 17)
        for the LSP "rewind last run" code action and ACP's `/rewind` without an id, which
        passes its session_id to look at that session's runs only. Asked on every cursor move in
        VS Code: the manifests are read off the event loop, and only when they changed."""
        store = self.checkpoint_store(roots)
        # One listing for the requests that arrive together (50 code actions must not queue 50
        # listings before a streaming run's own work on the thread pool); a save since the one
        # in flight began (this process's runs) starts another, so the newest run is seen.
        manifests = await self._listings((store.dir, store.saves), store.summaries)
        undone = rewound_by(manifests)  # a rewind undone in turn leaves its runs rewindable
        for manifest in reversed(manifests):
            if session_id is not None and manifest.session_id != session_id:
                continue
            if (
                manifest.kind == "run"
                and manifest.finished
                and manifest.run_id not in undone
                and not self.in_flight(manifest.run_id)
                and manifest.restorable
            ):
                return manifest.run_id, manifest.restorable
        return None
