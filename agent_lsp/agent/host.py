"""What every front end (LSP, ACP, the terminal) shares: sessions persisted per workspace, the
runs in flight, one model client per endpoint. Front ends adapt the ports; this is written once."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_lsp.agent.events import StatusEvent, StopEvent
from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.fs.prompt_files import PromptFiles, discover_shared
from agent_lsp.agent.fs.shared_read import SharedRead
from agent_lsp.agent.host_rewind import HostRewinds
from agent_lsp.agent.images import ImagePart
from agent_lsp.agent.loop.attach import Attachment, AttachmentRefused
from agent_lsp.agent.loop.budget import BudgetRefused, check_budget
from agent_lsp.agent.loop.handle import BY_USER, RunHandle, RunPhase, unstarted_report
from agent_lsp.agent.loop.prompt_plan import PromptPlan
from agent_lsp.agent.loop.run import RunOptions, run_task
from agent_lsp.agent.loop.structured import OutputSchema
from agent_lsp.agent.messages import CancelCause, RunReport, StopCause
from agent_lsp.agent.model.client import Model, ModelError, make_model
from agent_lsp.agent.model.listing import models_of
from agent_lsp.agent.ports import (
    Approver,
    CodeIntelSources,
    EventSink,
    PermissionSource,
    RunTelemetry,
    Telemetry,
    ToolServers,
    Workspace,
)
from agent_lsp.agent.state.checkpoints import CheckpointStore
from agent_lsp.agent.state.rewind import RewindResult
from agent_lsp.agent.state.session import KEPT, RunRecord, Session, SessionApprovals, new_id
from agent_lsp.agent.state.sessions import SessionError, SessionStore, sweep_orphans
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)

__all__ = ["AgentHost", "FinishedRun", "RunHandle", "RunPhase", "RunPorts", "RunRequest"]

# A server runs all day: what it keeps in memory is bounded (its idle sessions, below);
# finished runs are kept for the newest KEEP_FINISHED only.
KEEP_FINISHED = 100
# A server runs all day: what it keeps in memory is bounded. Idle sessions past these bounds
# are dropped from memory (they reload from their transcripts on next use).
KEEP_LIVE_SESSIONS = 32
IDLE_SECONDS = 30 * 60
PRUNE_SECONDS = 30  # a workspace's old sessions on disk are looked for at most this often
SWEEP_SECONDS = 3600  # orphan spills and transcripts are looked for at most this often
BY_SHUTDOWN = CancelCause(StopCause.SHUTDOWN)  # the server shuts down, the client goes away


@dataclass
class RunPorts:
    """A front end's adapters for one run."""

    workspace: Workspace
    approver: Approver
    emit: EventSink


@dataclass(frozen=True)
class RunRequest:
    """What a front end asks of a run: its prompt, its session (and store), its settings and
    ports, and what it may add. `plan` (prompt_plan.py): a slash command's prompt, settings and
    model, which win over `prompt` and `settings`."""

    prompt: str
    session: Session
    store: SessionStore
    settings: Settings
    ports: RunPorts
    run_id: str | None = None
    model: str | None = None  # the session's model from this run on
    mode: str | None = None
    continue_hint: str = "a follow-up in this session continues from here"
    before: Callable[[], Awaitable[None]] | None = None  # the front end's own wait (warm-up)
    after: Callable[[RunHandle], None] | None = None  # once the run is over, before its waiters
    mcp_servers: list[Any] | None = None
    title: str | None = None  # the user's own words (the session's title)
    output_schema: OutputSchema | None = None
    plan: PromptPlan | None = None
    images: list[ImagePart] | None = None
    context: list[Attachment] | None = None  # read when the run starts (Decision 53)
    # On a session whose run runs: wait for it to end (any stop) instead of being refused.
    queue: bool = False
    # The front end's prompt and slash command, made when the run starts (a queued run,
    # Decision 49): they replace `prompt` and `plan`; AttachmentRefused ends the run `fatal`.
    resolve: Callable[[], Awaitable[tuple[str, PromptPlan | None]]] | None = None

    @property
    def run_settings(self) -> Settings:
        return self.plan.settings if self.plan is not None else self.settings


