"""Edits go out as workspace/applyEdit: against the buffer's unsaved text with its version,
refused when stale or by the editor (and the model is told), new files, UTF-16 positions."""

from __future__ import annotations

import os

import pytest
from lsprotocol import types

from tests.e2e.harness import code_units, tool_messages

EDITORS = ["visual-studio-code", "neovim"]


def edit_call(old: str, new: str, path: str = "calc.py", call_id: str = "call_edit") -> dict:
    return {"tool_calls": [{"id": call_id, "name": "edit_file", "arguments": {"path": path, "old_text": old, "new_text": new}}]}


def single_text_edit(editor, uri: str) -> tuple[types.TextEdit, int | None]:
    """The one TextEdit of the one applyEdit sent, and the version it carried (None: none)."""
    [params] = editor.edits
    edit = params.edit
    if edit.document_changes:
        [change] = edit.document_changes
        assert change.text_document.uri == uri
        [text_edit] = change.edits
        return text_edit, change.text_document.version
    [text_edit] = edit.changes[uri]
    return text_edit, None


@pytest.mark.parametrize("caps", EDITORS)
async def test_edit_is_computed_against_the_unsaved_buffer_and_sent_with_its_version(open_editor, model, workspace, caps):
    model.add("fix the add", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        edit_call("return a - b  # typed, unsaved", "return a + b  # typed, unsaved"),
        {"text": "fixed"},
    ])
    editor = await open_editor(caps)
    uri = editor.open("calc.py")
    unsaved = "def add(a, b):\n    return a - b  # typed, unsaved\n\n\ndef mul(a, b):\n    return a * b\n"
    editor.type_into("calc.py", unsaved)  # didChange, never saved: version 2
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done", report
    read = next(e for e in editor.events(started["runId"], "toolResult"))
    assert read["ok"] is True
    assert "# typed, unsaved" in tool_messages(model.requests[1])[read["callId"]]  # the read saw the buffer
    text_edit, version = single_text_edit(editor, uri)
    if editor.client.capabilities.workspace.workspace_edit.document_changes:
        assert version == 2  # a versioned TextDocumentEdit: the buffer's version
    else:
        assert version is None  # Neovim does not advertise documentChanges: plain `changes`
    assert text_edit.range.start.line == 1 and text_edit.range.end.line == 1  # only what changed
    assert editor.text("calc.py") == unsaved.replace("a - b", "a + b")
    assert "a - b" in (workspace / "calc.py").read_text() and "typed" not in (workspace / "calc.py").read_text()
    assert report["editedFiles"] == [uri]


@pytest.mark.parametrize(("caps", "delivered"), [
    ("visual-studio-code", True), ("neovim", True),
    # the server has not heard of the change yet: only a versioned edit lets the editor refuse
    ("visual-studio-code", False),
])
async def test_edit_to_a_buffer_changed_after_the_agent_read_it_is_refused_and_the_model_told(open_editor, model, caps, delivered):
    model.add("fix the add", [edit_call("a - b", "a + b", call_id="call_stale"), {"text": "it changed under me"}])
    editor = await open_editor(caps)
    uri = editor.open("calc.py")
    typed = "def add(a, b):\n    return a - b  # the user is typing\n"

    def user_types_then_allows(_params):
        if delivered:
            editor.type_into("calc.py", typed)  # reaches the server before the answer
        else:
            editor.type_locally("calc.py", typed)
        return "Allow"

    editor.approval_answers = [user_types_then_allows]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["editedFiles"] == []
    assert editor.text("calc.py") == typed  # the user's text survives
    told = tool_messages(model.requests[-1])["call_stale"]
    assert "not applied" in told, told
    result = next(e for e in editor.events(started["runId"], "toolResult") if e["callId"] == "call_stale")
    assert result["ok"] is False
    for params in editor.edits:  # if an edit went out at all, it carried the old version
        for change in params.edit.document_changes or []:
            assert change.text_document.version == 1
    if not delivered:
        assert len(editor.edits) == 1 and "version 1 is stale" in told  # the editor's reason
    assert uri in editor.buffers


