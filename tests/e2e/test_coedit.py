"""Co-editing (issue 35, CONTRACT "Working beside the user"): an edit computed on the text the
tool read is merged at apply time with what the user changed while the approval waited: one
versioned edit keeping every user change, or a conflict that applies nothing and tells the model."""

from __future__ import annotations

import sys

import pytest
from lsprotocol import types

from tests.e2e.harness import tool_messages

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"


def edit_call(old: str, new: str, path: str = "calc.py", call_id: str = "call_edit") -> dict:
    return {"tool_calls": [{"id": call_id, "name": "edit_file",
                            "arguments": {"path": path, "old_text": old, "new_text": new}}]}


def result_of(editor, run_id: str, call_id: str) -> dict:
    return next(e for e in editor.events(run_id, "toolResult") if e["callId"] == call_id)


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim"])
async def test_a_disjoint_change_typed_while_the_approval_waits_is_merged(open_editor, model, workspace, caps):
    model.add("fix the add", [edit_call("a - b", "a + b"), {"text": "fixed"}])
    editor = await open_editor(caps)
    uri = editor.open("calc.py")
    typed = CALC.replace("return a * b", "return a * b  # the user's note")

    def user_types_then_allows(_params):
        editor.type_into("calc.py", typed)  # version 2, reaches the server before the answer
        return "Allow"

    editor.approval_answers = [user_types_then_allows]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done", report
    # both changes in the buffer: the user's line 6 and the agent's line 2
    assert editor.text("calc.py") == typed.replace("a - b", "a + b")
    [params] = editor.edits  # ONE edit, against the buffer as the user left it
    if params.edit.document_changes:
        [change] = params.edit.document_changes
        assert isinstance(change, types.TextDocumentEdit) and change.text_document.version == 2
    told = tool_messages(model.requests[-1])["call_edit"]
    assert "the file had changed since it was read; your edit was merged" in told, told
    assert "lines 2" in told  # where the agent's change now is
    # Decision 81: the buffer had unsaved changes, so our clients leave it unsaved
    assert "not saved: you were editing it" in told, told
    assert result_of(editor, started["runId"], "call_edit")["ok"] is True
    assert report["editedFiles"] == [uri]


async def test_an_overlapping_change_is_a_conflict_that_applies_nothing(open_editor, model):
    model.add("fix the add", [edit_call("a - b", "a + b"), {"text": "it conflicted"}])
    editor = await open_editor("visual-studio-code")
    editor.open("calc.py")
    typed = CALC.replace("return a - b", "return b - a  # the user rewrote it")

    def user_types_then_allows(_params):
        editor.type_into("calc.py", typed)
        return "Allow"

    editor.approval_answers = [user_types_then_allows]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["editedFiles"] == []
    assert editor.edits == [] and editor.text("calc.py") == typed  # nothing applied
    told = tool_messages(model.requests[-1])["call_edit"]
    assert "conflict" in told and "Read the file again" in told, told
    assert "your lines:\n      return a + b" in told  # the agent's lines ...
    assert "current lines:\n      return b - a  # the user rewrote it" in told  # ... and the user's
    assert result_of(editor, started["runId"], "call_edit")["ok"] is False


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim"])
async def test_a_closed_file_changed_on_disk_while_the_approval_waits_gets_the_edit_on_the_right_lines(
        open_editor, model, workspace, caps):
    model.add("fix the add", [edit_call("a - b", "a + b"), {"text": "fixed"}])
    editor = await open_editor(caps)
    header = '"""Arithmetic."""\n\nimport math\n\n'

    def disk_changes_then_allow(_params):
        # another program (a git checkout, a formatter) rewrites the file: the agent's line moves
        (workspace / "calc.py").write_text(header + CALC)
        return "Allow"

    editor.approval_answers = [disk_changes_then_allow]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done", report
    # before: the range was computed on the old text (line 1) and replaced `import math`'s line
    assert (workspace / "calc.py").read_text() == header + CALC.replace("a - b", "a + b")
    told = tool_messages(model.requests[-1])["call_edit"]
    assert "your edit was merged" in told and "lines 6" in told, told


async def test_a_file_created_while_the_approval_waits_is_a_conflict_not_prepended_to(open_editor, model, workspace):
    model.add("add notes", [
        {"tool_calls": [{"id": "call_new", "name": "write_file",
                         "arguments": {"path": "notes.md", "content": "agent notes\n"}}]},
        {"text": "it existed"},
    ])
    editor = await open_editor("visual-studio-code")

    def user_creates_then_allows(_params):
        (workspace / "notes.md").write_text("the user's own notes\n")
        return "Allow"

    editor.approval_answers = [user_creates_then_allows]
    started = await editor.run("add notes")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["editedFiles"] == []
    assert (workspace / "notes.md").read_text() == "the user's own notes\n"
    assert editor.edits == []
    told = tool_messages(model.requests[-1])["call_new"]
    assert "conflict" in told and "created since the agent looked" in told, told


async def test_the_approval_shows_the_diff_on_the_text_as_it_is_when_asked(open_editor, model, workspace, tmp_path):
    """A PreToolUse hook runs between the read and the question (as a formatter or the user
    could change the file then): the diff the user approves is the one that lands."""
    header = '"""Arithmetic."""\n\n'
    script = tmp_path / "someone_edits.py"
    script.write_text(f"from pathlib import Path\nPath({str(workspace / 'calc.py')!r}).write_text({header + CALC!r})\n")
    hooks = {"PreToolUse": [{"matcher": "", "hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]}
    model.add("fix the add", [edit_call("a - b", "a + b"), {"text": "fixed"}])
    editor = await open_editor("visual-studio-code", init={"hooks": hooks})
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done", report
    pending = next(e for e in editor.events(started["runId"], "approval") if e.get("diff"))
    assert ' """Arithmetic."""\n' in pending["diff"] and "@@ -1,7 +1,7 @@" in pending["diff"], pending["diff"]
    assert "changed since it was read: this is the edit merged with that change" in editor.approval_requests[0].message
    assert (workspace / "calc.py").read_text() == header + CALC.replace("a - b", "a + b")


async def test_an_edit_to_a_clean_open_buffer_says_nothing_about_saving(open_editor, model):
    model.add("fix the add", [edit_call("a - b", "a + b"), {"text": "fixed"}])
    editor = await open_editor("visual-studio-code")
    editor.open("calc.py")  # as on disk: our clients save it after the edit
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix the add function")
    await editor.wait_stop(started["runId"])

    told = tool_messages(model.requests[-1])["call_edit"]
    assert told.startswith("applied: edit calc.py") and "not saved" not in told and "merged" not in told, told


async def test_a_rewind_of_a_merged_edit_keeps_the_users_change(open_editor, model, workspace):
    """The file before the run, for a rewind, is the text the edit was merged onto: rewinding
    takes the agent's change back and leaves the user's."""
    model.add("fix the add", [edit_call("a - b", "a + b"), {"text": "fixed"}])
    editor = await open_editor("visual-studio-code")
    editor.open("calc.py")
    typed = CALC.replace("return a * b", "return a * b  # the user's note")

    def user_types_then_allows(_params):
        editor.type_into("calc.py", typed)
        return "Allow"

    editor.approval_answers = [user_types_then_allows]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])
    assert editor.text("calc.py") == typed.replace("a - b", "a + b")

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})

    assert result["conflicts"] == [] and len(result["restored"]) == 1, result
    assert editor.text("calc.py") == typed  # the agent's change gone, the user's kept
