"""Issue 22: one record of what a run changed. A rewind takes the rewound runs' files off the
session's edited files, in the live session as in the same session reloaded by a fresh host
(from its index and transcripts), and the "Files changed so far" line a compaction gives the
model says the same in both."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.agent.state.session import Session
from agent_lsp.agent.state.sessions import SessionStore
from tests.unit.kit import Events, ScriptedApprover, call, make_settings, tools_reply

pytestmark = pytest.mark.timeout(90)

RAW = {"usage": {"prompt_tokens": 0}}  # the estimator stays at characters / 4 (see test_compaction)
REWOUND = "The user rewound"  # the first user message of the session once its first run is rewound
SUMMARY = "SUMMARY-OF-EARLIER-WORK: the logs were read."


def ports(roots: list[Path]) -> RunPorts:
    return RunPorts(DiskWorkspace(roots), ScriptedApprover(), Events())


async def finish(hosted) -> None:
    await asyncio.wait_for(hosted.task, 30)
    assert hosted.report is not None and hosted.report.stop_reason == "done", hosted.report


def changed_line(requests: list[dict]) -> str:
    """The "Files changed so far" line of the first compaction note, as the model received it."""
    for request in requests:
        for message in request["messages"]:
            content = str(message.get("content"))
            if message["role"] == "user" and content.startswith("[Context compacted"):
                return next(line for line in content.splitlines() if line.startswith("Files changed so far:"))
    raise AssertionError("the follow-up never compacted its context")


async def follow_up_compacts(host: AgentHost, session: Session, store: SessionStore, roots: list[Path], model, logs: list[str]) -> str:
    """A follow-up that only reads (so it changes no file) and has its context compacted: the
    line the model is shown."""
    asked = len(model.requests_for(REWOUND))
    model.add(REWOUND, [*[tools_reply(call("read_file", path=n), **RAW) for n in logs], {"text": "read", **RAW}])
    model.add("", [{"text": SUMMARY, "repeat": 20}])
    settings = make_settings(model, contextWindow=4000, toolOutputLimit=3000, maxTurns=40)
    hosted = host.start(RunRequest("now read all the logs", session=session, store=store, settings=settings, ports=ports(roots)))
    await finish(hosted)
    return changed_line(model.requests_for(REWOUND)[asked:])


@pytest.fixture
def logs(workspace: Path) -> list[str]:
    names = []
    for n in range(6):
        name = f"log{n}.txt"
        # Each under compaction's STUB_MIN_CHARS, so old results are summarised, not squeezed to stubs.
        (workspace / name).write_text("".join(f"log {n} line {i:03d}: something happened here\n" for i in range(38)))
        names.append(name)
    return names


@pytest.mark.parametrize("seen_by", ["session", "compaction"])
async def test_a_rewound_runs_files_leave_the_session_live_and_reloaded(model, workspace, logs, seen_by):
    """Two runs edit calc.py then README.md; rewinding the first restores calc.py and drops both
    runs from the history. Seen by `session`: the session's edited files; by `compaction`: the
    "Files changed so far" line a follow-up's compaction shows the model."""
    roots = [workspace.resolve()]
    calc, readme = roots[0] / "calc.py", roots[0] / "README.md"
    original = calc.read_text(), readme.read_text()
    # RAW everywhere: the live session's estimator must not be calibrated differently from the
    # reloaded one's (fresh), or the two follow-ups would compact at different points.
    model.add("FIRST-EDIT", [tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b"), **RAW),
                             {"text": "fixed", **RAW},
                             tools_reply(call("edit_file", path="README.md", old_text="# sample", new_text="# sample, edited"), **RAW),
                             {"text": "noted", **RAW}])
    settings = make_settings(model)
    host = AgentHost()
    try:
        session, store = await host.open_session(roots, None)
        first = host.start(RunRequest("FIRST-EDIT: fix add()", session=session, store=store, settings=settings, ports=ports(roots)))
        await finish(first)
        second = host.start(RunRequest("and the README", session=session, store=store, settings=settings, ports=ports(roots)))
        await finish(second)
        assert list(session.edited) == [calc, readme], "before the rewind, both runs' files are the session's edited files"

        result = await host.rewind(roots, DiskWorkspace(roots), first.id)
        assert result.restored == [calc] and calc.read_text() == original[0]
        assert readme.read_text() != original[1], "the second run's edit stays on disk (only its history went)"

        fresh = AgentHost()  # the same session, reloaded from its index and transcripts
        try:
            reloaded, reloaded_store = await fresh.open_session(roots, session.id)
            assert reloaded is not session
            if seen_by == "session":
                assert list(session.edited) == list(reloaded.edited) == [], \
                    "the rewound runs' files are no longer the session's edited files, live or reloaded"
                return
            reloaded_line = await follow_up_compacts(fresh, reloaded, reloaded_store, roots, model, logs)
        finally:
            await fresh.aclose()
        live_line = await follow_up_compacts(host, session, store, roots, model, logs)
    finally:
        await host.aclose()
    assert (live_line, reloaded_line) == ("Files changed so far: none",) * 2, "the live and the reloaded session tell the model the same"


async def test_a_run_after_the_rewind_is_listed_live_and_reloaded(model, workspace):
    """The record is not emptied by a rewind: a later run's own edits are the session's edited
    files again, and the same in the reloaded session and in the session index's run list."""
    roots = [workspace.resolve()]
    calc, readme = roots[0] / "calc.py", roots[0] / "README.md"
    model.add("FIRST-EDIT", [tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")), {"text": "fixed"}])
    model.add(REWOUND, [tools_reply(call("edit_file", path="README.md", old_text="# sample", new_text="# sample, edited")),
                        {"text": "noted"}])
    settings = make_settings(model)
    host = AgentHost()
    try:
        session, store = await host.open_session(roots, None)
        first = host.start(RunRequest("FIRST-EDIT: fix add()", session=session, store=store, settings=settings, ports=ports(roots)))
        await finish(first)
        await host.rewind(roots, DiskWorkspace(roots), first.id)
        later = host.start(RunRequest("edit the README", session=session, store=store, settings=settings, ports=ports(roots)))
        await finish(later)
        assert later.report.edited_files == [readme.as_uri()]
        assert list(session.edited) == [readme]
        fresh = AgentHost()
        try:
            reloaded, _ = await fresh.open_session(roots, session.id)
            assert list(reloaded.edited) == [readme]
        finally:
            await fresh.aclose()
        listed = next(i for i in store.list() if i["sessionId"] == session.id)
        assert listed["editedFiles"] == [readme.as_uri()]
        assert [r["editedFiles"] for r in listed["runList"]] == [[calc.as_uri()], [readme.as_uri()]], \
            "each run's own record still names what it changed, the rewound one too"
    finally:
        await host.aclose()