@pytest.mark.parametrize("how", ["applied-false", "json-rpc-error"])
@pytest.mark.parametrize("caps", EDITORS)
async def test_refused_apply_edit_goes_back_to_the_model(open_editor, model, caps, how):
    model.add("fix the add", [edit_call("a - b", "a + b", call_id="call_refused"), {"text": "the editor said no"}])
    editor = await open_editor(caps)
    editor.open("calc.py")
    editor.refuse_edits = how == "applied-false"
    editor.error_edits = how == "json-rpc-error"
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["finalText"] == "the editor said no"
    assert report["editedFiles"] == []
    told = tool_messages(model.requests[-1])["call_refused"]
    assert "not applied" in told
    if how == "applied-false":
        assert "refused by the test editor" in told  # the editor's failureReason is passed on
    assert len(editor.edits) == 1 and "a - b" in editor.text("calc.py")


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim", "emacs"])
async def test_new_file(open_editor, model, workspace, caps):
    content = "def sub(a, b):\n    return a - b\n"
    model.add("new module", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "pkg/sub.py", "content": content}}]},
        {"text": "created"},
    ])
    editor = await open_editor(caps, init={"approval": {"default": "allow"}})
    started = await editor.run("new module please")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done"
    uri = (workspace / "pkg" / "sub.py").as_uri()
    assert report["editedFiles"] == [uri]
    [params] = editor.edits
    ws_edit = params.edit.workspace_edit if hasattr(params.edit, "workspace_edit") else params.edit
    workspace_edit_caps = editor.client.capabilities.workspace.workspace_edit
    if workspace_edit_caps.document_changes and "create" in (workspace_edit_caps.resource_operations or []):
        create, insert = ws_edit.document_changes  # VS Code: CreateFile, then the text
        assert isinstance(create, types.CreateFile) and create.uri == uri
        assert insert.text_document.uri == uri and insert.edits[0].new_text == content
        assert ws_edit.changes is None
    else:  # no documentChanges (Neovim) or no resource operations (Emacs): one insert at 0:0
        assert not ws_edit.document_changes
        [insert] = ws_edit.changes[uri]
        assert insert.new_text == content
        assert insert.range.start == insert.range.end == types.Position(line=0, character=0)
    assert (workspace / "pkg" / "sub.py").read_text() == content  # as the test editor applied it


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim", "helix"])
async def test_positions_after_an_emoji_are_in_the_negotiated_encoding(open_editor, model, caps):
    line = "greeting = '😀 héllo'; answer = 41"
    model.add("fix the answer", [edit_call("answer = 41", "answer = 42", path="emoji.py"), {"text": "42 now"}])
    editor = await open_editor(caps, init={"approval": {"default": "allow"}})
    uri = editor.open("emoji.py", f"# top\n{line}\nprint(answer)\n")
    started = await editor.run("fix the answer")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done"
    assert editor.text("emoji.py") == f"# top\n{line.replace('41', '42')}\nprint(answer)\n"
    text_edit, _ = single_text_edit(editor, uri)
    column = line.index("41")  # the minimal edit touches only the digit that changed
    expected = sum(code_units(c, editor.encoding) for c in line[: column + 1])
    assert text_edit.range.start == types.Position(line=1, character=expected), (editor.encoding, text_edit)
    assert text_edit.new_text == "2"
    if caps == "visual-studio-code":
        assert editor.encoding == "utf-16" and expected == column + 2  # the emoji is two UTF-16 units


async def test_run_command_after_an_edit_never_blocks_on_the_file_on_disk(open_editor, model, workspace):
    """Issue 11.7: before run_command the server compares the buffers the agent changed with
    their files on disk. That read is off the event loop and cannot block: with the file on
    disk replaced by a FIFO nobody writes to, the command still runs, its result says the
    file is unsaved, and the server goes on answering (the read used to hang the server)."""
    model.add("edit then test", [
        edit_call("return a - b", "return a + b"),
        {"ttft": 1.5, "tool_calls": [{"id": "cmd", "name": "run_command", "arguments": {"command": "echo ran"}}]},
        {"text": "done"},
    ])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    editor.open("calc.py")
    started = await editor.run("edit then test")
    await editor.wait_for(lambda: "a + b" in editor.text("calc.py"), 15, "the edit in the buffer")
    disk = workspace / "calc.py"
    disk.unlink()
    os.mkfifo(disk)  # another program put a FIFO where the file was, before the command
    report = await editor.wait_stop(started["runId"], 20)

    assert report["stopReason"] == "done", report
    result = tool_messages(model.requests[-1])["cmd"]
    assert "ran" in result and "still unsaved" in result and "calc.py" in result, result
    assert isinstance(await editor.execute("agentLsp.sessions", {}), list)  # the server still answers


@pytest.mark.parametrize("delay", [0.3, 1.0], ids=["neovim-debounce", "eglot-idle"])
async def test_a_second_edit_to_a_file_waits_for_the_editors_did_change(open_editor, model, workspace, delay):
    """Issue 21.14: a stock client sends the didChange of an applied edit late (Neovim debounces
    it, eglot waits for idle); the next edit to that file in the same reply is computed on the
    text the first one left, not on stale text the editor would refuse."""
    model.add("two edits", [{"tool_calls": [
        {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}},
        {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a * b", "new_text": "b * a"}}]},
        {"text": "done"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    editor.did_change_delay = delay
    uri = editor.open("calc.py")

    started = await editor.run("two edits")
    report = await editor.wait_stop(started["runId"], 20)

    assert report["stopReason"] == "done"
    text = editor.buffers[uri][1]
    assert "a + b" in text and "b * a" in text, "the second edit was lost or refused as stale"
