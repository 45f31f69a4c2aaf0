"""A diff before an edit lands (issue 12, Decision 13): the pending approval event carries the
file, the unified diff and the new text; the message request's action items name the run and the
call; a Deny can carry the user's reason; with `experimental.agentLsp.editPreview` the edit goes
to the editor's own preview as an annotated applyEdit."""

from __future__ import annotations

import attrs
from lsprotocol import types

from tests.e2e.harness import capabilities, tool_messages

EDIT = {"id": "call_e", "name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}


async def test_the_pending_event_carries_the_diff_and_the_request_names_its_call(open_editor, model, workspace):
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "fixed"}])
    editor = await open_editor()
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix add")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done"
    assert tool_messages(model.requests[-1])["call_e"].startswith("applied: edit calc.py")
    [pending] = [e for e in editor.events(started["runId"], "approval") if e["state"] == "pending"]
    assert pending["uri"] == (workspace / "calc.py").resolve().as_uri()
    assert pending["diff"].startswith("--- a/calc.py\n+++ b/calc.py\n")
    assert "-    return a - b\n+    return a + b\n" in pending["diff"]
    assert pending["newText"] == (workspace / "calc.py").read_text()
    assert pending["agentId"] == "main"
    [raw] = editor.raw_approval_requests
    assert [a["title"] for a in raw["actions"]] == ["Allow", "Allow for session", "Always allow", "Deny"]  # Decision 27
    assert all(a["runId"] == started["runId"] and a["callId"] == pending["callId"] for a in raw["actions"])


async def test_a_deny_with_a_reason_reaches_the_model(open_editor, model, workspace):
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "ok, not that way"}])
    editor = await open_editor()
    editor.approval_answers = [{"title": "Deny", "reason": "use a helper function instead"}]
    started = await editor.run("fix add")
    await editor.wait_stop(started["runId"])
    result = tool_messages(model.requests[-1])["call_e"]
    assert result.startswith("denied: the user said no; the user's reason: use a helper function instead.")
    assert "a - b" in (workspace / "calc.py").read_text()


async def test_agent_lsp_approve_takes_a_reason_too(open_editor, model):
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "ok"}])
    editor = await open_editor("helix")
    started = await editor.run("fix add")
    pending = await editor.wait_for(lambda: [e for e in editor.events(started["runId"], "approval") if e["state"] == "pending"], 15, "pending")
    assert await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending[0]["callId"],
                                                     "decision": "deny", "reason": "not today"}) is True
    await editor.wait_stop(started["runId"])
    assert "the user's reason: not today" in tool_messages(model.requests[-1])["call_e"]


def preview_caps() -> types.ClientCapabilities:
    caps = capabilities("visual-studio-code")
    assert caps.workspace.workspace_edit.change_annotation_support is not None
    return attrs.evolve(caps, experimental={"agentLsp": {"editPreview": True}})


async def test_with_edit_preview_the_edit_goes_to_the_editors_preview(open_editor, model, workspace):
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "fixed"}])
    editor = await open_editor(preview_caps())
    started = await editor.run("fix add")
    report = await editor.wait_stop(started["runId"])

    assert editor.approval_requests == [], "the preview asks: no separate message request"
    assert report["stopReason"] == "done" and "a + b" in (workspace / "calc.py").read_text()
    edit = editor.edits[-1].edit
    annotation = edit.change_annotations["agent-lsp-preview"]
    assert annotation.needs_confirmation is True and annotation.label == "agent-lsp: edit_file calc.py"
    # the confirming entry is a no-op; the change itself goes as its one hunk, pre-ticked (Decision 80)
    [[noop, change]] = [c.edits for c in edit.document_changes]
    assert noop.annotation_id == "agent-lsp-preview" and noop.new_text == ""
    assert change.annotation_id == "agent-lsp-hunk-0"
    assert edit.change_annotations["agent-lsp-hunk-0"].needs_confirmation is False
    assert [e["state"] for e in editor.events(started["runId"], "approval")] == ["pending", "preview"]


async def test_an_edit_rejected_in_the_preview_is_a_denial(open_editor, model, workspace):
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "understood"}])
    editor = await open_editor(preview_caps())
    editor.refuse_edits = True
    editor.refuse_reason = None  # the preview's "Discard": applied false, no failure reason
    started = await editor.run("fix add")
    report = await editor.wait_stop(started["runId"])
    assert report["denied"] == 1
    result = tool_messages(model.requests[-1])["call_e"]
    assert result.startswith("denied: the user rejected the edit in the preview")


