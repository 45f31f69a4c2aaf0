"""Wire layer of the scripted model server (:mod:`agent_lsp.testing.scripted_model`).

* :class:`Reply` (with :class:`ToolCallSpec` and :class:`UsageSpec`): the pydantic
  models that validate one scripted reply entry.
* Payload builders: the streamed ``chat.completion.chunk`` SSE events, the non-streaming
  ``chat.completion`` object and OpenAI-shaped error bodies, as the OpenAI API sends them.
* A minimal HTTP/1.1 layer over asyncio streams (:func:`read_request`, :class:`Responder`):
  keep-alive, ``Content-Length`` or chunked request bodies, chunked responses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Fault = Literal["status", "cut", "no_finish", "hang", "garbage"]
DONE = b"data: [DONE]\n\n"
GARBAGE = b"data: {this is not json]\n\n"


class ToolCallSpec(BaseModel):
    """One scripted tool call: ``arguments`` is JSON-encoded if a dict, sent verbatim if a str."""

    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class UsageSpec(BaseModel):
    """The usage a reply reports: `cached_tokens` as OpenAI's prompt_tokens_details, `cost` as
    OpenRouter's own figure (US dollars)."""

    model_config = ConfigDict(extra="forbid")
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    cost: float | None = Field(default=None, ge=0)