@dataclass(frozen=True)
class FinishedRun:
    """What the host keeps of a finished run: its ids and report, never its session (whose
    history a long-lived host would otherwise hold for each of its last runs)."""

    id: str
    session_id: str
    report: RunReport | None


@dataclass
class AgentHost:
    """What the front ends share: the sessions in memory (opened, loaded once, dropped when
    idle; one session id has at most one Session object), the runs queued and in flight, one
    model client per endpoint, and what a run borrows (MCP, language servers, checkpoints)."""

    # The live sessions of this process.
    sessions: dict[str, tuple[Session, SessionStore]] = field(default_factory=dict)
    keep_sessions: int = KEEP_LIVE_SESSIONS
    idle_seconds: float = IDLE_SECONDS
    # "Allow for session" grants outlive a session's eviction from memory, for the server's life
    # (CONTRACT Decision 46); a session of an earlier process still asks again (Decision 18).
    grants: dict[str, SessionApprovals] = field(default_factory=dict)
    _used: dict[str, float] = field(default_factory=dict)  # session id -> last used (monotonic)
    # Evicted sessions a front end may still hold (an ACP session object): found again rather
    # than loaded a second time, so one session id never has two live objects.
    _evicted: dict[str, tuple[weakref.ref[Session], SessionStore]] = field(default_factory=dict)
    _loads: SharedRead = field(default_factory=SharedRead)  # (store dir, session id) in flight
    _pruned: dict[Path, float] = field(default_factory=dict)  # store dir -> last prune
    _swept: float = 0.0

    active: dict[str, RunHandle] = field(default_factory=dict)
    # session id -> its queued runs, oldest first (agentLsp.run {queue: true})
    queued: dict[str, list[tuple[RunRequest, RunHandle]]] = field(default_factory=dict)
    models: dict[tuple[Any, ...], Model] = field(default_factory=dict)
    finished: dict[str, FinishedRun] = field(default_factory=dict)  # recent runs: ids, reports
    # MCP and OpenTelemetry, plugged in by the front end (none: no such tools, nothing recorded)
    tool_servers: ToolServers | None = None
    telemetry: Telemetry | None = None
    code_intel: CodeIntelSources | None = None  # roots -> language-server sources (ports.py)
    permissions: PermissionSource | None = None  # Claude Code's rule files, "Always allow"
    checkpoints: dict[Path, CheckpointStore] = field(default_factory=dict)  # first folder -> store
    keep_finished: int = KEEP_FINISHED
    # Set once every run was cancelled because the process is going away: a run that starts
    # later (its request was on its way) is cancelled as it begins, with the same cause.
    closing: CancelCause | None = None
    _background: set[asyncio.Task[Any]] = field(default_factory=set)
    # the newest configuration (of a run's start or a front end's reconfigure): what it does not
    # want any more (model clients, MCP and language servers) is closed once no run uses it
    _settings_now: Settings | None = None
    rewinds: HostRewinds = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rewinds = HostRewinds(
            checkpoints=self.checkpoint_store,
            sessions=self.store,
            live=self.live,
            load=self._load_once,
            in_flight=lambda run_id: run_id in self.active,
        )

    def store(self, roots: list[Path]) -> SessionStore:
        return SessionStore(state_dir(), roots[0])

    async def open_session(
        self, roots: list[Path], session_id: str | None, *, busy_ok: bool = False
    ) -> tuple[Session, SessionStore]:
        """A new session, a live one, or one of an earlier process rebuilt from its transcripts.
        SessionError (a ValueError) for an unknown, foreign, corrupt or busy session (`busy_ok`:
        a running one is fine, for a run queued after its run). One session
        id has at most one Session object: concurrent opens of a persisted session share its
        load."""
        store = self.store(roots)
        self.evict_idle()
        if session_id is None:
            session = Session()
            self._keep(session, store)
            return session, store
        live = self.live(session_id)
        if live is None:
            live = await self._load_once(store, session_id)
        if live[1].dir != store.dir:
            raise SessionError(
                f"session {session_id} belongs to another workspace ({live[1].root})"
            )
        session = live[0]
        if session.running and not busy_ok:
            raise SessionError(
                f"session {session_id} is still running ({session.running}); "
                "wait for it or cancel it first"
            )
        self._keep(session, store)
        return session, store

    async def session_to_read(
        self, roots: list[Path], session_id: str
    ) -> tuple[Session, SessionStore]:
        """A session to read (its history, a fork of it), running or not: the live object, else
        loaded once. SessionError for an unknown, foreign or unreadable one."""
        store = self.store(roots)
        live = self.live(session_id) or await self._load_once(store, session_id)
        if live[1].dir != store.dir:
            raise SessionError(
                f"session {session_id} belongs to another workspace ({live[1].root})"
            )
        return live

    def live(self, session_id: str) -> tuple[Session, SessionStore] | None:
        """The session's object in this process, if any (kept, or evicted but still held)."""
        kept = self.sessions.get(session_id)
        if kept is not None:
            return kept
        evicted = self._evicted.get(session_id)
        session = evicted[0]() if evicted is not None else None
        return (session, evicted[1]) if session is not None and evicted is not None else None

    async def _load_once(
        self, store: SessionStore, session_id: str
    ) -> tuple[Session, SessionStore]:
        return await self._loads.join(
            (store.dir, session_id), lambda: self._load(store, session_id)
        )

    async def _load(self, store: SessionStore, session_id: str) -> tuple[Session, SessionStore]:
        session = await store.load(session_id)
        live = self.live(session_id)  # an eviction or a new run may have raced the load
        if live is not None:
            return live
        self._keep(session, store)
        return session, store

    def _keep(self, session: Session, store: SessionStore) -> None:
        session.approvals = self.grants.setdefault(session.id, session.approvals)
        self.sessions[session.id] = (session, store)
        self._evicted.pop(session.id, None)
        self._used[session.id] = time.monotonic()

    def forget_session(self, session_id: str) -> None:
        """A deleted session leaves memory too (its grants included)."""
        self.sessions.pop(session_id, None)
        self._evicted.pop(session_id, None)
        self._used.pop(session_id, None)
        self.grants.pop(session_id, None)

    async def end_sessions(self, reason: str = "other") -> None:
        """SessionEnd for every session used in this process (exit, LSP shutdown), at once."""
        sessions: list[Session | None] = [s for s, _ in self.sessions.values()]
        sessions += [r() for r, _ in self._evicted.values()]
        ends = [s.end_hooks(reason) for s in sessions if s is not None and s.end_hooks is not None]
        for session in sessions:
            if session is not None:
                session.end_hooks = None
        if ends:
            await asyncio.gather(*ends, return_exceptions=True)

    def evict_idle(self) -> list[str]:
        """Drop idle sessions from memory past `keep_sessions` (least recently used first) or
        idle for `idle_seconds`; a running one is never dropped. Returns the ids dropped."""
        now = time.monotonic()
        idle = sorted(
            (
                (self._used.get(sid, 0.0), sid)
                for sid, (s, _) in self.sessions.items()
                if not s.running
            ),
            reverse=True,
        )
        dropped = []
        for rank, (used, sid) in enumerate(idle):
            if rank >= self.keep_sessions or now - used > self.idle_seconds:
                session, store = self.sessions.pop(sid)
                self._evicted[sid] = (weakref.ref(session), store)
                self._used.pop(sid, None)
                dropped.append(sid)
        for sid in [sid for sid, (ref, _) in self._evicted.items() if ref() is None]:
            del self._evicted[sid]
        return dropped

    def held_run_ids(self) -> set[str]:
        """The runs of every session this process holds (live or evicted but still referenced)."""
        held = [*self.sessions.values(), *filter(None, map(self.live, list(self._evicted)))]
        return {r.run_id for session, _ in held for r in session.runs}

    async def prune_state(
        self, store: SessionStore, running: set[str], live_runs: set[str]
    ) -> None:
        """Sessions past 100 per workspace or 30 days go with their transcripts and spills; the
        sessions this process holds (and `running`) are kept. Orphan spills and transcripts (of
        runs no session index names, nor `live_runs`) are swept at most once an hour. A
        workspace is pruned at most once per PRUNE_SECONDS: twenty runs that end together list
        its sessions once, not twenty times. A failure costs the prune only."""
        last = self._pruned.get(store.dir)
        if last is not None and time.monotonic() - last < PRUNE_SECONDS:
            return
        self._pruned[store.dir] = time.monotonic()
        protect = set(self.sessions) | set(self._evicted) | running
        sweep = time.monotonic() - self._swept > SWEEP_SECONDS or not self._swept
        if sweep:
            self._swept = time.monotonic()
        try:
            dropped = await asyncio.to_thread(store.prune, protect=protect)
            if sweep:
                await asyncio.to_thread(sweep_orphans, state_dir(), live_runs | self.held_run_ids())
        except OSError as exc:
            log.warning("pruning old sessions failed: %s", exc)
            return
        for sid in dropped:
            self.grants.pop(sid, None)

    def checkpoint_store(self, roots: list[Path]) -> CheckpointStore:
        """One per workspace and process: it keeps the git index and stat cache of snapshots."""
        key = roots[0].resolve()
        if key not in self.checkpoints or self.checkpoints[key].snapshotter.roots != roots:
            self.checkpoints[key] = CheckpointStore(state_dir(), roots)
        return self.checkpoints[key]

    async def rewind(
        self, roots: list[Path], workspace: Any, run_id: str, **options: Any
    ) -> RewindResult:
        """A run's files put back and the session's history cut there (host_rewind.py, whose
        keyword options it takes); its transcript goes to the settings' transcriptDir."""
        return await self.rewinds.rewind(roots, workspace, run_id, **options)

    async def last_rewindable(
        self, roots: list[Path], session_id: str | None = None
    ) -> tuple[str, int] | None:
        """The newest run the workspace (or session_id's session) can rewind (host_rewind.py)."""
        return await self.rewinds.last_rewindable(roots, session_id)

    def model_for(
        self, settings: Settings, name: str | None = None, reasoning_effort: str | None = None
    ) -> Model | None:
        """One model client per endpoint (and reasoning level), shared by all runs: a client per
        run costs an SSL context and a connection pool each time (~50 ms on the event loop)."""
        name = name or settings.model
        key = (
            name,
            settings.base_url,
            settings.api_key_env,
            keyguard.environment().get(settings.api_key_env),
            settings.request_timeout,
            reasoning_effort,
        )
        if key not in self.models:
            try:
                self.models[key] = make_model(
                    settings, name=name, reasoning_effort=reasoning_effort
                )
            except ModelError:
                return None  # run_task tries again and reports the problem as a fatal stop
        return self.models[key]

    async def mcp_status(self, roots: list[Path], settings: Settings) -> list[dict[str, Any]]:
        return (
            await self.tool_servers.status(roots, settings) if self.tool_servers is not None else []
        )

    def start(self, request: RunRequest) -> RunHandle:
        """Start a run in the background (its session claimed at once) and return its handle.
        BudgetRefused (a ValueError) when its budget could not be kept (Decision 36);
        SessionError when its session is still running."""
        run_id = request.run_id or new_id("r")
        settings, session = request.run_settings, request.session
        run_model = request.plan.model if request.plan is not None else None
        check_budget(settings, run_model or request.model or session.model or settings.model)
        # Checked again here, where the claim is made (nothing awaits in between).
        if session.running and request.queue and self.closing is None:
            return self._enqueue(request, run_id)
        if session.running:
            raise SessionError(
                f"session {session.id} is still running ({session.running}); "
                "wait for it or cancel it first"
            )
        # Every cancel a front end makes goes through cancel() or RunHandle.cancel(), which say
        # who; a run cancelled without a cause was cancelled by its event loop ending (the editor
        # or the client went away, the process is stopping): a shutdown, not the user.
        handle = RunHandle(run_id, session, uncaused=BY_SHUTDOWN, holds=[request.ports.workspace])
        return self._launch(request, handle)

    def _enqueue(self, request: RunRequest, run_id: str) -> RunHandle:
        """A run that starts when its session's running run ends; until then its handle is
        `queued` (a cancel takes it out: one `stop` event, and its session never sees it)."""
        handle = RunHandle(
            run_id,
            request.session,
            state=RunPhase.QUEUED,
            uncaused=BY_SHUTDOWN,
            holds=[request.ports.workspace],
            unqueue=self._unqueue,
        )
        self.queued.setdefault(request.session.id, []).append((request, handle))
        return handle

    def _unqueue(self, handle: RunHandle, cause: CancelCause) -> None:
        waiting = self.queued.get(handle.session.id, [])
        found = [(r, h) for r, h in waiting if h is handle]
        if not found:
            return
        waiting.remove(found[0])
        if not waiting:
            self.queued.pop(handle.session.id, None)
        request = found[0][0]
        report = unstarted_report(handle, cause, request.run_settings)
        handle.report = report
        request.ports.emit(StopEvent(report.summary, report))
        self.finished[handle.id] = FinishedRun(handle.id, handle.session.id, report)
        try:
            if request.after is not None:
                request.after(handle)
        finally:
            handle.finished(report)

    def _next_queued(self, session_id: str) -> None:
        """The session's oldest queued run starts (its run just ended)."""
        waiting = self.queued.get(session_id)
        if not waiting:
            return
        request, handle = waiting.pop(0)
        if not waiting:
            self.queued.pop(session_id, None)
        self._launch(request, handle)

    def _launch(self, request: RunRequest, handle: RunHandle) -> RunHandle:
        """The run's session claimed and its task started (a host closing cancels it as it
        begins)."""
        session = request.session
        if request.model is not None:
            session.model = request.model  # for this run and the rest of its session
        self._settings_now = request.run_settings
        session.running = handle.id
        handle.state = RunPhase.RUNNING
        self.active[handle.id] = handle
        handle.task = asyncio.ensure_future(self._drive(request, handle))
        if self.closing is not None:
            handle.cancel(self.closing)
        return handle

    async def _drive(self, request: RunRequest, handle: RunHandle) -> None:
        handle.started = True
        if handle.cancel_cause is not None:  # cancelled before it began: run_task reports it
            task = asyncio.current_task()
            if task is not None:
                task.cancel()
        try:
            handle.report = await self._run(request, handle)
        finally:
            self._ended(request, handle)

    async def _run(self, request: RunRequest, handle: RunHandle) -> RunReport:
        """The prompt resolved, the run's prelude (host._prelude), its options, its model client,
        then run_task."""
        request, refusal = await self._resolved(request)
        settings, session, plan, ports = (
            request.run_settings,
            request.session,
            request.plan,
            request.ports,
        )
        extra, files, granted = await self._prelude(
            request.before, ports.workspace.roots, settings, request.mcp_servers, handle, plan
        )
        if plan is not None and (line := plan.status()):
            ports.emit(StatusEvent(line, 0))
        run_model = plan.model if plan is not None else None
        options = RunOptions(
            run_id=handle.id,
            mode=request.mode,
            continue_hint=request.continue_hint,
            on_record=self._saver(request.store),
            extra_tools=extra,
            checkpoints=self.checkpoint_store(ports.workspace.roots),
            title=request.title,
            output_schema=request.output_schema,
            images=list(request.images or []),
            context=list(request.context or []),
            telemetry=self._run_telemetry(settings, handle.id, session),
            code_intel=self._held_code_intel(handle),
            prompt_files=files,
            model_name=run_model,
            readable=plan.readable if plan is not None else [],
            permissions=granted,
            refusal=refusal,
        )
        handle.model = self.model_for(
            settings, run_model or session.model, session.reasoning_effort
        )
        return await run_task(
            request.prompt,
            session=session,
            settings=settings,
            workspace=ports.workspace,
            approver=ports.approver,
            emit=ports.emit,
            model=handle.model,
            options=options,
            handle=handle,
        )

    @staticmethod
    async def _resolved(request: RunRequest) -> tuple[RunRequest, str | None]:
        """The request with its prompt made now (its `resolve`), or why it could not be (a file,
        a command's model over the budget). A cancel arriving meanwhile is re-armed, so run_task
        ends the run `cancelled`."""
        if request.resolve is None:
            return request, None
        try:
            prompt, plan = await request.resolve()
            if plan is not None and plan.model:  # a command's model: its budget (Decision 36)
                check_budget(plan.settings, plan.model)
        except (AttachmentRefused, BudgetRefused) as exc:
            return request, str(exc)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
                task.cancel()
            return request, None
        return replace(request, prompt=prompt, plan=plan, resolve=None), None

    def _saver(self, store: SessionStore) -> Callable[[Session, RunRecord], Awaitable[None]]:
        """How a run's session is saved at its start and its stop."""

        async def save(s: Session, record: RunRecord) -> None:
            if record.stop is not None and not any(r.reached for r in s.runs if r.kind in KEPT):
                # No run of this session ever heard from the model (no key, a wrong URL): there
                # is nothing to continue, so no session is kept (Decision 46).
                await store.delete(s.id)
                return
            await store.save(s)
            if record.stop is not None:  # the run's end: old sessions go (CONTRACT Decision 19)
                running = {r.session.id for r in self.active.values()}
                await self.prune_state(store, running, set(self.active))

        return save

    def _ended(self, request: RunRequest, handle: RunHandle) -> None:
        """A run's task is over: the host forgets it (keeping its ids and report), then the
        front end's `after`, then the handle is finished (its waiters wake)."""
        session = request.session
        session.running = None
        self.active.pop(handle.id, None)
        self._next_queued(session.id)
        self._used[session.id] = time.monotonic()
        self.finished[handle.id] = FinishedRun(handle.id, session.id, handle.report)
        while len(self.finished) > self.keep_finished:
            del self.finished[next(iter(self.finished))]
        self.evict_idle()
        self._spawn(self.retire_unused())
        try:
            if request.after is not None:
                request.after(handle)
        finally:
            handle.finished(handle.report)

    def _held_code_intel(self, handle: RunHandle) -> CodeIntelSources | None:
        """The host's code-intel sources, those a run got recorded on it (what it holds)."""
        sources = self.code_intel
        if sources is None:
            return None

        def held(roots: list[Path]) -> list[Any]:
            got = list(sources(roots))
            handle.holds.extend(got)
            return got

        return held

    async def reconfigure(self, settings: Settings, roots: list[Path] | None = None) -> None:
        """A front end's configuration was replaced: the model clients, MCP servers and
        language servers only the old one wanted are closed now, or when the last run using
        them ends. `roots`: the workspace whose MCP declarations are looked at again."""
        self._settings_now = settings
        if roots and self.tool_servers is not None:
            try:  # the new declarations' set (nothing starts) retires the replaced one
                await self.tool_servers.toolset(roots, settings)
            except Exception as exc:
                log.warning("the MCP servers' configuration could not be read: %s", exc)
        await self.retire_unused()

    def settings_replaced(self, settings: Settings, roots: list[Path] | None = None) -> None:
        """`reconfigure` in the background (a front end's notification handler)."""
        self._spawn(self.reconfigure(settings, roots))

    async def retire_unused(self) -> None:
        """Close what a replaced configuration left and no running run uses: MCP server sets,
        language servers (their processes stopped) and model clients (their connections)."""
        running = list(self.active.values())
        if self.tool_servers is not None:
            await self.tool_servers.retire([r.mcp for r in running if r.mcp is not None])
        retire_servers = getattr(self.code_intel, "retire", None)
        if retire_servers is not None:
            await retire_servers([held for r in running for held in r.holds])
        for model in self._unwanted_models({id(r.model) for r in running}):
            try:
                await model.aclose()
            except Exception as exc:
                log.warning("closing a replaced model client failed: %s", exc)

    def _unwanted_models(self, in_use: set[int]) -> list[Any]:
        """The model clients to close (and forget): of another endpoint than the newest
        configuration's, or of a model name neither it nor a session in memory names."""
        now = self._settings_now
        if now is None:
            return []
        endpoint = (now.base_url, now.api_key_env, keyguard.environment().get(now.api_key_env))
        names = {now.model} | {s.model for s, _ in self.sessions.values() if s.model}
        unwanted = []
        for key, model in list(self.models.items()):
            wanted = key[1:4] == endpoint and key[4] == now.request_timeout and key[0] in names
            if not wanted and id(model) not in in_use:
                del self.models[key]
                if getattr(model, "aclose", None) is not None:
                    unwanted.append(model)
        return unwanted

    def _run_telemetry(
        self, settings: Settings, run_id: str, session: Session
    ) -> RunTelemetry | None:
        """The run's recorder when telemetry is on; a failing integration costs the telemetry
        only."""
        if self.telemetry is None:
            return None
        try:
            return self.telemetry.for_run(
                settings,
                run_id=run_id,
                session_id=session.id,
                model=session.model or settings.model,
                endpoint=settings.base_url,
            )
        except Exception as exc:
            log.warning("telemetry is unavailable for this run: %s", exc)
            return None

    async def _prelude(
        self,
        before: Callable[[], Awaitable[None]] | None,
        roots: list[Path],
        settings: Settings,
        mcp_servers: list[Any] | None,
        handle: RunHandle,
        plan: PromptPlan | None,
    ) -> tuple[list[Any], PromptFiles | None, Any]:
        """What a run needs before its loop: the front end's own wait, the prompt files, other
        files' rules (a RunPermissions), then the MCP tools. A cancel arriving here is re-armed,
        so run_task meets it at its first await and still ends the run with its `cancelled`
        report; a failing MCP setup costs its tools only."""
        files = plan.files if plan is not None else None
        rules = None
        try:
            if before is not None:
                await before()
            if files is None:
                files = await discover_shared(roots)
            if self.permissions is not None:
                rules = await self.permissions.for_run(roots, settings)
            if self.tool_servers is None:
                return [], files, rules
            handle.mcp = await self.tool_servers.toolset(roots, settings, mcp_servers)
            return list(await handle.mcp.tools()), files, rules
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
                task.cancel()
        except Exception as exc:
            log.warning("MCP tools (or rule files) are unavailable for this run: %s", exc)
        return [], files, rules

    def run_handle(self, run_id: str) -> RunHandle | None:
        """A run's handle while it is queued or running."""
        found = self.active.get(run_id)
        if found is None:
            waiting = (h for q in self.queued.values() for _, h in q if h.id == run_id)
            found = next(waiting, None)
        return found

    def cancel(self, run_id: str, cause: CancelCause = BY_USER) -> bool:
        run = self.run_handle(run_id)
        return run is not None and run.cancel(cause)

    def steer(self, run_id: str, text: str) -> bool:
        """A user message for a running run's next model call (agentLsp.steer); False for an
        unknown, queued or finished run, or one whose stop began."""
        run = self.active.get(run_id)
        return run is not None and run.steer(text)

    async def stop_process(self, run_id: str, process_id: str) -> bool:
        """End a running run's background process (agentLsp.stopProcess, Decision 86); False
        for an unknown or finished run or process."""
        run = self.active.get(run_id)
        return run is not None and await run.stop_process(process_id)

    def cancel_every(self, cause: CancelCause) -> list[asyncio.Task[Any]]:
        """Cancel every run now (the server or the client is going away), and every run that
        starts from now on; returns their tasks."""
        self.closing = self.closing or cause
        for _, waiting in reversed([h for q in self.queued.values() for h in q]):
            waiting.cancel(cause)  # queued runs first, newest first (Decision 74)
        runs = [r for r in self.active.values() if r.task is not None and not r.task.done()]
        for run in runs:
            run.cancel(cause)
        return [r.task for r in runs if r.task is not None]

    async def cancel_all(self, deadline: float, cause: CancelCause = BY_SHUTDOWN) -> None:
        tasks = self.cancel_every(cause)
        if tasks:
            await asyncio.wait(tasks, timeout=deadline)

    async def list_models(self, settings: Settings) -> dict[str, Any]:
        """CONTRACT agentLsp.models: `{current, models, error?}` from the endpoint's GET /models."""
        return await models_of(self.model_for(settings), settings.model)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        """A background task kept referenced until done, its failure logged (never lost)."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("background task failed: %r", t.exception(), exc_info=t.exception())

        task.add_done_callback(done)

    async def aclose(self) -> None:
        closers = [self.tool_servers.aclose] if self.tool_servers is not None else []
        closers += [c for m in self.models.values() if (c := getattr(m, "aclose", None))]
        for close in closers:  # the tool servers, then each model client
            try:
                await close()
            except Exception as exc:
                log.warning("closing %r failed: %s", close, exc)
        self.models.clear()
