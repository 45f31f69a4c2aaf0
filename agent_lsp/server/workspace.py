"""The Workspace port over LSP: reads see open buffers, writes go out as workspace/applyEdit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from agent_lsp.agent.disk_workspace import read_disk_document
from agent_lsp.agent.ports import Document, EditOutcome
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import ClientRequestError, client_request

log = logging.getLogger(__name__)

APPLY_EDIT_TIMEOUT = 60.0


def uri_to_path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path).resolve() if path else None


def workspace_roots(ls: LanguageServer) -> list[Path]:
    roots = [p for folder in ls.workspace.folders.values() if (p := uri_to_path(folder.uri))]
    if not roots and ls.workspace.root_path:
        roots = [Path(ls.workspace.root_path).resolve()]
    return roots or [Path.cwd().resolve()]


def minimal_edit(ls: LanguageServer, before: str, after: str) -> types.TextEdit:
    """One TextEdit covering only what changed, with positions in the negotiated encoding."""
    start = 0
    limit = min(len(before), len(after))
    while start < limit and before[start] == after[start]:
        start += 1
    end_b, end_a = len(before), len(after)
    while end_b > start and end_a > start and before[end_b - 1] == after[end_a - 1]:
        end_b -= 1
        end_a -= 1
    lines = before.splitlines(keepends=True) or [""]
    codec = ls.workspace.position_codec

    def position(offset: int) -> types.Position:
        line = before.count("\n", 0, offset)
        column = offset - (before.rfind("\n", 0, offset) + 1)
        if line >= len(lines):  # just after a final newline
            return types.Position(line=line, character=0)
        return codec.position_to_client_units(lines, types.Position(line=line, character=column))

    return types.TextEdit(range=types.Range(start=position(start), end=position(end_b)), new_text=after[start:end_a])


class LspWorkspace:
    def __init__(self, ls: LanguageServer, caps: ClientCaps, roots: list[Path]):
        self.ls = ls
        self.caps = caps
        self.roots = roots
        self.agent_edited: list[Path] = []
        self.on_waiting: Callable[[str], None] | None = None  # a write right after a request

    def _open_document(self, path: Path):
        for uri, doc in list(self.ls.workspace.text_documents.items()):
            if uri.startswith("file:") and uri_to_path(uri) == path:
                return doc
        return None

    async def read(self, path: Path) -> Document:
        doc = self._open_document(path)
        if doc is not None:
            return Document(path, doc.source, doc.version)
        return await read_disk_document(path)

    def open_texts(self) -> dict[Path, str]:
        return {p: doc.source for uri, doc in list(self.ls.workspace.text_documents.items())
                if uri.startswith("file:") and (p := uri_to_path(uri))}

    def unsaved(self) -> list[Path]:
        out = []
        for path in self.agent_edited:
            doc = self._open_document(path)
            if doc is None:
                continue
            try:
                on_disk = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                on_disk = None
            if on_disk != doc.source:
                out.append(path)
        return out

    async def apply(self, path: Path, before: Document | None, after: str) -> EditOutcome:
        if not self.caps.can_apply_edit:
            return EditOutcome(False, "this editor does not support workspace/applyEdit")
        open_doc = self._open_document(path)
        if before is not None and open_doc is not None and open_doc.source != before.text:
            # A `changes` edit carries no version, so the editor cannot refuse it: refuse here,
            # before it lands on text it was not computed for.
            return EditOutcome(False, f"{path.name} was changed in the editor after the agent read it "
                                      f"(buffer version {open_doc.version})")
        edit = self._workspace_edit(path, before, after)
        label = f"agent-lsp: {'create' if before is None else 'edit'} {path.name}"
        try:
            notify = (lambda: self.on_waiting(f"waiting for the editor to apply the edit to {path.name}")) if self.on_waiting else None
            result = await client_request(self.ls, types.WORKSPACE_APPLY_EDIT,
                                          types.ApplyWorkspaceEditParams(edit=edit, label=label), APPLY_EDIT_TIMEOUT, on_sent=notify)
        except TimeoutError:
            return EditOutcome(False, f"the editor did not answer the edit within {APPLY_EDIT_TIMEOUT:g}s")
        except ClientRequestError as exc:  # e.g. eglot answers a stale version with an error
            return EditOutcome(False, f"the editor refused the edit: {exc}")
        applied = bool(getattr(result, "applied", False))
        if not applied:
            reason = getattr(result, "failure_reason", None) or "the editor refused the edit (the document may have changed since the agent read it)"
            return EditOutcome(False, reason)
        if path not in self.agent_edited:
            self.agent_edited.append(path)
        return EditOutcome(True)

    def _workspace_edit(self, path: Path, before: Document | None, after: str) -> types.WorkspaceEdit:
        uri = path.as_uri()
        open_doc = self._open_document(path)
        if open_doc is not None:
            uri = open_doc.uri  # the client's own spelling of the URI
        if before is None:
            insert = types.TextEdit(range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)), new_text=after)
            if self.caps.has_document_changes and self.caps.can_create_files:
                return types.WorkspaceEdit(document_changes=[
                    types.CreateFile(uri=uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True)),
                    types.TextDocumentEdit(text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
                                           edits=[insert]),
                ])
            return types.WorkspaceEdit(changes={uri: [insert]})
        text_edit = minimal_edit(self.ls, before.text, after)
        if self.caps.has_document_changes:
            # apply() checked the buffer still holds the text the edit was computed against
            version = open_doc.version if open_doc is not None else None
            return types.WorkspaceEdit(document_changes=[
                types.TextDocumentEdit(text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                                       edits=[text_edit])
            ])
        return types.WorkspaceEdit(changes={uri: [text_edit]})
