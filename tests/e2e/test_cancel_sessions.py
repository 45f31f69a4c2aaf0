"""Cancel (progress cancel, agentLsp.cancel) during a model call and during an approval,
follow-ups in the same session, a busy session, and concurrent runs."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.e2e.harness import dangling_tool_calls, tool_messages

# VS Code and Neovim differ only in what the server reads for edits (documentChanges) and in the
# position encoding; these runs neither edit nor send positions, so one set is the same path.
EDITORS = ["visual-studio-code"]
CANCEL_DEADLINE = 5.0  # the contract says within a second; tests allow ~5x


async def cancel(editor, run_id: str, how: str) -> None:
    if how == "progress":
        await editor.wait_progress(run_id, types.WorkDoneProgressBegin, 10)
        editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=run_id))
    else:
        assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is True


@pytest.mark.parametrize("how", ["progress", "command"])
@pytest.mark.parametrize("caps", EDITORS)
async def test_cancel_during_a_model_call(open_editor, model, caps, how):
    model.add("slow one", [{"text": "never sent", "ttft": 30}])
    editor = await open_editor(caps)
    started = await editor.run("slow one please")
    run_id = started["runId"]
    await editor.wait_for(lambda: model.log, 10, "the model request")  # held in the model call
    asked = time.monotonic()
    await cancel(editor, run_id, how)
    report = await editor.wait_stop(run_id, timeout=CANCEL_DEADLINE)
    took = time.monotonic() - asked

    assert report["stopReason"] == "cancelled", report
    assert took < CANCEL_DEADLINE
    end = await editor.wait_progress(run_id, types.WorkDoneProgressEnd, 5)
    assert end.message.startswith("cancelled")
    assert "never sent" not in "".join(e["text"] for e in editor.events(run_id, "text"))
    assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is False  # already finished


@pytest.mark.parametrize("how", ["progress", "command"])
@pytest.mark.parametrize("caps", EDITORS)
async def test_cancel_during_a_pending_approval_then_follow_up_in_the_session(open_editor, model, workspace, caps, how):
    model.add("two tools", [
        {"text": "Reading, then testing.", "tool_calls": [
            {"id": "call_read", "name": "read_file", "arguments": {"path": "calc.py"}},
            {"id": "call_cmd", "name": "run_command", "arguments": {"command": "touch should-not-exist"}},
        ]},
        {"text": "Picking up where we left off."},  # the follow-up's reply
    ])
    editor = await open_editor(caps)
    editor.approval_answers = ["ignore"]  # the user looks away
    started = await editor.run("two tools please")
    run_id = started["runId"]
    await editor.wait_for(lambda: editor.approval_requests, 10, "the approval request")
    [request_id] = editor.approval_request_ids
    asked = time.monotonic()
    await cancel(editor, run_id, how)
    report = await editor.wait_stop(run_id, timeout=CANCEL_DEADLINE)

    assert report["stopReason"] == "cancelled" and time.monotonic() - asked < CANCEL_DEADLINE
    assert not (workspace / "should-not-exist").exists()
    await editor.wait_for(lambda: request_id in editor.cancelled_ids, 5, "the $/cancelRequest of the approval")
    assert editor.events(run_id, "approval")[-1]["state"] == "withdrawn"
    await editor.wait_progress(run_id, types.WorkDoneProgressEnd, 5)

    follow = await editor.run("and now?", sessionId=started["sessionId"])
    assert follow["sessionId"] == started["sessionId"] and follow["runId"] != run_id
    again = await editor.wait_stop(follow["runId"])
    assert again["stopReason"] == "done" and again["finalText"] == "Picking up where we left off."
    sent = model.requests[-1]
    assert dangling_tool_calls(sent) == []  # every tool call has a result
    results = tool_messages(sent)
    assert results["call_read"].startswith("1\t") or "def add" in results["call_read"]  # finished: kept
    assert "cancel" in results["call_cmd"]  # left without a result: "cancelled"
    users = [m["content"] for m in sent["messages"] if m["role"] == "user"]
    assert users[0].startswith("two tools please") and users[-1] == "and now?"


async def test_cancel_while_an_edit_waits_for_the_editor(open_editor, model):
    model.add("slow edit", [
        {"tool_calls": [{"id": "call_e", "name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
        {"text": "follow-up"},
    ])
    editor = await open_editor("visual-studio-code", init={"approval": {"default": "allow"}})
    editor.open("calc.py")
    editor.edit_delay = 30
    started = await editor.run("slow edit")
    await editor.wait_for(lambda: editor.edits, 10, "the applyEdit")
    assert await editor.execute("agentLsp.cancel", {"runId": started["runId"]}) is True
    report = await editor.wait_stop(started["runId"], timeout=CANCEL_DEADLINE)
    assert report["stopReason"] == "cancelled"
    await editor.wait_for(lambda: editor.edit_request_ids[0] in editor.cancelled_ids, 5, "the applyEdit's $/cancelRequest")

    follow = await editor.run("and now?", sessionId=started["sessionId"])  # the session still works
    assert (await editor.wait_stop(follow["runId"]))["stopReason"] == "done"
    assert dangling_tool_calls(model.requests[-1]) == []


async def test_cancel_while_the_progress_is_being_created(open_editor, model):
    model.add("quick cancel", [{"text": "never", "ttft": 30}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("quick cancel")
    assert await editor.execute("agentLsp.cancel", {"runId": started["runId"]}) is True  # at once
    report = await editor.wait_stop(started["runId"], timeout=CANCEL_DEADLINE)
    assert report["stopReason"] == "cancelled"
    assert await editor.execute("agentLsp.cancel", {"runId": "r-does-not-exist"}) is False  # still answers

    def settled():  # no progress at all (its creation was withdrawn), or one that ended
        progress = editor.progress(started["runId"])
        return not progress or isinstance(progress[-1], types.WorkDoneProgressEnd)

    await editor.wait_for(settled, 2, "the progress to end")
    await asyncio.sleep(0.3)  # nothing comes after the end
    progress = editor.progress(started["runId"])
    assert settled() and sum(isinstance(p, types.WorkDoneProgressBegin) for p in progress) <= 1


async def test_a_second_run_on_a_running_session_is_refused(open_editor, model):
    model.add("busy one", [{"text": "slow", "ttft": 30}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("busy one")
    with pytest.raises(JsonRpcException) as refused:
        await editor.run("me too", sessionId=started["sessionId"])
    assert "still running" in str(refused.value) and started["sessionId"] in str(refused.value)
    with pytest.raises(JsonRpcException) as unknown:
        await editor.run("who?", sessionId="s-unknown")
    assert "unknown sessionId" in str(unknown.value)
    assert await editor.execute("agentLsp.cancel", {"runId": started["runId"]}) is True
    assert (await editor.wait_stop(started["runId"], CANCEL_DEADLINE))["stopReason"] == "cancelled"


@pytest.mark.parametrize("caps", EDITORS)
async def test_two_concurrent_runs_each_have_their_own_stream_progress_and_report(open_editor, model, caps):
    alpha = "Alpha answers slowly, in many small pieces."
    beta = "Beta has a different answer."
    model.add("alpha task", [{"text": alpha, "chunk_size": 2, "chunk_delay": 0.01}])
    model.add("beta task", [{"text": beta, "chunk_size": 2, "chunk_delay": 0.01}])
    editor = await open_editor(caps)
    first, second = await asyncio.gather(editor.run("alpha task"), editor.run("beta task"))
    assert first["runId"] != second["runId"] and first["sessionId"] != second["sessionId"]
    reports = await asyncio.gather(editor.wait_stop(first["runId"]), editor.wait_stop(second["runId"]))

    for started, text, report in ((first, alpha, reports[0]), (second, beta, reports[1])):
        events = editor.events(started["runId"])
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert "".join(e["text"] for e in events if e["kind"] == "text") == text
        assert report["runId"] == started["runId"] and report["finalText"] == text
        end = await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd, 5)
        progress = editor.progress(started["runId"])
        assert isinstance(progress[0], types.WorkDoneProgressBegin) and progress[-1] is end
    by_run = [e["runId"] for e in editor.stream if e["runId"] in (first["runId"], second["runId"])]
    assert by_run.index(second["runId"]) < len(by_run) - by_run[::-1].index(first["runId"]) - 1  # interleaved
