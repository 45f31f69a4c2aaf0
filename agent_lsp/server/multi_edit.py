"""A multi-file edit (a rename) as ONE `workspace/applyEdit`: a TextDocumentEdit per file (with
the open buffer's version, so the editor refuses it on a buffer that moved on) or `changes`,
built on each file's text as it is when sent (merged with the user's changes made meanwhile),
all applied or none (CONTRACT "Code intelligence": rename_symbol). With `preview`, the editor's
own preview asks once for the whole rename, hunk by hunk (CONTRACT "Edit review", Decision 80):
the user unticks the hunks they do not want, and the files' texts after the apply say which
landed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lsprotocol import types

from agent_lsp.agent.fs.merge import NOT_SAVED, applied_outcome
from agent_lsp.agent.ports import EditOutcome, FileChange
from agent_lsp.agent.tools.hunks import file_hunks
from agent_lsp.server.hunk_preview import confirming_entry, hunk_edits
from agent_lsp.server.positions import minimal_edit
from agent_lsp.server.preview_gate import preview_gate
from agent_lsp.server.rpc import ClientRequestError, client_request

RESOLVE_ATTEMPTS = 3


async def apply_all(
    ws: Any,
    changes: list[FileChange],
    label: str,
    timeout: float,
    preview: str | None = None,
    late: Callable[[], None] | None = None,
) -> EditOutcome:
    """`ws`: the LspWorkspace (its buffers, capabilities and version wait)."""
    if not ws.caps.can_apply_edit:
        return EditOutcome(False, "this editor does not support workspace/applyEdit")
    gate = preview_gate(ws.ls) if preview else None
    if gate is not None:
        if gate.locked() and ws.on_waiting:
            ws.on_waiting("waiting for the edit preview already open in the editor")
        await gate.acquire()  # one preview at a time per server (CONTRACT "Edit review")
    # every file as it is now (after the approval and the preview's turn), merged if it changed
    resolved = await _resolved(ws, changes)
    if isinstance(resolved, EditOutcome):
        if gate is not None:
            gate.release()
        return resolved
    rebased, merged = resolved
    # built with no await after the check: each buffer's version goes with the text it holds
    workspace_edit, expected = _workspace_edit(ws, rebased, preview)
    try:
        result = await client_request(
            ws.ls,
            types.WORKSPACE_APPLY_EDIT,
            types.ApplyWorkspaceEditParams(edit=workspace_edit, label=preview or label),
            None if preview else timeout,  # a previewed edit waits for the user
            late=(
                (lambda answer: late() if getattr(answer, "applied", False) else None)
                if preview and late
                else None
            ),
            settled=gate.release if gate is not None else None,
        )
    except TimeoutError:
        return EditOutcome(False, f"the editor did not answer the edit within {timeout:g}s")
    except ClientRequestError as exc:
        return EditOutcome(False, f"the editor refused the edit: {exc}")
    if not getattr(result, "applied", False):
        reason = getattr(result, "failure_reason", None)
        return EditOutcome(
            False,
            reason
            or "the editor refused the edit (a document may have changed since the agent read it)",
            rejected=preview is not None and not reason,
        )
    for path, version in expected.items():
        await ws._until_version(path, version)
    if preview is not None and ws.caps.has_document_changes:
        # which hunks did the user keep in the preview? (each file's text, when not all)
        for change in rebased:
            if (now := await ws.unticked_text(change.path, change.after)) is not None:
                merged.texts[change.path] = now
    return merged


async def _resolved(
    ws: Any, changes: list[FileChange]
) -> tuple[list[FileChange], EditOutcome] | EditOutcome:
    """Each change rebased on its file's text now (merged where the file changed since it was
    read) and the outcome an apply then has; or the conflict (nothing is applied). The files are
    read one after another: all again when a buffer moved meanwhile."""
    for _ in range(RESOLVE_ATTEMPTS):
        resolved = await _resolved_once(ws, changes)
        if isinstance(resolved, EditOutcome) or all(
            (doc := ws._open_document(c.path)) is None or doc.source == c.before.text
            for c in resolved[0]
        ):
            return resolved
    return EditOutcome(
        False, "the files kept changing while the edit was prepared; nothing was changed"
    )


async def _resolved_once(
    ws: Any, changes: list[FileChange]
) -> tuple[list[FileChange], EditOutcome] | EditOutcome:
    rebased: list[FileChange] = []
    merged = EditOutcome(True)
    for change in changes:
        resolved = await ws._resolved(change.path, change.before, change.after)
        if isinstance(resolved, EditOutcome):
            resolved.message = f"{resolved.message}; nothing was changed"
            return resolved
        current, resolution, open_doc = resolved
        if current is None or resolution.text is None:  # a rename edits existing files only
            return EditOutcome(False, f"{change.path.name} is gone; nothing was changed")
        rebased.append(FileChange(change.path, current, resolution.text))
        note = applied_outcome(change.path, resolution)
        merged.landed.update(note.landed)
        merged.merged_onto.update(note.merged_onto)
        if note.message:
            merged.message += f"{change.path.name}: {note.message}\n"
        if open_doc is not None and await ws.unsaved([change.path]):  # Decision 81
            merged.message += f"{change.path.name}: {NOT_SAVED}\n"
    merged.message = merged.message.rstrip("\n")
    return rebased, merged


def _workspace_edit(
    ws: Any, changes: list[FileChange], preview: str | None
) -> tuple[types.WorkspaceEdit, dict[Any, int]]:
    """The one edit of every file, and the version each open buffer has once it is in. For
    the editor's preview (Decision 80): each hunk its own ticked change, numbered across the
    files, each renamed place its own edit, plus the one entry that asks."""
    annotated = preview is not None and ws.caps.has_document_changes
    document_changes: list[Any] = []
    plain: dict[str, list[types.TextEdit]] = {}
    expected: dict[Any, int] = {}
    per_file = file_hunks([(str(c.path), c.before.text, c.after) for c in changes])
    total = sum(len(h) for _, h in per_file)
    noop, annotations = confirming_entry(preview or "")
    for change, (_, hunks) in zip(changes, per_file, strict=True):
        open_doc = ws._open_document(change.path)
        uri = open_doc.uri if open_doc is not None else change.path.as_uri()
        text_edit = minimal_edit(ws.ls, change.before.text, change.after)
        if open_doc is not None:
            expected[change.path] = (open_doc.version or 0) + 1
        if not ws.caps.has_document_changes:
            plain[uri] = [text_edit]
            continue
        edits: list[types.TextEdit | types.AnnotatedTextEdit] = [text_edit]
        if annotated:
            hunk_changes, named = hunk_edits(
                ws.ls, change.before.text, change.after, hunks, total=total, trim=True
            )
            edits = [*([noop] if not document_changes else []), *hunk_changes]
            annotations.update(named)
        document_changes.append(
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=open_doc.version if open_doc is not None else None
                ),
                edits=edits,
            )
        )
    if not ws.caps.has_document_changes:
        return types.WorkspaceEdit(changes=plain), expected
    return (
        types.WorkspaceEdit(
            document_changes=document_changes,
            change_annotations=annotations if annotated else None,
        ),
        expected,
    )
