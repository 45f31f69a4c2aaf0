"""Issue 21.17: our own failures are ours. A bug in our stream handling is an internal error with
its cause logged, never "the endpoint sent something that is not a valid completion stream" and
never sent again; a late edit's recording is never lost unseen; the spiral message says what it
counts; failures once swallowed are logged and, where a user sees a result, said."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent_lsp.agent.events import Event
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.state.sessions import workspace_state
from tests.e2e.test_edit_review import EDIT, preview_caps
from tests.unit.kit import Events, call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(90)


class BrokenTextSink(Events):
    """A front end's stream handling with a bug: it fails on model text."""

    def __call__(self, event: Event) -> None:
        if event.kind == "text":
            raise TypeError('can only concatenate str (not "NoneType") to str')
        super().__call__(event)


async def test_a_bug_in_our_stream_handling_is_an_internal_error_not_retried(model, workspace, caplog):
    model.add([{"text": "hello there", "repeat": 3}])
    with caplog.at_level(logging.ERROR, logger="agent_lsp"):
        report, _, _ = await run("hi", model, workspace, events=BrokenTextSink())
    assert report.stop_reason == StopReason.FATAL
    assert report.error.startswith("internal error: TypeError: can only concatenate str")
    assert "not a valid completion stream" not in report.error
    assert len(model.requests) == 1, "our own bug is never sent to the endpoint again"
    logged = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], TypeError)]
    assert logged, "the cause is logged with its traceback"


async def test_a_stream_of_garbage_is_still_the_endpoints_fault(model, workspace):
    model.add([{"text": "broken", "fault": "garbage", "repeat": 5}])
    report, _, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.FATAL and "not a valid completion stream" in report.error
    assert len(model.requests) == 3


async def test_the_spiral_message_counts_over_the_run_not_in_a_row(model, workspace):
    failing = call("read_file", path="nope.txt")
    replies = []
    for _ in range(5):  # the failing call, then a different successful one: never twice in a row
        replies += [tools_reply(failing), tools_reply(call("read_file", path="README.md"))]
    model.add(replies)
    report, _, _ = await run("read", model, workspace, maxTurns=30)
    assert report.stop_reason == StopReason.MAX_TURNS
    assert "read_file call failed 5 times in this run" in report.summary
    assert "in a row" not in report.summary


class BuffersThatFail(DiskWorkspace):
    def open_texts(self) -> dict[Path, str]:
        raise RuntimeError("the editor's document store is gone")


async def test_search_says_when_open_buffers_could_not_be_read(model, workspace, caplog):
    model.add([tools_reply(call("search", id="s", pattern="def add")), {"text": "ok"}])
    with caplog.at_level(logging.WARNING, logger="agent_lsp"):
        report, _, _ = await run("find", model, BuffersThatFail([workspace]))
    result = last_tool_results(model.requests[-1])["s"]
    assert "calc.py:1: def add(a, b):" in result
    assert "open buffers could not be read (RuntimeError: the editor's document store is gone)" in result
    assert "results come from the files on disk" in result
    assert any("open buffers could not be read" in r.getMessage() for r in caplog.records)


async def test_a_late_edit_that_cannot_be_recorded_is_said_not_lost(open_editor, model, workspace, state_dir):
    """A preview applied after a cancel, when the checkpoint store cannot keep it: the editor's
    message says rewind cannot take it back (not that it is in the checkpoint), and the server logs why."""
    blobs = workspace_state(state_dir, workspace) / "checkpoints" / "blobs"
    blobs.parent.mkdir(parents=True)
    blobs.write_text("not a folder")  # every blob write fails
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "never"}])
    editor = await open_editor(preview_caps())
    editor.edit_delay = 2.0
    started = await editor.run("fix add")
    await editor.wait_for(lambda: editor.edits, 15, "the previewed edit")
    await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "cancelled"
    # nothing follows the run's stop event (Decision 73): the editor's message says it
    said = await editor.wait_for(lambda: [m.message for m in editor.client.messages
                                          if "after the run was cancelled" in m.message], 15, "the announcement")
    assert "could not be added to the run's checkpoint" in said[0] and "rewind cannot take it back" in said[0]
    assert "rewind can take it back" not in said[0]
    await editor.wait_for(lambda: any("late edit" in line for line in editor.stderr), 10, "the cause in the server's log")


def test_the_demo_says_when_its_server_did_not_stop(capsys, caplog):
    from agent_lsp.demo.driver import _stop_problem

    with caplog.at_level(logging.WARNING, logger="agent_lsp"):
        _stop_problem("could not be stopped", TimeoutError("5 s"))
    err = capsys.readouterr().err
    assert "the demo's server could not be stopped (TimeoutError: 5 s)" in err
    assert caplog.records and caplog.records[0].exc_info
