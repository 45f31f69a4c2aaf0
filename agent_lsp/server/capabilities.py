"""Client capabilities, resolved once at `initialize` into the booleans the server branches on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsprotocol import types


@dataclass(frozen=True)
class ClientCaps:
    can_create_progress: bool = False
    can_show_message_request: bool = False
    can_apply_edit: bool = False
    has_document_changes: bool = False
    can_create_files: bool = False
    can_delete_files: bool = False
    can_pull_configuration: bool = False
    edit_preview: bool = False  # experimental.agentLsp.editPreview + changeAnnotationSupport
    diagnostics: bool = False  # experimental.agentLsp.diagnostics: answers agentLsp/diagnostics
    code_intel: bool = False  # experimental.agentLsp.codeIntel: answers agentLsp/codeIntel
    debug: bool = False  # experimental.agentLsp.debug: answers agentLsp/debug (its debugger)
    client_name: str = ""

    @classmethod
    def from_params(
        cls, caps: types.ClientCapabilities | None, client_name: str | None = None
    ) -> ClientCaps:
        if caps is None:
            caps = types.ClientCapabilities()
        window = caps.window
        workspace = caps.workspace
        edit = workspace.workspace_edit if workspace else None
        resource_ops = (edit.resource_operations or []) if edit else []
        ours = _experimental(caps.experimental)
        annotations = bool(edit and edit.change_annotation_support is not None)
        return cls(
            can_create_progress=bool(window and window.work_done_progress),
            can_show_message_request=_has_message_requests(client_name),
            can_apply_edit=bool(workspace and workspace.apply_edit),
            has_document_changes=bool(edit and edit.document_changes),
            can_create_files=types.ResourceOperationKind.Create in resource_ops,
            can_delete_files=types.ResourceOperationKind.Delete in resource_ops,
            can_pull_configuration=bool(workspace and workspace.configuration),
            edit_preview=bool(ours.get("editPreview"))
            and annotations
            and bool(edit and edit.document_changes),
            diagnostics=bool(ours.get("diagnostics")),
            code_intel=bool(ours.get("codeIntel")),
            debug=ours.get("debug") is True,
            client_name=client_name or "",
        )


def _experimental(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("agentLsp"), dict):
        return value["agentLsp"]
    return {}


# Clients known to ignore window/showMessageRequest (helix issue 4699): approvals go through
# agentLsp.approve and code actions there.
NO_MESSAGE_REQUESTS = ("helix",)


def _has_message_requests(client_name: str | None) -> bool:
    """showMessageRequest is base protocol: `window.showMessage` only describes extras. eglot
    1.9 sends no `window` capabilities and the eglot of Emacs 29/30 a `window` without
    `showMessage`, yet both answer requests. So: every client but those known not to."""
    return not (client_name and client_name.lower().split()[0] in NO_MESSAGE_REQUESTS)
