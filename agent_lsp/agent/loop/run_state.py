"""What one run holds beside its loops: the options a front end adds (RunOptions) and the run's
own state (RunState), which spawns the delegate tool's sub-agents as child loops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent_lsp.agent.events import StatusEvent
from agent_lsp.agent.loop.loop import AgentLoop
from agent_lsp.agent.loop.services import LoopTools, RunSeams
from agent_lsp.agent.loop.structured import OutputSchema
from agent_lsp.agent.messages import CancelCause, StopCause, StopReason, Structured
from agent_lsp.agent.model.client import Model
from agent_lsp.agent.ports import RunPermissions, RunTelemetry
from agent_lsp.agent.state.checkpoints import CheckpointStore
from agent_lsp.agent.state.session import Entry, RunRecord, Session
from agent_lsp.agent.tools.base import Tool, ToolBox, ToolContext, ToolError
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.agent.tools.toolsets import subagent_tools
from agent_lsp.settings import Settings

SUBAGENT_PROMPT = (
    "You are a sub-agent of agent-lsp with read-only tools (read_file, list_files, search) in the "
    "workspace {roots}.\n"
    "Do exactly the task you are given, then reply (without calling tools) with a concise, exact "
    "summary of the result: paths, line numbers, names. Your summary is all the main agent will "
    "see."
)


@dataclass
class RunOptions:
    """What a front end may add to a run beyond the prompt and its ports."""

    run_id: str | None = None
    model: Model | None = None  # a shared client (the front end owns and closes it)
    env: dict[str, str] | None = None
    mode: str | None = None  # "plan": read-only tools, a plan as the answer
    extra_tools: list[Tool] = field(default_factory=list)  # e.g. MCP tools
    continue_hint: str = "a follow-up in this session continues from here"
    # Persist the session's index.
    on_record: Callable[[Session, RunRecord], Awaitable[None]] | None = None
    checkpoints: CheckpointStore | None = None  # where the run's checkpoint goes (rewind)
    title: str | None = None  # the user's own words (the prompt may carry a file and a selection)
    # Who cancelled, when not the user (a signal, a shutdown).
    cancelled_by: Callable[[], CancelCause | None] | None = None
    # The answer must end with JSON that fits it (--output-schema).
    output_schema: OutputSchema | None = None
    telemetry: RunTelemetry | None = None  # the run's trace and metrics (None: telemetry off)
    # Rules of other files (Claude Code's) and where "Always allow" saves one.
    permissions: RunPermissions | None = None


@dataclass
class RunState:
    """The run's own state: the seams its loops get plus what closing it needs."""

    seams: RunSeams
    tool_ctx: ToolContext
    session: Session
    settings: Settings
    paths: PathGuard
    record: RunRecord
    subagents: int = 0
    # The answer's JSON, once it validated against the output schema.
    structured: Structured | None = None

    def spawn_subagent(self, task: str) -> Callable[[], Awaitable[str]]:
        self.subagents += 1
        agent_id = f"main/{self.subagents}"
        roots = ", ".join(self.paths.names())
        settings = self.settings

        async def go() -> str:
            history = [Entry({"role": "user", "content": task}, "prompt", self.seams.run_id)]
            self.seams.emit(
                StatusEvent(f"[{agent_id}] sub-agent started: {task[:120]}", 0, agent_id=agent_id)
            )
            diagnostics = bool(getattr(self.tool_ctx.workspace, "has_diagnostics", False))
            offered = [t for t in subagent_tools(diagnostics) if self.seams.gate.offers(t)]
            tools = LoopTools(ToolBox(offered), self.tool_ctx)
            sub = AgentLoop(
                self.seams,
                agent_id,
                tools,
                settings.delegate_max_turns,
                history,
                SUBAGENT_PROMPT.format(roots=roots),
            )
            outcome = await sub.loop()
            self.seams.emit(
                StatusEvent(
                    f"[{agent_id}] sub-agent stopped: {outcome.reason} after "
                    f"{plural(outcome.turns, 'turn')}",
                    outcome.turns,
                    agent_id=agent_id,
                )
            )
            if outcome.reason == StopReason.DONE:
                return outcome.final_text.strip() or "(the sub-agent returned no summary)"
            if outcome.cause == StopCause.BUDGET:  # the run stops too, at its next check
                note = f"(the sub-agent stopped: {outcome.note}; its last notes follow)"
                return f"{note}\n{outcome.final_text}"
            if outcome.reason == StopReason.MAX_TURNS:
                return (
                    f"(the sub-agent hit its turn limit of {settings.delegate_max_turns} before "
                    f"finishing; its last notes follow)\n{outcome.final_text}"
                )
            raise ToolError(f"the sub-agent failed: {outcome.error}")

        return go


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
