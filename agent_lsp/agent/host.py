"""What every front end (LSP, ACP, the terminal) shares: sessions persisted per workspace, the
runs in flight, one model client per endpoint. Front ends adapt the ports; this is written once."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.messages import RunReport
from agent_lsp.agent.model import Model, ModelError, make_model
from agent_lsp.agent.ports import Approver, EventSink, Workspace
from agent_lsp.agent.run import RunOptions, run_task
from agent_lsp.agent.session import RunRecord, Session, new_id
from agent_lsp.agent.sessions import SessionError, SessionStore
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)


@dataclass
class RunPorts:
    """A front end's adapters for one run."""

    workspace: Workspace
    approver: Approver
    emit: EventSink


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

    def store(self, roots: list[Path]) -> SessionStore:
        return SessionStore(state_dir(), roots[0])

    def model_for(self, settings: Settings, name: str | None = None) -> Model | None:
        """One model client per endpoint, shared by all runs: a client per run costs an SSL
        context and a connection pool each time (~50 ms on the event loop)."""
        name = name or settings.model
        key = (name, settings.base_url, settings.api_key_env, os.environ.get(settings.api_key_env), settings.request_timeout)
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

    def start(self, prompt: str, *, session: Session, store: SessionStore, settings: Settings, ports: RunPorts,
              run_id: str | None = None, model: str | None = None, mode: str | None = None,
              continue_hint: str = "a follow-up in this session continues from here",
              before: Callable[[], Awaitable[None]] | None = None,
              after: Callable[[HostedRun], None] | None = None, extra_tools: list[Any] | None = None) -> HostedRun:
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
                if before is not None:
                    await before()
                options = RunOptions(run_id=run_id, mode=mode, continue_hint=continue_hint, on_record=save,
                                     extra_tools=extra_tools or [])
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
        for model in list(self.models.values()):
            close = getattr(model, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception as exc:
                    log.debug("closing a model client failed: %s", exc)
        self.models.clear()
