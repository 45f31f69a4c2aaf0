"""rename_symbol's apply over LSP: the LspWorkspace sends ONE workspace/applyEdit for every file
(a TextDocumentEdit each, with the open buffer's version), merges a file that moved on since the
agent read it (a conflict sends nothing), and reports the editor's refusal."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lsprotocol import types
from pygls.workspace import PositionCodec, TextDocument

from agent_lsp.agent.ports import Document, FileChange
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.workspace import LspWorkspace


class FakeClient:
    """What LspWorkspace uses of pygls's server: the open documents, the position codec, and
    send_request (answered at once with `applied`)."""

    def __init__(self, docs: dict[str, Any], applied: bool = True):
        self.sent: list[tuple[str, Any]] = []
        self.applied = applied
        self.workspace = SimpleNamespace(text_documents=docs, position_codec=PositionCodec(types.PositionEncodingKind.Utf16))
        self.protocol = SimpleNamespace(send_request=self.send_request)

    def send_request(self, method: str, params: Any, msg_id: str | None = None) -> concurrent.futures.Future:
        self.sent.append((method, params))
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(types.ApplyWorkspaceEditResult(applied=self.applied, failure_reason=None if self.applied else "no"))
        if self.applied:
            for edit in params.edit.document_changes or []:
                doc = docs_by_uri(self).get(edit.text_document.uri)
                if doc is not None:
                    doc.version += 1
        return future


def docs_by_uri(client: FakeClient) -> dict[str, Any]:
    return client.workspace.text_documents


def changes(tmp_path: Path) -> list[FileChange]:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 🎉area\n", encoding="utf-8")  # a closed file's text is re-read from disk
    b.write_text("area()\n")
    return [FileChange(a, Document(a, "x = 🎉area\n"), "x = 🎉surface\n"),
            FileChange(b, Document(b, "area()\n"), "surface()\n")]


async def test_one_apply_edit_for_every_file_with_the_open_buffers_version(tmp_path: Path):
    open_a = SimpleNamespace(uri=(tmp_path / "a.py").as_uri(), source="x = 🎉area\n", version=7)
    client = FakeClient({open_a.uri: open_a})
    ws = LspWorkspace(client, ClientCaps(can_apply_edit=True, has_document_changes=True), [tmp_path])  # type: ignore[arg-type]
    outcome = await ws.apply_all(changes(tmp_path), label="agent-lsp: rename_symbol area -> surface")
    assert outcome.applied
    assert len(client.sent) == 1
    method, params = client.sent[0]
    assert method == types.WORKSPACE_APPLY_EDIT and params.label == "agent-lsp: rename_symbol area -> surface"
    first, second = params.edit.document_changes
    assert (first.text_document.uri, first.text_document.version) == (open_a.uri, 7)
    assert (second.text_document.uri, second.text_document.version) == ((tmp_path / "b.py").as_uri(), None)
    edit = first.edits[0]
    assert (edit.range.start.character, edit.range.end.character, edit.new_text) == (6, 10, "surface"), "UTF-16: the emoji is two"


async def test_a_buffer_changed_on_the_edited_line_since_the_read_is_a_conflict_nothing_sent(tmp_path: Path):
    open_b = SimpleNamespace(uri=(tmp_path / "b.py").as_uri(), source="area()  # typed\n", version=3)
    client = FakeClient({open_b.uri: open_b})
    ws = LspWorkspace(client, ClientCaps(can_apply_edit=True, has_document_changes=True), [tmp_path])  # type: ignore[arg-type]
    outcome = await ws.apply_all(changes(tmp_path), label="x")
    assert not outcome.applied and outcome.conflict and not client.sent
    assert "conflict: b.py had changed since it was read" in outcome.message
    assert "nothing was changed" in outcome.message


async def test_a_file_changed_elsewhere_since_the_read_is_merged_into_the_one_edit(tmp_path: Path):
    b = tmp_path / "b.py"
    edits = [*changes(tmp_path)[:1], FileChange(b, Document(b, "import os\n\narea()\n"), "import os\n\nsurface()\n")]
    b.write_text("import os, sys  # the user's\n\narea()\n")  # closed: changed on disk
    client = FakeClient({})
    ws = LspWorkspace(client, ClientCaps(can_apply_edit=True, has_document_changes=True), [tmp_path])  # type: ignore[arg-type]
    outcome = await ws.apply_all(edits, label="x")
    assert outcome.applied and outcome.landed == {b: "import os, sys  # the user's\n\nsurface()\n"}
    assert "b.py: the file had changed since it was read; your edit was merged" in outcome.message
    [_, second] = client.sent[0][1].edit.document_changes
    [edit] = second.edits
    assert (edit.range.start.line, edit.new_text) == (2, "surface"), "built on the text now on disk"


async def test_without_document_changes_one_changes_edit_and_a_refusal_is_reported(tmp_path: Path):
    client = FakeClient({}, applied=False)
    ws = LspWorkspace(client, ClientCaps(can_apply_edit=True), [tmp_path])  # type: ignore[arg-type]
    outcome = await ws.apply_all(changes(tmp_path), label="x")
    assert not outcome.applied and outcome.message == "no"
    assert len(client.sent) == 1 and set(client.sent[0][1].edit.changes) == {
        (tmp_path / "a.py").as_uri(), (tmp_path / "b.py").as_uri()}


async def test_a_previewed_rename_is_hunk_by_hunk_and_its_edits_give_the_new_text(tmp_path: Path):
    """Decision 80: one confirming no-op, then each hunk's places (UTF-16 positions past an emoji,
    CRLF line ends) that, applied, give exactly the agent's text."""
    before = "a = 🎉area\r\nb = '🎉' + area\r\n" + "pad\r\n" * 8 + "c = area\r\n"
    after = before.replace("area", "surface")
    path = tmp_path / "a.py"
    path.write_bytes(before.encode())
    client = FakeClient({})
    ws = LspWorkspace(client, ClientCaps(can_apply_edit=True, has_document_changes=True), [tmp_path])  # type: ignore[arg-type]
    await ws.apply_all([FileChange(path, Document(path, before), after)], label="rename", preview="agent-lsp: rename")
    [(_, params)] = client.sent
    [change] = params.edit.document_changes
    noop, *edits = change.edits
    notes = params.edit.change_annotations
    assert noop.new_text == "" and notes[noop.annotation_id].needs_confirmation is True
    assert [e.annotation_id for e in edits] == ["agent-lsp-hunk-0"] * 2 + ["agent-lsp-hunk-1"]
    assert [notes[f"agent-lsp-hunk-{i}"].needs_confirmation for i in (0, 1)] == [False, False]
    doc = TextDocument(path.as_uri(), before)
    for edit in reversed(edits):
        doc.apply_change(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
    assert doc.source == after
