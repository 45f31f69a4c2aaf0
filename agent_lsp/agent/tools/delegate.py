"""delegate: hand a bounded read-only sub-task to a sub-agent; only its summary comes back."""

from __future__ import annotations

from pydantic import Field

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError


class DelegateArgs(Args):
    task: str = Field(description="A self-contained sub-task with a clear, easily described result")


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
        return Prepared(f"delegate: {args.task[:200]}", spawn(args.task))
