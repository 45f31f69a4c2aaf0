"""The MCP servers of one workspace: consent, lazy start, their tools for the agent, and their end.

Front ends (LSP, headless, ACP) build one `McpManager` per workspace, `await tools()` when a run
needs its toolset, show `status()` and `on_status` changes, and `await aclose()` on shutdown.
The caller must call `aclose()` on every exit path, including the editor closing our stdin
(the LSP server's exit handler) and signals: server processes run in their own process groups
and would otherwise outlive us until they notice their own stdin closed. An `atexit` hook
kills any group still alive as a last resort.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.tools.base import Tool
from agent_lsp.mcp.config import McpDeclaration
from agent_lsp.mcp.connection import ServerConnection
from agent_lsp.mcp.consent import (
    AskConsent,
    ConsentStore,
    WorkspacePolicy,
    consent_prompt,
    workspace_key,
)
from agent_lsp.mcp.launch import Launch, resolve_launch
from agent_lsp.mcp.names import Naming
from agent_lsp.mcp.tools import McpTool

log = logging.getLogger(__name__)

State = Literal["idle", "starting", "running", "failed", "needs-consent", "denied"]
OnStatus = Callable[[str, State, str], None]


class _Server:
    """A declaration, what the user said about it, and its connection."""

    def __init__(
        self,
        decl: McpDeclaration,
        conn: ServerConnection,
        gate: Literal["allowed", "needs-consent", "denied"],
        why: str = "",
    ):
        self.decl = decl
        self.conn = conn
        self.gate = gate
        self.why = why  # why it is denied
        self.asked = asyncio.Lock()
        self.launch_error: str | None = None

    @property
    def state(self) -> State:
        if self.gate == "needs-consent":
            return "needs-consent"
        if self.gate == "denied":
            return "denied"
        return self.conn.state


class McpManager:
    def __init__(
        self,
        declarations: Sequence[McpDeclaration],
        *,
        roots: Sequence[Path] = (),
        env: Mapping[str, str] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        consent_store: ConsentStore | None = None,
        workspace_policy: WorkspacePolicy = "ask",
        ask_consent: AskConsent | None = None,
        on_status: OnStatus | None = None,
        request_timeout: float = 120.0,
        start_timeout: float = 60.0,
    ):
        """Nothing starts here. User and ACP declarations win a name clash over workspace ones;
        otherwise the first declaration of a name wins (each clash is in `problems`)."""
        self.roots = [Path(r) for r in roots]
        self.env = keyguard.environment() if env is None else dict(env)
        self.api_key_env = api_key_env
        self.store = consent_store
        self.policy = workspace_policy
        self.ask_consent = ask_consent
        self.on_status = on_status
        self.workspace = workspace_key(self.roots)
        self.problems: list[str] = []
        self._servers: dict[str, _Server] = {}
        self._tools: list[McpTool] = []
        self._by_name: dict[str, McpTool] = {}
        self._built_from: tuple[int, ...] = ()
        self._closed = False
        ordered = sorted(declarations, key=lambda d: not d.trusted)  # stable: trusted first
        for decl in ordered:
            if decl.name in self._servers:
                kept = self._servers[decl.name].decl
                self.problems.append(
                    f"MCP server `{decl.name}` from {decl.origin or decl.source} is ignored: "
                    f"`{decl.name}` is already declared in {kept.origin or kept.source}"
                )
                continue
            conn = ServerConnection(
                decl,
                launch=self._launcher(decl),
                request_timeout=request_timeout,
                start_timeout=start_timeout,
                on_change=self._changed,
            )
            gate, why = self._initial_gate(decl)
            self._servers[decl.name] = _Server(decl, conn, gate, why)
        for one, other in Naming(self._servers).overlaps():
            self.problems.append(
                f"MCP servers `{one}` and `{other}` "
                "can give tools the same `<server>__<tool>` name: "
                "such tools are offered under names ending in a hash, "
                "and an approval.tools entry under a shared name only denies or asks"
            )

    def _initial_gate(
        self, decl: McpDeclaration
    ) -> tuple[Literal["allowed", "needs-consent", "denied"], str]:
        if decl.trusted or self.policy == "allow":
            return "allowed", ""
        if self.policy == "deny":
            return "denied", "denied by the setting mcp.workspaceServers"
        remembered = self.store.get(self.workspace, decl.fingerprint) if self.store else None
        if remembered == "allow":
            return "allowed", ""
        if remembered == "deny":
            return "denied", "you denied it for this workspace"
        return "needs-consent", ""

    def _launcher(self, decl: McpDeclaration) -> Callable[[], Launch]:
        def launch() -> Launch:
            spec = resolve_launch(
                decl, roots=self.roots, env=self.env, api_key_env=self.api_key_env
            )
            for problem in spec.problems:
                message = f"MCP server `{decl.name}`: {problem}"
                if message not in self.problems:
                    self.problems.append(message)
                    log.warning("%s", message)
            return spec

        return launch

    # -- what front ends call ---------------------------------------------------------------
    async def tools(self) -> list[Tool]:
        """Start every allowed server not started yet (concurrently; workspace servers after
        consent) and return the tools of the running ones. One server failing never breaks
        others."""
        if self._closed:
            return []
        servers = list(self._servers.values())
        starts = [
            asyncio.create_task(s.conn.ensure_running()) for s in servers if s.gate == "allowed"
        ]
        try:
            for server in servers:
                if server.gate == "needs-consent" and await self._consent(server):
                    starts.append(asyncio.create_task(server.conn.ensure_running()))
            await asyncio.gather(*starts, return_exceptions=True)
        except asyncio.CancelledError:
            for task in starts:  # the starts themselves go on in their own tasks
                task.cancel()
            raise
        await asyncio.gather(
            *(s.conn.refresh_if_stale() for s in servers if s.conn.state == "running"),
            return_exceptions=True,
        )
        self._rebuild()
        return list(self._tools)

    def status(self) -> list[dict[str, Any]]:
        """`[{name, source, state, tools, error?}]` (what `agentLsp.mcpServers` answers)."""
        self._rebuild()
        out = []
        for server in self._servers.values():
            item: dict[str, Any] = {
                "name": server.decl.name,
                "source": server.decl.source,
                "state": server.state,
                "tools": [t.name for t in self._tools if t.server == server.decl.name]
                if server.state == "running"
                else [],
            }
            error = server.why if server.state == "denied" else server.conn.error
            if error:
                item["error"] = error
            out.append(item)
        return out

    def find(self, name: str) -> McpTool | None:
        """A current tool by its model name or its raw `<server>__<tool>` name."""
        return self._by_name.get(name)

    def server_pid(self, name: str) -> int | None:
        server = self._servers.get(name)
        return server.conn.pid if server else None

    async def aclose(self) -> None:
        """End every server process (and its process group); safe to call twice, and from
        shutdown."""
        self._closed = True
        await asyncio.gather(
            *(s.conn.stop() for s in self._servers.values()), return_exceptions=True
        )
        self._tools, self._by_name = [], {}

    # -- inside -----------------------------------------------------------------------------
    async def _consent(self, server: _Server) -> bool:
        """Ask once (concurrent runs share the answer): allow | allowAlways | deny | None (nobody to
        ask)."""
        async with server.asked:
            if server.gate != "needs-consent":
                return False  # answered while we waited; an allowed one was started by its asker
            decl = server.decl
            remembered = (
                await asyncio.to_thread(self.store.get, self.workspace, decl.fingerprint)
                if self.store
                else None
            )
            answer: str | None = remembered
            if answer is None and self.ask_consent is not None:
                prompt = consent_prompt(
                    decl, default_cwd=str(self.roots[0]) if self.roots else None
                )
                try:
                    answer = await self.ask_consent(decl, prompt)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a failing front end is nobody to ask
                    log.warning("asking consent for MCP server %s failed: %s", decl.name, exc)
                    answer = None
            if answer in ("allowAlways", "deny") and remembered is None and self.store is not None:
                await asyncio.to_thread(
                    self.store.remember,
                    self.workspace,
                    decl,
                    "allow" if answer == "allowAlways" else "deny",
                )
            if answer in ("allow", "allowAlways"):
                server.gate = "allowed"
                return True
            server.gate = "denied"
            server.why = (
                "you denied it" if answer == "deny" else "nobody could be asked for consent"
            )
            self._notify(
                decl.name, "denied", f"MCP server `{decl.name}` was not started: {server.why}"
            )
            return False

    def _changed(self, conn: ServerConnection) -> None:
        message = {
            "starting": f"starting MCP server `{conn.name}`",
            "running": f"MCP server `{conn.name}` is running ({len(conn.tools)} tools)",
            "idle": f"MCP server `{conn.name}` stopped",
        }.get(conn.state) or conn.failure_line()
        self._notify(conn.name, conn.state, message)

    def _notify(self, name: str, state: State, message: str) -> None:
        if self.on_status is None:
            return
        try:
            self.on_status(name, state, message)
        except Exception:  # a front end's callback must not break a server's life cycle
            log.exception("on_status callback failed")

    def _rebuild(self) -> None:
        """Tool objects for the running servers; rebuilt only when some server's list changed."""
        versions = tuple(s.conn.version for s in self._servers.values())
        if versions == self._built_from:
            return
        # every declared server, running or not: names mean the same all along
        naming = Naming(self._servers)
        tools: list[McpTool] = []
        taken: set[str] = set()
        for server in self._servers.values():
            if server.conn.state != "running":
                continue
            specs = {spec.name: spec for spec in server.conn.tools if isinstance(spec.name, str)}
            for tool, names in naming.of_server(server.decl.name, specs).items():
                spec = specs[tool]
                # a server's own tool literally named like another's hashed name
                if names.name in taken:
                    log.warning(
                        "MCP tool %s of server %s is left out: its name %s is taken",
                        tool,
                        server.decl.name,
                        names.name,
                    )
                    continue
                taken.add(names.name)
                hint = getattr(getattr(spec, "annotations", None), "read_only_hint", None) is True
                tools.append(
                    McpTool(
                        server=server.decl.name,
                        tool=tool,
                        description=spec.description or spec.title or "",
                        input_schema=spec.input_schema,
                        read_only=hint and server.decl.trusted,
                        call=server.conn.call,
                        name=names.name,
                        aliases=names.aliases,
                        contested=names.contested,
                        source=server.decl.source,
                    )
                )
        self._tools = tools
        # find() answers only names that mean one tool: never a contested one.
        self._by_name = {alias: t for t in tools for alias in (t.name, *t.aliases)}
        self._built_from = versions
