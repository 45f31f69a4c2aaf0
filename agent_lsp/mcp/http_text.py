"""Answers of an MCP server over HTTP made readable: a lone surrogate escape (`"\\ud800"`,
valid JSON that pydantic's parser refuses) becomes `\\ufffd` in the response bytes, so the SDK
reads the answer instead of failing the call with a parse error. Lines are rewritten whole (a
JSON escape never spans a newline, in a JSON body or an SSE stream), so a backslash's parity
is known from the line's start."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2

# an escaped backslash (kept, and its parity settled), a surrogate pair (kept), a lone half
_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def _fixed(match: re.Match[bytes]) -> bytes:
    text = match.group()
    return text if len(text) in (2, 12) else b"\\ufffd"


def well_formed_lines(data: bytes) -> bytes:
    return _ESCAPE.sub(_fixed, data) if b"\\u" in data else data


class _Lines(httpx2.AsyncByteStream):
    def __init__(self, inner: Any):
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held = b""
        async for chunk in self._inner:
            held += chunk
            cut = held.rfind(b"\n") + 1
            if cut:
                yield well_formed_lines(held[:cut])
                held = held[cut:]
        if held:
            yield well_formed_lines(held)

    async def aclose(self) -> None:
        await self._inner.aclose()


class WellFormedTransport(httpx2.AsyncBaseTransport):
    """httpx's transport with every response body passed through `well_formed_lines`."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Lines(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
