"""agentLsp.fork's core (Decision 77): the fork's history is the parent's as it stood before the
run (compaction included), kept in its own base record; a fork of a fork before a run it lists;
removing a fork leaves its parent's transcripts alone."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.state.fork import fork_session
from agent_lsp.agent.state.sessions import SessionStore
from tests.unit.kit import call, run, tools_reply

pytestmark = pytest.mark.timeout(60)

SUMMARY = "SUMMARY-OF-EARLIER-WORK: logs were read."
RAW = {"usage": {"prompt_tokens": 0}}  # the estimator stays at characters / 4 (test_compaction)
SMALL = {"contextWindow": 4000, "toolOutputLimit": 3000}


async def test_a_fork_after_a_compaction_has_the_compacted_history(model, workspace, state_dir, tmp_path):
    logs = []
    for n in range(6):
        (workspace / f"log{n}.txt").write_text("".join(f"log {n} line {i:03d}: something\n" for i in range(70)))
        logs.append(f"log{n}.txt")
    model.add("GOAL-7", [{"text": "noted", **RAW}, *[tools_reply(call("read_file", path=n), **RAW) for n in logs],
                         {"text": "done", **RAW}, {"text": "third", **RAW}])
    model.add("", [{"text": SUMMARY, "repeat": 10}])
    session = Session()
    await run("GOAL-7: read the logs", model, workspace, session=session, **SMALL)
    _, events, _ = await run("now read all the logs", model, workspace, session=session, **SMALL)
    assert events.of("compaction")
    before_third = copy.deepcopy(session.messages())
    assert any(SUMMARY in str(m.get("content")) for m in before_third)
    third, _, _ = await run("third", model, workspace, session=session, **SMALL)

    store = SessionStore(state_dir, workspace)
    fork = await fork_session(store, session, third.run_id, tmp_path)
    assert fork.messages() == before_third
    assert (await store.load(fork.id)).messages() == before_third  # rebuilt from its base record
    assert [r.run_id for r in session.runs if r.kind == "run"][-1] == third.run_id  # parent unchanged


async def test_a_fork_of_a_fork_and_removing_a_fork(model, workspace, state_dir, tmp_path):
    model.add("FIRST", [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    session = Session()
    a, _, _ = await run("FIRST", model, workspace, session=session)
    after_a = copy.deepcopy(session.messages())
    b, _, _ = await run("second", model, workspace, session=session)
    after_b = copy.deepcopy(session.messages())
    c, _, _ = await run("third", model, workspace, session=session)
    store = SessionStore(state_dir, workspace)

    first = await fork_session(store, session, c.run_id, tmp_path)
    assert first.messages() == after_b
    assert [(r.run_id, r.forked_from) for r in first.runs if r.kind == "run"] == [
        (a.run_id, session.id), (b.run_id, session.id)]
    second = await fork_session(store, first, b.run_id, tmp_path)  # before a run it lists
    assert second.messages() == after_a
    assert [r.forked_from for r in second.runs if r.kind == "run"] == [session.id]

    base = Path(next(r.transcript for r in first.runs if r.kind == "base"))
    assert store.remove(first.id) is True
    assert Path(a.transcript).exists() and Path(b.transcript).exists()  # the parent's stay
    assert (await store.load(second.id)).messages() == after_a
    assert base.is_relative_to(tmp_path)  # a transcriptDir outside the state dir is the user's
