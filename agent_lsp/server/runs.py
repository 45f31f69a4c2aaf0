"""The run registry: start, cancel, and each run's progress and `agentLsp/stream`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.coalesce import TextCoalescer
from agent_lsp.agent.events import (
    ApprovalEvent,
    CompactionEvent,
    Event,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
    to_wire,
)
from agent_lsp.agent.host import AgentHost, RunHandle, RunPorts, RunRequest
from agent_lsp.agent.images import ImagePart
from agent_lsp.agent.loop.attach import Attachment
from agent_lsp.agent.loop.prompt_plan import PromptPlan
from agent_lsp.agent.loop.verify import end_line
from agent_lsp.agent.ports import ApprovalRequest
from agent_lsp.agent.state.session import new_id
from agent_lsp.langservers.hub import with_diagnostics
from agent_lsp.server.approvals import LspApprover, PendingApprovals
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.folders import workspace_folders
from agent_lsp.server.rpc import ClientRequestError, client_request, safe_notify
from agent_lsp.server.workspace import LspWorkspace
from agent_lsp.settings import Settings

log = logging.getLogger(__name__)

STREAM = "agentLsp/stream"
PROGRESS_CREATE_TIMEOUT = 5.0


class RunStream:
    """Numbers events per run, coalesces text deltas (never losing one), drives progress."""

    def __init__(self, ls: LanguageServer, caps: ClientCaps, run_id: str, title: str):
        self.ls = ls
        self.caps = caps
        self.run_id = run_id
        self.title = title
        self.seq = 0
        self._text = TextCoalescer(lambda text: self.send(TextDelta(text)))
        self._thinking = TextCoalescer(lambda text: self.send(ThinkingDelta(text)))
        self._progress = "off"  # off | creating | on | ended
        self._last_report: str | None = None
        self._usage = ""  # `ctx 31k/128k · $0.012`, appended to progress messages
        self.turn = 0  # the main agent's turn, for a status line said outside the loop
        self.progress_task: asyncio.Task[Any] | None = None

    # -- stream -----------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._thinking.flush()
            self._text.add(event.text)
            return
        if isinstance(event, ThinkingDelta):  # coalesced like text (CONTRACT agentLsp/stream)
            self._text.flush()
            self._thinking.add(event.text)
            return
        self.flush_text()
        self.send(event)
        if isinstance(event, UsageEvent) and event.agent_id == "main":
            self._usage = event.text
        if isinstance(event, StatusEvent | ToolCallEvent | CompactionEvent):
            self.report(event.text)
        elif isinstance(event, ApprovalEvent):
            # the progress line has no label: it names the state itself
            self.report(f"approval {event.state}: {event.text}")

    def flush_text(self) -> None:
        self._thinking.flush()
        self._text.flush()

    def send(self, event: Event) -> None:
        if isinstance(event, StatusEvent | CompactionEvent) and event.agent_id == "main":
            if event.turn is None:  # a front end's own line (an approval waits): the turn it is in
                event = replace(event, turn=self.turn)
            else:
                self.turn = event.turn
        payload = to_wire(event, self.run_id, self.seq)
        self.seq += 1
        safe_notify(self.ls, STREAM, payload)

    # -- progress ---------------------------------------------------------------------------
    async def begin_progress(self) -> None:
        if not self.caps.can_create_progress:
            return
        self._progress = "creating"
        try:
            await client_request(
                self.ls,
                types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                types.WorkDoneProgressCreateParams(token=self.run_id),
                PROGRESS_CREATE_TIMEOUT,
            )
        except (TimeoutError, ClientRequestError) as exc:
            log.info("no progress for %s: %s", self.run_id, exc)
            self._progress = "off"
            return
        if self._progress != "creating":  # the run already ended
            return
        self._progress = "on"
        self._notify_progress(
            types.WorkDoneProgressBegin(
                title=self.title, cancellable=True, message=self._last_report or "starting"
            )
        )

    def report(self, message: str) -> None:
        line = message.splitlines()[0][:200] if message else ""
        if self._usage:
            line = f"{line} · {self._usage}"
        self._last_report = line
        if self._progress == "on":
            self._notify_progress(types.WorkDoneProgressReport(message=line, cancellable=True))
        elif not self.caps.can_create_progress:
            safe_notify(
                self.ls,
                types.WINDOW_LOG_MESSAGE,
                types.LogMessageParams(
                    type=types.MessageType.Info, message=f"[{self.run_id}] {line}"
                ),
            )

    def end(self, message: str) -> None:
        self.flush_text()
        if self._progress == "on":
            self._notify_progress(types.WorkDoneProgressEnd(message=message[:300]))
        elif not self.caps.can_create_progress:
            safe_notify(
                self.ls,
                types.WINDOW_LOG_MESSAGE,
                types.LogMessageParams(
                    type=types.MessageType.Info, message=f"[{self.run_id}] {message}"
                ),
            )
        self._progress = "ended"

    def _notify_progress(self, value: Any) -> None:
        safe_notify(self.ls, types.PROGRESS, types.ProgressParams(token=self.run_id, value=value))


@dataclass
class RunRegistry:
    """The LSP side of runs: each run's stream and progress, the pending approvals; the runs
    themselves, their sessions and model clients live in the shared AgentHost."""

    ls: LanguageServer
    host: AgentHost = field(default_factory=AgentHost)
    approvals: PendingApprovals = field(default_factory=PendingApprovals)
    streams: dict[str, RunStream] = field(default_factory=dict)
    # the SDK import started at `initialized`
    warm_up: concurrent.futures.Future[None] | None = None

    @property
    def active(self) -> dict[str, RunHandle]:
        return self.host.active

    async def start(
        self,
        prompt: str,
        title: str,
        session_id: str | None,
        settings: Settings,
        caps: ClientCaps,
        *,
        model: str | None = None,
        mode: str | None = None,
        request: str | None = None,
        plan: PromptPlan | None = None,
        queue: bool = False,
        images: list[ImagePart] | None = None,
        context: list[Attachment] | None = None,
        resolve: Callable[[], Awaitable[tuple[str, PromptPlan | None]]] | None = None,
    ) -> RunHandle:
        """Start a run in the background (`queue`: or after its session's running run); a
        ValueError (shown to the client) if it cannot."""
        roots, names = workspace_folders(self.ls)
        session, store = await self.host.open_session(roots, session_id, busy_ok=queue)
        run_id = new_id("r")
        stream = RunStream(self.ls, caps, run_id, title)
        self.streams[run_id] = stream
        workspace = LspWorkspace(self.ls, caps, roots, names)
        workspace.on_waiting = lambda text: stream.send(StatusEvent(text, None))
        approver = LspApprover(
            self.ls,
            caps,
            self.approvals,
            run_id,
            settings.approval.timeout,
            on_waiting=lambda req: self._waiting(stream, req),
        )
        stream.progress_task = asyncio.ensure_future(stream.begin_progress())

        def after(run: RunHandle) -> None:
            # The progress ends whatever happened: an editor's progress must never stay open.
            report = run.report
            stream.end(
                end_line(str(report.stop_reason), report.summary, report.verification)
                if report
                else "stopped"
            )
            if stream.progress_task and not stream.progress_task.done():
                stream.progress_task.cancel()
            self.streams.pop(run.id, None)

        try:
            return self.host.start(
                RunRequest(
                    prompt,
                    session,
                    store,
                    settings,
                    RunPorts(with_diagnostics(self.host, workspace), approver, stream),
                    run_id=run_id,
                    model=model,
                    mode=mode,
                    before=self._until_warm,
                    after=after,
                    title=request,
                    plan=plan,
                    queue=queue,
                    images=images,
                    context=context,
                    resolve=resolve,
                )
            )
        except ValueError:  # the session was claimed meanwhile: this run never starts
            stream.progress_task.cancel()
            self.streams.pop(run_id, None)
            raise

    @staticmethod
    def _waiting(stream: RunStream, request: ApprovalRequest) -> None:
        # Written right after the request goes out: some clients' readers (eglot's jsonrpc)
        # only look at the next message once the server writes again.
        stream.send(StatusEvent(f"waiting for approval: {request.detail.splitlines()[0]}", None))

    async def _until_warm(self) -> None:
        """Wait (without blocking the loop) for the SDK import, which the core would otherwise
        do synchronously at the first model call."""
        if self.warm_up is not None and not self.warm_up.done():
            await asyncio.shield(asyncio.wrap_future(self.warm_up))

    def cancel(self, run_id: str) -> bool:
        return self.host.cancel(run_id)

    async def cancel_all(self, deadline: float) -> None:
        await self.host.cancel_all(deadline)