class Reply(BaseModel):
    """One scripted reply entry (see :mod:`agent_lsp.testing.scripted_model`)."""

    model_config = ConfigDict(extra="forbid")
    text: str = ""
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    refusal: str | None = None
    """OpenAI's refusal: streamed as `delta.refusal` pieces, no content, finish `stop`."""
    chunk_size: int = Field(default=16, ge=1)
    ttft: float = Field(default=0.0, ge=0)
    chunk_delay: float = Field(default=0.0, ge=0)
    finish_reason: str | None = None
    usage: UsageSpec | None = None
    fault: Fault | None = None
    status: int | None = Field(default=None, ge=400, le=599)
    retry_after: float | None = Field(default=None, ge=0)
    message: str | None = None
    body: Any = None
    """With fault "status": the error body sent verbatim (a str as text/plain, else as JSON)."""
    raw: list[str] | None = None
    """A whole SSE answer sent verbatim, one HTTP chunk per item (a real server's recording)."""
    raw_split: int | None = Field(default=None, ge=1)
    """With ``raw``: the bytes re-cut into chunks of this size (a UTF-8 character across chunks)."""
    repeat: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _check_fault(self) -> Reply:
        if self.status is not None and self.fault is None:
            self.fault = "status"  # a bare `status` implies the status fault
        if self.fault == "status" and self.status is None:
            raise ValueError('fault "status" needs a "status" code (e.g. 429, 500, 503)')
        if self.fault != "status" and (self.status, self.retry_after) != (None, None):
            raise ValueError('"status"/"retry_after" only make sense with fault "status"')
        if self.body is not None and self.fault != "status":
            raise ValueError('"body" only makes sense with fault "status"')
        if self.raw_split is not None and self.raw is None:
            raise ValueError('"raw_split" only makes sense with "raw"')
        return self

    def effective_finish_reason(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def completion_chars(self) -> int:
        return len(self.text) + sum(len(c.name) + len(c.arguments_text()) for c in self.tool_calls)


def message_text(content: Any) -> str:
    """The text of a message ``content`` (a string or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def prompt_chars(messages: Iterable[Any]) -> int:
    total = 0
    for msg in messages:
        if not isinstance(msg, Mapping):
            continue
        total += len(message_text(msg.get("content")))
        for call in msg.get("tool_calls") or ():
            fn = call.get("function", {}) if isinstance(call, Mapping) else {}
            total += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
    return total


def split_text(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def split_fragments(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into about ``parts`` non-empty fragments."""
    size = max(1, -(-len(text) // parts))
    return split_text(text, size)


def sse_event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def status_error(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-shaped error body for an HTTP ``status`` fault."""
    kinds = {
        429: ("requests", "rate_limit_exceeded"),
        401: ("invalid_request_error", "invalid_api_key"),
    }
    default = ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    return error_body(message, *kinds.get(status, default))


@dataclass
class ReplyPayload:
    """Everything one answer needs, rendered for a given request."""

    reply: Reply
    completion_id: str
    model: str
    created: int
    call_ids: list[str]
    usage: dict[str, int]

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def content_events(self) -> Iterator[bytes]:
        """Role delta, text deltas, then tool call deltas (no finish_reason anywhere)."""
        r = self.reply
        first: dict[str, Any] = {"role": "assistant", "content": "" if r.text else None}
        if r.refusal is not None:
            first["refusal"] = ""
        yield sse_event(self._chunk(first))
        for piece in split_text(r.refusal or "", r.chunk_size):
            yield sse_event(self._chunk({"refusal": piece}))
        for piece in split_text(r.text, r.chunk_size):
            yield sse_event(self._chunk({"content": piece}))
        for index, (call, call_id) in enumerate(zip(r.tool_calls, self.call_ids, strict=True)):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield sse_event(self._chunk({"tool_calls": [head]}))
            for frag in split_fragments(call.arguments_text()):
                part = {"index": index, "function": {"arguments": frag}}
                yield sse_event(self._chunk({"tool_calls": [part]}))

    def finish_event(self) -> bytes:
        return sse_event(self._chunk({}, self.reply.effective_finish_reason()))

    def usage_event(self) -> bytes:
        chunk = self._chunk({})
        chunk["choices"] = []
        chunk["usage"] = self.usage
        return sse_event(chunk)

    def completion(self, finish: bool = True) -> dict[str, Any]:
        r = self.reply
        message: dict[str, Any] = {"role": "assistant", "content": r.text, "refusal": r.refusal}
        if r.tool_calls:
            message["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_text()},
                }
                for c, cid in zip(r.tool_calls, self.call_ids, strict=True)
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": r.effective_finish_reason() if finish else None,
                }
            ],
            "usage": self.usage,
        }


def raw_chunks(reply: Reply) -> list[bytes]:
    """The HTTP chunks of a verbatim (``raw``) answer."""
    items = [item.encode("utf-8") for item in reply.raw or ()]
    if reply.raw_split is None:
        return items
    data = b"".join(items)
    return [data[i : i + reply.raw_split] for i in range(0, len(data), reply.raw_split)]


async def send_raw(resp: Responder, reply: Reply) -> None:
    """A verbatim (``raw``) SSE answer, chunk by chunk."""
    await resp.head(
        200, {"content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"}
    )
    for i, data in enumerate(raw_chunks(reply)):
        if i and reply.chunk_delay:
            await asyncio.sleep(reply.chunk_delay)
        await resp.chunk(data)
    await resp.write(b"0\r\n\r\n")


def verbatim_body(body: Any) -> tuple[bytes, str]:
    """An error body as a server sent it, with its content type."""
    if isinstance(body, str):
        return body.encode("utf-8"), "text/plain; charset=utf-8"
    return json.dumps(body).encode(), "application/json"


# -- minimal HTTP/1.1 over asyncio streams ---------------------------------------------
@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


async def read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """Read one request; ``None`` on a clean EOF. Malformed input raises ``ValueError``."""
    line = b"\r\n"
    while line in (b"\r\n", b"\n"):
        line = await reader.readline()
    if not line:
        return None
    method, target, version = line.decode("latin-1").strip().split(" ", 2)
    headers: dict[str, str] = {}
    while (h := await reader.readline()) not in (b"\r\n", b"\n"):
        if not h:
            raise asyncio.IncompleteReadError(h, None)
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while size := int((await reader.readline()).split(b";")[0], 16):
            parts.append((await reader.readexactly(size + 2))[:-2])
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        body = b"".join(parts)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if target.startswith(("http://", "https://")):  # absolute form: we are someone's HTTP proxy
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    return HttpRequest(method.upper(), target.split("?", 1)[0], headers, body, keep)


class Responder:
    """Writes one response; ``keep_alive`` turns False once the connection must close."""

    def __init__(self, writer: asyncio.StreamWriter, request_id: str, keep_alive: bool) -> None:
        self.writer, self.request_id, self.keep_alive = writer, request_id, keep_alive

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def head(self, status: int, headers: Mapping[str, str]) -> None:
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
        lines = [
            f"HTTP/1.1 {status} {phrase}",
            f"x-request-id: {self.request_id}",
            f"connection: {'keep-alive' if self.keep_alive else 'close'}",
        ]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        await self.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def send(self, status: int, body: bytes | Any, headers: Mapping[str, str] = {}) -> None:  # noqa: B006
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        await self.head(
            status,
            {"content-type": "application/json", "content-length": str(len(data)), **headers},
        )
        await self.write(data)

    async def chunk(self, data: bytes) -> None:
        await self.write(b"%x\r\n%s\r\n" % (len(data), data))

    def abort(self) -> None:
        self.keep_alive = False
        self.writer.transport.abort()


async def send_status_fault(reply: Reply, resp: Responder) -> int:
    """An HTTP error answer: the reply's status, retry-after headers, and its body verbatim or a
    standard error object."""
    status = reply.status or 500
    headers = {}
    if reply.retry_after is not None:
        ra = reply.retry_after
        headers["retry-after"] = str(int(ra)) if ra == int(ra) else str(ra)
        headers["retry-after-ms"] = str(round(ra * 1000))
    if reply.body is not None:  # a real server's error body, whatever its shape
        data, kind = verbatim_body(reply.body)
        await resp.send(status, data, {**headers, "content-type": kind})
        return status
    msg = reply.message or f"scripted model: HTTP {status} fault"
    await resp.send(status, status_error(status, msg), headers)
    return status


async def send_completion(payload: ReplyPayload, resp: Responder) -> int:
    """A non-streamed completion, or one of its faults (garbage, no finish, a cut body)."""
    reply = payload.reply
    if reply.chunk_delay:
        await asyncio.sleep(reply.chunk_delay * (sum(1 for _ in payload.content_events()) - 1))
    if reply.fault == "garbage":
        await resp.send(200, GARBAGE)
        return 200
    data = json.dumps(payload.completion(finish=reply.fault != "no_finish")).encode()
    if reply.fault != "cut":
        await resp.send(200, data)
        return 200
    await resp.head(200, {"content-type": "application/json", "content-length": str(len(data))})
    await resp.write(data[: len(data) // 2])
    resp.abort()
    return 200
