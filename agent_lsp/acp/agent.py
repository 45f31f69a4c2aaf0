"""The ACP agent: the SDK's Agent interface, one handler per method, each thin (unpack, call the
session or the shared AgentHost, convert). The core loads after `initialize` is answered."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionModeResponse,
)

from agent_lsp import __version__
from agent_lsp.frontend import WarmUp, shut_down, stop_runs, user_settings

if TYPE_CHECKING:
    from agent_lsp.acp.session import AcpSession
    from agent_lsp.agent.host import AgentHost

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CORE_MODULES = (
    "agent_lsp.settings",
    "agent_lsp.agent.host",
    "agent_lsp.mcp.config",
    "agent_lsp.acp.session",
    "agent_lsp.acp.replay",
)
WARM_UP_DELAY = 0.02  # let the initialize answer go out before the import thread takes the GIL


def _root(cwd: str, method: str) -> Path:
    path = Path(cwd).expanduser() if isinstance(cwd, str) else None
    if path is None or not path.is_absolute():
        raise RequestError(-32602, f"{method}: cwd must be an absolute path, got {cwd!r}")
    root = path.resolve()
    if not root.is_dir():
        raise RequestError(-32602, f"{method}: cwd {cwd} is not a directory")
    return root


class AcpAgent:
    def __init__(self) -> None:
        self.client: Any = None  # the SDK's AgentSideConnection
        self.caps: Any = None
        self.sessions: dict[str, AcpSession] = {}
        self.warm = WarmUp(CORE_MODULES, name="agent-lsp-acp-warm-up")
        self._host: AgentHost | None = None

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    @property
    def host(self) -> AgentHost:
        if self._host is None:
            from agent_lsp.acp.approver import McpConsent
            from agent_lsp.acp.session import CURRENT
            from agent_lsp.agent.host import AgentHost
            from agent_lsp.mcp.hub import McpHooks, McpHub
            from agent_lsp.telemetry.hub import OtelTelemetry

            def outbox() -> Any:
                session = CURRENT.get()
                return session.outbox if session is not None else None

            def on_status(name: str, state: str, message: str) -> None:
                log.info("MCP %s: %s", name, message)
                box = outbox()
                if box is not None and state in ("failed", "needs-consent", "denied"):
                    from agent_lsp.acp.updates import thought

                    box.send(thought(f"[MCP] {message}"))

            hooks = McpHooks(
                McpConsent(self.client, outbox, self._approval_timeout()).ask, on_status
            )
            self._host = AgentHost(tool_servers=McpHub(hooks), telemetry=OtelTelemetry())
            from agent_lsp.langservers.hub import plug

            plug(self._host, lambda: _settings()[0])  # the language servers we start
            from agent_lsp.acp.approver import ProjectConsent
            from agent_lsp.permissions.source import ClaudePermissions

            consent = ProjectConsent(self.client, outbox, self._approval_timeout())
            self._host.permissions = ClaudePermissions(consent.ask)
        return self._host

    @staticmethod
    def _approval_timeout() -> float:
        return _settings()[0].approval.timeout

    # -- lifecycle --------------------------------------------------------------------------
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        from agent_lsp.acp.capabilities import FsCaps

        self.caps = FsCaps.from_client(client_capabilities)
        log.info(
            "ACP client %s (protocol %s); fs read=%s write=%s",
            getattr(client_info, "name", "?"),
            protocol_version,
            self.caps.read,
            self.caps.write,
        )
        asyncio.get_running_loop().call_later(WARM_UP_DELAY, self.warm.start)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    embedded_context=True, image=False, audio=False
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            auth_methods=[],
            agent_info=Implementation(name="agent-lsp", title="agent-lsp", version=__version__),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        root = _root(cwd, "session/new")
        session = await self._open([root], None, mcp_servers)
        return NewSessionResponse(session_id=session.id, modes=_modes(session.mode))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        _valid_session_id(session_id, "session/load")
        root = _root(cwd, "session/load")
        live = self.sessions.get(session_id)
        if live is not None and live.run is not None:
            raise RequestError(
                -32602, f"session/load: session {session_id} is running a turn; cancel it first"
            )
        session = await self._open([root], session_id, mcp_servers, announce=False)
        from agent_lsp.acp.replay import replay_updates

        for update in replay_updates(session.core.history, session.roots, session.ids):
            session.outbox.send(update)
        await session.outbox.drain()  # the whole conversation before the answer, as ACP asks
        session.announce()
        return LoadSessionResponse(modes=_modes(session.mode))

    async def _open(
        self,
        roots: list[Path],
        session_id: str | None,
        mcp_servers: list[Any] | None,
        announce: bool = True,
    ) -> AcpSession:
        await self.warm.wait_core()
        from agent_lsp.acp.session import AcpSession
        from agent_lsp.agent.state.sessions import SessionError
        from agent_lsp.mcp.config import from_acp

        settings, problems = _settings()
        declarations, more = from_acp(mcp_servers or [])
        for problem in more:
            log.warning("%s", problem)
        try:
            core, store = await self.host.open_session(roots, session_id)
        except SessionError as exc:
            # ACP's "resource not found"
            raise RequestError(-32002, f"session/load: {exc}", {"sessionId": session_id}) from None
        previous = self.sessions.get(core.id)
        session = AcpSession(
            core.id,
            self.host,
            self.client,
            self.caps,
            core,
            store,
            roots,
            settings,
            declarations,
            until_warm=self.warm.wait_sdk,
            mode=previous.mode if previous else "default",
        )
        self.sessions[core.id] = session
        from agent_lsp.agent.fs.prompt_files import discover_shared

        session.files = await discover_shared(roots)  # the commands it announces
        if announce:
            session.announce(problems + more)
        return session

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        if cursor is not None:
            raise RequestError(
                -32602, "session/list: unknown cursor (every session is listed in one page)"
            )
        await self.warm.wait_core()
        roots = [_root(cwd, "session/list")] if cwd is not None else self._known_roots()
        sessions: list[SessionInfo] = []
        for root in roots:
            items = await asyncio.to_thread(self.host.store([root]).list)
            sessions += [
                SessionInfo(
                    session_id=item["sessionId"],
                    cwd=str(root),
                    title=item["title"] or None,
                    updated_at=item["updated"],
                    field_meta={
                        "agentLsp": {
                            k: item[k] for k in ("created", "runs", "lastStop", "editedFiles")
                        }
                    },
                )
                for item in items
            ]
        sessions.sort(key=lambda s: s.updated_at or "", reverse=True)
        return ListSessionsResponse(sessions=sessions)

    def _known_roots(self) -> list[Path]:
        """Without a cwd: the workspaces of this process's sessions and those with sessions in
        the state dir (each index names its workspace)."""
        from agent_lsp.acp.session_roots import stored_roots

        roots = {s.roots[0]: None for s in self.sessions.values()}
        roots.update({r: None for r in stored_roots()})
        return list(roots)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        self._session(session_id, "session/set_mode").set_mode(mode_id)
        return SetSessionModeResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        return await self._session(session_id, "session/prompt").prompt(prompt)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "agentLsp/rewind":
            raise RequestError.method_not_found(f"_{method}")
        from agent_lsp.acp.session_roots import rewind_params

        run_id, force, include_later, session_id = rewind_params(params)
        if session_id is not None:
            return await self._session(session_id, "_agentLsp/rewind").rewind(
                run_id, force, include_later
            )
        await self.warm.wait_core()
        from agent_lsp.acp.session_roots import rewind_anywhere

        return await rewind_anywhere(
            self.host, self._known_roots(), run_id, force, include_later, _settings()[0]
        )

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignoring the extension notification _%s", method)

    def _session(self, session_id: str, method: str) -> AcpSession:
        _valid_session_id(session_id, method)
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(
                -32002,
                f"{method}: unknown sessionId {session_id!r} "
                "(create it with session/new or load it with session/load)",
                {"sessionId": session_id},
            )
        return session

    def signalled(self, name: str) -> None:
        """SIGTERM or SIGHUP: every turn in flight is cancelled, its cause the signal."""
        from agent_lsp.agent.messages import CancelCause, StopCause

        stop_runs(self._host, CancelCause(StopCause.SIGNAL, name))

    async def shutdown(self) -> None:
        """The client went away: cancel every turn (cause `shutdown`), end the MCP servers."""
        await shut_down(self._host)


def _modes(current: str) -> Any:
    from agent_lsp.acp.session import modes_state

    return modes_state(current)


def _settings() -> tuple[Any, list[str]]:
    """ACP has no initializationOptions: the user's settings file, then the environment, read
    again when either changed (the same rule as the language server's, frontend.UserSources)."""
    return user_settings()


def _valid_session_id(session_id: Any, method: str) -> None:
    """A value that cannot be a session id is -32602 (an unknown valid one is -32002)."""
    from agent_lsp.agent.state.sessions import InvalidSessionId, check_session_id

    try:
        check_session_id(session_id)
    except InvalidSessionId as exc:
        raise RequestError(-32602, f"{method}: {exc}") from None
