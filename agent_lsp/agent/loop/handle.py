"""A run's handle: the one owner of a run's life, from its request (or its place in a session's
queue) to its stop. It keeps the cancel token (the first cause wins; a second cancel never
makes a second stop), the steers waiting for the next model call, and it is the one place that
ends a run: the tools stopped (sibling calls, processes, the debugger), the hooks settled, the
report written, the `stop` event sent and the transcript closed, all shielded from a second
cancel (after the stop record nothing more is written or sent)."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_lsp.agent.exec.process import kill_group
from agent_lsp.agent.loop.report import CANCELLED_BY, close_run
from agent_lsp.agent.messages import CancelCause, RunReport, StopCause, Usage
from agent_lsp.agent.state.session import Session
from agent_lsp.settings import Settings

if TYPE_CHECKING:
    from agent_lsp.agent.exec.background import BackgroundProcesses
    from agent_lsp.agent.loop.loop import AgentLoop
    from agent_lsp.agent.loop.run_state import RunOptions, RunState
    from agent_lsp.agent.loop.stops import LoopOutcome
    from agent_lsp.agent.model.client import Model
    from agent_lsp.agent.ports import ToolSet
    from agent_lsp.agent.tools.runner import CommandRunner

log = logging.getLogger(__name__)

BY_USER = CancelCause(StopCause.USER)


class RunPhase(enum.StrEnum):
    QUEUED = "queued"  # waiting for its session's running run to end (agentLsp.run {queue})
    RUNNING = "running"
    STOPPING = "stopping"  # its stop is decided (a cancel, or the loop's end): ending it
    FINISHED = "finished"  # its report is out


@dataclass(eq=False)
class RunHandle:
    id: str
    session: Session
    state: RunPhase = RunPhase.RUNNING
    task: asyncio.Task[Any] | None = None
    report: RunReport | None = None
    # Who cancelled it (the first cause wins); none yet: not cancelled.
    cancel_cause: CancelCause | None = None
    # The cause of a cancel that says none (its event loop ended): a host's runs say shutdown.
    uncaused: CancelCause = BY_USER
    started: bool = False  # its task began: a cancel now reaches run_task, which reports it
    # What a host lends the run and keeps open while it goes: its MCP tool set, its model
    # client, its code-intel sources and workspace (the language servers they hold).
    mcp: ToolSet | None = None
    model: Model | None = None
    holds: list[Any] = field(default_factory=list)
    # A queued run cancelled: its host takes it out of the queue and says so (one stop event).
    unqueue: Callable[[RunHandle, CancelCause], None] | None = None
    # its background processes, once built (agentLsp.stopProcess, Decision 86)
    background: BackgroundProcesses | None = None
    _steers: list[str] = field(default_factory=list)
    _hurry: Callable[[], None] | None = None
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    # -- what a front end asks -------------------------------------------------------------
    def cancel(self, cause: CancelCause | None = None) -> bool:
        """Stop the run, `cause` saying who (kept only if it is the first). True until it is
        finished, False after; a second cancel never makes a second stop, it only cuts the
        end's waits (the hooks' grace) short. A run whose task has not begun yet is cancelled
        as it begins (a task cancelled before its first step would never report)."""
        cause = cause or self.uncaused
        if self.state == RunPhase.FINISHED:
            return False
        if self.state == RunPhase.QUEUED:
            self.cancel_cause = cause
            if self.unqueue is not None:
                self.unqueue(self, cause)
            return True
        if self.task is None or self.task.done():
            return False
        if self.cancel_cause is not None or self.state == RunPhase.STOPPING:
            self.cancel_cause = self.cancel_cause or cause
            if self._hurry is not None:
                self._hurry()
            return True
        self.cancel_cause = cause
        if self.started:
            self.task.cancel()
        return True

    def steer(self, text: str) -> bool:
        """A user message for the run's next model call (after the current calls' results).
        True while the run runs, until its stop begins; False when queued, stopping or over."""
        if self.state != RunPhase.RUNNING or self.cancel_cause is not None:
            return False
        self._steers.append(text)
        return True

    def take_steers(self) -> list[str]:
        """The steers waiting, oldest first (the main loop takes them before a model call)."""
        steers, self._steers = self._steers, []
        return steers

    async def stop_process(self, process_id: str) -> bool:
        """End one of its background processes (agentLsp.stopProcess): True when it was
        running."""
        if self.background is None or self.state == RunPhase.FINISHED:
            return False
        return await self.background.stop(process_id)

    def waiting_steers(self) -> list[str]:
        return list(self._steers)

    async def wait(self) -> RunReport | None:
        """The run's report once it is finished (None only if it ended without one)."""
        await self._done.wait()
        return self.report

    def cause(self) -> CancelCause:
        """Who stopped the run by a cancel (the first cause; none said: `uncaused`)."""
        return self.cancel_cause or self.uncaused

    def finished(self, report: RunReport | None) -> None:
        """The run is over (its report out, or none when it never began)."""
        self.report = report if report is not None else self.report
        self.state = RunPhase.FINISHED
        self._done.set()

    # -- the run's end ---------------------------------------------------------------------
    async def end(
        self,
        run: RunState,
        main: AgentLoop | None,
        outcome: LoopOutcome,
        runner: CommandRunner,
        *,
        owns_model: bool,
        options: RunOptions,
    ) -> RunReport:
        """What every run does once at its end, shielded: a cancel arriving meanwhile (a second
        Stop while a Notification hook settles) cannot lose the report, the transcript's stop
        line, the stop event or the progress's end; it only hurries the hooks."""
        self.state = RunPhase.STOPPING
        hooks = run.seams.hooks
        self._hurry = hooks.hurry if hooks is not None else None
        report = await uncancellable(
            self._end(run, main, outcome, runner, owns_model=owns_model, options=options),
            hurry=self._hurry,
        )
        self.report = report
        return report

    async def _end(
        self,
        run: RunState,
        main: AgentLoop | None,
        outcome: LoopOutcome,
        runner: CommandRunner,
        *,
        owns_model: bool,
        options: RunOptions,
    ) -> RunReport:
        try:
            await stop_tools(run, runner)
            await settle_hooks(run)
        except Exception:  # the report must still be written and sent
            log.exception("ending run %s failed", run.seams.run_id)
        finally:
            run.session.running = None
        return await close_run(run, main, outcome, owns_model=owns_model, options=options)


