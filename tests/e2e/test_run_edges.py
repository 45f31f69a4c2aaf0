"""Issue 32, a run's edges over LSP: a run ends exactly once whatever cancels it meanwhile (a
second cancel while a Notification hook settles); a hook's `continue: false` on one of several
parallel calls stops the others before the run's `stop` (Decision 73: nothing follows it); a run
that starts while the server shuts down still gets a cancelled stop and a report; every `status`
event carries its turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(60)


def hooks(event: str, command: str, matcher: str = "") -> dict:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}


def transcript_types(report: dict) -> list[str]:
    lines = Path(report["transcript"]).read_text().splitlines()
    return [json.loads(line)["type"] for line in lines]


async def settled(editor, run_id: str) -> None:
    """The run's task is over on the server (a cancel of it answers false); every notification
    it sent came before that answer."""
    assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is False


async def test_a_second_cancel_while_the_run_ends_still_ends_it_once(open_editor, model, workspace):
    model.add("guarded", [tools_reply(call("run_command", "cmd", command="touch nope"))])
    # The Notification hook runs beside the approval and is still running when the run ends: the
    # first cancel's cleanup gives it its grace; the second cancel arrives then.
    editor = await open_editor(init={"hooks": hooks("Notification", "sleep 4")})
    editor.approval_answers = ["ignore"]
    started = await editor.run("guarded command")
    run_id = started["runId"]
    await editor.wait_for(lambda: editor.approval_requests, 10, "the approval request")

    assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is True
    assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is True  # still ending
    report = await editor.wait_stop(run_id, 15)
    end = await editor.wait_progress(run_id, types.WorkDoneProgressEnd, 10)
    await settled(editor, run_id)

    assert report["stopReason"] == "cancelled" and report["stopCause"] == "user", report
    assert end.message.startswith("cancelled")
    assert len(editor.events(run_id, "stop")) == 1
    assert editor.events(run_id)[-1]["kind"] == "stop"
    assert transcript_types(report)[-1] == "stop"
    assert not (workspace / "nope").exists()


async def test_a_hook_stopping_one_parallel_call_stops_its_siblings_first(open_editor, model):
    stop = "echo '{\"continue\": false, \"stopReason\": \"enough reading\"}'"
    model.add("three reads", [tools_reply(
        call("read_file", "fast", path="calc.py"),
        call("delegate", "slow", task="look around slowly"),
        call("list_files", "list"),
    )])
    # The sub-agent's model answers late: it is still waiting when the read's hook stops the run.
    model.add("look around slowly", [{"text": "late news", "ttft": 3}])
    editor = await open_editor(init={"hooks": hooks("PostToolUse", stop, "read_file")})
    started = await editor.run("three reads at once")
    run_id = started["runId"]
    report = await editor.wait_stop(run_id, 20)
    # The sub-agent's request is over (answered, or given up when the run cancelled it) ...
    await editor.wait_for(
        lambda: [e for e in model.log if e.key == "look around slowly" and e.t_end], 10,
        "the sub-agent's model request to end")
    await asyncio.sleep(0)  # ... then what the server did with it has been sent:
    await editor.execute("agentLsp.sessions", {})
    await settled(editor, run_id)

    assert report["stopReason"] == "fatal" and report["stopCause"] == "hook", report
    assert "enough reading" in report["error"]
    events = editor.events(run_id)
    assert events[-1]["kind"] == "stop", events[-3:]
    assert "late news" not in json.dumps(events)
    assert transcript_types(report)[-1] == "stop"
    results = {e["callId"] for e in editor.events(run_id, "toolResult")}
    assert "slow" not in results  # it never finished: the stop cancelled it


async def test_a_run_starting_while_the_server_shuts_down_is_cancelled_with_a_report(
    open_editor, model, workspace
):
    model.add("first", [{"text": "one"}])
    model.add("late run", [{"text": "should not run"}])
    # The shutdown runs the SessionEnd hooks of the sessions used; while this one runs, the
    # editor's next run request is still taken (pygls drops requests only once it is over).
    ending = "touch session-ending; sleep 3"
    editor = await open_editor(init={"hooks": hooks("SessionEnd", ending)})
    first = await editor.run("first run")
    assert (await editor.wait_stop(first["runId"]))["stopReason"] == "done"

    shutting = asyncio.ensure_future(editor.shutdown(15))
    await editor.wait_for(lambda: (workspace / "session-ending").exists(), 15, "the shutdown")
    started = await editor.run("late run please")
    report = await editor.wait_stop(started["runId"], 15)
    await asyncio.wait_for(shutting, 15)

    assert report["stopReason"] == "cancelled" and report["stopCause"] == "shutdown", report
    # A progress that began ends, saying so; a run cancelled before the editor answered the
    # progress token's creation never began one (nothing is left open either way).
    progress = editor.progress(started["runId"])
    if any(isinstance(p, types.WorkDoneProgressBegin) for p in progress):
        end = await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd, 10)
        assert end.message.startswith("cancelled")
    assert transcript_types(report)[-1] == "stop"
    assert not [r for r in model.requests if "late run" in json.dumps(r)]


async def test_every_status_event_carries_its_turn(open_editor, model, workspace):
    model.add("ask me", [
        tools_reply(call("read_file", "r", path="calc.py")),
        tools_reply(call("run_command", "cmd", command="echo hi")),
        {"text": "done"},
    ])
    editor = await open_editor()
    editor.approval_answers = ["Allow"]
    started = await editor.run("ask me something")
    report = await editor.wait_stop(started["runId"], 20)

    assert report["stopReason"] == "done", report
    statuses = editor.events(started["runId"], "status")
    waiting = [e for e in statuses if e["text"].startswith("waiting for approval")]
    assert waiting and waiting[0]["turn"] == 2, waiting
    assert all(isinstance(e["turn"], int) for e in statuses), statuses
