"""The LSP server object: its client's capabilities, its settings (resolved after `initialize`
is answered, refreshed when the user's file changes), its runs, and warnings sent to the
editor's log. server.py builds one with the handlers of each method family."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp import __version__
from agent_lsp.frontend import WarmUp
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import AgentProtocol, client_request, safe_notify

if TYPE_CHECKING:
    from agent_lsp.server.config import SettingsState
    from agent_lsp.server.runs import RunRegistry

log = logging.getLogger(__name__)

CONFIG_WAIT = 2.0  # CONTRACT Decision 8


class AgentServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "agent-lsp",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=AgentProtocol,
        )
        self.caps = ClientCaps()
        self.connection_closed = False  # set on `exit`: nothing more is written to the client
        self.shutdown_asked = False  # LSP: `exit` after `shutdown` exits 0, without it 1
        self.exit_asked = False
        self.init_options: Any = None
        self._config: SettingsState | None = None
        self._runs: RunRegistry | None = None
        # the first workspace/configuration answer (or none to wait for)
        self._configured = asyncio.Event()
        self.warm = WarmUp(CORE_MODULES, tool_schemas=True)

    @property
    def exit_code(self) -> int:
        """What the process exits with: 1 after an `exit` that no `shutdown` preceded (LSP)."""
        return 1 if self.exit_asked and not self.shutdown_asked else 0

    # The agent core, pydantic and the settings model load after `initialize` is answered
    # (start-up is the editor's wait); the first use, or the warm-up thread, brings them in.
    # The user's settings file is read again when it changed, as ACP does (one UserSources).
    @property
    def config(self) -> SettingsState:
        if self._config is None:
            from agent_lsp.server.config import SettingsState

            self._config = SettingsState()
            self.show_problems(self._config.update(init_options=self.init_options or {}))
        else:
            before = self._config.settings
            self.show_problems(self._config.refresh())
            if self._config.settings is not before:  # the user's settings file changed
                self.settings_replaced()
        return self._config

    def settings_replaced(self) -> None:
        """The configuration was replaced: the model clients, MCP and language servers only the
        old one wanted are closed (now, or when the last run using them ends)."""
        if self._runs is None or self._config is None:  # nothing was started yet
            return
        from agent_lsp.server.folders import workspace_roots

        self._runs.host.settings_replaced(self._config.settings, workspace_roots(self))

    @property
    def runs(self) -> RunRegistry:
        if self._runs is None:
            from agent_lsp.mcp.hub import McpHooks, McpHub
            from agent_lsp.server.mcp import LspMcpHooks
            from agent_lsp.server.project_consent import plug_permissions
            from agent_lsp.server.runs import RunRegistry
            from agent_lsp.telemetry.hub import OtelTelemetry

            self._runs = RunRegistry(self)
            self._runs.warm_up = self.warm.sdk  # a run's first model call waits for the SDK import
            hooks = LspMcpHooks(
                self, self.caps, self._runs.streams, self.config.settings.approval.timeout
            )
            self._runs.host.tool_servers = McpHub(McpHooks(hooks.ask_consent, hooks.on_status))
            plug_permissions(self._runs.host, self, self.caps, self._runs.streams, hooks.timeout)
            self._runs.host.telemetry = OtelTelemetry()  # the SDK only once a run has telemetry on
            from agent_lsp.langservers.hub import plug
            from agent_lsp.server.code_intel import editor_sources

            self._runs.host.code_intel = editor_sources(self)  # the editor first (issue 23)
            plug(self._runs.host, lambda: self.config.settings)  # for stock clients and files
        return self._runs

    async def settings_ready(self) -> None:
        """Wait (at most CONFIG_WAIT s) for the first workspace/configuration answer."""
        if not self._configured.is_set():
            try:
                await asyncio.wait_for(self._configured.wait(), CONFIG_WAIT)
            except TimeoutError:
                log.info(
                    "workspace/configuration not answered within %ss: "
                    "the run uses the settings it has",
                    CONFIG_WAIT,
                )

    def show_problems(self, problems: list[str]) -> None:
        for problem in problems:
            log.warning("%s", problem)
            safe_notify(
                self,
                types.WINDOW_SHOW_MESSAGE,
                types.ShowMessageParams(
                    type=types.MessageType.Error, message=f"agent-lsp: {problem}"
                ),
            )

    async def pull_configuration(self) -> None:
        if not self.caps.can_pull_configuration:
            self._configured.set()
            return
        try:
            result = await client_request(
                self,
                types.WORKSPACE_CONFIGURATION,
                types.ConfigurationParams(items=[types.ConfigurationItem(section="agentLsp")]),
                timeout=10,
            )
            # pygls gives a tuple
            section = result[0] if isinstance(result, list | tuple) and result else None
            self.show_problems(self.config.update(workspace_config=section or {}))
            self.settings_replaced()
        except Exception as exc:  # a client that cannot answer keeps the settings it has
            log.info("workspace/configuration failed: %s", exc)
        finally:
            self._configured.set()


class EditorLogHandler(logging.Handler):
    """Warnings and errors also go to the editor's log (`window/logMessage`); stderr has all."""

    LEVELS = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning}

    def __init__(self, ls: AgentServer, loop: asyncio.AbstractEventLoop):
        super().__init__(logging.WARNING)
        self.ls = ls
        self.loop = loop

    def emit(self, record: logging.LogRecord) -> None:
        if self.ls.connection_closed or self.loop.is_closed():
            return
        level = self.LEVELS.get(record.levelno, types.MessageType.Error)
        params = types.LogMessageParams(type=level, message=f"agent-lsp: {record.getMessage()}")
        # pygls writes from the event loop's thread only
        self.loop.call_soon_threadsafe(safe_notify, self.ls, types.WINDOW_LOG_MESSAGE, params)


CORE_MODULES = (
    "agent_lsp.server.config",
    "agent_lsp.server.runs",
    "agent_lsp.server.commands",
    "agent_lsp.server.code_actions",
    "agent_lsp.server.run_prompt",
    "agent_lsp.mcp",
    "agent_lsp.agent.tools",
)
