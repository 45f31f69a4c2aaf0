"""Per-hunk review over LSP (issue 35, Decisions 58 and 80): every edit approval lists its files'
hunks; `agentLsp.approve {decision: "allow", hunks}` applies only those, and the model reads
which hunks the user rejected, their lines and their text; `hunks: []` is a denial; `hunks`
with another decision, or indices the approval does not offer, are -32602."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from tests.e2e.harness import tool_messages

BEFORE = "".join(f"line {i}\n" for i in range(1, 61))
# three hunks: line 5 changed, line 40 becomes two lines, line 55 removed
AFTER = BEFORE.replace("line 5\n", "LINE FIVE\n").replace("line 40\n", "forty\nforty-one\n")
AFTER = AFTER.replace("line 55\n", "")
WRITE = {"id": "call_w", "name": "write_file", "arguments": {"path": "notes.txt", "content": AFTER}}


async def pending_of(editor, run_id):
    found = await editor.wait_for(
        lambda: [e for e in editor.events(run_id, "approval") if e["state"] == "pending"], 15, "the pending approval")
    return found[0]


async def start(open_editor, model, workspace, caps="helix"):
    (workspace / "notes.txt").write_text(BEFORE)
    model.add("tidy", [{"tool_calls": [WRITE]}, {"text": "ok"}])
    editor = await open_editor(caps)
    started = await editor.run("tidy the notes")
    return editor, started["runId"], await pending_of(editor, started["runId"])


async def test_the_approval_lists_the_hunks_and_keeping_two_applies_only_those(open_editor, model, workspace):
    editor, run_id, pending = await start(open_editor, model, workspace)
    [file] = pending["files"]
    assert file["uri"] == (workspace / "notes.txt").resolve().as_uri()
    assert file["diff"] == pending["diff"]
    assert file["hunks"] == [{"index": 0, "header": "@@ -2,7 +2,7 @@"},
                             {"index": 1, "header": "@@ -37,7 +37,8 @@"},
                             {"index": 2, "header": "@@ -52,7 +53,6 @@"}]

    assert await editor.execute("agentLsp.approve", {"runId": run_id, "callId": pending["callId"],
                                                     "decision": "allow", "hunks": [0, 2]}) is True
    report = await editor.wait_stop(run_id)

    assert report["stopReason"] == "done"
    text = (workspace / "notes.txt").read_text()
    assert "LINE FIVE\n" in text and "line 55\n" not in text  # hunks 1 and 3 landed
    assert "line 40\n" in text and "forty" not in text  # hunk 2 did not
    result = tool_messages(model.requests[-1])["call_w"]
    assert "applied hunks 1 and 3 of 3; the user rejected hunk 2 of 3 (lines 37-43)" in result
    assert "-line 40\n+forty\n+forty-one\n" in result  # the rejected hunk's text
    assert text.splitlines()[36:43] == [f"line {i}" for i in range(37, 44)]  # lines 37-43 as named


async def test_an_answer_with_hunks_withdraws_the_message_request(open_editor, model, workspace):
    editor, run_id, pending = await start(open_editor, model, workspace, "visual-studio-code")
    await editor.wait_for(lambda: editor.approval_request_ids, 15, "the message request")
    request_id = editor.approval_request_ids[0]
    assert await editor.execute("agentLsp.approve", {"runId": run_id, "callId": pending["callId"],
                                                     "decision": "allow", "hunks": [1]}) is True
    await editor.wait_stop(run_id)
    await editor.wait_for(lambda: request_id in editor.cancelled_ids, 5, "the $/cancelRequest of the approval")
    text = (workspace / "notes.txt").read_text()
    assert "forty\nforty-one\n" in text and "LINE FIVE" not in text and "line 55\n" in text
    assert "the user rejected hunk 1 of 3 (line" in tool_messages(model.requests[-1])["call_w"]


async def test_no_hunk_kept_is_a_denial(open_editor, model, workspace):
    editor, run_id, pending = await start(open_editor, model, workspace)
    assert await editor.execute("agentLsp.approve", {"runId": run_id, "callId": pending["callId"],
                                                     "decision": "allow", "hunks": []}) is True
    report = await editor.wait_stop(run_id)
    assert report["denied"] == 1
    assert (workspace / "notes.txt").read_text() == BEFORE
    assert tool_messages(model.requests[-1])["call_w"].startswith("denied: the user rejected every hunk")


@pytest.mark.parametrize("answer", [
    {"decision": "deny", "hunks": [0]},
    {"decision": "allowSession", "hunks": [0]},
    {"decision": "allow", "hunks": [3]},
    {"decision": "allow", "hunks": [-1]},
    {"decision": "allow", "hunks": ["0"]},
])
async def test_hunks_the_approval_does_not_offer_are_invalid_params(open_editor, model, workspace, answer):
    editor, run_id, pending = await start(open_editor, model, workspace)
    with pytest.raises(JsonRpcInvalidParams):
        await editor.execute("agentLsp.approve", {"runId": run_id, "callId": pending["callId"], **answer})
    # the approval still waits: a plain allow then applies the whole edit
    assert await editor.execute("agentLsp.approve", {"runId": run_id, "callId": pending["callId"],
                                                     "decision": "allow"}) is True
    await editor.wait_stop(run_id)
    assert (workspace / "notes.txt").read_text() == AFTER


async def test_a_command_offers_no_hunks(open_editor, model, workspace):
    model.add("ls", [{"tool_calls": [{"id": "call_c", "name": "run_command", "arguments": {"command": "ls"}}]},
                     {"text": "ok"}])
    editor = await open_editor("helix")
    started = await editor.run("ls")
    pending = await pending_of(editor, started["runId"])
    assert "files" not in pending
    with pytest.raises(JsonRpcInvalidParams):
        await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending["callId"],
                                                  "decision": "allow", "hunks": [0]})
    await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending["callId"], "decision": "deny"})
    await editor.wait_stop(started["runId"])


async def test_a_cut_diff_offers_no_hunk_choice(open_editor, model, workspace):
    big = "".join(f"row {i} {'x' * 60}\n" for i in range(20_000))  # emptying it: a diff over 1 MB
    (workspace / "big.txt").write_text(big)
    model.add("big", [{"tool_calls": [{"id": "call_b", "name": "write_file",
                                       "arguments": {"path": "big.txt", "content": "short\n"}}]}, {"text": "ok"}])
    editor = await open_editor("helix")
    started = await editor.run("big")
    pending = await pending_of(editor, started["runId"])
    assert pending["diffTruncated"] is True
    assert [f["hunks"] for f in pending["files"]] == [[]]
    with pytest.raises(JsonRpcInvalidParams):
        await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending["callId"],
                                                  "decision": "allow", "hunks": [0]})
    await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending["callId"], "decision": "deny"})
    await editor.wait_stop(started["runId"])


@pytest.mark.timeout(150)
async def test_a_rename_offers_hunks_across_files_and_warns_when_kept_in_part(open_editor, model, workspace):
    from tests.e2e.test_rename_preview import RENAME, project, servers

    root = workspace.resolve()
    _, before = project(root)
    model.add("RENAME", [{"tool_calls": [RENAME]}, {"text": "renamed in part"}])
    editor = await open_editor("helix", init=servers())
    started = await editor.run("RENAME Invoice.total to grand_total")
    pending = await editor.wait_for(
        lambda: [e for e in editor.events(started["runId"], "approval") if e["state"] == "pending"], 120, "pending")
    files = pending[0]["files"]
    assert [f["uri"] for f in files] == [(root / "pkg/models.py").as_uri(), (root / "pkg/mod_0000.py").as_uri()]
    indices = [h["index"] for f in files for h in f["hunks"]]
    assert indices == list(range(len(indices))) and len(indices) >= 2  # global across the files
    last = indices[-1]  # the caller's hunk: rejected
    assert await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending[0]["callId"],
                                                     "decision": "allow", "hunks": indices[:-1]}) is True
    await editor.wait_stop(started["runId"], 120)

    assert "grand_total" in (root / "pkg/models.py").read_text()
    assert (root / "pkg/mod_0000.py").read_text() == before[root / "pkg/mod_0000.py"]
    result = tool_messages(model.requests[-1])["call_r"]
    assert f"the user rejected hunk {last + 1} of {last + 1} (pkg/mod_0000.py line" in result
    assert "may not compile" in result


def preview_editor_caps():
    from tests.e2e.test_edit_review import preview_caps

    return preview_caps()


async def test_the_preview_sends_each_hunk_ticked_and_an_unticked_hunk_is_rejected(open_editor, model, workspace):
    """Decision 80: one annotated change per hunk that needs no confirmation (ticked) plus one
    confirming no-op (so the preview opens); the server reads the buffer after the apply."""
    (workspace / "notes.txt").write_text(BEFORE)
    model.add("tidy", [{"tool_calls": [WRITE]}, {"text": "ok"}])
    editor = await open_editor(preview_editor_caps())
    editor.preview_unticked = {"agent-lsp-hunk-1"}  # the user unticks the second hunk, then Apply
    started = await editor.run("tidy the notes")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and editor.approval_requests == []
    notes = editor.edits[-1].edit.change_annotations
    assert notes["agent-lsp-preview"].needs_confirmation is True
    assert [notes[f"agent-lsp-hunk-{i}"].needs_confirmation for i in range(3)] == [False, False, False]
    text = (workspace / "notes.txt").read_text()
    assert "LINE FIVE\n" in text and "line 40\n" in text and "forty" not in text and "line 55\n" not in text
    result = tool_messages(model.requests[-1])["call_w"]
    assert "applied hunks 1 and 3 of 3; the user rejected hunk 2 of 3 (lines 37-43)" in result
    assert "+forty\n+forty-one\n" in result


async def test_apply_with_every_hunk_unticked_is_a_rejection(open_editor, model, workspace):
    (workspace / "notes.txt").write_text(BEFORE)
    model.add("tidy", [{"tool_calls": [WRITE]}, {"text": "ok"}])
    editor = await open_editor(preview_editor_caps())
    editor.preview_unticked = {f"agent-lsp-hunk-{i}" for i in range(3)}
    started = await editor.run("tidy the notes")
    report = await editor.wait_stop(started["runId"])
    assert report["denied"] == 1 and (workspace / "notes.txt").read_text() == BEFORE
    assert tool_messages(model.requests[-1])["call_w"].startswith("denied: the user rejected the edit in the preview")


async def test_apply_with_only_the_confirming_entry_ticked_is_a_rejection(open_editor, model, workspace):
    """The user may tick the no-op entry and untick every hunk: Apply then changes nothing, which
    is a denial (not an error of the tool)."""
    (workspace / "notes.txt").write_text(BEFORE)
    model.add("tidy", [{"tool_calls": [WRITE]}, {"text": "ok"}])
    editor = await open_editor(preview_editor_caps())
    editor.preview_unticked = {f"agent-lsp-hunk-{i}" for i in range(3)}
    editor.preview_confirmed = True
    started = await editor.run("tidy the notes")
    report = await editor.wait_stop(started["runId"])
    assert report["denied"] == 1 and (workspace / "notes.txt").read_text() == BEFORE
    assert tool_messages(model.requests[-1])["call_w"].startswith("denied: the user rejected the edit in the preview")


async def test_the_message_requests_allow_may_carry_the_kept_hunks(open_editor, model, workspace):
    """Our Emacs client answers the message request itself: `{title: "Allow", hunks}` keeps only
    those hunks, like `agentLsp.approve {hunks}`; hunks it does not offer apply nothing."""
    (workspace / "notes.txt").write_text(BEFORE)
    model.add("tidy", [{"tool_calls": [WRITE]}, {"text": "ok"}])
    model.add("again", [{"tool_calls": [{**WRITE, "id": "call_x"}]}, {"text": "ok"}])
    editor = await open_editor("visual-studio-code")
    editor.approval_answers = [{"title": "Allow", "hunks": [2]}, {"title": "Allow", "hunks": [7]}]
    started = await editor.run("tidy the notes")
    await editor.wait_stop(started["runId"])
    text = (workspace / "notes.txt").read_text()
    assert "line 55\n" not in text and "LINE FIVE" not in text and "forty" not in text
    assert "applied hunk 3 of 3; the user rejected hunk 1 of 3" in tool_messages(model.requests[-1])["call_w"]

    again = await editor.run("again")
    report = await editor.wait_stop(again["runId"])
    assert report["denied"] == 1 and (workspace / "notes.txt").read_text() == text
    assert "hunk choice was wrong" in tool_messages(model.requests[-1])["call_x"]
