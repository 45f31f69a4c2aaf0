"""One run of the agent on a session: wires the loop to its host's ports, and explains the stop."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.approval import ApprovalPolicy, SessionApprovals
from agent_lsp.agent.context import TokenEstimator
from agent_lsp.agent.loop import AgentLoop, LoopOutcome
from agent_lsp.agent.memory import recall_memory
from agent_lsp.agent.messages import Event, RunReport, StopReason, Usage
from agent_lsp.agent.model import Model, ModelError, make_model
from agent_lsp.agent.ports import Approver, EventSink, Workspace
from agent_lsp.agent.tools import ToolContext, ToolError, main_tools, subagent_tools
from agent_lsp.agent.tools.command import kill_group
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.agent.transcript import Redactor, Transcript
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class Session:
    """A conversation that follow-up runs continue; lives in memory for the process."""

    id: str = field(default_factory=lambda: new_id("s"))
    history: list[dict[str, Any]] = field(default_factory=list)
    approvals: SessionApprovals = field(default_factory=SessionApprovals)
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    edited: list[Path] = field(default_factory=list)
    spill_files: set[Path] = field(default_factory=set)
    running: str | None = None  # the run id while a run is going


SYSTEM_PROMPT = """You are agent-lsp, a coding agent working inside the user's editor.
Workspace folders: {roots}. Paths are relative to the first folder (other folders by their name as prefix).
Work in small verified steps: look (read_file, list_files, search) before you change anything; change files only with edit_file/write_file (the editor applies them); run tests or commands with run_command. Every side effect may need the user's approval: a denial is an answer, not an error - do not repeat a denied call, take another route or ask.
Use delegate for big read-only investigations with a clear result. When the task is done, stop calling tools and reply with a short summary of what you changed and anything left to do.{memory}"""

SUBAGENT_PROMPT = """You are a sub-agent of agent-lsp with read-only tools (read_file, list_files, search) in the workspace {roots}.
Do exactly the task you are given, then reply (without calling tools) with a concise, exact summary of the result: paths, line numbers, names. Your summary is all the main agent will see."""


@dataclass
class RunContext:
    """Everything one run needs; shared by the main loop and its sub-agents."""

    run_id: str
    session: Session
    settings: Settings
    model: Model
    workspace: Workspace
    approver: Approver
    emit: EventSink
    transcript: Transcript
    paths: PathGuard
    tool_ctx: ToolContext
    policy: ApprovalPolicy
    spill_dir: Path
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    denied: int = 0
    subagents: int = 0

    @property
    def estimator(self) -> TokenEstimator:
        return self.session.estimator

    def context_budget(self) -> int:
        window = self.settings.context_window
        return window - min(8192, window // 8)  # room for the reply

    def compaction_threshold(self) -> int:
        # Compact a little before the hard limit: each compaction breaks the provider's prompt
        # cache once, and a history kept near the limit makes every later request the biggest.
        return int(self.context_budget() * 0.75)

    def spawn_subagent(self, task: str) -> Callable[[], Awaitable[str]]:
        self.subagents += 1
        agent_id = f"main/{self.subagents}"
        roots = ", ".join(map(str, self.paths.roots))

        async def go() -> str:
            history = [{"role": "user", "content": task}]
            self.emit(Event("status", f"[{agent_id}] sub-agent started: {task[:120]}", {"turn": 0}, agent_id))
            sub = AgentLoop(self, agent_id, subagent_tools(), self.settings.delegate_max_turns, history, SUBAGENT_PROMPT.format(roots=roots))
            outcome = await sub.loop()
            self.emit(Event("status", f"[{agent_id}] sub-agent stopped: {outcome.reason} after {outcome.turns} turn(s)", {"turn": outcome.turns}, agent_id))
            if outcome.reason == StopReason.DONE:
                return outcome.final_text.strip() or "(the sub-agent returned no summary)"
            if outcome.reason == StopReason.MAX_TURNS:
                return f"(the sub-agent hit its turn limit of {self.settings.delegate_max_turns} before finishing; its last notes follow)\n{outcome.final_text}"
            raise ToolError(f"the sub-agent failed: {outcome.error}")

        return go


async def run_task(
    prompt: str,
    *,
    session: Session,
    settings: Settings,
    workspace: Workspace,
    approver: Approver,
    emit: EventSink,
    run_id: str | None = None,
    model: Model | None = None,
    env: dict[str, str] | None = None,
) -> RunReport:
    """Run the agent on one user message. Always returns a report, whatever happens."""
    env = dict(os.environ) if env is None else env
    run_id = run_id or new_id("r")
    redact = Redactor([env.get(settings.api_key_env, "")])
    transcript = Transcript(settings.transcript_path() / f"{run_id}.jsonl", run_id, redact)
    paths = PathGuard(workspace.roots)
    paths.extra_readable = session.spill_files
    tool_ctx = ToolContext(workspace=workspace, paths=paths, output_limit=settings.tool_output_limit, edited=[])
    run = RunContext(run_id, session, settings, model, workspace, approver, _redacting(emit, redact), transcript, paths,
                     tool_ctx, ApprovalPolicy(settings.approval, session.approvals), state_dir() / "spill" / run_id)
    tool_ctx.spawn_subagent = run.spawn_subagent
    session.running = run_id
    session.history.append({"role": "user", "content": prompt})
    main: AgentLoop | None = None
    try:
        try:
            if run.model is None:
                run.model = make_model(settings, env)
            memory = await recall_memory(paths.roots, settings.memory_files)
            memory_text = "".join(f"\n\n## Memory: {label}\n{text}" for label, text in memory)
            system = SYSTEM_PROMPT.format(roots=", ".join(map(str, paths.roots)), memory=memory_text)
            main = AgentLoop(run, "main", main_tools(), settings.max_turns, session.history, system)
            await transcript.write("main", 0, "start", prompt=prompt, sessionId=session.id, model=settings.model,
                                   memory=[label for label, _ in memory])
            outcome = await main.loop()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            outcome = LoopOutcome(StopReason.CANCELLED, main.last_text if main else "", main.turn if main else 0)
        except ModelError as exc:
            outcome = LoopOutcome(StopReason.FATAL, "", 0, str(exc))
        except Exception as exc:  # the loop must explain every stop, even a bug of ours
            log.exception("run %s failed", run_id)
            outcome = LoopOutcome(StopReason.FATAL, main.last_text if main else "", main.turn if main else 0, f"internal error: {type(exc).__name__}: {exc}")
    finally:
        for proc in list(tool_ctx.processes):
            kill_group(proc)
        session.running = None
    # The stop is decided: a cancel arriving from here on must not lose the report, the
    # transcript's stop line or the stop event.
    return await _uncancellable(_close_run(run, outcome, owns_model=model is None))


async def _uncancellable(coro: Awaitable[RunReport]) -> RunReport:
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


async def _close_run(run: RunContext, outcome: LoopOutcome, owns_model: bool) -> RunReport:
    session, tool_ctx, transcript, settings = run.session, run.tool_ctx, run.transcript, run.settings
    redact = run.transcript.redact
    if owns_model and hasattr(run.model, "aclose"):  # the client this run made, not the caller's
        try:
            await run.model.aclose()
        except Exception as exc:
            log.debug("closing the model client failed: %s", exc)
    for path in tool_ctx.edited:
        if path not in session.edited:
            session.edited.append(path)
    report = RunReport(
        run_id=run.run_id,
        session_id=session.id,
        stop_reason=outcome.reason,
        turns=outcome.turns,
        final_text=redact(outcome.final_text),
        summary=redact(explain_stop(outcome, run, settings)),
        edited_files=[p.as_uri() for p in tool_ctx.edited],
        tool_calls=run.tool_calls,
        denied=run.denied,
        usage=run.usage,
        transcript=str(transcript.path),
        error=redact(outcome.error) if outcome.error else None,
    )
    await transcript.write("main", outcome.turns, "stop", report=report.to_dict())
    await transcript.close()
    run.emit(Event("stop", report.summary, {"report": report.to_dict()}))
    return report


def _redacting(emit: EventSink, redact: Redactor) -> EventSink:
    """Secrets out of every event. Model text is a stream of deltas and a secret can straddle
    two of them: the tail that could start a secret waits for the next delta (or event)."""
    if not redact.secrets:
        return emit
    pending: dict[str, str] = {}  # agent id -> held-back text

    def flush(agent_id: str) -> None:
        if held := pending.pop(agent_id, ""):
            emit(Event("text", redact(held), {}, agent_id))

    def sink(event: Event) -> None:
        if event.kind == "text":
            text = redact(pending.pop(event.agent_id, "") + event.text)
            if keep := redact.held_back(text):
                text, pending[event.agent_id] = text[:-keep], text[-keep:]
            if text:
                event.text = text
                emit(event)
            return
        for agent_id in list(pending):
            flush(agent_id)
        event.text = redact(event.text)
        event.data = redact.value(event.data)
        emit(event)

    return sink


def explain_stop(outcome: LoopOutcome, run: RunContext, settings: Settings) -> str:
    """Every stop says what was done and, unless done, what was left."""
    edited = ", ".join(run.paths.display(p) for p in run.tool_ctx.edited) or "no files"
    done = f"{outcome.turns} turn(s), {run.tool_calls} tool call(s)" + (f" ({run.denied} denied)" if run.denied else "") + f", edited {edited}"
    if outcome.reason == StopReason.DONE:
        return f"Done: {done}."
    left = "the task is not finished; a follow-up in this session continues from here"
    if outcome.reason == StopReason.MAX_TURNS:
        return f"Stopped at the turn limit ({settings.max_turns} turns, setting maxTurns) before the model finished. Done so far: {done}. Left: {left}."
    if outcome.reason == StopReason.CANCELLED:
        return f"Cancelled by the user at turn {outcome.turns}. Done so far: {done}; edits already applied are kept. Left: {left}."
    return f"Stopped by an error: {outcome.error}. Done so far: {done}. Left: {left}."
