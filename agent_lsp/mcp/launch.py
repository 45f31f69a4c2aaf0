"""What actually starts: a declaration with `${...}` expanded, its environment built at start."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.exec import keyguard
from agent_lsp.mcp.config import McpDeclaration

_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class LaunchError(Exception):
    """The declaration cannot start as written (an `${input:…}` nobody can answer, no workspace
    folder)."""


@dataclass(frozen=True)
class Launch:
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # the whole environment of a stdio server
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


TELEMETRY = "the telemetry backend's credentials"


def _refused(
    decl: McpDeclaration, key: str, why: str, what: str = "the model's API key"
) -> LaunchError:
    return LaunchError(
        f"not started: `{key}` {why}; agent-lsp never gives {what} "
        f"to a server declared in {decl.origin or decl.source}"
    )


def _check_variable(
    decl: McpDeclaration,
    key: str,
    arg: str,
    value: str,
    key_names: Sequence[str],
    keys: Sequence[str],
) -> None:
    """`${env:arg}` in a workspace-declared server: refused when the variable is the key's, or
    holds the key or the telemetry backend's credentials."""
    if decl.trusted:
        return
    if arg in key_names or keyguard.holds_key(value, keys):
        what = "the model's API key" if arg in key_names else "the model's API key as its value"
        raise _refused(decl, key, f"asks for ${{env:{arg}}}, which holds {what}")
    if keyguard.telemetry_credential(arg, value):
        raise _refused(decl, key, f"asks for ${{env:{arg}}}, which holds {TELEMETRY}", TELEMETRY)


def _variable(
    match: re.Match[str],
    key: str,
    decl: McpDeclaration,
    first: Path | None,
    env: Mapping[str, str],
    secrets: tuple[Sequence[str], Sequence[str]],
) -> str:
    """The value of one `${...}` (VS Code's variables) in the field `key`; `secrets`: the key's
    variable names and values."""
    key_names, keys = secrets
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
        value = env.get(arg, "")
        _check_variable(decl, key, arg, value, key_names, keys)
        return value
    if kind == "input":
        raise LaunchError(
            f"`{key}` needs the input `{arg}` (${{input:{arg}}}), "
            "which agent-lsp cannot ask for; "
            "put the value in your own settings' mcpServers instead"
        )
    return match.group(0)  # unknown variables stay as written, as in VS Code


def resolve_launch(
    decl: McpDeclaration, *, roots: Sequence[Path], env: Mapping[str, str], api_key_env: str
) -> Launch:
    """Expand `${workspaceFolder}`, `${workspaceFolderBasename}`, `${userHome}`, `${env:NAME}`,
    `${pathSeparator}`.

    The model's API key (the `api_key_env` variable's value, or OPENAI_API_KEY's) reaches a
    server only when the user's own settings or the ACP client name it in the server's `env`:
    no server inherits it, under whatever variable it sits; no server gets it in its command
    line, which every local user reads in /proc/<pid>/cmdline; and a workspace-declared server
    that asks for it (`${env:X}` with X the key's variable or any variable holding the key) or
    holds it anywhere after expansion is not started: LaunchError naming where, never the value.
    The telemetry backend's credentials (the OTLP exporter's headers, an OTLP endpoint with a
    password: keyguard.telemetry_credential) are kept from a workspace-declared server alike."""
    problems: list[str] = []
    first = Path(roots[0]) if roots else None
    key_names = keyguard.key_names(api_key_env)
    keys = keyguard.secrets(env, [api_key_env])
    telemetry = keyguard.telemetry_secrets(env)

    def expand(text: str, key: str) -> str:
        def one(match: re.Match[str]) -> str:
            return _variable(match, key, decl, first, env, (key_names, keys))

        expanded = _VARIABLE.sub(one, text)
        if not decl.trusted and keyguard.holds_key(expanded, keys):
            raise _refused(decl, key, "holds the model's API key")
        if not decl.trusted and keyguard.holds_key(expanded, telemetry):
            raise _refused(decl, key, f"holds {TELEMETRY}", TELEMETRY)
        return expanded

    if decl.transport == "http":
        headers = {name: expand(value, f"headers.{name}") for name, value in decl.headers.items()}
        return Launch(url=expand(decl.url, "url"), headers=headers, problems=tuple(problems))

    command = expand(decl.command, "command")
    args = tuple(expand(a, f"args[{i}]") for i, a in enumerate(decl.args))
    for where, part in (("command", command), *((f"args[{i}]", a) for i, a in enumerate(args))):
        if keyguard.holds_key(part, keys):
            raise LaunchError(
                f"not started: `{where}` holds the model's API key, "
                "and a command line is readable by every local user "
                "(/proc/<pid>/cmdline); give it to the server in its `env` instead"
            )
    cwd = expand(decl.cwd, "cwd") if decl.cwd else None
    if cwd is not None and first is not None and not os.path.isabs(cwd):
        cwd = str(first / cwd)
    elif cwd is None and first is not None:
        cwd = str(first)
    full = keyguard.child_env(env, names=[api_key_env])
    for name, value in decl.env.items():
        if name in key_names and not decl.trusted:
            problems.append(
                f"`env.{name}` (the model's API key variable) "
                f"is not given to a server declared in {decl.source}"
            )
            continue
        if value is None:
            full.pop(name, None)
        else:
            full[name] = expand(value, f"env.{name}")
    return Launch(command=command, args=args, env=full, cwd=cwd, problems=tuple(problems))
