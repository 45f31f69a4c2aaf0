"""The MCP servers of every workspace a process serves, as the host's tool servers (the core's
`ToolServers` port): built once per workspace and set of declarations, replaced sets closed once
no run uses them, all closed with the process. Front ends plug it into the host."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.exec import keyguard
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)


@dataclass
class McpHooks:
    """How a front end asks consent for a workspace-declared MCP server and shows server status."""

    ask_consent: Callable[[Any, str], Awaitable[str | None]] | None = None
    on_status: Callable[[str, str, str], None] | None = None


class NoServers:
    """The tool set of a workspace that declares no MCP server: the MCP client machinery
    (the SDK, the server processes' code) is not even imported (start-up: issue 33)."""

    async def tools(self) -> list[Any]:
        return []

    def status(self) -> list[dict[str, Any]]:
        return []

    async def aclose(self) -> None:
        pass


@dataclass
class McpHub:
    hooks: McpHooks = field(default_factory=McpHooks)
    # (workspace, declarations) -> McpManager
    managers: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    # (workspace, extra) -> current key
    _slots: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict)
    # replaced managers, closed once no run uses them
    _retired: list[Any] = field(default_factory=list)

    async def toolset(
        self, roots: list[Path], settings: Settings, extra: list[Any] | None = None
    ) -> Any:
        """The MCP servers of a workspace: the user's (settings), the workspace's own files
        (behind consent) and those a front end passed (ACP's session/new). Nothing starts until
        a run asks for tools."""
        from agent_lsp.mcp.config import from_user_settings, from_workspace

        user, problems = from_user_settings(settings.mcp_servers)
        declared, more = await asyncio.to_thread(from_workspace, roots)
        declarations = [*user, *(extra or []), *declared]
        key = (
            str(roots[0]),
            tuple(d.fingerprint for d in declarations),
            settings.mcp.workspace_servers,
        )
        slot = (str(roots[0]), tuple(d.fingerprint for d in extra or []))
        manager = self.managers.get(key)
        if manager is None:
            replaced = self._slots.get(slot)
            if replaced is not None and replaced != key and replaced in self.managers:
                # The declarations changed: the old manager's servers must not run until
                # shutdown. It is closed once no running run still uses its tools (retire).
                self._retired.append(self.managers.pop(replaced))
            for problem in problems + more:
                log.warning("%s", problem)
            manager = self._manager(declarations, roots, settings) if declarations else NoServers()
            self.managers[key] = manager
            self._slots[slot] = key
        return manager

    def _manager(self, declarations: list[Any], roots: list[Path], settings: Settings) -> Any:
        from agent_lsp.mcp.consent import ConsentStore
        from agent_lsp.mcp.manager import McpManager

        return McpManager(
            declarations,
            roots=roots,
            env=keyguard.environment(),
            api_key_env=settings.api_key_env,
            consent_store=ConsentStore(state_dir() / "mcp-consent.json"),
            workspace_policy=settings.mcp.workspace_servers,
            ask_consent=self.hooks.ask_consent,  # type: ignore[arg-type]
            on_status=self.hooks.on_status,
            request_timeout=settings.request_timeout,
        )

    async def status(self, roots: list[Path], settings: Settings) -> list[dict[str, Any]]:
        return list((await self.toolset(roots, settings)).status())

    async def retire(self, in_use: list[Any]) -> None:
        """Close the replaced sets no running run still uses."""
        used = {id(m) for m in in_use}
        done = [m for m in self._retired if id(m) not in used]
        self._retired = [m for m in self._retired if id(m) in used]
        for result in await asyncio.gather(*(m.aclose() for m in done), return_exceptions=True):
            if isinstance(result, BaseException):
                log.warning(
                    "closing the MCP servers of a replaced configuration failed: %s", result
                )

    async def aclose(self) -> None:
        managers, self.managers = [*self.managers.values(), *self._retired], {}
        self._retired = []
        await asyncio.gather(*(m.aclose() for m in managers), return_exceptions=True)