def unstarted_report(handle: RunHandle, cause: CancelCause, settings: Settings) -> RunReport:
    """The report of a run cancelled before it started (a queued one): nothing was done."""
    who = CANCELLED_BY[cause.cause].format(by=cause.by or "a signal")
    return RunReport(
        run_id=handle.id,
        session_id=handle.session.id,
        stop_reason=cause.cause.reason,
        stop_cause=cause.cause,
        turns=0,
        final_text="",
        summary=f"{who} before it started (it was queued). Done so far: nothing.",
        edited_files=[],
        tool_calls=0,
        denied=0,
        usage=Usage(),
        transcript="",
        context_window=settings.context_window,
    )


async def stop_tools(run: RunState, runner: CommandRunner) -> None:
    """Everything the run's tools started ends with it: their processes (e.g. an rg a cancel
    interrupted), the debug session, the commands still running."""
    for proc in list(run.tool_ctx.processes):
        kill_group(proc)
    if run.tool_ctx.debugger is not None:  # the debug session ends with the run
        try:
            await run.tool_ctx.debugger.stop()
        except Exception:  # runner.stop_all below still ends its processes
            log.exception("run %s: ending the debug session failed", run.seams.run_id)
    await stop_background(run)
    await runner.stop_all()


async def stop_background(run: RunState) -> None:
    """Its background processes stop (state `stopped`) and what they changed is recorded,
    before the report lists them."""
    if run.tool_ctx.background is None:
        return
    try:
        await run.tool_ctx.background.stop_all()
    except Exception:  # runner.stop_all after it still ends their processes
        log.exception("run %s: stopping its background processes failed", run.seams.run_id)


async def settle_hooks(run: RunState) -> None:
    """The run's background hooks finish (or are cut short), their processes end, and the
    session keeps its SessionEnd hooks."""
    hooks = run.seams.hooks
    if hooks is None:
        return
    await hooks.settle()
    for proc in list(hooks.processes):
        kill_group(proc)
    run.session.end_hooks = hooks.session_end


async def uncancellable(
    coro: Awaitable[RunReport], hurry: Callable[[], None] | None = None
) -> RunReport:
    """`coro` run to its end whatever cancels the caller meanwhile (each such cancel calls
    `hurry`, to cut waits short); the caller's cancel is absorbed, the report returned."""
    task = asyncio.ensure_future(coro)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            if hurry is not None:
                hurry()
