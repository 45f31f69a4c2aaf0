"""The editor's own edit preview (CONTRACT "Edit review"): the change annotation every
previewed edit carries, and the server's one open preview at a time."""

from __future__ import annotations

import asyncio

from pygls.lsp.server import LanguageServer

PREVIEW_ANNOTATION = "agent-lsp-preview"


def preview_gate(ls: LanguageServer) -> asyncio.Lock:
    """The server's one open edit preview: VS Code shows one refactoring preview at a time and
    answers a second with a Cancel the model would take for the user's no. Held until the
    editor answers, even when the run that asked was cancelled meanwhile."""
    gate = getattr(ls, "_agent_lsp_preview_gate", None)
    if gate is None:
        gate = asyncio.Lock()
        ls._agent_lsp_preview_gate = gate  # type: ignore[attr-defined]
    return gate
