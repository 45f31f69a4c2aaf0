"""MCP server declarations, as written: from the user's settings, the workspace's files or ACP."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Source = Literal["user", ".mcp.json", ".vscode/mcp.json", "acp"]
TRUSTED_SOURCES: frozenset[str] = frozenset({"user", "acp"})
MAX_FILE_BYTES = 1024 * 1024

_HTTP_TYPES = {"http", "streamable-http", "streamablehttp", "streamable_http"}
_IGNORED = "is not supported and was ignored"


@dataclass(frozen=True)
class McpDeclaration:
    """One server as declared, before any `${...}` expansion. Not hashable (env is a dict)."""

    name: str
    source: Source
    transport: Literal["stdio", "http"]
    fingerprint: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)  # None unsets an inherited variable
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    origin: str | None = None  # the file it was read from (workspace sources)

    @property
    def trusted(self) -> bool:
        """Declared by the user (settings or an ACP client), not by a workspace's files."""
        return self.source in TRUSTED_SOURCES


def fingerprint(name: str, source: str, raw: Any) -> str:
    """sha256 of the declaration as written: a changed declaration is a different one."""
    canonical = json.dumps(
        {"name": name, "source": source, "declaration": raw},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def from_user_settings(
    mcp_servers: Mapping[str, Any] | None,
) -> tuple[list[McpDeclaration], list[str]]:
    """The user's own `mcpServers`: `{name: {command, args?, env?, cwd?}}` or
    `{name: {type: "http", url, headers?}}`."""
    return _parse_servers(mcp_servers, "user", "mcpServers", origin=None)


def from_workspace(roots: Iterable[Path]) -> tuple[list[McpDeclaration], list[str]]:
    """`<root>/.mcp.json` (`{mcpServers}`) and `<root>/.vscode/mcp.json` (`{servers, inputs?}`) of
    every root.

    Blocking (two small reads per root): call it through `asyncio.to_thread` from async code."""
    decls: list[McpDeclaration] = []
    problems: list[str] = []
    for root in roots:
        for relative, source, key in (
            (".mcp.json", ".mcp.json", "mcpServers"),
            (".vscode/mcp.json", ".vscode/mcp.json", "servers"),
        ):
            path = Path(root) / relative
            data, problem = _read_json_file(path)
            if problem:
                problems.append(problem)
            if data is None:
                continue
            if not isinstance(data, dict):
                problems.append(f"{path}: expected a JSON object at the top level")
                continue
            found, more = _parse_servers(data.get(key), source, f"{path}: {key}", origin=str(path))  # type: ignore[arg-type]
            decls += found
            problems += more
    return decls, problems


def from_acp(servers: Iterable[Any] | None) -> tuple[list[McpDeclaration], list[str]]:
    """ACP `session/new` `mcpServers`: stdio `{name, command, args, env: [{name, value}]}`,
    http `{type: "http", name, url, headers: [{name, value}]}`. Dicts or pydantic models."""
    decls: list[McpDeclaration] = []
    problems: list[str] = []
    for index, item in enumerate(servers or ()):
        raw = (
            item.model_dump(by_alias=True, exclude_none=True)
            if hasattr(item, "model_dump")
            else item
        )
        if (
            not isinstance(raw, Mapping)
            or not isinstance(raw.get("name"), str)
            or not raw.get("name")
        ):
            problems.append(f"ACP mcpServers[{index}]: expected an object with a non-empty `name`")
            continue
        entry = dict(raw)
        name = entry.pop("name")
        where = f"ACP mcpServers `{name}`"
        for key in ("env", "headers"):
            pairs = entry.get(key)
            if isinstance(pairs, list):
                try:
                    entry[key] = {p["name"]: p["value"] for p in pairs}
                except (TypeError, KeyError):
                    problems.append(f"{where}: `{key}` must be a list of {{name, value}} objects")
                    entry[key] = None
        decl, more = _parse_entry(name, entry, "acp", where, origin=None, raw=raw)
        problems += more
        if decl is not None:
            decls.append(decl)
    return decls, problems


def _parse_servers(
    servers: Any, source: Source, where: str, origin: str | None
) -> tuple[list[McpDeclaration], list[str]]:
    if servers is None:
        return [], []
    if not isinstance(servers, Mapping):
        return [], [f"{where}: expected an object of servers by name, got {type(servers).__name__}"]
    decls: list[McpDeclaration] = []
    problems: list[str] = []
    for name, entry in servers.items():
        decl, more = _parse_entry(str(name), entry, source, f"{where} `{name}`", origin, raw=entry)
        problems += more
        if decl is not None:
            decls.append(decl)
    return decls, problems


def _parse_entry(
    name: str, entry: Any, source: Source, where: str, origin: str | None, raw: Any
) -> tuple[McpDeclaration | None, list[str]]:
    """One server entry; a bad one gives a problem naming the server and the key, never an
    exception."""
    if not name.strip():
        return None, [f"{where}: a server needs a non-empty name"]
    if not isinstance(entry, Mapping):
        return None, [f"{where}: expected an object, got {type(entry).__name__}"]
    problems: list[str] = []
    kind = entry.get("type")
    if kind is not None and not isinstance(kind, str):
        return None, [f"{where}: `type` must be a string"]
    kind = (kind or "").lower()
    if kind == "sse":
        return None, [
            f'{where}: `type: "sse"` (the older HTTP+SSE transport) is not supported; '
            'use the server\'s streamable HTTP endpoint with `type: "http"`'
        ]
    if kind and kind != "stdio" and kind not in _HTTP_TYPES:
        return None, [f'{where}: unknown `type` {kind!r} (expected "stdio" or "http")']
    if "envFile" in entry:
        problems.append(f"{where}: `envFile` {_IGNORED}")
    common = {
        "name": name,
        "source": source,
        "origin": origin,
        "fingerprint": fingerprint(name, source, raw),
    }
    is_http = kind in _HTTP_TYPES or (not kind and "url" in entry and "command" not in entry)
    if is_http:
        url = entry.get("url")
        if not isinstance(url, str) or not url.strip():
            return None, problems + [f"{where}: `url` must be a non-empty string"]
        if not url.lower().startswith(("http://", "https://", "${")):
            return None, problems + [f"{where}: `url` must start with http:// or https://"]
        headers = _string_map(
            entry.get("headers"), f"{where}: `headers`", problems, allow_null=False
        )
        if headers is None:
            return None, problems
        return McpDeclaration(transport="http", url=url, headers=headers, **common), problems  # type: ignore[arg-type]
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        what = (
            "`command` must be a non-empty string"
            if "command" in entry
            else "needs `command` (stdio) or `url` (streamable HTTP)"
        )
        return None, problems + [f"{where}: {what}"]
    args = entry.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list) or not all(
        isinstance(a, str | int | float) and not isinstance(a, bool) for a in args
    ):
        return None, problems + [f"{where}: `args` must be a list of strings"]
    env = _string_map(entry.get("env"), f"{where}: `env`", problems, allow_null=True)
    if env is None:
        return None, problems
    cwd = entry.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.strip()):
        return None, problems + [f"{where}: `cwd` must be a non-empty string"]
    return McpDeclaration(
        transport="stdio",
        command=command,
        args=tuple(str(a) for a in args),
        env=env,
        cwd=cwd,
        **common,  # type: ignore[arg-type]
    ), problems


