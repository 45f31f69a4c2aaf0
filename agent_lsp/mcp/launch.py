"""What actually starts: a declaration with `${...}` expanded and its environment built, at start time."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.mcp.config import McpDeclaration

_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class LaunchError(Exception):
    """The declaration cannot start as written (an `${input:…}` nobody can answer, no workspace folder)."""


@dataclass(frozen=True)
class Launch:
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # the whole environment of a stdio server
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def resolve_launch(decl: McpDeclaration, *, roots: Sequence[Path], env: Mapping[str, str], api_key_env: str) -> Launch:
    """Expand `${workspaceFolder}`, `${workspaceFolderBasename}`, `${userHome}`, `${env:NAME}`, `${pathSeparator}`.

    A workspace-declared server never sees the model's API key: `${env:<api_key_env>}` expands
    to "" (with a problem) and the variable is never in its environment. A user or ACP server
    gets it only when its own `env` names it."""
    problems: list[str] = []
    first = Path(roots[0]) if roots else None

    def expand(text: str, key: str) -> str:
        def one(match: re.Match[str]) -> str:
            token = match.group(1)
            kind, _, arg = token.partition(":")
            if token == "workspaceFolder" or token == "workspaceRoot":
                if first is None:
                    raise LaunchError(f"`{key}` uses ${{{token}}} but there is no workspace folder")
                return str(first)
            if token == "workspaceFolderBasename":
                if first is None:
                    raise LaunchError(f"`{key}` uses ${{{token}}} but there is no workspace folder")
                return first.name
            if token == "userHome":
                return env.get("HOME") or os.path.expanduser("~")
            if token in ("pathSeparator", "/"):
                return os.sep
            if kind == "env":
                if arg == api_key_env and not decl.trusted:
                    problems.append(f"`{key}` asks for ${{env:{arg}}}, the model's API key: not given to a server declared in {decl.source}")
                    return ""
                return env.get(arg, "")
            if kind == "input":
                raise LaunchError(f"`{key}` needs the input `{arg}` (${{input:{arg}}}), which agent-lsp cannot ask for; put the value in your own settings' mcpServers instead")
            return match.group(0)  # unknown variables stay as written, as in VS Code

        return _VARIABLE.sub(one, text)

    if decl.transport == "http":
        headers = {name: expand(value, f"headers.{name}") for name, value in decl.headers.items()}
        return Launch(url=expand(decl.url, "url"), headers=headers, problems=tuple(problems))

    command = expand(decl.command, "command")
    args = tuple(expand(a, f"args[{i}]") for i, a in enumerate(decl.args))
    cwd = expand(decl.cwd, "cwd") if decl.cwd else None
    if cwd is not None and first is not None and not os.path.isabs(cwd):
        cwd = str(first / cwd)
    elif cwd is None and first is not None:
        cwd = str(first)
    full = {k: v for k, v in env.items() if k != api_key_env}
    for name, value in decl.env.items():
        if name == api_key_env and not decl.trusted:
            problems.append(f"`env.{name}` (the model's API key) is not given to a server declared in {decl.source}")
            continue
        if value is None:
            full.pop(name, None)
        else:
            full[name] = expand(value, f"env.{name}")
    return Launch(command=command, args=args, env=full, cwd=cwd, problems=tuple(problems))
