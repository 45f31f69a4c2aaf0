"""MCP servers for `agent-lsp run`: consent for workspace-declared servers asked on the terminal,
and why a server is not there said on it (CONTRACT Decision 16: a TTY prompt; no TTY, no start)."""

from __future__ import annotations

from typing import Any, TextIO

from agent_lsp.mcp.consent import Answer
from agent_lsp.terminal.style import Style, read_line_async

NOBODY = "no one could be asked (run in a terminal to allow it)"
CHOICES: dict[str, Answer] = {
    "a": "allow",
    "y": "allow",
    "w": "allowAlways",
    "d": "deny",
    "n": "deny",
}


class TerminalMcpHooks:
    """`ask_consent` and `on_status` for the host's McpHooks. `out` is where the person looks
    (stderr with --json); `interactive`: stdin is a terminal a person can answer on."""

    def __init__(self, out: TextIO, interactive: bool):
        self.out = out
        self.interactive = interactive
        self.style = Style.for_stream(out)
        self.unasked: set[str] = set()  # servers left unstarted because nobody could be asked
        self.said: set[tuple[str, str]] = set()

    async def ask_consent(self, decl: Any, prompt: str) -> Answer | None:
        if not self.interactive:
            self.unasked.add(decl.name)
            return None
        s = self.style
        lines = prompt.splitlines()
        self.out.write(f"\n  {s('35;1', '?')} {lines[0] if lines else decl.name}\n")
        for line in lines[1:]:
            self.out.write(f"      {line}\n")
        # No time limit: a person is reading a command line (CONTRACT Decision 10).
        answer = await read_line_async(
            "    [a]llow / allow al[w]ays for this workspace / [d]eny? ", self.out
        )
        return CHOICES.get((answer or "d").strip().lower()[:1], "deny")

    def on_status(self, name: str, state: str, message: str) -> None:
        if state == "denied" and name in self.unasked:
            self._say(name, f"MCP server `{name}` not started: {NOBODY}")
        elif state in ("denied", "failed"):
            self._say(name, message)

    def show_initial(self, status: list[dict[str, Any]]) -> None:
        """Servers denied before anything is asked (remembered, or by the setting): said once."""
        for item in status:
            if item.get("state") == "denied":
                self._say(
                    item["name"],
                    f"MCP server `{item['name']}` not started: {item.get('error') or 'denied'}",
                )

    def _say(self, name: str, message: str) -> None:
        if (name, message) in self.said:
            return
        self.said.add((name, message))
        self.out.write(f"  {self.style.bad()} {message}\n")
        self.out.flush()
