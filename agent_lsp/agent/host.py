"""What every front end (LSP, ACP, the terminal) shares: sessions persisted per workspace, the
runs in flight, one model client per endpoint. Front ends adapt the ports; this is written once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent import keyguard
from agent_lsp.agent.checkpoints import CheckpointStore
from agent_lsp.agent.messages import RunReport
from agent_lsp.agent.model import Model, ModelError, make_model
from agent_lsp.agent.ports import Approver, EventSink, Workspace
from agent_lsp.agent.rewind import RewindError, RewindResult, rewind
from agent_lsp.agent.run import RunOptions, run_task
from agent_lsp.agent.session import Entry, RunRecord, Session, new_id
from agent_lsp.agent.sessions import SessionError, SessionStore
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.agent.transcript import Redactor, Transcript
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)


@dataclass
class RunPorts:
    """A front end's adapters for one run."""

    workspace: Workspace
    approver: Approver
    emit: EventSink


@dataclass
class McpHooks:
    """How a front end asks consent for a workspace-declared MCP server and shows server status."""

    ask_consent: Callable[[Any, str], Awaitable[str | None]] | None = None
    on_status: Callable[[str, str, str], None] | None = None


@dataclass
class HostedRun:
    id: str
    session: Session
    store: SessionStore
    task: asyncio.Task[Any] | None = None
    report: RunReport | None = None


