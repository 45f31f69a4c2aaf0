"""Our stdio transport for the SDK's `Client`: the server runs under the agent's reaper, and its
stdout is read through a bounded line reader.

Why not the SDK's `stdio_client`: its reader decodes stdout strictly, so one line that is not
UTF-8 (a Latin-1 log line) ends its reader while the process lives on, and every later call waits
out the request timeout; it keeps a whole line in memory, however long; and it starts the server
in a process group that a `setsid` helper leaves, so the helper outlives us. Here:

- a line that is not UTF-8 or not a JSON-RPC message is logged and skipped; the next message is
  read as usual. Only a server that writes nothing but such lines (BAD_LINES_LIMIT in a row) has
  its connection closed, so the pending call fails at once with the reason, not at its timeout.
- a message longer than MAX_MESSAGE_BYTES is never kept: when its id shows which of our requests
  it answers (the id comes first, or last, in every SDK's output), that request gets a JSON-RPC
  error saying the answer was too large, and the connection goes on; otherwise the connection is
  closed with that reason (the connection restarts it per its own rules).
- the server runs under `agent/exec/reaper.py --session`: a child subreaper that kills every
  descendant, `setsid` escapes included, when the server ends, when we stop it, and when
  agent-lsp dies (even by SIGKILL: PR_SET_PDEATHSIG). The server itself leads a new session, as
  with the SDK, so its process group can be signalled without the reaper.

Imported only when a stdio server starts (it imports anyio and the SDK's types).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
from types import TracebackType
from typing import Any, TextIO

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from agent_lsp.agent.exec.process import REAPER
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.wellformed import wellformed_value
from agent_lsp.mcp.launch import Launch
from agent_lsp.mcp.process import forget_reaper, keep_reaper, server_pid

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 10 * 1024 * 1024  # one JSON-RPC message from a server
# lines in a row that are no JSON-RPC message: the server only writes garbage
BAD_LINES_LIMIT = 1000
_EDGE = 4096  # what is kept of the head and the tail of a line too long to keep
_READ = 65536
_EOF_GRACE = 2.0  # for the server to exit after its stdin closes (the SDK's own grace)
_TERM_GRACE = 2.0  # after SIGTERM, before the reaper kills everything
_FLUSH = 0.5  # for the writer to hand over what it accepted before stdin closes
# our JSON-RPC error code for an answer refused for its size (not one the SDK or MCP uses)
TOO_LARGE = -32090

_ID = rb'(-?\d+|"(?:[^"\\]|\\.){0,200}")'
_HEAD_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*'
    + _ID
    + rb'\s*,\s*"(result|error|method)"'
)
_HEAD_METHOD = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"method"\s*:')
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def reaped_server(command: str, args: tuple[str, ...]) -> list[str]:
    import sys

    return [sys.executable, "-I", "-S", str(REAPER), "--session", "--", command, *args]


class _Oversize:
    """A line past the cap: its first and last bytes and its size, never the rest."""

    def __init__(self, head: bytearray):
        self.head = bytes(head[:_EDGE])
        self.tail = bytes(head[-_EDGE:])
        self.size = len(head)
        self.answered = False  # its request got our error already (the id was in the head)

    def add(self, data: bytes) -> None:
        self.size += len(data)
        self.tail = (self.tail + data)[-_EDGE:]


class BoundedStdio:
    """An async context manager yielding (read stream, write stream) for `mcp.Client`."""

    def __init__(self, launch: Launch, errlog: TextIO, name: str):
        self.launch = launch
        self.errlog = errlog
        self.name = name
        self.reaper_pid: int | None = None
        self.broken: str | None = None  # why we closed the connection ourselves
        self._process: Process | None = None
        self._pending: set[Any] = set()  # ids of our requests not answered yet
        self._bad = 0
        self._stack = contextlib.AsyncExitStack()

    # -- the context manager ----------------------------------------------------------------
    async def __aenter__(
        self,
    ) -> tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]:
        env = {**get_default_environment(), **self.launch.env}
        command = self.launch.command
        if os.sep not in command and find_program(command, env.get("PATH", "")) is None:
            raise FileNotFoundError(2, "No such file or directory", command)
        self._process = process = await anyio.open_process(
            reaped_server(command, self.launch.args),
            env=env,
            cwd=self.launch.cwd,
            stderr=self.errlog,
            start_new_session=True,
        )
        self.reaper_pid = process.pid
        keep_reaper(process.pid)
        # No await between the spawn and the task group: a cancel in the gap would leak the process.
        self._to_session, self._read = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self._write, self._from_session = anyio.create_memory_object_stream[SessionMessage](0)
        self._writer_done = anyio.Event()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._read_stdout)
        self._group.start_soon(self._write_stdin)
        return self._read, self._write

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        # the server must end even when our caller is cancelled
        with anyio.CancelScope(shield=True):
            await self._shutdown()
        self._group.cancel_scope.cancel()
        return await self._group.__aexit__(kind, exc, tb)

    # -- stdin --------------------------------------------------------------------------------
    async def _write_stdin(self) -> None:
        assert self._process is not None and self._process.stdin is not None
        try:
            async with self._from_session:
                async for item in self._from_session:
                    message = item.message
                    if isinstance(message, types.JSONRPCRequest):
                        self._pending.add(message.id)
                    elif (
                        isinstance(message, types.JSONRPCNotification)
                        and message.method == "notifications/cancelled"
                    ):
                        self._pending.discard((message.params or {}).get("requestId"))
                    data = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await self._process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await self._to_session.aclose()  # the session sees the end instead of a request hanging
        finally:
            self._writer_done.set()

    # -- stdout -------------------------------------------------------------------------------
    async def _read_stdout(self) -> None:
        """Read to the end whatever happens (a server blocked on a full pipe cannot exit);
        deliver lines while the session listens and the connection is not broken."""
        assert self._process is not None and self._process.stdout is not None
        line = bytearray()
        oversize: _Oversize | None = None
        try:
            async with self._to_session:
                while True:
                    try:
                        chunk = await self._process.stdout.receive(_READ)
                    except (
                        anyio.EndOfStream,
                        anyio.ClosedResourceError,
                        anyio.BrokenResourceError,
                        OSError,
                    ):
                        return
                    start = 0
                    while start < len(chunk):
                        end = chunk.find(b"\n", start)
                        piece = chunk[start:] if end < 0 else chunk[start:end]
                        if oversize is not None:
                            oversize.add(piece)
                        else:
                            line += piece
                            if len(line) > MAX_MESSAGE_BYTES:
                                oversize = _Oversize(line)
                                line = bytearray()
                                await self._early_refusal(oversize)
                        if end < 0:
                            break
                        start = end + 1
                        if oversize is not None:
                            await self._refuse(oversize)
                            oversize = None
                        else:
                            await self._line(bytes(line))
                            line = bytearray()
                        if self.broken is not None:
                            return  # only the drain is left
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            await self._drain()

    async def _drain(self) -> None:
        with (
            anyio.CancelScope(shield=True),
            contextlib.suppress(
                anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
            ),
        ):
            assert self._process is not None and self._process.stdout is not None
            while True:
                await self._process.stdout.receive(_READ)

    async def _deliver(self, item: SessionMessage | Exception) -> None:
        if self.broken is None:
            await self._to_session.send(item)

    async def _line(self, data: bytes) -> None:
        if not data.strip():
            return
        try:
            message = _message(data.decode("utf-8"))
        except UnicodeDecodeError:
            # an answer holding a surrogate's UTF-8 bytes (or any bad byte) is still that answer
            message = _message(data.decode("utf-8", "replace"))
            if message is None:
                await self._bad_line("a line that is not UTF-8", data)
                return
        if message is None:
            await self._bad_line("a line that is not a JSON-RPC message", data)
            return
        self._bad = 0
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._pending.discard(message.id)
        await self._deliver(SessionMessage(message))

    async def _bad_line(self, what: str, data: bytes) -> None:
        self._bad += 1
        if self._bad <= 3:  # a few, then only the verdict
            log.warning(
                "MCP server %s wrote %s on stdout (skipped): %r", self.name, what, data[:200]
            )
        if self._bad >= BAD_LINES_LIMIT:
            await self._break(
                f"the server wrote {self._bad} lines in a row on stdout "
                f"that are not JSON-RPC messages (the last: {data[:80]!r})"
            )

    async def _early_refusal(self, big: _Oversize) -> None:
        """The id is in the head (every Python SDK server): answer our request now, without
        waiting for the end of a line that may never come."""
        match = _HEAD_ID.match(big.head)
        if (
            match
            and match.group(2) != b"method"
            and (request := _request_id(match.group(1))) in self._pending
        ):
            big.answered = True
            await self._too_large(request, big.size, "at least ")

    async def _refuse(self, big: _Oversize) -> None:
        if big.answered:
            self._bad = 0
            return
        if _HEAD_METHOD.match(big.head) or (
            (match := _HEAD_ID.match(big.head)) and match.group(2) == b"method"
        ):
            await self._bad_line(
                f"a request or notification of {megabytes(big.size)}, "
                f"over the limit of {megabytes(MAX_MESSAGE_BYTES)}",
                big.head[:200],
            )
            return
        found = _HEAD_ID.match(big.head) or _TAIL_ID.search(big.tail)
        request = _request_id(found.group(1)) if found else None
        if request is not None and request in self._pending:
            self._bad = 0
            await self._too_large(request, big.size, "")
            return
        await self._break(
            f"the server sent a message of {megabytes(big.size)}, "
            f"over the limit of {megabytes(MAX_MESSAGE_BYTES)} per message, "
            "and it does not say which request it answers"
        )

    async def _too_large(self, request: Any, size: int, qualifier: str) -> None:
        self._pending.discard(request)
        log.warning(
            "MCP server %s: an answer of %s%s refused (limit %s)",
            self.name,
            qualifier,
            megabytes(size),
            megabytes(MAX_MESSAGE_BYTES),
        )
        text = (
            f"the server's answer is {qualifier}{megabytes(size)}, "
            f"over agent-lsp's limit of {megabytes(MAX_MESSAGE_BYTES)} "
            "per MCP message; it was refused unread (ask the tool for less, e.g. a narrower query)"
        )
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request, error=types.ErrorData(code=TOO_LARGE, message=text)
        )
        await self._deliver(SessionMessage(error))

    async def _break(self, reason: str) -> None:
        """Close the connection ourselves: pending calls fail now with `reason`, not at their
        timeout."""
        if self.broken is not None:
            return
        log.warning("MCP server %s: %s; closing the connection", self.name, reason)
        self.broken = reason
        await self._to_session.aclose()

    # -- the end ------------------------------------------------------------------------------
    async def _shutdown(self) -> None:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        self._read.close()
        self._write.close()
        with anyio.move_on_after(_FLUSH):
            await self._writer_done.wait()
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
        # The reaper exits once the server has, after killing what the server left behind.
        if not await _exited(process, _EOF_GRACE):
            server = server_pid(process.pid)
            if server is not None:  # the server's own group first: it may clean up on SIGTERM
                with contextlib.suppress(OSError):
                    os.killpg(server, signal.SIGTERM)
                await _exited(process, _TERM_GRACE / 2)
            with contextlib.suppress(OSError):
                # the reaper SIGKILLs every descendant, then exits
                os.kill(process.pid, signal.SIGTERM)
            if not await _exited(process, _TERM_GRACE):
                with contextlib.suppress(OSError):
                    os.kill(process.pid, signal.SIGKILL)
                if not await _exited(process, _TERM_GRACE):
                    log.warning(
                        "MCP server %s: its reaper %d is still alive after SIGKILL",
                        self.name,
                        process.pid,
                    )
        forget_reaper(process.pid)
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdout.aclose()
        for stream in (self._read, self._write, self._to_session, self._from_session):
            await stream.aclose()
        with anyio.move_on_after(_FLUSH), contextlib.suppress(Exception):
            await process.aclose()  # everything that held the pipes is dead by now


async def _exited(process: Process, timeout: float) -> bool:
    """Poll returncode, not wait(): asyncio's wait also waits for the pipes to close."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:  # noqa: ASYNC110 (no event tells it, and wait() is what we avoid)
            await anyio.sleep(0.01)
    return process.returncode is not None


def _message(text: str) -> Any:
    """The JSON-RPC message of a line, or None. A lone surrogate escape (`"\\ud800"`, valid
    JSON that pydantic's parser refuses) is read with U+FFFD in its place: skipping the line
    would leave the call it answers waiting out its timeout."""
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:
        pass
    import json

    try:
        value = wellformed_value(json.loads(text))
        return types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except (ValueError, RecursionError):
        return None


def _request_id(raw: bytes) -> Any:
    import json

    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def transport(launch: Launch, errlog: TextIO, name: str) -> BoundedStdio:
    return BoundedStdio(launch, errlog, name)
