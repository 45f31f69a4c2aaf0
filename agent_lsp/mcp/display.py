"""Text shown to the user about MCP servers: escaped like every approval surface, one line where a
line is wanted."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from agent_lsp.agent.display import escape_invisible, show_command


def visible(text: str) -> str:
    """Control, zero-width and bidi characters escaped (newlines kept): what you see runs."""
    return escape_invisible(text)


def command_line(command: str, args: Sequence[str]) -> str:
    """The command line as a shell would need it, on one line, escaped, long space runs marked."""
    return show_command(shlex.join([command, *args]))


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit} more characters not shown)"


def failure_message(
    name: str, reason: str, stderr_tail: Sequence[str] = (), *, during_start: bool = True
) -> str:
    """One line for `window/showMessage`: "MCP server `git` failed to start: …; last stderr: …"."""
    what = "failed to start" if during_start else "stopped"
    line = f"MCP server `{_one_line(name)}` {what}: {_one_line(reason)}"
    tail = [t for t in (_one_line(s) for s in stderr_tail) if t][-3:]
    if tail:
        line += "; last stderr: " + " | ".join(tail)
    return line if len(line) <= 400 else line[:399] + "…"


def _one_line(text: str) -> str:
    return " ".join(visible(text).split())
