"""The run registry: start, cancel, and each run's progress and `agentLsp/stream`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.messages import Event
from agent_lsp.agent.model import Model, ModelError, make_model
from agent_lsp.agent.ports import ApprovalRequest
from agent_lsp.agent.run import Session, new_id, run_task
from agent_lsp.server.approvals import LspApprover, PendingApprovals
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import ClientRequestError, client_request, safe_notify
from agent_lsp.server.workspace import LspWorkspace, workspace_roots
from agent_lsp.settings import Settings

log = logging.getLogger(__name__)

STREAM = "agentLsp/stream"
TEXT_INTERVAL = 1 / 25  # at most ~30 text events per second per run: 25 leaves room for jitter
PROGRESS_CREATE_TIMEOUT = 5.0


class RunStream:
    """Numbers events per run, coalesces text deltas (never losing one), drives progress."""

    def __init__(self, ls: LanguageServer, caps: ClientCaps, run_id: str, title: str):
        self.ls = ls
        self.caps = caps
        self.run_id = run_id
        self.title = title
        self.seq = 0
        self._text: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last_text = 0.0
        self._progress = "off"  # off | creating | on | ended
        self._last_report: str | None = None

    # -- stream -----------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        if event.kind == "text":
            self._text.append(event.text)
            if self._timer is None:
                delay = max(0.0, self._last_text + TEXT_INTERVAL - time.monotonic())
                self._timer = asyncio.get_running_loop().call_later(delay, self.flush_text)
            return
        self.flush_text()
        self.send(event.kind, event.text, event.data)
        if event.kind in ("status", "toolCall", "approval", "compaction"):
            self.report(event.text)

    def flush_text(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._text:
            text, self._text = "".join(self._text), []
            self._last_text = time.monotonic()
            self.send("text", text, {})

    def send(self, kind: str, text: str, data: dict[str, Any]) -> None:
        payload = {**data, "runId": self.run_id, "seq": self.seq, "kind": kind, "text": text}
        self.seq += 1
        safe_notify(self.ls, STREAM, payload)

    # -- progress ---------------------------------------------------------------------------
    async def begin_progress(self) -> None:
        if not self.caps.can_create_progress:
            return
        self._progress = "creating"
        try:
            await client_request(self.ls, types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                                 types.WorkDoneProgressCreateParams(token=self.run_id), PROGRESS_CREATE_TIMEOUT)
        except (TimeoutError, ClientRequestError) as exc:
            log.info("no progress for %s: %s", self.run_id, exc)
            self._progress = "off"
            return
        if self._progress != "creating":  # the run already ended
            return
        self._progress = "on"
        self._notify_progress(types.WorkDoneProgressBegin(title=self.title, cancellable=True, message=self._last_report or "starting"))

    def report(self, message: str) -> None:
        line = message.splitlines()[0][:200] if message else ""
        self._last_report = line
        if self._progress == "on":
            self._notify_progress(types.WorkDoneProgressReport(message=line, cancellable=True))
        elif not self.caps.can_create_progress:
            safe_notify(self.ls, types.WINDOW_LOG_MESSAGE, types.LogMessageParams(type=types.MessageType.Info, message=f"[{self.run_id}] {line}"))

    def end(self, message: str) -> None:
        self.flush_text()
        if self._progress == "on":
            self._notify_progress(types.WorkDoneProgressEnd(message=message[:300]))
        elif not self.caps.can_create_progress:
            safe_notify(self.ls, types.WINDOW_LOG_MESSAGE, types.LogMessageParams(type=types.MessageType.Info, message=f"[{self.run_id}] {message}"))
        self._progress = "ended"

    def _notify_progress(self, value: Any) -> None:
        safe_notify(self.ls, types.PROGRESS, types.ProgressParams(token=self.run_id, value=value))


@dataclass
class ActiveRun:
    id: str
    session: Session
    stream: RunStream
    task: asyncio.Task[Any] | None = None
    progress_task: asyncio.Task[Any] | None = None
    report: dict[str, Any] | None = None


@dataclass
class RunRegistry:
    ls: LanguageServer
    approvals: PendingApprovals = field(default_factory=PendingApprovals)
    sessions: dict[str, Session] = field(default_factory=dict)
    active: dict[str, ActiveRun] = field(default_factory=dict)
    warm_up: concurrent.futures.Future[None] | None = None  # the SDK import started at `initialized`
    models: dict[tuple[Any, ...], Model] = field(default_factory=dict)

    def model_for(self, settings: Settings) -> Model | None:
        """One model client per endpoint, shared by all runs: a client per run costs an SSL
        context and a connection pool each time (~50 ms on the event loop)."""
        key = (settings.model, settings.base_url, settings.api_key_env, os.environ.get(settings.api_key_env),
               settings.request_timeout)
        if key not in self.models:
            try:
                self.models[key] = make_model(settings)
            except ModelError:
                return None  # run_task tries again and reports the problem as a fatal stop
        return self.models[key]

    def start(self, prompt: str, title: str, session_id: str | None, settings: Settings, caps: ClientCaps) -> ActiveRun:
        """Start a run in the background; ValueError (shown to the client) if it cannot."""
        if session_id is not None:
            session = self.sessions.get(session_id)
            if session is None:
                raise ValueError(f"unknown sessionId {session_id!r}: it may belong to an earlier server process; omit it to start a new session")
            if session.running:
                raise ValueError(f"session {session_id} is still running ({session.running}); wait for it or cancel it first")
        else:
            session = Session()
            self.sessions[session.id] = session
        run_id = new_id("r")
        stream = RunStream(self.ls, caps, run_id, title)
        run = ActiveRun(run_id, session, stream)
        workspace = LspWorkspace(self.ls, caps, workspace_roots(self.ls))
        workspace.on_waiting = lambda text: stream.send("status", text, {"turn": None})
        approver = LspApprover(self.ls, caps, self.approvals, run_id, settings.approval.timeout,
                               on_waiting=lambda req: self._waiting(stream, req))
        session.running = run_id  # claimed now, so a second start on this session is refused
        self.active[run_id] = run
        run.progress_task = asyncio.ensure_future(stream.begin_progress())
        run.task = asyncio.ensure_future(self._drive(run, prompt, settings, workspace, approver))
        return run

    @staticmethod
    def _waiting(stream: RunStream, request: ApprovalRequest) -> None:
        # Written right after the request goes out: some clients' readers (eglot's jsonrpc)
        # only look at the next message once the server writes again.
        stream.send("status", f"waiting for approval: {request.detail.splitlines()[0]}", {"turn": None})

    async def _drive(self, run: ActiveRun, prompt: str, settings: Settings, workspace: LspWorkspace, approver: LspApprover) -> None:
        try:
            await self._until_warm()
            report = await run_task(prompt, session=run.session, settings=settings, workspace=workspace,
                                    approver=approver, emit=run.stream, run_id=run.id, model=self.model_for(settings))
            run.report = report.to_dict()
            run.stream.end(f"{report.stop_reason}: {report.summary}")
        finally:
            if run.progress_task and not run.progress_task.done():
                run.progress_task.cancel()
            self.active.pop(run.id, None)

    async def _until_warm(self) -> None:
        """Wait (without blocking the loop) for the SDK import, which the core would otherwise
        do synchronously at the first model call."""
        if self.warm_up is None or self.warm_up.done():
            return
        try:
            await asyncio.shield(asyncio.wrap_future(self.warm_up))
        except asyncio.CancelledError:
            # Cancelled before the run began: re-arm the cancel so run_task meets it at its
            # first await and still ends the run with its `cancelled` report.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
                task.cancel()

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
