"""How the core's tool calls look in ACP: the tool kind (the client's icon), a short title, the
file locations a client follows, and the tool call id that stays unique in the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_lsp.agent.display import escape_invisible, show_command
from agent_lsp.agent.tools.paths import PathGuard

KINDS = {
    "read_file": "read",
    "list_files": "read",
    "diagnostics": "read",
    "find_definition": "search",
    "find_references": "search",
    "hover": "read",
    "symbols": "search",
    "call_hierarchy": "search",
    "rename_symbol": "edit",
    "search": "search",
    "edit_file": "edit",
    "write_file": "edit",
    "remember": "edit",
    "run_command": "execute",
    "process_output": "read",  # a background process's output (issue 35)
    "stop_process": "execute",
    "delegate": "think",
    "debug_start": "execute",  # the debugger runs the program and steps it (issue 36)
    "debug_step": "execute",
    "debug_eval": "execute",
    "debug_stop": "execute",
}
EDIT_TOOLS = frozenset({"edit_file", "write_file"})
FETCH_WORDS = ("fetch", "http_get", "get_url", "read_url", "download", "web_get")
TITLE_CHARS = 120


def tool_kind(tool: str) -> str:
    """ACP's ToolKind for a core tool; MCP tools (`server__tool`) are `other`, or `fetch` when
    the tool's own name says it fetches."""
    if tool in KINDS:
        return KINDS[tool]
    own = tool.rsplit("__", 1)[-1].lower()
    if "__" in tool and any(own == w or own.startswith(w) or own.endswith(w) for w in FETCH_WORDS):
        return "fetch"
    return "other"


def _one_line(text: str, limit: int = TITLE_CHARS) -> str:
    line = " ".join(escape_invisible(str(text), keep_newlines=False).split())
    return _cut(line, limit)


def _cut(line: str, limit: int = TITLE_CHARS) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tool_title(tool: str, arguments: Any, agent_id: str = "main") -> str:
    """`Read calc.py`, `Run pytest -x`: what the call does, in a line."""
    args = arguments if isinstance(arguments, dict) else {}

    def arg(name: str) -> str:
        value = args.get(name)
        return _one_line(value) if isinstance(value, str) and value else ""

    path = arg("path")
    titles = {
        "read_file": f"Read {path}" if path else "Read a file",
        "list_files": f"List files in {path}"
        if path
        else "List files" + (f" matching {arg('glob')}" if arg("glob") else ""),
        "search": f"Search `{arg('pattern')}`" + (f" in {path}" if path else ""),
        "diagnostics": f"Diagnostics of {path}" if path else "Diagnostics",
        "edit_file": f"Edit {path}",
        "write_file": f"Write {path}",
        "run_command": f"Run `{show_command(args['command'])}`"
        if isinstance(args.get("command"), str)
        else "Run a command",
        "delegate": f"Delegate: {arg('task')}",
        "remember": f"Remember: {arg('note')}",
        "debug_start": "Debug " + (arg("program") or arg("module") or arg("command") or "?"),
        "debug_step": f"Debugger: {arg('action') or 'step'}",
        "debug_eval": f"Debugger: evaluate `{arg('expression')}`",
        "debug_stop": "Debugger: stop",
        "process_output": f"Output of {arg('processId') or 'a background process'}",
        "stop_process": f"Stop {arg('processId') or 'a background process'}",
    }
    title = titles.get(tool)
    if not title:
        pairs = " ".join(f"{k}={v}" for k, v in args.items())
        shown = arguments if isinstance(arguments, str) else pairs
        title = f"{tool} {_one_line(shown, 80)}".strip()
    prefix = "" if agent_id == "main" else f"[{agent_id}] "
    return _cut(prefix + title)


def resolve_path(raw: Any, roots: list[Path]) -> Path | None:
    """The file a tool argument names, resolved by the core's own rule (PathGuard: relative to
    the first root, or to another by its folder name), so the client follows the file the tool
    works on; None when the tool refuses the path."""
    return PathGuard(roots).locate(raw)


def tool_locations(tool: str, arguments: Any, roots: list[Path]) -> list[dict[str, Any]]:
    """Where the call works, for the client's follow-along: the file (and the line read from)
    or the folder searched; `line` is 0-based (read_file's `offset` is 1-based)."""
    if not isinstance(arguments, dict) or tool not in (
        "read_file",
        "edit_file",
        "write_file",
        "list_files",
        "search",
        "diagnostics",
    ):
        return []
    path = resolve_path(arguments.get("path"), roots)
    if path is None:
        return [{"path": str(roots[0])}] if tool in ("list_files", "search") else []
    location: dict[str, Any] = {"path": str(path)}
    offset = arguments.get("offset")
    if (
        tool == "read_file"
        and isinstance(offset, int)
        and not isinstance(offset, bool)
        and offset > 0
    ):
        location["line"] = offset - 1
    return [location]


class CallIds:
    """ACP wants a tool call id unique in the session; the core's ids are unique per run (and a
    model may reuse `call_1` in the next run): a repeat gets the run id as suffix."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.current: dict[str, str] = {}  # core call id -> ACP id, for the run in flight

    def new_run(self) -> None:
        self.current = {}

    def start(self, call_id: str, run_id: str) -> str:
        acp_id = call_id if call_id not in self.used else f"{call_id}@{run_id}"
        self.used.add(acp_id)
        self.current[call_id] = acp_id
        return acp_id

    def of(self, call_id: str) -> str:
        return self.current.get(call_id, call_id)