async def test_change_annotation_support_alone_is_not_a_preview(open_editor, model):
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "fixed"}])
    editor = await open_editor("visual-studio-code")
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix add")
    await editor.wait_stop(started["runId"])
    assert len(editor.approval_requests) == 1
    assert editor.edits[-1].edit.change_annotations is None


async def test_a_preview_applied_after_a_cancel_is_recorded_and_announced(open_editor, model, workspace):
    """CONTRACT "Edit review": the run is cancelled while its preview is open; the user applies
    the edit later: it goes into the run's checkpoint (rewindable) and a status event says so."""
    original = (workspace / "calc.py").read_text()
    model.add("fix", [{"tool_calls": [EDIT]}, {"text": "never"}])
    editor = await open_editor(preview_caps())
    editor.edit_delay = 2.0  # the user looks at the preview for a while
    started = await editor.run("fix add")
    await editor.wait_for(lambda: editor.edits, 15, "the previewed edit")
    await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "cancelled"
    # nothing follows the run's stop event (Decision 73): the editor is told with showMessage
    await editor.wait_for(lambda: [m for m in editor.client.messages if "after the run was cancelled" in m.message],
                          15, "the announcement")
    assert not [e for e in editor.events(started["runId"], "status") if "after the run was cancelled" in e["text"]]
    assert "a + b" in (workspace / "calc.py").read_text()
    result = await editor.execute("agentLsp.rewind", {"runId": started["runId"]})
    assert len(result["restored"]) == 1 and (workspace / "calc.py").read_text() == original


async def test_the_late_edits_status_line_carries_the_turn_it_belongs_to(open_editor, model, workspace):
    """Issue 21.18: a tool's own status line carries the turn of the loop it came from, like
    every status line, not `turn: null`; the preview applied after the cancel is no status line
    at all any more (nothing follows the stop, Decision 73) but the editor's message."""
    read = {"id": "call_r", "name": "read_file", "arguments": {"path": "calc.py"}}
    model.add("fix", [{"tool_calls": [read]}, {"tool_calls": [EDIT]}, {"text": "never"}])
    editor = await open_editor(preview_caps())
    editor.edit_delay = 2.0
    started = await editor.run("fix add")
    await editor.wait_for(lambda: editor.edits, 15, "the previewed edit")
    await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "cancelled"
    await editor.wait_for(lambda: [m for m in editor.client.messages if "after the run was cancelled" in m.message],
                          15, "the announcement")
    [edit_line] = [e for e in editor.events(started["runId"], "status") if e["text"].startswith("turn 2: edit calc.py")]
    assert edit_line["turn"] == 2 and edit_line["agentId"] == "main"
    assert editor.events(started["runId"])[-1]["kind"] == "stop"


async def test_one_preview_at_a_time_even_after_the_run_that_opened_it_was_cancelled(open_editor, model, workspace):
    """Issue 21.12: VS Code shows one refactoring preview at a time and answers a second one with
    a Cancel that the model would take for the user's no. A second run's preview waits until
    the editor answered the first, also when the first run was cancelled while its preview was
    open; both edits land and neither is reported as rejected."""
    model.add("first", [{"tool_calls": [EDIT]}, {"text": "never"}])
    model.add("second", [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a * b", "new_text": "b * a"}}]},
                         {"text": "done"}])
    editor = await open_editor(preview_caps())
    editor.edit_delay = 2.0  # the user looks at each preview for a while
    first = await editor.run("first")
    await editor.wait_for(lambda: editor.edits, 15, "the first preview")
    await editor.execute("agentLsp.cancel", {"runId": first["runId"]})
    second = await editor.run("second")
    report = await editor.wait_stop(second["runId"], 20)

    assert report["stopReason"] == "done" and report["denied"] == 0
    assert len(editor.edit_times) == 2
    (asked_1, answered_1), (asked_2, _) = editor.edit_times
    assert asked_2 >= answered_1 - 0.05, "the second preview was shown while the first was still open"
    text = (workspace / "calc.py").read_text()
    assert "a + b" in text and "b * a" in text
    waiting = [e for e in editor.events(second["runId"], "status") if "preview already open" in e.get("text", "")]
    assert waiting, "the second run said what it waits for"
