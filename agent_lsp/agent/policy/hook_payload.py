"""What a hook reads on stdin, in Claude Code's field names (CONTRACT Decision 32), and a hook's
`updatedInput` turned back into our tool's arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_lsp.agent.policy.hook_config import CLAUDE_NAMES, MATCH_ALIASES
from agent_lsp.agent.tools.base import CommandExit

DEFAULT_COMMAND_TIMEOUT_MS = 120_000


def tool_names(name: str, raw_mcp: str | None = None) -> tuple[str, ...]:
    """Every name a matcher may use for our tool `name`: ours, Claude Code's (and its other
    spellings), and `mcp__<server>__<tool>` for an MCP tool (`raw_mcp` = `<server>__<tool>`)."""
    names = [name]
    if name in CLAUDE_NAMES:
        names.append(CLAUDE_NAMES[name])
    names += [alias for alias, ours in MATCH_ALIASES.items() if ours == name]
    if raw_mcp:
        names.append(f"mcp__{raw_mcp}")
    return tuple(dict.fromkeys(names))


def claude_name(name: str, raw_mcp: str | None = None) -> str:
    if raw_mcp:
        return f"mcp__{raw_mcp}"
    return CLAUDE_NAMES.get(name, name)


def _absolute(path: Any, root: Path) -> Any:
    if not isinstance(path, str):
        return path
    candidate = Path(path).expanduser()
    return str(candidate if candidate.is_absolute() else (root / candidate))


def tool_input(name: str, args: dict[str, Any], root: Path) -> dict[str, Any]:
    """Our arguments in Claude Code's names (`file_path` absolute; Bash's timeout in ms)."""
    match name:
        case "run_command":
            timeout = args.get("timeout")
            out: dict[str, Any] = {
                "command": args.get("command", ""),
                "description": "",
                "timeout": int(timeout * 1000)
                if isinstance(timeout, int | float)
                else DEFAULT_COMMAND_TIMEOUT_MS,
            }
            if args.get("cwd"):
                out["cwd"] = _absolute(args["cwd"], root)
            if args.get("background") is True:  # Claude Code's name (Decision 86)
                out["run_in_background"] = True
            return out
        case "process_output":
            return {"bash_id": args.get("processId", "")}
        case "stop_process":
            return {"shell_id": args.get("processId", "")}
        case "read_file":
            out = {"file_path": _absolute(args.get("path", ""), root)}
            out.update({k: args[k] for k in ("offset", "limit") if k in args})
            return out
        case "edit_file":
            return {
                "file_path": _absolute(args.get("path", ""), root),
                "old_string": args.get("old_text", ""),
                "new_string": args.get("new_text", ""),
            }
        case "write_file":
            return {
                "file_path": _absolute(args.get("path", ""), root),
                "content": args.get("content", ""),
            }
        case "search":
            out = {"pattern": args.get("pattern", "")}
            if args.get("path"):
                out["path"] = _absolute(args["path"], root)
            if args.get("glob"):
                out["glob"] = args["glob"]
            if args.get("ignoreCase"):
                out["-i"] = True
            return out
        case "list_files":
            return {
                "pattern": args.get("glob") or "**/*",
                "path": _absolute(args.get("path") or ".", root),
            }
        case "delegate":
            task = str(args.get("task", ""))
            return {
                "description": " ".join(task.split())[:60],
                "prompt": task,
                "subagent_type": args.get("agent") or "general-purpose",
            }
    return dict(args)


def _relative(path: Any, root: Path) -> Any:
    """An absolute path inside the first root back to a relative one (ours are relative)."""
    if isinstance(path, str) and Path(path).is_absolute():
        try:
            return str(Path(path).relative_to(root)) or "."
        except ValueError:
            return path
    return path


def our_arguments(name: str, updated: dict[str, Any], root: Path) -> dict[str, Any]:
    """A hook's `updatedInput` (Claude Code's names, or ours) as our tool's arguments."""
    match name:
        case "run_command":
            out: dict[str, Any] = {"command": updated.get("command", "")}
            if isinstance(updated.get("timeout"), int | float):
                out["timeout"] = max(1.0, updated["timeout"] / 1000)
            if updated.get("cwd"):
                out["cwd"] = _relative(updated["cwd"], root)
            if updated.get("run_in_background", updated.get("background")) is True:
                out["background"] = True
            return out
        case "process_output" | "stop_process":
            found = updated.get("processId", updated.get("bash_id", updated.get("shell_id")))
            return {"processId": found if isinstance(found, str) else ""}
        case "read_file" | "edit_file" | "write_file":
            out = {"path": _relative(updated.get("file_path", updated.get("path", "")), root)}
            renames = {
                "old_string": "old_text",
                "new_string": "new_text",
                "content": "content",
                "offset": "offset",
                "limit": "limit",
                "old_text": "old_text",
                "new_text": "new_text",
            }
            out.update({renames[k]: v for k, v in updated.items() if k in renames})
            return out
        case "search":
            out = {k: updated[k] for k in ("pattern", "glob") if k in updated}
            if updated.get("path"):
                out["path"] = _relative(updated["path"], root)
            if updated.get("-i") or updated.get("ignoreCase"):
                out["ignoreCase"] = True
            return out
        case "list_files":
            out = {"path": _relative(updated.get("path") or ".", root)}
            pattern = updated.get("pattern", updated.get("glob"))
            if pattern and pattern != "**/*":
                out["glob"] = pattern
            return out
        case "delegate":
            out = {"task": updated.get("prompt", updated.get("task", ""))}
            if updated.get("subagent_type") not in (None, "general-purpose"):
                out["agent"] = updated["subagent_type"]
            return out
    return dict(updated)


def tool_response(
    name: str, tool_in: dict[str, Any], ok: bool, text: str, ended: CommandExit | None = None
) -> dict[str, Any]:
    """`{success, output}`, plus Bash's `{stdout, stderr, exit_code, interrupted}` and a writer's
    `{filePath, success}` (Decision 32). `ended`: how the command ended, when it ran (its result's
    first line is then the status line, which `stdout` leaves out)."""
    out: dict[str, Any] = {"success": ok, "output": text}
    if name == "run_command":
        exited = ended is not None and ended.code is not None
        out.update(
            stdout=text.partition("\n")[2] if exited else text,
            stderr="",
            exit_code=ended.code if ended is not None and exited else (0 if ok else None),
            interrupted=ended is not None and ended.timed_out,
        )
    elif name in ("edit_file", "write_file"):
        out["filePath"] = tool_in.get("file_path")
    return out
