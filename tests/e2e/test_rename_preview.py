"""rename_symbol in the editor's own preview (CONTRACT "Edit review", issue 23, Decision 80): with
`experimental.agentLsp.editPreview` the rename goes out as ONE workspace/applyEdit, hunk by hunk
(each hunk its own ticked change, numbered across the files, plus one confirming no-op), with no
message request; hunks the user unticks are not applied and the model is told which, with the
rename's warning; a rejected preview is a denial that changes nothing; a preview applied after a
cancel is in the run's checkpoint for every file."""

from __future__ import annotations

import asyncio

import pytest

from tests.e2e.harness import tool_messages
from tests.e2e.test_edit_review import preview_caps
from tests.langservers.conftest import tool
from tests.unit.codeintel_kit import make_project

pytestmark = pytest.mark.timeout(150)

RENAME = {"id": "call_r", "name": "rename_symbol",
          "arguments": {"path": "pkg/models.py", "line": 5, "symbol": "total", "newName": "grand_total"}}


def servers() -> dict:
    return {"languageServers": {"auto": False, "servers": {
        "bp": {"command": [tool("basedpyright-langserver"), "--stdio"], "extensions": [".py"]}}}}


def project(root):
    make_project(root, files=1, every=1)  # pkg/models.py and its one caller pkg/mod_0000.py
    return ["pkg/models.py", "pkg/mod_0000.py"], {p: p.read_text() for p in (root / "pkg").glob("*.py")}


async def test_the_rename_is_one_annotated_apply_edit_for_every_file(open_editor, model, workspace):
    root = workspace.resolve()
    files, before = project(root)
    model.add("RENAME", [{"tool_calls": [RENAME]}, {"text": "renamed"}])
    editor = await open_editor(preview_caps(), init=servers())
    started = await editor.run("RENAME Invoice.total to grand_total")
    report = await editor.wait_stop(started["runId"], 120)

    assert report["stopReason"] == "done", report
    assert editor.approval_requests == [], "the preview asks: no separate message request"
    assert len(editor.edits) == 1, "one workspace/applyEdit for every file"
    edit = editor.edits[0].edit
    annotation = edit.change_annotations["agent-lsp-preview"]
    assert annotation.needs_confirmation is True
    assert annotation.label == "agent-lsp: rename_symbol pkg/models.py"
    assert editor.edits[0].label == annotation.label
    assert sorted(c.text_document.uri for c in edit.document_changes) == sorted((root / r).as_uri() for r in files)
    # Decision 80: one confirming no-op entry, then every hunk its own ticked change, numbered
    # across the files in file order
    every = [e for c in edit.document_changes for e in c.edits]
    noop, hunk_edits = every[0], every[1:]
    assert noop.annotation_id == "agent-lsp-preview" and noop.new_text == ""
    assert noop.range.start == noop.range.end
    assert [e.annotation_id for e in hunk_edits] == ["agent-lsp-hunk-0", "agent-lsp-hunk-1"]
    hunks = [edit.change_annotations[e.annotation_id] for e in hunk_edits]
    assert [h.needs_confirmation for h in hunks] == [False, False]
    assert [h.label for h in hunks] == ["hunk 1 of 2 @@ -2,7 +2,7 @@", "hunk 2 of 2 @@ -3,7 +3,7 @@"]
    # one edit per renamed place (the preview lists each), not one span from first to last
    assert all(e.range.start.line == e.range.end.line and "\n" not in e.new_text for e in hunk_edits)
    assert "invoice.grand_total()" in (root / "pkg/mod_0000.py").read_text()
    assert [e["state"] for e in editor.events(started["runId"], "approval")] == ["pending", "preview"]

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert sorted(result["restored"]) == sorted((root / r).as_uri() for r in files), result
    assert all(p.read_text() == text for p, text in before.items())


async def test_a_rename_rejected_in_the_preview_is_a_denial_that_changes_nothing(open_editor, model, workspace):
    root = workspace.resolve()
    _, before = project(root)
    model.add("RENAME", [{"tool_calls": [RENAME]}, {"text": "understood"}])
    editor = await open_editor(preview_caps(), init=servers())
    editor.refuse_edits = True
    editor.refuse_reason = None  # the preview's "Discard": applied false, no failure reason
    started = await editor.run("RENAME Invoice.total to grand_total")
    report = await editor.wait_stop(started["runId"], 120)

    assert report["denied"] == 1, report
    assert editor.approval_requests == []
    assert tool_messages(model.requests[-1])["call_r"].startswith("denied: the user rejected the edit in the preview")
    assert all(p.read_text() == text for p, text in before.items())


