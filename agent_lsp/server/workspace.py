"""The Workspace port over LSP: reads see open buffers, writes go out as workspace/applyEdit
(annotated for the editor's own preview when the client asked for that)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.fs.disk_workspace import read_disk_document, read_disk_text
from agent_lsp.agent.fs.merge import (
    NOT_SAVED,
    Resolution,
    applied_outcome,
    conflict_outcome,
    resolve,
)
from agent_lsp.agent.fs.safeio import NotReadable
from agent_lsp.agent.ports import Document, EditOutcome, FileChange
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.folders import uri_to_path
from agent_lsp.server.hunk_preview import hunk_workspace_edit
from agent_lsp.server.positions import minimal_edit, start_insert, whole_edit
from agent_lsp.server.preview_gate import PREVIEW_ANNOTATION, preview_gate
from agent_lsp.server.rpc import ClientRequestError, client_request, safe_notify

log = logging.getLogger(__name__)

APPLY_EDIT_TIMEOUT = 60.0
DID_CHANGE_WAIT = 3.0  # after an applied edit, for the editor's didChange (eglot: when idle)
DIAGNOSTICS_METHOD = "agentLsp/diagnostics"
DIAGNOSTICS_TIMEOUT = 3.0  # CONTRACT Decision 15: the client answers within ~2 s
DEBUG_METHOD = "agentLsp/debug"


def _refused(result: Any, previewed: bool) -> EditOutcome | None:
    """The outcome of an applyEdit the editor did not apply (None: applied). A previewed edit
    refused without a reason was the user's no in the preview."""
    if getattr(result, "applied", False):
        return None
    reason = getattr(result, "failure_reason", None)
    return EditOutcome(
        False,
        reason or "the editor refused the edit "
        "(the document may have changed since the agent read it)",
        rejected=previewed and not reason,
    )


