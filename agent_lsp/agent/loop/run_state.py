"""What one run holds beside its loops: the options a front end adds (RunOptions) and the run's
own state (RunState), which spawns the delegate tool's sub-agents as child loops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent_lsp.agent.events import StatusEvent
from agent_lsp.agent.fs.prompt_files import PromptFile, PromptFiles
from agent_lsp.agent.images import ImagePart
from agent_lsp.agent.loop.attach import Attachment
from agent_lsp.agent.loop.loop import AgentLoop
from agent_lsp.agent.loop.services import LoopTools, RunSeams
from agent_lsp.agent.loop.slash import run_model
from agent_lsp.agent.loop.structured import OutputSchema
from agent_lsp.agent.loop.verify import Verification
from agent_lsp.agent.messages import StopCause, StopReason, Structured
from agent_lsp.agent.model.client import Model, make_model
from agent_lsp.agent.policy.hook_config import HookSpec
from agent_lsp.agent.ports import (
    CodeIntelSources,
    RunPermissions,
    RunTelemetry,
    answers_diagnostics,
)
from agent_lsp.agent.state.checkpoints import CheckpointStore
from agent_lsp.agent.state.session import Entry, RunRecord, Session
from agent_lsp.agent.tools.base import Tool, ToolBox, ToolContext, ToolError
from agent_lsp.agent.tools.codeintel.offered import SUBAGENT_CODE_INTEL_PROMPT
from agent_lsp.agent.tools.delegate import narrow
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

# After a user agent's own prompt (its file's body): where it works and who reads its answer.
AGENT_CONTEXT = (
    "\n\n(You work as a sub-agent of agent-lsp in the workspace {roots}; your final reply, "
    "without tool calls, is all the main agent will see.)"
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
    # The answer must end with JSON that fits it (--output-schema).
    output_schema: OutputSchema | None = None
    telemetry: RunTelemetry | None = None  # the run's trace and metrics (None: telemetry off)
    code_intel: CodeIntelSources | None = None  # the language-server sources (None: none)
    # Whether the user consented to a project hook (the consent store; None: none has consent).
    hook_consent: Callable[[HookSpec], bool] | None = None
    # The user's skills, commands and agents (None: none are offered).
    prompt_files: PromptFiles | None = None
    model_name: str | None = None  # this run's model only (a command's `model`), not the session's
    readable: list[Path] = field(default_factory=list)  # made readable for the session
    # Rules of other files (Claude Code's) and where "Always allow" saves one.
    permissions: RunPermissions | None = None
    images: list[ImagePart] = field(default_factory=list)  # sent with the prompt (Decision 54)
    # files and selections read when the run starts, put before the prompt (Decision 53)
    context: list[Attachment] = field(default_factory=list)
    # Why the prompt could not be made when the run started (a queued run's file, Decision 49):
    # the run ends `fatal` with it before any model call.
    refusal: str | None = None


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
    parent_tools: list[Tool] = field(default_factory=list)  # the main loop's (a user agent narrows)
    verification: Verification | None = None  # the checks after the last edit (report, verify)

    def spawn_subagent(
        self, task: str, agent: PromptFile | None = None
    ) -> Callable[[], Awaitable[str]]:
        self.subagents += 1
        agent_id = f"main/{self.subagents}"
        roots = ", ".join(self.paths.names())
        settings = self.settings

        async def go() -> str:
            history = [Entry({"role": "user", "content": task}, "prompt", self.seams.run_id)]
            who = f"sub-agent {agent.name}" if agent is not None else "sub-agent"
            self.seams.emit(
                StatusEvent(f"[{agent_id}] {who} started: {task[:120]}", 0, agent_id=agent_id)
            )
            diagnostics = answers_diagnostics(self.tool_ctx.workspace)
            code_intel = self.tool_ctx.code_intel is not None
            steer = SUBAGENT_CODE_INTEL_PROMPT if code_intel else ""
            seams, prompt = self.seams, SUBAGENT_PROMPT.format(roots=roots) + steer
            offered = subagent_tools(diagnostics, code_intel)
            toolset = [t for t in offered if self.seams.gate.offers(t)]  # a bare deny rule
            withheld = [t for t in offered if t not in toolset]  # its calls: denied, said why
            if agent is not None:  # the user's agent: its prompt, its (narrowed) tools, its model
                toolset = narrow(agent, self.parent_tools)
                prompt = f"{agent.body.strip()}{AGENT_CONTEXT.format(roots=roots)}{steer}"
                seams = self._seams_for(agent)
            sub = AgentLoop(
                seams,
                agent_id,
                # the background processes are the main agent's (Decision 86)
                LoopTools(ToolBox(toolset, withheld), replace(self.tool_ctx, background=None)),
                settings.delegate_max_turns,
                history,
                prompt,
            )
            try:
                outcome = await sub.loop()
            finally:
                if seams.model is not self.seams.model:
                    await _close(seams.model)
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

    def _seams_for(self, agent: PromptFile) -> RunSeams:
        """The run's seams, with the agent's own model when it names one this endpoint serves
        (Decision 35: through `modelAliases`; Claude's names run on the run's model)."""
        name = run_model(agent.model, agent.scope, self.settings, set())
        if name is None or name == self.seams.model.name:
            return self.seams
        return replace(
            self.seams,
            model=make_model(self.settings, None, name),
            pricing=self.settings.pricing.get(name),
        )


async def _close(model: Model) -> None:
    close = getattr(model, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # a client that fails to close costs nothing more
            pass


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
