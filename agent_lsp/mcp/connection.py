"""One MCP server: a background task owns the SDK's contexts; calls come from any task.

The `mcp` SDK's anyio task groups must be entered and exited in one task, so each server
gets a long-lived task that opens the transport and the `Client`, lists tools, then waits
for a stop or for the connection to end. Calls are made from the caller's own task on the
shared `Client` (its request/response plumbing is task-agnostic), so a cancelled caller
gets CancelledError at once and the SDK sends the server a `notifications/cancelled`,
while the connection lives on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

from agent_lsp.agent.tools.base import ToolError
from agent_lsp.mcp.config import McpDeclaration
from agent_lsp.mcp.display import failure_message
from agent_lsp.mcp.launch import Launch, LaunchError
from agent_lsp.mcp.process import StderrTail, end_process_group, keep_group, server_pid
from agent_lsp.mcp.sdk import (
    WatchedRead,
    describe_error,
    http_transport,
    is_modern,
    list_all_tools,
    load_sdk,
    make_client,
    stdio_transport,
)

log = logging.getLogger(__name__)

ConnectionState = Literal["idle", "starting", "running", "failed"]
_STOP_GRACE = 8.0  # the SDK's own shutdown is bounded at ~6 s (stdin close, SIGTERM, SIGKILL)


class ServerConnection:
    def __init__(
        self,
        decl: McpDeclaration,
        *,
        launch: Callable[[], Launch],
        request_timeout: float,
        start_timeout: float,
        on_change: Callable[[ServerConnection], None],
    ):
        self.decl = decl
        self.name = decl.name
        self._launch = launch
        self.request_timeout = request_timeout
        self.start_timeout = start_timeout
        self._on_change = on_change
        self.state: ConnectionState = "idle"
        self.reason = ""  # why it failed, without the stderr tail
        self.stderr_tail: list[str] = []
        self.failed_running = False  # it had been running (a crash), not a failed start
        self.crashes = 0
        self.tools: list[Any] = []  # the server's mcp `Tool` objects
        self.version = 0  # bumped whenever `tools` changes
        self.pid: int | None = None
        self._client: Any = None
        self._transport: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[bool] | None = None
        self._wake = asyncio.Event()
        self._dead = False
        self._stopping = False
        self._stale = False
        self._lock = asyncio.Lock()
        self._refresh_lock = asyncio.Lock()

    @property
    def error(self) -> str | None:
        if self.state != "failed":
            return None
        if self.stderr_tail:
            return f"{self.reason}\nlast stderr:\n" + "\n".join(self.stderr_tail)
        return self.reason

    def failure_line(self) -> str:
        return failure_message(
            self.name, self.reason, self.stderr_tail, during_start=not self.failed_running
        )

    async def ensure_running(self) -> bool:
        """Start (or restart once after a crash) unless it failed for good; True when running."""
        async with self._lock:
            if self._dead and self._task is not None and not self._task.done():
                # the connection ended: let the task finish tearing down
                await asyncio.wait({self._task})
            if self._stopping:
                return False
            if self.state == "running":
                return True
            if self.state == "idle" or (
                self.state == "failed" and self.failed_running and self.crashes == 1
            ):
                self._spawn()
            ready = self._ready
        return bool(ready is not None and await asyncio.shield(ready) and self.state == "running")

    def _spawn(self) -> None:
        self._set("starting")
        self._transport = None
        self._ready = asyncio.get_running_loop().create_future()
        self._dead = False
        self._stale = False
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._serve(self._ready), name=f"mcp-server:{self.name}")

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """tools/call; every failure is a ToolError the model reads, never an exception out of the
        loop."""
        if not await self.ensure_running():
            raise ToolError(f"MCP server `{self.name}` is not running: {self.reason or self.state}")
        client = self._client
        try:
            async with asyncio.timeout(self.request_timeout) as deadline:
                return await client.call_tool(tool, arguments)
        except TimeoutError:
            if deadline.expired():
                raise ToolError(
                    f"MCP server `{self.name}` did not answer within "
                    f"{self.request_timeout:g} s (tool {tool})"
                ) from None
            raise ToolError(f"MCP server `{self.name}`: the call to {tool} timed out") from None
        except Exception as exc:
            if self._dead:
                retry = " (it will be restarted once on the next call)" if self.crashes == 0 else ""
                if broken := self._broken():
                    raise ToolError(
                        f"MCP server `{self.name}`: {broken}; "
                        f"agent-lsp closed the connection during the call to {tool}{retry}"
                    ) from None
                raise ToolError(
                    f"MCP server `{self.name}` stopped during the call to {tool}{retry}"
                ) from None
            raise ToolError(
                f"MCP server `{self.name}` failed the call to {tool}: {describe_error(exc)}"
            ) from None

    async def refresh_if_stale(self) -> None:
        """After `notifications/tools/list_changed`: list the tools again."""
        if not self._stale or self.state != "running":
            return
        async with self._refresh_lock:
            if not self._stale:
                return
            self._stale = False
            try:
                async with asyncio.timeout(self.request_timeout):
                    tools = await list_all_tools(self._client)
            except Exception as exc:
                log.warning(
                    "MCP server %s: listing tools again failed: %s", self.name, describe_error(exc)
                )
                return
            self.tools = tools
            self.version += 1
            log.info("MCP server %s: the tool list changed (%d tools)", self.name, len(tools))

    async def stop(self) -> None:
        """End the server (and its process group); safe to call twice."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=_STOP_GRACE)
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if self.state in ("starting", "running"):
            self._set("idle")

    def _set(self, state: ConnectionState) -> None:
        if state != self.state or state == "failed":
            self.state = state
            self._on_change(self)

    # -- the background task --------------------------------------------------------------
    async def _serve(self, ready: asyncio.Future[bool]) -> None:
        reached = False
        stderr: StderrTail | None = None
        try:
            launch = self._launch()
            await load_sdk()
            async with AsyncExitStack() as stack:
                if self.decl.transport == "stdio":
                    stderr = StderrTail(self.name)
                    transport = stdio_transport(launch, stderr.writer, self.name)
                else:
                    transport = await http_transport(stack, launch)
                client = make_client(self._watch(transport, stderr), self._on_message)
                # asyncio's timeout, not anyio's: an anyio scope must not close over the client's
                # open ones.
                async with asyncio.timeout(self.start_timeout):
                    await stack.enter_async_context(client)
                    tools = await list_all_tools(client)
                self._client, self.tools, self.version = client, tools, self.version + 1
                self._find_server(transport)
                reached = True
                self.failed_running = False
                self._set("running")
                ready.set_result(True)
                listener = asyncio.create_task(self._listen(client))
                try:
                    while not (self._stopping or self._dead):
                        await self._wake.wait()
                        self._wake.clear()
                finally:
                    listener.cancel()
                    await asyncio.wait({listener})
        except asyncio.CancelledError:
            self.reason = "stopped"
            raise
        except Exception as exc:
            if not reached:
                self.reason = str(exc) if isinstance(exc, LaunchError) else describe_error(exc)
                if isinstance(exc, TimeoutError):
                    self.reason = f"no answer to the MCP handshake within {self.start_timeout:g} s"
                elif broken := self._broken():
                    self.reason = (
                        f"{broken}; agent-lsp closed the connection during the MCP handshake"
                    )
                elif self._dead:
                    self.reason = (
                        "it exited during the MCP handshake"
                        if self.decl.transport == "stdio"
                        else f"the connection closed during the MCP handshake ({self.reason})"
                    )
            log.debug("MCP server %s ended with an error", self.name, exc_info=True)
        finally:
            self._client = None
            if self.pid is not None:
                pid, self.pid = self.pid, None
                await end_process_group(pid)
            if stderr is not None:
                self.stderr_tail = stderr.finish()
            self.tools, self.version = [], self.version + 1
            if not ready.done():
                ready.set_result(False)
            if self._stopping:
                self._set("idle")
            elif not reached:
                self.failed_running = False
                self._set("failed")
            else:
                self.crashes += 1
                self.failed_running = True
                self.reason = (
                    "the server exited"
                    if self.decl.transport == "stdio"
                    else "the connection was closed"
                )
                if broken := self._broken():
                    self.reason = f"{broken}; agent-lsp closed the connection"
                if self.crashes == 1:
                    self.reason += " (it will be restarted once when next needed)"
                self._set("failed")

    @asynccontextmanager
    async def _watch(
        self, transport: Any, stderr: StderrTail | None
    ) -> AsyncIterator[tuple[Any, Any]]:
        self._transport = transport
        async with transport as (read, write):
            # spawned: only the server (and its reaper) hold the pipe's write end now
            if stderr is not None:
                stderr.close_writer()
            yield WatchedRead(read, self._on_eof), write

    def _broken(self) -> str | None:
        """Why our stdio transport closed the connection itself (a server writing garbage), if it
        did."""
        return getattr(self._transport, "broken", None)

    def _find_server(self, transport: Any) -> None:
        """The server process (the reaper's child; it answered, so it exists): what `pid` names."""
        reaper = getattr(transport, "reaper_pid", None)
        if reaper is not None:
            self.pid = server_pid(reaper)
            if self.pid is not None:
                keep_group(self.pid)

    def _on_eof(self) -> None:
        self._dead = True
        self._wake.set()

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True
        elif isinstance(message, Exception):
            log.debug("MCP server %s: transport error: %s", self.name, message)

    async def _listen(self, client: Any) -> None:
        """2026-07-28 servers send list_changed only on a `subscriptions/listen` stream."""
        if not is_modern(client):
            return
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._stale = True
        except Exception as exc:
            log.debug("MCP server %s: no tools subscription: %s", self.name, describe_error(exc))