async def test_a_rename_preview_applied_after_a_cancel_is_in_the_checkpoint(open_editor, model, workspace):
    root = workspace.resolve()
    files, before = project(root)
    model.add("RENAME", [{"tool_calls": [RENAME]}, {"text": "never"}])
    editor = await open_editor(preview_caps(), init=servers())
    editor.edit_delay = 2.0  # the user looks at the preview for a while
    started = await editor.run("RENAME Invoice.total to grand_total")
    await editor.wait_for(lambda: editor.edits, 120, "the previewed rename")
    await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "cancelled"
    # nothing follows the run's stop event (Decision 73): the editor is told with showMessage
    said = await editor.wait_for(lambda: [m.message for m in editor.client.messages
                                          if "after the run was cancelled" in m.message], 15, "the announcement")
    assert "rename of `total` to `grand_total`" in said[0] and "rewind can take it back" in said[0]
    assert "invoice.grand_total()" in (root / "pkg/mod_0000.py").read_text()
    result = await editor.execute("agentLsp.rewind", {"runId": started["runId"]})
    assert sorted(result["restored"]) == sorted((root / r).as_uri() for r in files), result
    assert all(p.read_text() == text for p, text in before.items())


async def test_a_hunk_unticked_in_the_rename_preview_is_left_and_the_model_is_warned(open_editor, model, workspace):
    root = workspace.resolve()
    _, before = project(root)
    model.add("RENAME", [{"tool_calls": [RENAME]}, {"text": "noted"}])
    editor = await open_editor(preview_caps(), init=servers())
    editor.preview_unticked = set()
    editor.edit_hold = asyncio.Event()  # the user looks at the preview
    started = await editor.run("RENAME Invoice.total to grand_total")
    await editor.wait_for(lambda: editor.edits, 120, "the previewed rename")
    caller = (root / "pkg/mod_0000.py").as_uri()
    [in_caller] = [c for c in editor.edits[0].edit.document_changes if c.text_document.uri == caller]
    unticked = {e.annotation_id for e in in_caller.edits if e.annotation_id != "agent-lsp-preview"}
    [index] = [int(name.rsplit("-", 1)[1]) for name in unticked]
    editor.preview_unticked |= unticked  # the user unticks the caller's hunk, then Apply
    editor.edit_hold.set()
    report = await editor.wait_stop(started["runId"], 120)

    assert report["stopReason"] == "done" and report["denied"] == 0, report
    assert "def grand_total(self)" in (root / "pkg/models.py").read_text()
    assert (root / "pkg/mod_0000.py").read_text() == before[root / "pkg/mod_0000.py"]
    result = tool_messages(model.requests[-1])["call_r"]
    kept = 2 - index  # the other hunk (of two), 1-based
    assert result.startswith("applied in part: rename `total` to `grand_total` in 2 files"), result
    assert f"applied hunk {kept} of 2; the user rejected hunk {index + 1} of 2 (pkg/mod_0000.py lines 3-9)" in result
    assert "-    return invoice.total() + 0\n+    return invoice.grand_total() + 0" in result
    assert "only part of the rename was applied, so the code may not compile" in result
    # the checkpoint holds what landed: a rewind puts the renamed file back, the other is as it was
    await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert all(p.read_text() == text for p, text in before.items())


async def test_a_rename_with_every_hunk_unticked_but_the_confirming_entry_is_a_denial(open_editor, model, workspace):
    root = workspace.resolve()
    _, before = project(root)
    model.add("RENAME", [{"tool_calls": [RENAME]}, {"text": "understood"}])
    editor = await open_editor(preview_caps(), init=servers())
    editor.preview_unticked = {"agent-lsp-hunk-0", "agent-lsp-hunk-1"}
    editor.preview_confirmed = True  # Apply with only the entry that changes nothing
    started = await editor.run("RENAME Invoice.total to grand_total")
    report = await editor.wait_stop(started["runId"], 120)

    assert report["denied"] == 1, report
    assert tool_messages(model.requests[-1])["call_r"].startswith("denied: the user rejected the edit in the preview")
    assert all(p.read_text() == text for p, text in before.items())
