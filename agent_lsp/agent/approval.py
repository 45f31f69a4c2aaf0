"""Approval policy: per tool allow/ask/deny, allowCommands on parsed argv, session memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent_lsp.agent.tools.base import Tool
from agent_lsp.agent.tools.command import matches_prefix
from agent_lsp.settings import ApprovalSettings

Verdict = Literal["allow", "ask", "deny"]


@dataclass
class SessionApprovals:
    """What "Allow for session" remembered: exact command lines, and tools. One session only."""

    commands: set[str] = field(default_factory=set)
    tools: set[str] = field(default_factory=set)

    def remember(self, tool: str, command: str | None) -> None:
        if command is not None:
            self.commands.add(command)
        else:
            self.tools.add(tool)


class ApprovalPolicy:
    def __init__(self, settings: ApprovalSettings, session: SessionApprovals):
        self.settings = settings
        self.session = session

    def decide(self, tool: Tool, command: str | None = None, session_key: str | None = None) -> Verdict:
        """`command` is matched against allowCommands; `session_key` (default: the command)
        is what "Allow for session" remembered: the exact line, with its working directory."""
        configured = self.settings.tools.get(tool.name)
        if configured == "deny":
            return "deny"
        if tool.read_only:
            return configured or "allow"
        if command is not None:
            if (session_key or command) in self.session.commands:
                return "allow"
            if matches_prefix(command, self.settings.allow_commands):
                return "allow"
        elif tool.name in self.session.tools:
            return "allow"
        return configured or self.settings.default
