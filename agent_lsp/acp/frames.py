"""What reaches the ACP SDK from stdin: one JSON-RPC object per line. A batch (a JSON array),
a JSON scalar, a line that is not JSON or an object no JSON-RPC message can be gets one error
answer here and never reaches the SDK, whose receive loop would end on it and take the
connection down (Decision 45: an ACP batch gets one -32600 error and the connection stays)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger(__name__)

# Stable ACP methods the pinned SDK does not route yet: renamed to an extension method (`_` +
# the name), which the SDK hands to AcpAgent.ext_method under the method's own name.
UNROUTED = ("session/delete",)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_READ = 1 << 16


def refusal(line: bytes) -> dict[str, Any] | None:
    """The error answer for a frame the SDK must not see; None for a frame to pass on."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return _error(PARSE_ERROR, "Parse error: a line that is not JSON", None)
    if isinstance(message, list):
        return _error(
            INVALID_REQUEST,
            "Invalid Request: batches (JSON arrays) are not supported; send one message a line",
            None,
        )
    if not isinstance(message, dict):
        return _error(INVALID_REQUEST, "Invalid Request: a message is a JSON object", None)
    request_id = message.get("id")
    id_ok = request_id is None or (
        isinstance(request_id, int | str) and not isinstance(request_id, bool)
    )
    if not id_ok:
        return _error(INVALID_REQUEST, "Invalid Request: an id is a string or a number", None)
    if "method" in message and not isinstance(message["method"], str):
        return _error(INVALID_REQUEST, "Invalid Request: method is a string", request_id)
    if "params" in message and not isinstance(message["params"], dict | list | None):
        return _error(
            INVALID_REQUEST, "Invalid Request: params are an object or an array", request_id
        )
    return None


def routed(line: bytes) -> bytes:
    """The frame as the SDK can route it (UNROUTED methods as extension methods)."""
    if b"session/delete" not in line:
        return line
    message = json.loads(line)
    if message.get("method") not in UNROUTED:
        return line
    message["method"] = "_" + message["method"]
    return json.dumps(message).encode()


def _error(code: int, message: str, request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def filtered(
    source: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int
) -> asyncio.StreamReader:
    """A reader holding only the frames of `source` the SDK can take; the others are answered
    on `writer` (each answer one whole line, written in one call like the SDK's own, so lines
    never interleave). Lines are read in pieces, so a line of any length is read in time
    proportional to it."""
    out = asyncio.StreamReader(limit=limit)

    async def pump() -> None:
        try:
            while True:
                line = await _read_line(source)
                if not line:
                    break
                if not line.strip():
                    continue
                answer = refusal(line)
                if answer is None:
                    line = routed(line.rstrip(b"\n"))
                    out.feed_data(line + b"\n")
                    continue
                log.warning("ACP: refused a frame (%s)", answer["error"]["message"])
                writer.write((json.dumps(answer) + "\n").encode())
                await writer.drain()
        except (ConnectionError, OSError) as exc:  # the client went away: end of input
            log.debug("ACP input ended: %s", exc)
        finally:
            out.feed_eof()

    task = asyncio.ensure_future(pump())
    _PUMPS.add(task)
    task.add_done_callback(_PUMPS.discard)
    return out


_PUMPS: set[asyncio.Future[None]] = set()  # a strong reference while each pump runs


async def _read_line(source: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        try:
            chunks.append(await source.readuntil(b"\n"))
            return b"".join(chunks)
        except asyncio.LimitOverrunError as exc:
            chunks.append(await source.readexactly(exc.consumed))
        except asyncio.IncompleteReadError as exc:
            chunks.append(exc.partial)
            return b"".join(chunks)
