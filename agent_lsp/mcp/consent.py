"""Consent for servers a workspace declares: the prompt, and the answers kept in the state dir."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from agent_lsp.mcp.config import McpDeclaration
from agent_lsp.mcp.display import command_line, visible

log = logging.getLogger(__name__)

Remembered = Literal["allow", "deny"]
Answer = Literal["allow", "allowAlways", "deny"]
AskConsent = Callable[[McpDeclaration, str], Awaitable[Answer | None]]
WorkspacePolicy = Literal["ask", "allow", "deny"]

_ENV_REF = re.compile(r"\$\{env:([^}]*)\}")


class ConsentStore:
    """`allow`/`deny` per workspace and declaration fingerprint, in one JSON file (0600, dirs 0700).

    Written atomically under a lock file, so two agent-lsp processes do not lose each other's
    answers. Small and rarely written: the methods block briefly; async callers may use
    `asyncio.to_thread`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def get(self, workspace: str, fingerprint: str) -> Remembered | None:
        entry = self._read().get("workspaces", {}).get(workspace, {}).get(fingerprint)
        answer = entry.get("answer") if isinstance(entry, dict) else None
        return answer if answer in ("allow", "deny") else None

    def remember(self, workspace: str, decl: McpDeclaration, answer: Remembered) -> None:
        self._put(
            workspace,
            decl.fingerprint,
            {"answer": answer, "name": decl.name, "source": decl.source, "origin": decl.origin},
        )

    def _put(self, workspace: str, key: str, record: dict[str, Any]) -> None:
        """One answer kept (stamped with its time), the file read and written under the locks."""
        with self._lock, self._file_lock():
            data = self._read()
            workspaces = data.setdefault("workspaces", {})
            if not isinstance(workspaces, dict):
                data["workspaces"] = workspaces = {}
            entries = workspaces.setdefault(workspace, {})
            if not isinstance(entries, dict):
                workspaces[workspace] = entries = {}
            entries[key] = {**record, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            data["version"] = 1
            self._write(data)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning(
                "MCP consent file %s is unreadable (%s); treating it as empty", self.path, exc
            )
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".mcp-consent-", dir=self.path.parent)  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # not POSIX: the in-process lock is all there is
            yield
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def consent_prompt(decl: McpDeclaration, *, default_cwd: str | None = None) -> str:
    """What the user is asked: the server, its file, the exact command line and cwd (or URL), and
    the NAMES of the environment variables and headers it sets (never their values)."""
    where = f" in {visible(decl.origin)}" if decl.origin else f" in {decl.source}"
    lines = [
        f"The workspace declares the MCP server `{visible(decl.name)}`{where}. Allow it to start?"
    ]
    if decl.transport == "stdio":
        lines.append(f"Command: {command_line(decl.command, decl.args)}")
        cwd = decl.cwd or default_cwd
        if cwd:
            lines.append(f"Working directory: {visible(cwd)}")
        if decl.env:
            lines.append(
                "Environment variables it sets: " + ", ".join(visible(k) for k in decl.env)
            )
    else:
        lines.append(f"URL: {visible(decl.url)}")
        if decl.headers:
            lines.append("HTTP headers it sends: " + ", ".join(visible(k) for k in decl.headers))
    used = sorted({m for text in _declared_texts(decl) for m in _ENV_REF.findall(text)})
    if used:
        lines.append("Reads your environment variables: " + ", ".join(visible(u) for u in used))
    return "\n".join(lines)


def _declared_texts(decl: McpDeclaration) -> list[str]:
    values = [v for v in (*decl.env.values(), *decl.headers.values()) if v]
    return [decl.command, *decl.args, decl.cwd or "", decl.url, *values]


def workspace_key(roots: list[Path]) -> str:
    """A workspace is the resolved path of its first folder (Decisions 18)."""
    return str(Path(roots[0]).resolve()) if roots else ""
