"""Client capabilities, resolved once at `initialize` into the booleans the server branches on."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types


@dataclass(frozen=True)
class ClientCaps:
    can_create_progress: bool = False
    can_show_message_request: bool = False
    can_apply_edit: bool = False
    has_document_changes: bool = False
    can_create_files: bool = False
    can_pull_configuration: bool = False

    @classmethod
    def from_params(cls, caps: types.ClientCapabilities | None, client_name: str | None = None) -> ClientCaps:
        if caps is None:
            caps = types.ClientCapabilities()
        window = caps.window
        workspace = caps.workspace
        edit = workspace.workspace_edit if workspace else None
        resource_ops = (edit.resource_operations or []) if edit else []
        return cls(
            can_create_progress=bool(window and window.work_done_progress),
            can_show_message_request=_has_message_requests(window, client_name),
            can_apply_edit=bool(workspace and workspace.apply_edit),
            has_document_changes=bool(edit and edit.document_changes),
            can_create_files=types.ResourceOperationKind.Create in resource_ops,
            can_pull_configuration=bool(workspace and workspace.configuration),
        )


# Clients known to ignore window/showMessageRequest (helix issue 4699): approvals go through
# agentLsp.approve and code actions there.
NO_MESSAGE_REQUESTS = ("helix",)


def _has_message_requests(window: types.WindowClientCapabilities | None, client_name: str | None) -> bool:
    """showMessageRequest is base protocol: `window.showMessage` only describes extras, and
    eglot 1.9 sends no `window` capabilities at all yet answers requests. So: supported,
    unless the client is known not to, or describes its window without it."""
    if client_name and client_name.lower().split()[0] in NO_MESSAGE_REQUESTS:
        return False
    return window is None or window.show_message is not None
