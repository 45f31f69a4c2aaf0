"""The language server and the one place its handlers are registered. Handlers stay thin."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp import __version__
from agent_lsp.frontend import WarmUp, leave_after, shut_down, stop_runs
from agent_lsp.server import conversation
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import AgentProtocol, client_request, safe_notify

if TYPE_CHECKING:
    from agent_lsp.server.config import SettingsState
    from agent_lsp.server.runs import RunRegistry

log = logging.getLogger(__name__)

CONFIG_WAIT = 2.0  # CONTRACT Decision 8
HEALTH_ENDPOINT_TIMEOUT = 6.0  # agentLsp.health answers within Emacs's 10 s command timeout


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


def create_server() -> AgentServer:
    server = AgentServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: AgentServer, params: types.InitializeParams) -> None:
        ls.caps = ClientCaps.from_params(
            params.capabilities, params.client_info.name if params.client_info else None
        )
        ls.init_options = params.initialization_options  # resolved once `initialize` is answered
        logging.getLogger("agent_lsp").addHandler(EditorLogHandler(ls, asyncio.get_running_loop()))

    @server.feature(types.INITIALIZED)
    async def initialized(ls: AgentServer, params: types.InitializedParams) -> None:
        # the core off the loop (the model SDK after it, in the background); then:
        await ls.warm.wait_core()
        ls.config  # noqa: B018 - resolve initializationOptions now, problems shown to the user
        await ls.pull_configuration()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: AgentServer, params: types.DidChangeConfigurationParams
    ) -> None:
        pushed = params.settings.get("agentLsp") if isinstance(params.settings, dict) else None
        if ls.caps.can_pull_configuration:
            await ls.pull_configuration()
        elif isinstance(pushed, dict):
            ls.show_problems(ls.config.update(workspace_config=pushed))
            ls.settings_replaced()

    @server.command("agentLsp.run")
    async def run(ls: AgentServer, *args: Any) -> dict[str, Any]:
        from agent_lsp.server import commands
        from agent_lsp.server.folders import workspace_roots
        from agent_lsp.server.prompt_files import plan_run
        from agent_lsp.server.run_prompt import build_run_prompt

        parsed = commands.parse_args(commands.RunArgs, "agentLsp.run", args)
        # CONTRACT Decision 8: the first run sees the workspace's settings
        await ls.settings_ready()
        settings = ls.config.settings  # (each look at ls.config checks the user's file)
        # a `/name args` prompt runs that prompt file (Decision 34); titles keep it as typed
        expanded, plan = await plan_run(ls.runs.host, workspace_roots(ls), parsed, settings)
        prompt = await build_run_prompt(ls, expanded)
        title = "Agent: " + parsed.typed.strip().splitlines()[0][:60]
        try:
            started = await ls.runs.start(
                prompt,
                title,
                parsed.session_id,
                settings,
                ls.caps,
                model=parsed.model,
                mode=parsed.mode,
                request=parsed.typed,
                plan=plan,
                queue=parsed.queue,
            )
        except ValueError as exc:
            raise commands.JsonRpcInvalidParams(str(exc)) from None
        if started.state == "queued":  # its session's run runs: it starts when that one ends
            return {"runId": started.id, "sessionId": started.session.id, "queued": True}
        return {"runId": started.id, "sessionId": started.session.id}

    conversation.register(server)  # agentLsp.fork, agentLsp.history

    @server.command("agentLsp.sessions")
    async def sessions(ls: AgentServer, *args: Any) -> list[dict[str, Any]]:
        from agent_lsp.server import commands
        from agent_lsp.server.folders import workspace_roots

        commands.parse_args(commands.NoArgs, "agentLsp.sessions", args)
        store = ls.runs.host.store(workspace_roots(ls))
        return await asyncio.to_thread(store.list)

    @server.command("agentLsp.models")
    async def models(ls: AgentServer, *args: Any) -> dict[str, Any]:
        from agent_lsp.server import commands

        commands.parse_args(commands.NoArgs, "agentLsp.models", args)
        await ls.settings_ready()
        return await ls.runs.host.list_models(ls.config.settings)

    @server.command("agentLsp.rewind")
    async def rewind(ls: AgentServer, *args: Any) -> dict[str, Any]:
        from agent_lsp.server import commands
        from agent_lsp.server.folders import workspace_folders
        from agent_lsp.server.workspace import LspWorkspace

        parsed = commands.parse_args(commands.RewindArgs, "agentLsp.rewind", args)
        await ls.settings_ready()  # its transcript goes where the runs' go (transcriptDir)
        roots, names = workspace_folders(ls)
        try:
            result = await ls.runs.host.rewind(
                roots,
                LspWorkspace(ls, ls.caps, roots, names),
                parsed.run_id,
                force=parsed.force,
                include_later=parsed.include_later,
                binary_ok=False,
                settings=ls.config.settings,
            )
        except ValueError as exc:
            raise commands.JsonRpcInvalidParams(f"agentLsp.rewind: {exc}") from None
        # this command's own arguments
        return result.to_dict(force="`force: true`", include_later="`includeLater: true`")

    @server.command("agentLsp.health")
    async def health(ls: AgentServer, *args: Any) -> dict[str, Any]:
        """CONTRACT Decision 47: the checks `doctor` prints, as JSON; starts no MCP server."""
        from agent_lsp import health
        from agent_lsp.server import commands
        from agent_lsp.server.folders import workspace_roots

        parsed = commands.parse_args(commands.HealthArgs, "agentLsp.health", args or ({},))
        await ls.settings_ready()
        config = ls.config
        settings = (
            config.settings
            if parsed.model is None
            else config.settings.model_copy(update={"model": parsed.model})
        )
        source = health.SettingsSource(
            config.user_path,
            await asyncio.to_thread(config.user_path.is_file),
            config.user_file_problems,
            config.standing_problems,
        )
        checks = source.checks() + await health.run_checks(
            settings,
            workspace_roots(ls),
            host=ls.runs.host,
            start_mcp=False,
            endpoint_timeout=HEALTH_ENDPOINT_TIMEOUT,
            editor_debug=ls.caps.debug,
        )
        return health.report(checks)

    @server.command("agentLsp.mcpServers")
    async def mcp_servers(ls: AgentServer, *args: Any) -> list[dict[str, Any]]:
        from agent_lsp.server import commands
        from agent_lsp.server.folders import workspace_roots

        commands.parse_args(commands.NoArgs, "agentLsp.mcpServers", args)
        await ls.settings_ready()
        return await ls.runs.host.mcp_status(workspace_roots(ls), ls.config.settings)

    @server.command("agentLsp.commands")
    async def prompt_commands(ls: AgentServer, *args: Any) -> list[dict[str, Any]]:
        from agent_lsp.server import commands
        from agent_lsp.server.folders import workspace_roots
        from agent_lsp.server.prompt_files import list_commands

        commands.parse_args(commands.NoArgs, "agentLsp.commands", args)
        return await list_commands(workspace_roots(ls))

    @server.command("agentLsp.setup")
    async def setup(ls: AgentServer, *args: Any) -> dict[str, Any]:
        from agent_lsp.server.prompt_files import setup_view

        return await setup_view(ls, args)

    @server.command("agentLsp.cancel")
    def cancel(ls: AgentServer, *args: Any) -> bool:
        from agent_lsp.server import commands

        return ls.runs.cancel(
            commands.parse_args(commands.CancelArgs, "agentLsp.cancel", args).run_id
        )

    @server.command("agentLsp.steer")
    def steer(ls: AgentServer, *args: Any) -> bool:
        from agent_lsp.server import commands

        parsed = commands.parse_args(commands.SteerArgs, "agentLsp.steer", args)
        return ls.runs.host.steer(parsed.run_id, parsed.text)

    @server.command("agentLsp.approve")
    def approve(ls: AgentServer, *args: Any) -> bool:
        from agent_lsp.server import commands

        parsed = commands.parse_args(commands.ApproveArgs, "agentLsp.approve", args)
        return ls.runs.approvals.answer(
            parsed.run_id, parsed.call_id, parsed.decision, parsed.reason
        )

    @server.command("agentLsp.showApproval")
    def show_approval(ls: AgentServer, *args: Any) -> bool:
        """The whole of what an approval would run or change, for clients whose menus cut it."""
        from agent_lsp.server import commands

        parsed = commands.parse_args(commands.ApprovalRef, "agentLsp.showApproval", args)
        pending = ls.runs.approvals.get(parsed.run_id, parsed.call_id)
        if pending is None:
            return False
        safe_notify(
            ls,
            types.WINDOW_SHOW_MESSAGE,
            types.ShowMessageParams(
                type=types.MessageType.Info,
                message=f"agent-lsp approval ({pending.request.tool}):\n{pending.request.detail}",
            ),
        )
        return True

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: AgentServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.runs.cancel(str(params.token))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.RefactorRewrite,
                types.CodeActionKind.Empty,
            ]
        ),
    )
    async def code_action(
        ls: AgentServer, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        try:
            from agent_lsp.server.code_actions import code_actions
            from agent_lsp.server.folders import workspace_roots

            extra = []
            if (last := await ls.runs.host.last_rewindable(workspace_roots(ls))) is not None:
                run_id, count = last
                extra.append(
                    types.CodeAction(
                        title=f"Agent: rewind last run ({count} file{'s' if count != 1 else ''})",
                        kind=types.CodeActionKind.Empty,
                        command=types.Command(
                            title="Rewind", command="agentLsp.rewind", arguments=[{"runId": run_id}]
                        ),
                    )
                )
            return code_actions(ls, params, ls.runs.approvals, extra)
        except Exception:  # a code action request must never take the server down
            log.exception("code actions failed")
            return []

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: AgentServer, *args: Any) -> None:
        ls.shutdown_asked = True
        await shut_down(ls._runs.host if ls._runs is not None else None)

    @server.feature(types.EXIT)
    def exit_(ls: AgentServer, *args: Any) -> None:
        ls.connection_closed = True  # pygls closes stdout right after this handler
        ls.exit_asked = True
        if ls._runs is not None:  # an exit without a shutdown first: the runs stop `shutdown` too
            from agent_lsp.agent.messages import CancelCause, StopCause

            stop_runs(ls._runs.host, CancelCause(StopCause.SHUTDOWN))
        # pygls waits for its stdin reader thread on exit: do not let that keep us alive
        leave_after(1.0, ls.exit_code)

    return server


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
