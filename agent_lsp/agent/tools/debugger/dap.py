"""A small typed client of the Debug Adapter Protocol over a process's stdio. DAP's framing is
LSP's (`Content-Length: N\\r\\n\\r\\n` then N bytes of JSON); the core never imports pygls, so
the few lines of framing live here."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_MESSAGE = 64 * 1024 * 1024


class DapError(Exception):
    """The adapter refused a request, went away, or spoke something that is not DAP."""


@dataclass
class DapEvent:
    event: str
    body: dict[str, Any] = field(default_factory=dict)


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One framed message, or None at the end of the stream."""
    length = None
    while True:
        line = await reader.readline()
        if not line:
            return None
        text = line.decode("ascii", errors="replace").strip()
        if not text:
            break
        name, _, value = text.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None or not 0 <= length <= MAX_MESSAGE:
        raise DapError(f"bad DAP header (Content-Length {length})")
    data = await reader.readexactly(length)
    message = json.loads(data)
    if not isinstance(message, dict):
        raise DapError("a DAP message is not an object")
    return message


def frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class DapClient:
    """Requests answered by sequence number; events go to a queue (and `on_event` first)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: Writer,
        on_event: Callable[[DapEvent], None] | None = None,
    ):
        self._reader = reader
        self._writer = writer
        self._seq = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[DapEvent] = asyncio.Queue()
        self.on_event = on_event
        self._task = asyncio.ensure_future(self._read())
        self.closed = False

    async def _read(self) -> None:
        try:
            while (message := await read_message(self._reader)) is not None:
                self._dispatch(message)
        except (DapError, ValueError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(DapError("the debug adapter went away"))
            self._pending.clear()
            self.events.put_nowait(DapEvent("agentLsp/closed"))

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "response":
            future = self._pending.pop(int(message.get("request_seq", -1)), None)
            if future is not None and not future.done():
                future.set_result(message)
        elif kind == "event":
            event = DapEvent(str(message.get("event")), message.get("body") or {})
            if self.on_event is not None:
                self.on_event(event)
            self.events.put_nowait(event)
        elif kind == "request":  # reverse requests (runInTerminal, startDebugging): refused
            self._send(
                {
                    "type": "response",
                    "request_seq": message.get("seq"),
                    "command": message.get("command"),
                    "success": False,
                    "message": "not supported by agent-lsp",
                }
            )

    def _send(self, message: dict[str, Any]) -> int:
        self._seq += 1
        message["seq"] = self._seq
        self._writer.write(frame(message))
        return self._seq

    def send(self, command: str, arguments: dict[str, Any] | None = None) -> asyncio.Future[Any]:
        """Send a request; the future holds the response's body (DapError when refused)."""
        if self.closed:
            raise DapError("the debug adapter went away")
        seq = self._send({"type": "request", "command": command, "arguments": arguments or {}})
        raw: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[seq] = raw
        return asyncio.ensure_future(_body(command, raw))

    async def request(self, command: str, arguments: dict[str, Any] | None = None) -> Any:
        return await self.send(command, arguments)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
        with contextlib.suppress(Exception):
            self._writer.close()


async def _body(command: str, raw: asyncio.Future[dict[str, Any]]) -> Any:
    response = await raw
    if not response.get("success"):
        text = response.get("message") or "failed"
        error = (response.get("body") or {}).get("error") or {}
        detail = error.get("format") if isinstance(error, dict) else None
        raise DapError(f"{command}: {detail or text}")
    return response.get("body") or {}
