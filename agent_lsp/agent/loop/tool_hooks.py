"""The hooks around one loop's tool calls: PreToolUse before the user is asked, PostToolUse once
the call ran, with our tool names and arguments in Claude Code's (Decision 32)."""

from __future__ import annotations

import json
from typing import Any

from agent_lsp.agent.messages import ToolCall, parse_arguments
from agent_lsp.agent.policy.hook_payload import (
    claude_name,
    our_arguments,
    tool_input,
    tool_names,
    tool_response,
)
from agent_lsp.agent.policy.hooks import PreToolVerdict, RunHooks
from agent_lsp.agent.ports import TraceSpan
from agent_lsp.agent.tools.base import CommandExit, Tool, served


def _raw_mcp(tool: Tool | None) -> str | None:
    """`<server>__<tool>` of an MCP tool (for the `mcp__…` names), else None."""
    mcp = served(tool)
    return mcp.raw_name if mcp is not None else None


class ToolHooks:
    """One loop's PreToolUse/PostToolUse; each call's names and input kept for its PostToolUse."""

    def __init__(self, hooks: RunHooks | None, agent_id: str):
        self.hooks = hooks
        self.agent_id = agent_id
        self._calls: dict[str, tuple[tuple[str, ...], str, dict[str, Any]]] = {}

    def wants(self, event: str) -> bool:
        return self.hooks is not None and self.hooks.has(event)

    @property
    def any(self) -> bool:
        """Tool hooks are declared at all (else a call costs nothing here)."""
        return self.wants("PreToolUse") or self.wants("PostToolUse")

    def _fields(self, call: ToolCall, tool: Tool | None, args: dict[str, Any]) -> dict[str, Any]:
        assert self.hooks is not None
        raw = _raw_mcp(tool)
        names = tool_names(call.name, raw)
        given = tool_input(call.name, args, self.hooks.root)
        self._calls[call.id] = (names, claude_name(call.name, raw), given)
        return {"tool_name": self._calls[call.id][1], "tool_input": given, "tool_use_id": call.id}

    async def before(
        self, call: ToolCall, tool: Tool | None, turn: int, span: TraceSpan
    ) -> PreToolVerdict:
        """The PreToolUse hooks' verdict on a prepared call (none declared: no verdict)."""
        try:
            args = parse_arguments(call)
        except ValueError:
            args = {}
        fields = self._fields(call, tool, args)
        if not self.wants("PreToolUse"):
            return PreToolVerdict()
        assert self.hooks is not None
        return await self.hooks.pre_tool_use(
            self._calls[call.id][0], fields, agent_id=self.agent_id, turn=turn, span=span
        )

    def updated_call(
        self, call: ToolCall, updated: dict[str, Any]
    ) -> tuple[ToolCall, dict[str, Any]]:
        """The call with a hook's `updatedInput` (Claude Code's names) as our arguments."""
        assert self.hooks is not None
        args = our_arguments(call.name, updated, self.hooks.root)
        text = json.dumps(args, ensure_ascii=False)
        return ToolCall(call.id, call.name, text, call.model_id, call.extra_content), args

    def replaced(self, call: ToolCall, tool: Tool | None, args: dict[str, Any]) -> None:
        """A hook replaced the input: PostToolUse sees the one that ran."""
        self._fields(call, tool, args)

    async def after(
        self,
        call: ToolCall,
        ok: bool,
        text: str,
        turn: int,
        span: TraceSpan,
        ended: CommandExit | None = None,
    ) -> str:
        """What the PostToolUse hooks tell the model about the call that ran ("" for nothing)."""
        known = self._calls.pop(call.id, None)
        if known is None or not self.wants("PostToolUse"):
            return ""
        assert self.hooks is not None
        names, name, given = known
        fields = {
            "tool_name": name,
            "tool_input": given,
            "tool_response": tool_response(call.name, given, ok, text, ended),
            "tool_use_id": call.id,
        }
        return await self.hooks.post_tool_use(
            names, fields, agent_id=self.agent_id, turn=turn, span=span
        )
