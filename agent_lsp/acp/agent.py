"""The ACP agent: the SDK's Agent interface, one handler per method, each thin (unpack, call the
session or the shared AgentHost, convert). The core loads after `initialize` is answered."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
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
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionDeleteCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionConfigOptionResponse,
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
MODELS_TTL = 60.0  # the model picker's list is asked again after this long
# session/new waits this long for the endpoint's list; a slower one is announced when it lands
MODELS_WAIT = 3.0
STABLE_DELETE = "session/delete"  # a stable method the pinned SDK routes as an extension
WARM_UP_DELAY = 0.02  # let the initialize answer go out before the import thread takes the GIL


def _root(cwd: str, method: str, what: str = "cwd") -> Path:
    path = Path(cwd).expanduser() if isinstance(cwd, str) else None
    if path is None or not path.is_absolute():
        raise RequestError(-32602, f"{method}: {what} must be an absolute path, got {cwd!r}")
    root = path.resolve()
    if not root.is_dir():
        raise RequestError(-32602, f"{method}: {what} {cwd} is not a directory")
    return root


def _roots(cwd: str, extra: list[str] | None, method: str) -> list[Path]:
    """The session's folders: cwd first, then its additionalDirectories (the rules of LSP's
    workspaceFolders: each a root of reads, search, edits, rewind and the sandbox)."""
    roots = [_root(cwd, method)]
    if extra is not None and not isinstance(extra, list):
        raise RequestError(-32602, f"{method}: additionalDirectories must be a list of paths")
    for directory in extra or []:
        root = _root(directory, method, "an additional directory")
        if root not in roots:
            roots.append(root)
    return roots


class AcpAgent:
    def __init__(self) -> None:
        self.client: Any = None  # the SDK's AgentSideConnection
        self.caps: Any = None
        self.sessions: dict[str, AcpSession] = {}
        # Idle sessions past the host's bound are parked: what reopens them, without their
        # history (it reloads from the transcript on the session's next request).
        self.parked: dict[str, Parked] = {}
        self._reopening: dict[str, asyncio.Task[AcpSession]] = {}
        self._listing: dict[tuple[Any, ...], tuple[float, list[str]]] = {}
        self._asking: dict[tuple[Any, ...], asyncio.Task[list[str]]] = {}  # GET /models going
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
                    embedded_context=True, image=True, audio=False
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    delete=SessionDeleteCapabilities(),
                    additional_directories=SessionAdditionalDirectoriesCapabilities(),
                ),
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
        roots = _roots(cwd, additional_directories, "session/new")
        session = await self._open(roots, None, mcp_servers)
        return NewSessionResponse(
            session_id=session.id, modes=_modes(session.mode), config_options=session.options()
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        _valid_session_id(session_id, "session/load")
        roots = _roots(cwd, additional_directories, "session/load")
        live = self.sessions.get(session_id)
        if live is not None and not live.idle:
            raise RequestError(
                -32602, f"session/load: session {session_id} is running a turn; cancel it first"
            )
        session = await self._open(roots, session_id, mcp_servers, announce=False)
        from agent_lsp.acp.replay import replay_updates

        for update in replay_updates(session.core.history, session.roots, session.ids):
            if update.session_update == "agent_thought_chunk" and session.thought_level is None:
                session.thought_level = "medium"  # the model was seen reasoning
            session.outbox.send(update)
        await session.outbox.drain()  # the whole conversation before the answer, as ACP asks
        session.announce()
        return LoadSessionResponse(modes=_modes(session.mode), config_options=session.options())

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
        previous = self.sessions.get(core.id) or self.parked.pop(core.id, None)
        models, late = await self._models(settings)
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
            cost=previous.cost if previous else 0.0,
            thought_level=previous.thought_level if previous else None,
            models=models,
        )
        if late is not None:
            late.add_done_callback(session.models_listed)
        self.sessions[core.id] = session
        self._park_idle()
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
        roots.update({p.roots[0]: None for p in self.parked.values()})
        roots.update({r: None for r in stored_roots()})
        return list(roots)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        (await self._session(session_id, "session/set_mode")).set_mode(mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = await self._session(session_id, "session/set_config_option")
        return SetSessionConfigOptionResponse(config_options=session.set_option(config_id, value))

    async def delete_session(self, session_id: Any) -> dict[str, Any]:
        """session/delete: the session's index and transcripts go, as `agent-lsp sessions
        delete` does; a session running a turn is -32602."""
        if not isinstance(session_id, str) or not session_id:
            raise RequestError(-32602, "session/delete: sessionId must be a non-empty string")
        live = self.sessions.get(session_id)
        if live is not None and not live.idle:
            raise RequestError(
                -32602, f"session/delete: session {session_id} is running a turn; cancel it first"
            )
        await self.warm.wait_core()
        parked = self.parked.get(session_id)
        if live is not None or parked is not None:
            roots = (live or parked).roots  # type: ignore[union-attr]
        else:
            roots = self._known_roots()
        for root in {r: None for r in [*roots[:1], *self._known_roots()]}:
            store = self.host.store([root])
            if await asyncio.to_thread(store.remove, session_id):
                self.sessions.pop(session_id, None)
                self.parked.pop(session_id, None)
                self.host.forget_session(session_id)
                return {}
        raise RequestError(
            -32002, f"session/delete: unknown sessionId {session_id!r}", {"sessionId": session_id}
        )

    async def _models(self, settings: Any) -> tuple[list[str], asyncio.Task[list[str]] | None]:
        """The endpoint's models for the model picker, asked at most once a minute. A listing
        slower than MODELS_WAIT does not hold the session up: the current model is offered
        alone, and the task still going is returned, to announce the list when it lands."""
        key = (settings.base_url, settings.api_key_env)
        cached = self._listing.get(key)
        if cached is not None and time.monotonic() - cached[0] < MODELS_TTL:
            return cached[1], None
        await self.warm.wait_sdk()  # the clock is the endpoint's, not this machine's imports
        asking = self._asking.get(key)
        if asking is None:
            asking = self._asking[key] = asyncio.ensure_future(self._ask_models(key, settings))
        done, _ = await asyncio.wait([asking], timeout=MODELS_WAIT)
        return (asking.result(), None) if done else ([], asking)

    async def _ask_models(self, key: tuple[Any, ...], settings: Any) -> list[str]:
        try:
            listing = await self.host.list_models(settings)
        finally:
            self._asking.pop(key, None)
        if listing.get("error"):
            log.info("the model picker offers the current model alone: %s", listing["error"])
        models = list(listing.get("models") or [])
        self._listing[key] = (time.monotonic(), models)
        return models

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        session = await self._session(session_id, "session/prompt")
        try:
            return await session.prompt(prompt)
        finally:
            self._park_idle()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == STABLE_DELETE:  # session/delete (frames.py: the SDK does not route it)
            return await self.delete_session((params or {}).get("sessionId"))
        if method == "agentLsp/stopProcess":
            return {"stopped": await self._stop_process(params or {})}
        if method != "agentLsp/rewind":
            raise RequestError.method_not_found(f"_{method}")
        from agent_lsp.acp.session_roots import rewind_params

        run_id, force, include_later, session_id = rewind_params(params)
        if session_id is not None:
            session = await self._session(session_id, "_agentLsp/rewind")
            if not session.idle:
                raise RequestError(
                    -32602,
                    f"session {session_id} is running a turn; "
                    "cancel it or wait for it before rewinding",
                )
            return await session.rewind(run_id, force, include_later)
        await self.warm.wait_core()
        from agent_lsp.acp.session_roots import rewind_anywhere

        return await rewind_anywhere(
            self.host, self._known_roots(), run_id, force, include_later, _settings()[0]
        )

    async def _stop_process(self, params: dict[str, Any]) -> bool:
        """`_agentLsp/stopProcess {runId, processId}` (Decision 86): true when it was running."""
        run_id, process_id = params.get("runId"), params.get("processId")
        if not isinstance(run_id, str) or not isinstance(process_id, str):
            raise RequestError(
                -32602, "_agentLsp/stopProcess needs {runId: string, processId: string}"
            )
        return await self.host.stop_process(run_id, process_id)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignoring the extension notification _%s", method)

    async def _session(self, session_id: str, method: str) -> AcpSession:
        """A session of this process: live, or parked and reopened from its transcript."""
        _valid_session_id(session_id, method)
        session = self.sessions.get(session_id)
        if session is not None:
            return session
        if session_id in self.parked or session_id in self._reopening:
            return await self._reopen(session_id)
        raise RequestError(
                -32002,
                f"{method}: unknown sessionId {session_id!r} "
                "(create it with session/new or load it with session/load)",
                {"sessionId": session_id},
            )
        return session

    async def _reopen(self, session_id: str) -> AcpSession:
        """One reopening per parked session, however many requests name it meanwhile."""
        task = self._reopening.get(session_id)
        if task is None:
            parked = self.parked[session_id]
            task = asyncio.ensure_future(
                self._open(parked.roots, session_id, parked.mcp, announce=False)
            )
            self._reopening[session_id] = task
            task.add_done_callback(lambda _: self._reopening.pop(session_id, None))
        return await asyncio.shield(task)

    def _park_idle(self) -> None:
        """Past the host's bound of live sessions, the least recently used idle ones are parked
        (their history is dropped from this process until their next request)."""
        if self._host is None:
            return
        keep = self._host.keep_sessions
        idle = sorted((s for s in self.sessions.values() if s.idle), key=lambda s: s.used)
        for session in idle[: max(0, len(self.sessions) - keep)]:
            del self.sessions[session.id]
            self.parked[session.id] = Parked(
                session.roots, session.mcp, session.mode, session.cost, session.thought_level
            )

    def signalled(self, name: str) -> None:
        """SIGTERM or SIGHUP: every turn in flight is cancelled, its cause the signal."""
        from agent_lsp.agent.messages import CancelCause, StopCause

        stop_runs(self._host, CancelCause(StopCause.SIGNAL, name))

    async def shutdown(self) -> None:
        """The client went away: cancel every turn (cause `shutdown`), end the MCP servers."""
        await shut_down(self._host)


@dataclass
class Parked:
    """What reopens a parked session as it was: its roots, the client's MCP servers for it,
    its mode and this process's cost of it."""

    roots: list[Path]
    mcp: list[Any]
    mode: str
    cost: float
    thought_level: str | None


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
