"""Consent for a project's own allow rules on the terminal (CONTRACT Decision 30): one prompt
listing the entries exactly; no terminal to ask on: denied, and said so."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from agent_lsp.agent.display import for_terminal
from agent_lsp.terminal.style import Style, read_line_async

if TYPE_CHECKING:
    from agent_lsp.agent.host import AgentHost

CHOICES = {"a": "allow", "y": "allow", "w": "allowAlways", "d": "deny", "n": "deny"}


class TerminalProjectConsent:
    def __init__(self, out: TextIO, interactive: bool):
        self.out = out
        self.interactive = interactive
        self.style = Style.for_stream(out)

    async def ask(
        self, prompt: str, entries: list[str], what: str = "project allow rules"
    ) -> str | None:
        s = self.style
        lines = for_terminal(prompt).splitlines()
        if not self.interactive:
            shown = ", ".join(for_terminal(e) for e in entries)
            self.out.write(
                f"  {s.bad()} {for_terminal(what)} not used: no one could be asked "
                f"(run in a terminal to allow them): {shown}\n"
            )
            return None
        self.out.write(f"\n  {s('35;1', '?')} {lines[0] if lines else ''}\n")
        for line in lines[1:]:
            self.out.write(f"      {line}\n")
        # No time limit: a person is reading rules (CONTRACT Decision 10).
        answer = await read_line_async(
            "    [a]llow / allow al[w]ays for this workspace / [d]eny? ", self.out
        )
        return CHOICES.get((answer or "d").strip().lower()[:1], "deny")


def plug_permissions(host: AgentHost, out: TextIO, interactive: bool) -> None:
    """The host's permission source for `agent-lsp run`: Claude Code's files, consent asked on
    this terminal, "Always allow" saved in the user settings file (Decision 1)."""
    from agent_lsp.permissions.source import ClaudePermissions

    host.permissions = ClaudePermissions(TerminalProjectConsent(out, interactive).ask)