class LspWorkspace:
    def __init__(
        self,
        ls: LanguageServer,
        caps: ClientCaps,
        roots: list[Path],
        names: list[str] | None = None,
    ):
        self.ls = ls
        self.caps = caps
        self.roots = roots
        self.names = names
        self.on_waiting: Callable[[str], None] | None = None  # a write right after a request

    def announce(self, text: str) -> None:
        """A line for the user outside the run's stream (window/showMessage)."""
        safe_notify(
            self.ls,
            types.WINDOW_SHOW_MESSAGE,
            types.ShowMessageParams(type=types.MessageType.Info, message=f"agent-lsp: {text}"),
        )

    @property
    def has_diagnostics(self) -> bool:
        return self.caps.diagnostics

    @property
    def has_debugger(self) -> bool:
        return self.caps.debug

    async def debug(self, params: dict[str, Any], timeout: float) -> Any:
        """`agentLsp/debug` (CONTRACT Decision 61): the editor drives its own debugger. Its
        refusal or silence is a DebugFailed for the model."""
        from agent_lsp.agent.tools.debugger.session import DebugFailed

        try:
            return await client_request(self.ls, DEBUG_METHOD, params, timeout)
        except TimeoutError:
            raise DebugFailed(
                f"the editor's debugger did not answer {params.get('action')!r} in {timeout:g}s"
            ) from None
        except ClientRequestError as exc:
            raise DebugFailed(f"the editor's debugger: {exc}") from None

    async def diagnostics(
        self, paths: list[Path] | None, after: dict[Path, int] | None
    ) -> list[dict[str, Any]] | None:
        """`agentLsp/diagnostics`: what the editor shows for those files (all when None); with
        `after`, once the editor has diagnostics for that version (it waits at most ~2 s).
        None when the client cannot or does not answer in time."""
        if not self.caps.diagnostics:
            return None
        params: dict[str, Any] = {}
        if paths is not None:
            params["uris"] = [
                (self._open_document(p).uri if self._open_document(p) is not None else p.as_uri())
                for p in paths
            ]
        if after:
            params["afterVersion"] = max(after.values())
        try:
            result = await client_request(self.ls, DIAGNOSTICS_METHOD, params, DIAGNOSTICS_TIMEOUT)
        except (TimeoutError, ClientRequestError) as exc:
            log.info("agentLsp/diagnostics: %s", exc)
            return None
        return (
            [item for item in result if isinstance(item, dict)]
            if isinstance(result, list)
            else None
        )

    def _open_document(self, path: Path) -> Any:
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
        return {
            p: doc.source
            for uri, doc in list(self.ls.workspace.text_documents.items())
            if uri.startswith("file:") and (p := uri_to_path(uri))
        }

    async def unsaved(self, paths: list[Path]) -> list[Path]:
        out = []
        for path in paths:
            doc = self._open_document(path)
            if doc is None:
                continue
            try:
                on_disk: str | None = (await read_disk_text(path))[0]
            except (NotReadable, OSError):
                on_disk = None
            if on_disk != doc.source:
                out.append(path)
        return out

    async def apply(
        self,
        path: Path,
        before: Document | None,
        after: str,
        *,
        preview: str | None = None,
        late: Callable[[], None] | None = None,
    ) -> EditOutcome:
        if not self.caps.can_apply_edit:
            return EditOutcome(False, "this editor does not support workspace/applyEdit")
        label = preview or f"agent-lsp: {'create' if before is None else 'edit'} {path.name}"
        gate = preview_gate(self.ls) if preview else None
        if gate is not None:
            await self._take_preview_turn(gate, path)
        # Decision 81: our clients save after an agent edit only buffers that were clean before
        editing = self._open_document(path) is not None and bool(await self.unsaved([path]))
        # The text the edit lands on is read now, after the approval (and the preview's turn):
        # the open buffer, else the file on disk; changed since the read, it is merged.
        resolved = await self._resolved(path, before, after)
        if isinstance(resolved, EditOutcome):
            if gate is not None:
                gate.release()
            return resolved
        current, resolution, open_doc = resolved
        assert resolution.text is not None
        # no await from the buffer's reading to the edit built on it (its version and ranges)
        edit = self._workspace_edit(path, current, resolution.text, preview)
        # The buffer's version once the edit is in: the next one for an open document (read
        # before the request: the editor's didChange may arrive before its answer), the first
        # for one the editor opens to apply it.
        expected = (open_doc.version or 0) + 1 if open_doc is not None else 1
        try:
            waiting = self.on_waiting
            notify = (
                (lambda: waiting(f"waiting for the editor to apply the edit to {path.name}"))
                if waiting
                else None
            )
            # A previewed edit waits for the user, without a time limit (CONTRACT "Edit review").
            on_late = (
                (lambda answer: late() if getattr(answer, "applied", False) else None)
                if preview and late
                else None
            )
            result = await client_request(
                self.ls,
                types.WORKSPACE_APPLY_EDIT,
                types.ApplyWorkspaceEditParams(edit=edit, label=label),
                None if preview else APPLY_EDIT_TIMEOUT,
                on_sent=notify,
                late=on_late,
                settled=gate.release if gate is not None else None,
            )
        except TimeoutError:
            return EditOutcome(
                False, f"the editor did not answer the edit within {APPLY_EDIT_TIMEOUT:g}s"
            )
        except ClientRequestError as exc:  # e.g. eglot answers a stale version with an error
            return EditOutcome(False, f"the editor refused the edit: {exc}")
        if (refused := _refused(result, preview is not None)) is not None:
            return refused
        if open_doc is not None:
            await self._until_version(path, expected)
        outcome = applied_outcome(path, resolution, expected)
        if editing:
            outcome.message = "\n".join(filter(None, [outcome.message, NOT_SAVED]))
        if preview is not None and before is not None and self.caps.has_document_changes:
            outcome.text = await self.unticked_text(path, resolution.text)
        return outcome

    async def unticked_text(self, path: Path, applied: str) -> str | None:
        """The file's text after a previewed edit when it is not `applied` (the user unticked
        hunks: the tool learns from it which landed, Decision 80); else None."""
        try:
            now = (await self.read(path)).text
        except (ValueError, OSError):
            return None
        return now if now != applied else None

    async def _resolved(
        self, path: Path, before: Document | None, after: str
    ) -> tuple[Document | None, Resolution, Any] | EditOutcome:
        """The current text (None: no file), what the edit becomes on it, and the open buffer;
        or why nothing can be applied (a conflict, a file no longer text)."""
        current: Document | None = None
        try:
            if self._open_document(path) is None and (path.exists() or path.is_symlink()):
                current = await read_disk_document(path)  # never a range on stale text
        except ValueError as exc:
            return EditOutcome(False, str(exc))
        # read last, with no await after it: a buffer the editor opened meanwhile counts
        open_doc = self._open_document(path)
        if open_doc is not None:
            current = Document(path, open_doc.source, open_doc.version)
        if current is not None and not current.exact:
            return EditOutcome(
                False, f"{path.name} is no longer valid UTF-8 text (or holds NUL bytes)"
            )
        resolution = resolve(
            before.text if before else None, current.text if current else None, after
        )
        if resolution.text is None:
            return conflict_outcome(path, resolution)
        return current, resolution, open_doc

    async def _take_preview_turn(self, gate: asyncio.Lock, path: Path) -> None:
        """One preview at a time per server (CONTRACT "Edit review"): the gate taken (the edit
        is then built on the text as it is once its turn came)."""
        if gate.locked() and self.on_waiting:
            self.on_waiting(
                "waiting for the edit preview already open in the editor "
                f"before showing {path.name}"
            )
        await gate.acquire()

    async def apply_all(
        self,
        changes: list[FileChange],
        *,
        label: str,
        preview: str | None = None,
        late: Callable[[], None] | None = None,
    ) -> EditOutcome:
        """Several files as ONE workspace/applyEdit (multi_edit.py)."""
        from agent_lsp.server.multi_edit import apply_all

        return await apply_all(self, changes, label, APPLY_EDIT_TIMEOUT, preview, late)

    async def _until_version(self, path: Path, version: int) -> None:
        """Wait (bounded) for the editor's didChange of an edit it applied: clients send it late
        (Neovim debounces 150 ms, eglot waits for idle), and the next edit of the same reply must
        be computed on the text this one left."""
        deadline = asyncio.get_running_loop().time() + DID_CHANGE_WAIT
        while asyncio.get_running_loop().time() < deadline:
            doc = self._open_document(path)
            if doc is None or (doc.version or 0) >= version:
                return
            await asyncio.sleep(0.01)
        log.info(
            "no didChange for %s version %d within %g s: going on", path, version, DID_CHANGE_WAIT
        )

    async def restore(self, restores: list[Any]) -> Any:
        """A rewind as one workspace/applyEdit (so the editor's undo can take it back):
        whole-file replacements, CreateFile for files a command deleted, DeleteFile for files
        the run created (emptied, and listed, where the client cannot delete)."""
        from agent_lsp.agent.ports import RestoreOutcome

        outcome = RestoreOutcome()
        if not self.caps.can_apply_edit:
            outcome.failed = [
                (r.path, "this editor does not support workspace/applyEdit") for r in restores
            ]
            return outcome
        edit, emptied = self._rewind_edit(restores)
        try:
            result = await client_request(
                self.ls,
                types.WORKSPACE_APPLY_EDIT,
                types.ApplyWorkspaceEditParams(edit=edit, label="agent-lsp: rewind"),
                APPLY_EDIT_TIMEOUT,
            )
            applied = bool(getattr(result, "applied", False))
            reason = getattr(result, "failure_reason", None) or "the editor refused the rewind"
        except TimeoutError:
            applied, reason = False, f"the editor did not answer within {APPLY_EDIT_TIMEOUT:g}s"
        except ClientRequestError as exc:
            applied, reason = False, f"the editor refused the rewind: {exc}"
        for item in restores:
            if not applied:
                outcome.failed.append((item.path, reason))
            elif item.path in emptied:
                outcome.failed.append((item.path, "emptied: the editor cannot delete files"))
            else:
                outcome.restored.append(item.path)
        return outcome

    def _rewind_edit(self, restores: list[Any]) -> tuple[types.WorkspaceEdit, list[Path]]:
        """The rewind's one edit, and the files it can only empty (the client cannot delete)."""
        document_changes: list[Any] = []
        changes: dict[str, list[types.TextEdit]] = {}
        emptied: list[Path] = []
        for item in restores:
            open_doc = self._open_document(item.path)
            uri = open_doc.uri if open_doc is not None else item.path.as_uri()
            current = (
                open_doc.source
                if open_doc is not None
                else (item.current or b"").decode("utf-8", errors="replace")
            )
            new_text = item.content.decode("utf-8") if item.content is not None else ""
            whole = whole_edit(self.ls, current, new_text)
            if (
                item.content is None
                and self.caps.has_document_changes
                and self.caps.can_delete_files
            ):
                document_changes.append(
                    types.DeleteFile(
                        uri=uri, options=types.DeleteFileOptions(ignore_if_not_exists=True)
                    )
                )
                continue
            if item.content is None:
                emptied.append(item.path)
            if (
                item.current is None
                and open_doc is None
                and self.caps.has_document_changes
                and self.caps.can_create_files
            ):
                document_changes.append(
                    types.CreateFile(
                        uri=uri,
                        options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True),
                    )
                )
                whole = start_insert(new_text)
            if self.caps.has_document_changes:
                version = open_doc.version if open_doc is not None else None
                document_changes.append(
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(
                            uri=uri, version=version
                        ),
                        edits=[whole],
                    )
                )
            else:
                changes.setdefault(uri, []).append(whole)
        edit = (
            types.WorkspaceEdit(document_changes=document_changes)
            if self.caps.has_document_changes
            else types.WorkspaceEdit(changes=changes)
        )
        return edit, emptied

    def _workspace_edit(
        self, path: Path, before: Document | None, after: str, preview: str | None
    ) -> types.WorkspaceEdit:
        uri = path.as_uri()
        open_doc = self._open_document(path)
        if open_doc is not None:
            uri = open_doc.uri  # the client's own spelling of the URI
        annotations = None
        if preview is not None and before is not None and self.caps.has_document_changes:
            return hunk_workspace_edit(self.ls, uri, open_doc, before.text, after, preview)
        if preview is not None and self.caps.has_document_changes:
            annotations = {
                PREVIEW_ANNOTATION: types.ChangeAnnotation(
                    label=preview,
                    needs_confirmation=True,
                    description=f"{'create' if before is None else 'edit'} {path.name}",
                )
            }

        def text_edit(edit: types.TextEdit) -> types.TextEdit | types.AnnotatedTextEdit:
            if annotations is None:
                return edit
            return types.AnnotatedTextEdit(
                range=edit.range, new_text=edit.new_text, annotation_id=PREVIEW_ANNOTATION
            )

        if before is None:
            insert = start_insert(after)
            if self.caps.has_document_changes and self.caps.can_create_files:
                return types.WorkspaceEdit(
                    document_changes=[
                        types.CreateFile(
                            uri=uri,
                            options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True),
                            annotation_id=PREVIEW_ANNOTATION if annotations else None,
                        ),
                        types.TextDocumentEdit(
                            text_document=types.OptionalVersionedTextDocumentIdentifier(
                                uri=uri, version=None
                            ),
                            edits=[text_edit(insert)],
                        ),
                    ],
                    change_annotations=annotations,
                )
            if annotations is not None:
                return types.WorkspaceEdit(
                    document_changes=[
                        types.TextDocumentEdit(
                            text_document=types.OptionalVersionedTextDocumentIdentifier(
                                uri=uri, version=None
                            ),
                            edits=[text_edit(insert)],
                        )
                    ],
                    change_annotations=annotations,
                )
            return types.WorkspaceEdit(changes={uri: [insert]})
        edit = minimal_edit(self.ls, before.text, after)
        if self.caps.has_document_changes:
            # apply() computed the edit on the buffer's text as it is now (merged if it moved)
            version = open_doc.version if open_doc is not None else None
            return types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(
                            uri=uri, version=version
                        ),
                        edits=[text_edit(edit)],
                    )
                ],
                change_annotations=annotations,
            )
        return types.WorkspaceEdit(changes={uri: [edit]})
