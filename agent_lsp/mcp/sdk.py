"""The seam to the official `mcp` SDK: the only module that imports it, when a server starts."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from agent_lsp.mcp.launch import Launch

_LIST_PAGES = 100
_loaded: asyncio.Future[None] | None = None


async def load_sdk() -> None:
    """Import `mcp` (~1.5 s) in a thread, once: the event loop keeps serving the editor
    meanwhile."""
    global _loaded
    if "mcp.client.streamable_http" in sys.modules:
        return
    if _loaded is None or _loaded.get_loop() is not asyncio.get_running_loop():
        _loaded = asyncio.ensure_future(asyncio.to_thread(_import_sdk))
    await asyncio.shield(_loaded)


def _import_sdk() -> None:
    import mcp.client.stdio  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401

    import agent_lsp.mcp.stdio  # noqa: F401


def stdio_transport(launch: Launch, errlog: Any, name: str) -> Any:
    """Our own stdio transport (stdio.py: bounded reads, the server under the reaper), not the
    SDK's."""
    from agent_lsp.mcp.stdio import BoundedStdio

    return BoundedStdio(launch, errlog, name)


async def http_transport(stack: AsyncExitStack, launch: Launch) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults: 30 s to connect/write, 300 s to read a held-open stream.
    from agent_lsp.mcp.http_text import WellFormedTransport

    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers=launch.headers,
            timeout=httpx2.Timeout(30.0, read=300.0),
            transport=WellFormedTransport(),  # an answer with a lone surrogate is still read
        )
    )
    return streamable_http_client(launch.url, http_client=http)


def make_client(transport: Any, on_message: Any) -> Any:
    """The SDK's `Client`: `auto` negotiates 2026-07-28 with servers that speak it and falls back
    to the initialize handshake; no response cache (we keep the tool list ourselves)."""
    from mcp import Client
    from mcp.types import Implementation

    from agent_lsp import __version__

    return Client(
        transport,
        mode="auto",
        cache=None,
        message_handler=on_message,
        client_info=Implementation(name="agent-lsp", version=__version__),
    )


async def list_all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def is_modern(client: Any) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


class WatchedRead:
    """The transport's read stream, telling us when the connection ends: the server exited or
    hung up, or the SDK's reader stopped on a transport failure."""

    def __init__(self, inner: Any, on_end: Callable[[], None]):
        self._inner = inner
        self._on_end = on_end

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except Exception:
            self._on_end()
            raise

    def __aiter__(self) -> WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, Exception):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        self._on_end()  # the SDK stopped reading, for whatever reason: this connection is over
        return await self._inner.__aexit__(*exc)


def describe_error(exc: BaseException) -> str:
    """The innermost useful message of an exception (anyio wraps failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command not found: {exc.filename}"
    text = str(exc).strip()
    return (
        f"{type(exc).__name__}: {text}"
        if text and not text.startswith(type(exc).__name__)
        else (text or type(exc).__name__)
    )