@dataclass
class AgentHost:
    sessions: dict[str, tuple[Session, SessionStore]] = field(default_factory=dict)  # live sessions of this process
    active: dict[str, HostedRun] = field(default_factory=dict)
    models: dict[tuple[Any, ...], Model] = field(default_factory=dict)
    finished: dict[str, HostedRun] = field(default_factory=dict)  # recent runs, for rewind
    mcp_hooks: McpHooks = field(default_factory=McpHooks)
    mcp: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # (workspace, declarations) -> McpManager
    checkpoints: dict[Path, CheckpointStore] = field(default_factory=dict)  # first folder -> its store

    def store(self, roots: list[Path]) -> SessionStore:
        return SessionStore(state_dir(), roots[0])

    def checkpoint_store(self, roots: list[Path]) -> CheckpointStore:
        """One per workspace and process: it keeps the git index and stat cache of snapshots."""
        key = roots[0].resolve()
        if key not in self.checkpoints or self.checkpoints[key].snapshotter.roots != roots:
            self.checkpoints[key] = CheckpointStore(state_dir(), roots)
        return self.checkpoints[key]

    def model_for(self, settings: Settings, name: str | None = None) -> Model | None:
        """One model client per endpoint, shared by all runs: a client per run costs an SSL
        context and a connection pool each time (~50 ms on the event loop)."""
        name = name or settings.model
        key = (name, settings.base_url, settings.api_key_env, keyguard.environment().get(settings.api_key_env), settings.request_timeout)
        if key not in self.models:
            try:
                self.models[key] = make_model(settings, name=name)
            except ModelError:
                return None  # run_task tries again and reports the problem as a fatal stop
        return self.models[key]

    async def open_session(self, roots: list[Path], session_id: str | None) -> tuple[Session, SessionStore]:
        """A new session, a live one, or one of an earlier process rebuilt from its transcripts.
        SessionError (a ValueError) for an unknown, foreign, corrupt or busy session."""
        store = self.store(roots)
        if session_id is None:
            session = Session()
            self.sessions[session.id] = (session, store)
            return session, store
        live = self.sessions.get(session_id)
        if live is None:
            session = await store.load(session_id)
            self.sessions[session.id] = (session, store)
        elif live[1].dir != store.dir:
            raise SessionError(f"session {session_id} belongs to another workspace ({live[1].root})")
        else:
            session = live[0]
        if session.running:
            raise SessionError(f"session {session_id} is still running ({session.running}); wait for it or cancel it first")
        return session, store

    async def mcp_manager(self, roots: list[Path], settings: Settings, extra: list[Any] | None = None) -> Any:
        """The MCP servers of a workspace: the user's (settings), the workspace's own files
        (behind consent) and those a front end passed (ACP's session/new). Built once per
        workspace and set of declarations; nothing starts until a run asks for tools."""
        from agent_lsp.mcp import ConsentStore, McpManager, from_user_settings, from_workspace

        user, problems = from_user_settings(settings.mcp_servers)
        declared, more = await asyncio.to_thread(from_workspace, roots)
        declarations = [*user, *(extra or []), *declared]
        key = (str(roots[0]), tuple(d.fingerprint for d in declarations), settings.mcp.workspace_servers)
        manager = self.mcp.get(key)
        if manager is None:
            for problem in problems + more:
                log.warning("%s", problem)
            manager = McpManager(declarations, roots=roots, env=keyguard.environment(), api_key_env=settings.api_key_env,
                                 consent_store=ConsentStore(state_dir() / "mcp-consent.json"),
                                 workspace_policy=settings.mcp.workspace_servers, ask_consent=self.mcp_hooks.ask_consent,  # type: ignore[arg-type]
                                 on_status=self.mcp_hooks.on_status, request_timeout=settings.request_timeout)
            self.mcp[key] = manager
        return manager

    async def mcp_status(self, roots: list[Path], settings: Settings) -> list[dict[str, Any]]:
        return (await self.mcp_manager(roots, settings)).status()

    def start(self, prompt: str, *, session: Session, store: SessionStore, settings: Settings, ports: RunPorts,
              run_id: str | None = None, model: str | None = None, mode: str | None = None,
              continue_hint: str = "a follow-up in this session continues from here",
              before: Callable[[], Awaitable[None]] | None = None,
              after: Callable[[HostedRun], None] | None = None, mcp_servers: list[Any] | None = None,
              title: str | None = None) -> HostedRun:
        """Start a run in the background (its session claimed at once)."""
        run_id = run_id or new_id("r")
        if model is not None:
            session.model = model  # for this run and the rest of its session
        hosted = HostedRun(run_id, session, store)
        session.running = run_id
        self.active[run_id] = hosted

        async def save(s: Session, _record: RunRecord) -> None:
            await store.save(s)

        async def drive() -> None:
            try:
                extra = await self._prelude(before, ports.workspace.roots, settings, mcp_servers)
                options = RunOptions(run_id=run_id, mode=mode, continue_hint=continue_hint, on_record=save, extra_tools=extra,
                                     checkpoints=self.checkpoint_store(ports.workspace.roots), title=title)
                hosted.report = await run_task(prompt, session=session, settings=settings, workspace=ports.workspace,
                                               approver=ports.approver, emit=ports.emit,
                                               model=self.model_for(settings, session.model), options=options)
            finally:
                session.running = None
                self.active.pop(run_id, None)
                self.finished[run_id] = hosted
                if after is not None:
                    after(hosted)

        hosted.task = asyncio.ensure_future(drive())
        return hosted

    async def _prelude(self, before: Callable[[], Awaitable[None]] | None, roots: list[Path], settings: Settings,
                       mcp_servers: list[Any] | None) -> list[Any]:
        """What a run needs before its loop: the front end's own wait, then the MCP tools. A
        cancel arriving here is re-armed, so run_task meets it at its first await and still
        ends the run with its `cancelled` report; a failing MCP setup costs its tools only."""
        try:
            if before is not None:
                await before()
            return await (await self.mcp_manager(roots, settings, mcp_servers)).tools()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
                task.cancel()
        except Exception as exc:
            log.warning("MCP tools are unavailable for this run: %s", exc)
        return []

    async def rewind(self, roots: list[Path], workspace: Any, run_id: str, *, force: bool = False,
                     include_later: bool = False, binary_ok: bool = True) -> RewindResult:
        """Rewind a run's files (and with include_later the session's later runs that touched
        them), then drop that run and every later one from the session's history with a note
        for the model. RewindError (a ValueError) for an unknown or running run."""
        store = self.checkpoint_store(roots)
        try:
            manifest = await asyncio.to_thread(store.load, run_id)
        except OSError as exc:
            raise RewindError(str(exc)) from None
        if manifest is None:
            raise RewindError(f"unknown runId {run_id!r}: no checkpoint of that run in this workspace (a run that changed no file has none)")
        live = self.sessions.get(manifest.session_id)
        if run_id in self.active or (live is not None and live[0].running):
            raise RewindError(f"a run of session {manifest.session_id} is still running; wait for it or cancel it before rewinding")
        try:
            result = await rewind(store, workspace, workspace, run_id, force=force, include_later=include_later, binary_ok=binary_ok)
        except OSError as exc:
            raise RewindError(f"the checkpoint store cannot be used ({exc}); nothing was changed") from None
        await self._forget_rewound(roots, manifest.session_id, result)
        return result

    async def _forget_rewound(self, roots: list[Path], session_id: str, result: RewindResult) -> None:
        """The session's history drops the rewound run and every later one; a note tells the model."""
        sessions = self.store(roots)
        live = self.sessions.get(session_id)
        try:
            session = live[0] if live is not None else await sessions.load(session_id)
        except SessionError as exc:
            log.info("rewind: the session %s is not resumable (%s); its files were restored anyway", session_id, exc)
            return
        rewound = set(result.runs)
        ids = [r.run_id for r in session.runs if r.kind == "run"]
        first = min((ids.index(r) for r in rewound if r in ids), default=None)
        if first is None:  # a rewind of a rewind: files only
            dropped: set[str] = set()
        else:
            dropped = set(ids[first:])
        cut = next((i for i, e in enumerate(session.history) if e.run_id in dropped), len(session.history))
        shown = ", ".join(PathGuard(roots).display(p) for p in result.restored) or "none"
        note = Entry({"role": "user", "content": f"[The user rewound {'run ' + ', '.join(sorted(rewound)) if dropped else 'an earlier rewind'}: "
                      f"these files were restored to their state before it: {shown}. What was said and done in that run "
                      "and after it is gone from this conversation; read the files again before relying on them.]"},
                     "note", result.rewind_id)
        del session.history[cut:]
        session.history.append(note)
        for record in session.runs:
            if record.run_id in dropped:
                record.rewound = True
        transcript = Transcript(state_dir() / "runs" / f"{result.rewind_id}.jsonl", result.rewind_id, Redactor([]))
        await transcript.write("main", 0, "history", op="truncate", length=cut)
        await transcript.write("main", 0, "history", op="append", entries=[note.to_record()])
        await transcript.write("main", 0, "rewind", result=result.to_dict(), runs=sorted(rewound))
        await transcript.close()
        session.runs.append(RunRecord(result.rewind_id, str(transcript.path), time.time(), f"rewind of {', '.join(sorted(rewound))}",
                                      "done", [p.as_uri() for p in result.restored], kind="rewind"))
        session.updated = time.time()
        await sessions.save(session)

    async def last_rewindable(self, roots: list[Path]) -> tuple[str, int] | None:
        """The newest finished run of the workspace that changed files and was not rewound:
        (its id, how many files it can restore), for the "rewind last run" code action (asked
        on every cursor move in VS Code: the manifests are read off the event loop, and only
        when they changed)."""
        manifests = await asyncio.to_thread(self.checkpoint_store(roots).all)
        undone = {r for m in manifests if m.kind == "rewind" for r in m.rewinds}
        for manifest in reversed(manifests):
            if manifest.kind == "run" and manifest.finished and manifest.run_id not in undone and manifest.run_id not in self.active:
                count = sum(1 for f in manifest.files.values() if f.restorable)
                if count:
                    return manifest.run_id, count
        return None

    def cancel(self, run_id: str) -> bool:
        run = self.active.get(run_id)
        if run is None or run.task is None or run.task.done():
            return False
        # call_soon: a run cancelled before its task first ran would skip run_task entirely
        # (and so its report); one loop iteration later it is inside run_task's handler.
        asyncio.get_running_loop().call_soon(run.task.cancel)
        return True

    async def cancel_all(self, deadline: float) -> None:
        tasks = [r.task for r in self.active.values() if r.task and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=deadline)

    async def list_models(self, settings: Settings) -> dict[str, Any]:
        """CONTRACT agentLsp.models: `{current, models, error?}` from the endpoint's GET /models."""
        out: dict[str, Any] = {"current": settings.model, "models": []}
        model = self.model_for(settings)
        lister = getattr(model, "list_models", None)
        if model is None or lister is None:
            out["error"] = "no model client could be made: set the API key variable named by apiKeyEnv, or baseUrl"
            return out
        try:
            out["models"] = await lister()
        except ModelError as exc:
            out["error"] = str(exc)
        return out

    async def aclose(self) -> None:
        managers, self.mcp = list(self.mcp.values()), {}
        await asyncio.gather(*(m.aclose() for m in managers), return_exceptions=True)
        for model in list(self.models.values()):
            close = getattr(model, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception as exc:
                    log.debug("closing a model client failed: %s", exc)
        self.models.clear()
