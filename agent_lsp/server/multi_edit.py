"""A multi-file edit (a rename) as ONE `workspace/applyEdit`: a TextDocumentEdit per file (with
the open buffer's version, so the editor refuses it on a buffer that moved on) or `changes`,
all applied or none (CONTRACT "Code intelligence": rename_symbol)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from agent_lsp.agent.ports import EditOutcome, FileChange
from agent_lsp.server.positions import minimal_edit
from agent_lsp.server.rpc import ClientRequestError, client_request


async def apply_all(ws: Any, changes: list[FileChange], label: str, timeout: float) -> EditOutcome:
    """`ws`: the LspWorkspace (its buffers, capabilities and version wait)."""
    if not ws.caps.can_apply_edit:
        return EditOutcome(False, "this editor does not support workspace/applyEdit")
    document_changes: list[Any] = []
    plain: dict[str, list[types.TextEdit]] = {}
    expected: dict[Any, int] = {}
    for change in changes:
        open_doc = ws._open_document(change.path)
        if open_doc is not None and open_doc.source != change.before.text:
            return EditOutcome(
                False,
                f"{change.path.name} was changed in the editor after the agent read it "
                f"(buffer version {open_doc.version}); nothing was changed",
            )
        uri = open_doc.uri if open_doc is not None else change.path.as_uri()
        edit = minimal_edit(ws.ls, change.before.text, change.after)
        if open_doc is not None:
            expected[change.path] = (open_doc.version or 0) + 1
        if ws.caps.has_document_changes:
            document_changes.append(
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=open_doc.version if open_doc is not None else None
                    ),
                    edits=[edit],
                )
            )
        else:
            plain[uri] = [edit]
    workspace_edit = (
        types.WorkspaceEdit(document_changes=document_changes)
        if ws.caps.has_document_changes
        else types.WorkspaceEdit(changes=plain)
    )
    try:
        result = await client_request(
            ws.ls,
            types.WORKSPACE_APPLY_EDIT,
            types.ApplyWorkspaceEditParams(edit=workspace_edit, label=label),
            timeout,
        )
    except TimeoutError:
        return EditOutcome(False, f"the editor did not answer the edit within {timeout:g}s")
    except ClientRequestError as exc:
        return EditOutcome(False, f"the editor refused the edit: {exc}")
    if not getattr(result, "applied", False):
        return EditOutcome(
            False,
            getattr(result, "failure_reason", None)
            or "the editor refused the edit (a document may have changed since the agent read it)",
        )
    for path, version in expected.items():
        await ws._until_version(path, version)
    return EditOutcome(True)
