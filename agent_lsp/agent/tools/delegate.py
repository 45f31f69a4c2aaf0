"""delegate: hand a bounded read-only sub-task to a sub-agent; only its summary comes back. With
the user's agent definitions (`.claude/agents/*.md`), `agent` names the one to follow: its body
is the sub-agent's prompt and its tools only narrow the parent's (Decision 35)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent_lsp.agent.fs.prompt_files import PromptFile
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError, _schema_of
from agent_lsp.agent.tools.names import tool_name

MAX_LISTED = 3000  # characters of the agents' list in the tool's description
DESCRIPTION_CUT = 200


class DelegateArgs(Args):
    task: str = Field(description="A self-contained sub-task with a clear, easily described result")


class DelegateToAgentArgs(DelegateArgs):
    agent: str | None = Field(
        None, description="The agent to hand it to (one of those listed); none: a read-only helper"
    )


class Delegate(Tool):
    name = "delegate"
    description = (
        "Hand a bounded read-only sub-task (e.g. 'find every caller of X') to a sub-agent with its "
        "own context; returns only its summary. "
        "Several delegate calls in one reply run concurrently."
    )
    args = DelegateArgs

    async def prepare(self, args: DelegateArgs, ctx: ToolContext) -> Prepared:
        spawn = ctx.spawn_subagent
        if spawn is None:
            raise ToolError("delegate is not available here (sub-agents cannot delegate further)")
        if not args.task.strip():
            raise ToolError("the task is empty")
        definition = _definition(getattr(args, "agent", None), ctx)
        shown = f"delegate: {args.task[:200]}"
        if definition is not None:
            shown = f"delegate to {definition.name}: {args.task[:200]}"
            return Prepared(shown, spawn(args.task, definition))
        return Prepared(shown, spawn(args.task))


class DelegateToAgent(Delegate):
    """delegate when the user has agent definitions: `agent` is offered and they are listed."""

    args = DelegateToAgentArgs

    def __init__(self, agents: dict[str, PromptFile]):
        self.agents = agents
        listed = ""
        for name in sorted(agents):
            about = " ".join(agents[name].description.split())
            if len(about) > DESCRIPTION_CUT:
                about = about[: DESCRIPTION_CUT - 1] + "…"
            line = f"\n- {name}: {about}"
            if len(listed) + len(line) > MAX_LISTED:
                break
            listed += line
        self.full_description = (
            f"{Delegate.description} Pass `agent` to hand it to one of the user's agents, "
            f"which may have other tools (each of their calls is approved as usual):{listed}"
        )

    def schema(self) -> dict[str, Any]:
        return _schema_of(self.name, self.full_description, self.args)

    def writes(self, raw: dict[str, Any], parent: list[Tool]) -> bool:
        """A delegate to an agent whose tools can write runs in order, like a side effect."""
        definition = self.agents.get(str(raw.get("agent") or ""))
        return definition is not None and any(not t.read_only for t in narrow(definition, parent))


def _definition(agent: str | None, ctx: ToolContext) -> PromptFile | None:
    if not agent:
        return None
    agents = ctx.prompt_files.agents if ctx.prompt_files is not None else {}
    definition = agents.get(agent.strip())
    if definition is None:
        known = ", ".join(sorted(agents)) or "none"
        raise ToolError(f"no agent named {agent!r}; the agents are: {known}")
    return definition


MAIN_AGENT_ONLY = frozenset({"delegate", "process_output", "stop_process"})


def narrow(definition: PromptFile, parent: list[Tool]) -> list[Tool]:
    """The sub-agent's tools: those of the parent's (delegate aside) the definition names, in
    our or Claude Code's words (`Read`, `mcp__server__tool`, `mcp__server__*`, `mcp__server`);
    unknown names are dropped; no `tools`: the parent's read-only ones. Never wider than the
    parent's."""
    # never delegate, never the debugger (one session per run, the main agent's), never the
    # background processes' tools (the main agent's, Decision 86)
    candidates = [
        t for t in parent if t.name not in MAIN_AGENT_ONLY and not t.name.startswith("debug_")
    ]
    wanted = definition.tools
    if wanted is None:
        return [t for t in candidates if t.read_only]
    names: set[str] = set()
    prefixes: list[str] = []
    for entry in wanted:
        raw = entry.split("(", 1)[0].strip()  # `Bash(git:*)`: the tool, its specifier aside
        if raw.startswith("mcp__") and (raw.endswith("__*") or raw.count("__") == 1):
            prefixes.append(tool_name(raw.removesuffix("*").removesuffix("__")) + "__")
            continue
        names.add(tool_name(raw))
    return [
        t
        for t in candidates
        if t.name in names
        or any(a in names for a in t.aliases)
        or any(t.name.startswith(p) for p in prefixes)
    ]
