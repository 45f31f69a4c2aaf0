"""Approvals: showMessageRequest (Allow / Allow for session / Deny / dismissed / unanswered),
and the agentLsp.approve and code-action paths for clients without it (Helix)."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from tests.e2e.harness import tool_messages

# One recorded set per path the server takes here (it reads only ClientCaps, capabilities.py): a
# run_command approval reads can_show_message_request (true for all but Helix, by client name)
# and can_create_progress. "emacs-29" (a window without showMessage, issue 11.3) stands for the
# sets with progress (VS Code, Neovim and "emacs-30" resolve to the same flags on this path);
# "eglot-1.9" (no window at all) for the one without. Edits and positions are not involved.
EDITORS = ["emacs-29", "eglot-1.9"]


def command_call(command: str, call_id: str | None = None) -> dict:
    call = {"name": "run_command", "arguments": {"command": command}}
    if call_id:
        call["id"] = call_id
    return {"tool_calls": [call]}


@pytest.mark.parametrize("caps", EDITORS)
async def test_allow_runs_the_command(open_editor, model, workspace, caps):
    model.add("make marker", [command_call("touch made-by-agent", "call_touch"), {"text": "made it"}])
    editor = await open_editor(caps)
    editor.approval_answers = ["Allow"]
    started = await editor.run("make marker file")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["denied"] == 0
    assert (workspace / "made-by-agent").exists()
    [request] = editor.approval_requests
    assert "run_command" in request.message or "command" in request.message
    assert "touch made-by-agent" in request.message  # exactly what would run
    # "Always allow" (Decision 27) saves `Bash(touch made-by-agent)`
    assert [a.title for a in request.actions] == ["Allow", "Allow for session", "Always allow", "Deny"]
    states = [e["state"] for e in editor.events(started["runId"], "approval")]
    assert states == ["pending", "allowed"]
    assert tool_messages(model.requests[-1])["call_touch"].startswith("exit code 0")


@pytest.mark.parametrize("caps", EDITORS)
async def test_allow_for_session_remembers_that_exact_command_in_that_session_only(open_editor, model, caps):
    model.add("echo twice", [
        command_call("echo one"), command_call("echo one"), command_call("echo two"), {"text": "echoed"},
    ])
    model.add("echo again", [command_call("echo one"), {"text": "echoed again"}])
    editor = await open_editor(caps)
    editor.approval_answers = ["Allow for session", "Allow", "Allow"]
    started = await editor.run("echo twice")
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done" and report["toolCalls"] == 3 and report["denied"] == 0
    asked = [r.message for r in editor.approval_requests]
    assert len(asked) == 2, asked  # the second identical `echo one` was not asked again
    assert "echo one" in asked[0] and "echo two" in asked[1]

    other = await editor.run("echo again")  # a new session: nothing remembered
    await editor.wait_stop(other["runId"])
    assert len(editor.approval_requests) == 3 and "echo one" in editor.approval_requests[2].message


async def test_allow_for_session_remembers_the_edit_tool(open_editor, model, workspace):
    model.add("two edits", [
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a * b", "new_text": "b * a"}}]},
        {"text": "edited twice"},
    ])
    editor = await open_editor("visual-studio-code")
    editor.open("calc.py")
    editor.approval_answers = ["Allow for session"]
    started = await editor.run("two edits")
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done" and len(editor.approval_requests) == 1
    assert "calc.py" in editor.approval_requests[0].message  # the path and a diff summary
    assert "-1 +1" in editor.approval_requests[0].message
    assert "a + b" in editor.text("calc.py") and "b * a" in editor.text("calc.py")


@pytest.mark.parametrize("answer", ["Deny", None], ids=["deny", "dismiss"])
@pytest.mark.parametrize("caps", EDITORS)
async def test_deny_or_dismiss_is_fed_back_to_the_model_and_the_run_goes_on(open_editor, model, workspace, caps, answer):
    model.add("make marker", [command_call("touch should-not-exist", "call_no"), {"text": "understood, I will not"}])
    editor = await open_editor(caps)
    editor.approval_answers = [answer]
    started = await editor.run("make marker file")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["denied"] == 1
    assert report["finalText"] == "understood, I will not"  # deny is not cancel
    assert not (workspace / "should-not-exist").exists()
    fed_back = tool_messages(model.requests[-1])["call_no"]
    assert "denied" in fed_back and "touch should-not-exist" in fed_back
    assert [e["state"] for e in editor.events(started["runId"], "approval")] == ["pending", "denied"]
    result = next(e for e in editor.events(started["runId"], "toolResult") if e["callId"] == "call_no")
    assert result["ok"] is False


async def test_unanswered_approval_times_out_as_a_denial_and_the_request_is_withdrawn(open_editor, model, workspace):
    model.add("make marker", [command_call("touch should-not-exist", "call_slow"), {"text": "no answer, moving on"}])
    editor = await open_editor("visual-studio-code", init={"approval": {"default": "ask", "timeout": 0.5}})
    editor.approval_answers = ["ignore"]
    started = await editor.run("make marker file")
    report = await editor.wait_stop(started["runId"], timeout=10)

    assert report["stopReason"] == "done" and report["denied"] == 1
    assert not (workspace / "should-not-exist").exists()
    assert "denied" in tool_messages(model.requests[-1])["call_slow"]
    assert editor.events(started["runId"], "approval")[-1]["state"] in ("denied", "withdrawn")
    [request_id] = editor.approval_request_ids
    await editor.wait_for(lambda: request_id in editor.cancelled_ids, 5, "the $/cancelRequest of the approval")


# -- clients without window/showMessageRequest -------------------------------------------------
async def pending_approval(editor, run_id: str) -> dict:
    events = await editor.wait_for(lambda: [e for e in editor.events(run_id, "approval") if e["state"] == "pending"],
                                   10, "a pending approval")
    return events[0]


async def test_helix_approves_with_the_approve_command(open_editor, model, workspace):
    model.add("make marker", [command_call("touch made-by-agent", "call_h"), {"text": "made it"}])
    editor = await open_editor("helix")
    started = await editor.run("make marker file")
    pending = await pending_approval(editor, started["runId"])
    assert pending["callId"] == "call_h" and "touch made-by-agent" in pending["detail"]

    assert await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": "call_h", "decision": "allow"}) is True
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done" and (workspace / "made-by-agent").exists()
    assert editor.approval_requests == []  # Helix was never sent a showMessageRequest
    assert await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": "call_h", "decision": "deny"}) is False


@pytest.mark.parametrize("choice", ["Allow for session", "Always allow", "Deny"])
async def test_helix_approves_with_a_code_action(open_editor, model, workspace, choice):
    model.add("make marker", [command_call("touch made-by-agent", "call_ca"), {"text": "finished"}])
    editor = await open_editor("helix")
    uri = editor.open("calc.py")
    started = await editor.run("make marker file")
    await pending_approval(editor, started["runId"])

    # offered at any position, with an empty range
    where = types.Range(start=types.Position(line=3, character=0), end=types.Position(line=3, character=0))
    actions = await asyncio.wait_for(editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=where,
        context=types.CodeActionContext(diagnostics=[]))), 10)
    approvals = [a for a in actions if a.command and a.command.command == "agentLsp.approve"]
    assert len(approvals) == 4, [a.title for a in actions]  # with "Always allow" (Decision 27)
    assert all("touch made-by-agent" in a.title for a in approvals)
    chosen = next(a for a in approvals if a.command.title == choice)
    assert await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=chosen.command.command, arguments=chosen.command.arguments)), 10) is True

    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done"
    assert (workspace / "made-by-agent").exists() == (choice != "Deny")
    assert report["denied"] == (1 if choice == "Deny" else 0)
    # once answered, no approval actions are left
    actions = await asyncio.wait_for(editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=where,
        context=types.CodeActionContext(diagnostics=[]))), 10)
    assert not [a for a in actions or [] if a.command and a.command.command == "agentLsp.approve"]
