"""Claude Code's settings files (CONTRACT Decision 29), read once for everything that uses them
(permission rules, hooks): the user's `$CLAUDE_CONFIG_DIR/settings.json` or
`~/.claude/settings.json`, and `.claude/settings.json` / `.claude/settings.local.json` of each
workspace folder. Only `permissions.{allow,ask,deny}`, `hooks` and `disableAllHooks` are read;
every other key is listed as ignored. A file that cannot be read is named with its error; it
never stops the others."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

MAX_FILE = 1_000_000
READ_KEYS = ("permissions", "hooks", "disableAllHooks")
RULE_LISTS = ("allow", "ask", "deny")
PROJECT_FILES = (".claude/settings.json", ".claude/settings.local.json")

Scope = Literal["user", "project"]


@dataclass
class ClaudeFile:
    """One file as read: its rules and hooks as written, what was ignored, and its error."""

    path: Path
    scope: Scope
    folder: Path | None = None  # the workspace folder of a project file
    permissions: dict[str, list[str]] = field(default_factory=dict)  # allow / ask / deny
    hooks: dict[str, Any] = field(default_factory=dict)
    disable_all_hooks: bool = False
    ignored: list[str] = field(default_factory=list)  # keys as dotted paths: `apiKeyHelper`
    error: str | None = None  # why the file (or a part of it) could not be used
    problem: str | None = None  # the same without the file's name (the setup view's column)
    hooks_error: str | None = None  # the error, when it stops the file's hooks (all or `hooks`)


def user_file_path(env: Mapping[str, str] | None = None) -> Path:
    """`$CLAUDE_CONFIG_DIR/settings.json`, else `~/.claude/settings.json`."""
    source = os.environ if env is None else env
    folder = source.get("CLAUDE_CONFIG_DIR")
    if folder:
        return Path(folder).expanduser() / "settings.json"
    home = source.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".claude" / "settings.json"


def claude_files(roots: list[Path], env: Mapping[str, str] | None = None) -> list[ClaudeFile]:
    """The user's file, then each workspace folder's two project files; absent files are left
    out."""
    found: list[ClaudeFile] = []
    user = read_file(user_file_path(env), "user")
    if user is not None:
        found.append(user)
    for root in roots:
        for name in PROJECT_FILES:
            project = read_file(Path(root) / name, "project", Path(root))
            if project is not None:
                found.append(project)
    return found


def read_file(path: Path, scope: Scope, folder: Path | None = None) -> ClaudeFile | None:
    """One file; None when it does not exist."""
    out = ClaudeFile(path, scope, folder)
    try:
        if not path.exists():
            return None
        if not path.is_file():
            out.problem = "not a regular file: ignored"
            out.error = out.hooks_error = f"{path} is {out.problem}"
            return out
        if path.stat().st_size > MAX_FILE:
            out.problem = f"larger than {MAX_FILE} bytes: ignored"
            out.error = out.hooks_error = f"{path} is {out.problem}"
            return out
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        out.problem = (
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
            "none of its rules or hooks apply"
        )
        out.error = out.hooks_error = f"{path} is {out.problem}"
        return out
    except (OSError, UnicodeDecodeError) as exc:
        out.error = out.hooks_error = out.problem = f"cannot read {path}: {exc}"
        return out
    if not isinstance(data, dict):
        out.problem = f"must hold a JSON object, got {type(data).__name__}: ignored"
        out.error = out.hooks_error = f"{path} {out.problem}"
        return out
    problems: list[str] = []
    for key, value in data.items():
        if key == "permissions":
            _permissions(value, out, problems)
        elif key == "hooks":
            if isinstance(value, dict):
                out.hooks = value
            else:
                problems.append(f"`hooks` must be an object, got {type(value).__name__}")
                out.hooks_error = f"{path}: {problems[-1]}"
        elif key == "disableAllHooks":
            out.disable_all_hooks = value is True
        else:
            out.ignored.append(str(key))
    if problems:
        out.problem = "; ".join(problems)
        out.error = f"{path}: {out.problem}"
    return out


def _permissions(value: Any, out: ClaudeFile, problems: list[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"`permissions` must be an object, got {type(value).__name__}")
        return
    for key, rules in value.items():
        if key not in RULE_LISTS:
            out.ignored.append(f"permissions.{key}")
            continue
        if not isinstance(rules, list):
            problems.append(f"`permissions.{key}` must be a list of rules")
            continue
        kept = [r for r in rules if isinstance(r, str) and r.strip()]
        if len(kept) != len(rules):
            problems.append(f"`permissions.{key}` holds entries that are not rules (strings)")
        out.permissions[key] = kept