def _string_map(
    value: Any, where: str, problems: list[str], *, allow_null: bool
) -> dict[str, Any] | None:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{where} must be an object of strings")
        return None
    out: dict[str, Any] = {}
    for key, item in value.items():
        if item is None and allow_null:
            out[str(key)] = None
        elif isinstance(item, str):
            out[str(key)] = item
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out[str(key)] = str(item)
        else:
            problems.append(f"{where}: `{key}` must be a string")
            return None
    return out


def _read_json_file(path: Path) -> tuple[Any, str | None]:
    """A regular file of at most 1 MB, JSON with comments and trailing commas allowed (VS Code's
    JSONC)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, None
    except NotADirectoryError:
        return None, None
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror or exc})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{path}: not a regular file; ignored"
        if info.st_size > MAX_FILE_BYTES:
            return None, f"{path}: larger than {MAX_FILE_BYTES // 1024} KB; ignored"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        return None, f"{path}: larger than {MAX_FILE_BYTES // 1024} KB; ignored"
    try:
        return json.loads(strip_jsonc(data.decode("utf-8-sig"))), None
    except UnicodeDecodeError:
        return None, f"{path}: not valid UTF-8; ignored"
    except json.JSONDecodeError as exc:
        return None, f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def strip_jsonc(text: str) -> str:
    """Drop `//` and `/* */` comments and trailing commas outside strings (VS Code's mcp.json is
    JSONC)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "}]":
            # A comma followed only by whitespace before the closing bracket is a trailing comma.
            k = len(out) - 1
            while k >= 0 and out[k].isspace():
                k -= 1
            if k >= 0 and out[k] == ",":
                out[k] = ""
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)
