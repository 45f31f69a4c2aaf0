"""MCP servers over LSP: consent for workspace-declared servers as a message request, and their
status as `status` stream events, window/logMessage and one window/showMessage per failure."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.events import StatusEvent
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.project_consent import ask_consent
from agent_lsp.server.rpc import safe_notify

log = logging.getLogger(__name__)


class LspMcpHooks:
    def __init__(
        self, ls: LanguageServer, caps: ClientCaps, streams: dict[str, Any], timeout: float
    ):
        self.ls = ls
        self.caps = caps
        self.streams = streams  # the runs in flight: their streams get the status lines
        self.timeout = timeout
        self.shown: set[str] = set()

    async def ask_consent(self, decl: Any, prompt: str) -> str | None:
        """allow | allowAlways | deny; None when nobody can be asked (Helix) or nobody answered."""
        waiting = f"waiting for consent to start MCP server `{decl.name}`"
        return await ask_consent(self, prompt, waiting, f"MCP server {decl.name}")

    def on_status(self, name: str, state: str, message: str) -> None:
        safe_notify(
            self.ls,
            types.WINDOW_LOG_MESSAGE,
            types.LogMessageParams(
                type=types.MessageType.Error if state == "failed" else types.MessageType.Info,
                message=f"agent-lsp: {message}",
            ),
        )
        for stream in list(self.streams.values()):
            stream.send(StatusEvent(message, None, mcp_server=name, mcp_state=state))
        if state == "failed" and name not in self.shown:
            self.shown.add(name)
            safe_notify(
                self.ls,
                types.WINDOW_SHOW_MESSAGE,
                types.ShowMessageParams(
                    type=types.MessageType.Error, message=f"agent-lsp: {message}"
                ),
            )
