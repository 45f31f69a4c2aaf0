"""A scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

The real ``openai`` SDK talks to it over real HTTP/1.1 on 127.0.0.1 (standard library only:
asyncio streams, keep-alive, ``Content-Length`` or chunked request bodies; SSE answers use
``Transfer-Encoding: chunked`` so connections stay reusable).

Replies are queued per *conversation key*: a request goes to the queue whose key is a
substring of its FIRST ``user`` message (longest key wins, default key ``""``); each request
consumes one answer; an exhausted queue answers HTTP 400 (``openai.BadRequestError``, not
retried). Reply fields are validated by :class:`agent_lsp.testing.sse.Reply`.

What the SDK (openai 3.x over httpx2) raises for each ``fault``, as observed by the tests:

* ``status``: the status error class (``RateLimitError`` 429, ``InternalServerError`` 5xx…),
  after ``max_retries`` retries for 408/409/429/5xx; ``retry_after`` is sent as
  ``retry-after`` and ``retry-after-ms`` and honoured by the SDK between retries.
* ``cut``: streaming: ``openai.APIConnectionError`` while iterating (cause:
  ``httpx2.RemoteProtocolError``, incomplete chunked body), never retried mid-stream.
  Non-streaming: the body read fails inside the request, so the SDK retries it (consuming
  further entries), then raises ``APIConnectionError``.
* ``no_finish``: no exception; the stream just ends with no ``finish_reason`` and no
  ``[DONE]`` (non-streaming: ``choices[0].finish_reason is None``).
* ``hang``: ``openai.APITimeoutError`` once the client's timeout expires (retried first if
  ``max_retries > 0``).
* ``garbage``: streaming: ``json.JSONDecodeError`` (a ``ValueError``, NOT an ``OpenAIError``)
  from the SDK's SSE decoding; non-streaming: the same ``JSONDecodeError``.

CLI: ``python -m agent_lsp.testing.serve --script FILE [--port 0] [--record FILE]``
prints ``http://127.0.0.1:PORT/v1`` then serves until SIGTERM/SIGINT or EOF on stdin (EOF is
only watched when stdin is a pipe, so ``stdin=DEVNULL`` does not stop it at once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_lsp.testing.http_thread import ThreadedHttpServer
from agent_lsp.testing.sse import (
    DONE,
    GARBAGE,
    HttpRequest,
    Reply,
    ReplyPayload,
    Responder,
    error_body,
    message_text,
    prompt_chars,
    send_completion,
    send_raw,
    send_status_fault,
)
from agent_lsp.testing.strict import (
    MISTRAL_HOSTS,
    has_null_content,
    mistral_order_problem,
    strict_problem,
)

__all__ = ["LogEntry", "Reply", "ScriptedModelServer"]


@dataclasses.dataclass
class LogEntry:
    """One chat-completions request: times are ``time.monotonic()``; ``status`` is ``None``
    while unanswered or if never answered (``hang``)."""

    key: str
    t_start: float
    t_end: float | None = None
    status: int | None = None
    fault: str | None = None


class ScriptedModelServer(ThreadedHttpServer):
    """Scripted OpenAI-compatible server running in a background thread (see module doc)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        record: str | Path | None = None,
        strict: bool = False,
        refuse_stream_options: bool = False,
        null_content_answer: Mapping[str, Any] | Reply | None = None,
    ) -> None:
        super().__init__(host, port, name="scripted-model")
        self.strict, self.refuse_stream_options = strict, refuse_stream_options  # see strict.py
        # What a request carrying an assistant `content: null` gets instead of the script (a
        # real server's recorded answer: llama-cpp-python's 500, LiteLLM's empty stream)
        self.null_content_answer = (
            None
            if null_content_answer is None
            else null_content_answer
            if isinstance(null_content_answer, Reply)
            else Reply.model_validate(null_content_answer)
        )
        self._record = Path(record) if record is not None else None
        self._lock = threading.Lock()
        self._queues: dict[str, deque[list[Any]]] = {}
        self._requests: list[tuple[str, dict[str, Any]]] = []
        self._authorizations: list[str] = []
        self._log: list[LogEntry] = []
        self._models: dict[str, None] = {"scripted": None}
        self.models_delay = 0.0  # seconds GET /v1/models takes (a slow endpoint's listing)
        self._by_turn: list[Reply] | None = None

    # -- scripting ---------------------------------------------------------------------
    def add(
        self,
        key: str | Sequence[Mapping[str, Any] | Reply],
        replies: Sequence[Mapping[str, Any] | Reply] | None = None,
    ) -> None:
        """Queue ``replies`` for conversation ``key``; ``add([...])`` uses the default key
        ``""``."""
        if replies is None:
            key, replies = "", key  # type: ignore[assignment]
        if not isinstance(key, str):
            raise TypeError(f"scripted model: key must be a str, got {type(key).__name__}")
        if isinstance(replies, Mapping | Reply):
            replies = [replies]
        parsed = []
        for i, raw in enumerate(replies or []):
            try:
                reply = raw if isinstance(raw, Reply) else Reply.model_validate(raw)
            except ValidationError as err:
                raise ValueError(
                    f"scripted model: invalid reply #{i} for key {key!r}: {err}"
                ) from err
            parsed.append([reply, reply.repeat])
        with self._lock:
            self._queues.setdefault(key, deque()).extend(parsed)

    def replay_each_prompt(self, replies: Sequence[Mapping[str, Any] | Reply]) -> None:
        """Answer by position instead of from the queues: turn N of a prompt (N counting the
        assistant messages since the last ``user`` message) gets ``replies[N-1]``, so every new
        prompt, in any session, replays the whole recording; never used up
        (`demo --serve-model`)."""
        parsed = [raw if isinstance(raw, Reply) else Reply.model_validate(raw) for raw in replies]
        with self._lock:
            self._by_turn = parsed

    def add_model(self, name: str) -> None:
        """List ``name`` in ``GET /v1/models`` (a health check asks whether the model exists)."""
        with self._lock:
            self._models[name] = None

    def remaining(self, key: str = "") -> int:
        """Requests the queue of ``key`` can still answer (an entry counts ``repeat`` times)."""
        with self._lock:
            return sum(left for _, left in self._queues.get(key, ()))

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [body for _, body in self._requests]

    @property
    def authorizations(self) -> list[str]:
        """The `Authorization` header of each chat request, in order (what key the client sent)."""
        with self._lock:
            return list(self._authorizations)

    def requests_for(self, key: str) -> list[dict[str, Any]]:
        with self._lock:
            return [body for k, body in self._requests if k == key]

    @property
    def log(self) -> list[LogEntry]:
        with self._lock:
            return [dataclasses.replace(e) for e in self._log]

    async def _dispatch(
        self, req: HttpRequest, resp: Responder, reader: asyncio.StreamReader
    ) -> None:
        path = req.path.rstrip("/")
        # Any versioned base path (Gemini's /v1beta/openai, reached through HTTP_PROXY); a base
        # URL without a version still gets the 404 real servers give.
        if req.method == "POST" and path.endswith("/chat/completions") and path.startswith("/v1"):
            with self._lock:
                self._authorizations.append(req.headers.get("authorization", ""))
            try:
                body = json.loads(req.body)
                if not isinstance(body, dict):
                    raise ValueError("body is not a JSON object")
            except ValueError as err:
                msg = f"scripted model: invalid JSON body: {err}"
                await resp.send(400, error_body(msg, "invalid_request_error", None))
                return
            await self._chat(body, resp, reader, req.headers.get("host", ""))
        elif req.method == "GET" and path == "/v1/models":
            await asyncio.sleep(self.models_delay)
            with self._lock:
                names = list(self._models)
            data = [
                {"id": n, "object": "model", "created": 0, "owned_by": "scripted"} for n in names
            ]
            await resp.send(200, {"object": "list", "data": data})
        else:
            msg = f"scripted model: no route for {req.method} {req.path}"
            await resp.send(404, error_body(msg, "invalid_request_error", "not_found"))

    def _take(self, body: dict[str, Any]) -> tuple[str, Reply | None, LogEntry]:
        messages: list[Any] = body["messages"] if isinstance(body.get("messages"), list) else []
        users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
        first_user = message_text(users[0].get("content")) if users else ""
        with self._lock:
            key = max((k for k in self._queues if k in first_user), key=len, default="")
            queue = self._queues.get(key)
            reply = None
            if self._by_turn is not None:
                turn = _turns_since_last_prompt(messages)
                key = f"<recorded turn {turn + 1} of {len(self._by_turn)}>"
                reply = self._by_turn[turn] if turn < len(self._by_turn) else None
            elif queue:
                reply = queue[0][0]
                queue[0][1] -= 1
                if queue[0][1] == 0:
                    queue.popleft()
            self._requests.append((key, body))
            entry = LogEntry(key, time.monotonic(), fault=reply.fault if reply else None)
            self._log.append(entry)
            if isinstance(body.get("model"), str):
                self._models[body["model"]] = None
            if self._record is not None:
                with self._record.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(body, ensure_ascii=False) + "\n")
        return key, reply, entry

    async def _chat(
        self, body: dict[str, Any], resp: Responder, reader: asyncio.StreamReader, host: str = ""
    ) -> None:
        if host.partition(":")[0].lower() in MISTRAL_HOSTS and (
            order := mistral_order_problem(body)
        ):  # Mistral's message-order rule, for requests that name its host
            with self._lock:
                self._requests.append(("<refused>", body))
            await resp.send(400, order, {"x-should-retry": "false"})
            return
        if self.null_content_answer is not None and has_null_content(body):
            with self._lock:
                self._requests.append(("<null content>", body))
            entry = LogEntry("<null content>", time.monotonic())
            await self._answer(
                body, "<null content>", self.null_content_answer, resp, reader, entry
            )
            return
        if self.strict or self.refuse_stream_options:
            problem = strict_problem(
                body, messages=self.strict, stream_options=self.refuse_stream_options
            )
            if problem is not None:
                with self._lock:  # refused without consuming a reply, as a strict server does
                    self._requests.append(("<refused>", body))
                await resp.send(
                    400,
                    error_body(problem, "invalid_request_error", None),
                    {"x-should-retry": "false"},
                )
                return
        key, reply, entry = self._take(body)
        status = None
        try:
            status = await self._answer(body, key, reply, resp, reader, entry)
        finally:
            with self._lock:
                entry.status, entry.t_end = status, time.monotonic()

    async def _answer(
        self,
        body: dict[str, Any],
        key: str,
        reply: Reply | None,
        resp: Responder,
        reader: asyncio.StreamReader,
        entry: LogEntry,
    ) -> int | None:
        if reply is None:
            msg = f"scripted model: script exhausted for key {key!r}"
            await resp.send(
                400,
                error_body(msg, "invalid_request_error", "script_exhausted"),
                {"x-should-retry": "false"},
            )
            return 400
        if reply.fault == "hang":
            resp.keep_alive = False
            while await reader.read(65536):
                pass  # until the client disconnects (or stop() cancels us)
            return None
        if reply.ttft:
            await asyncio.sleep(reply.ttft)
        if reply.fault == "status":
            return await send_status_fault(reply, resp)
        if reply.raw is not None:  # a recorded stream, byte for byte
            with self._lock:
                entry.status = 200
            await send_raw(resp, reply)
            return 200
        payload = self._payload(body, reply)
        if not body.get("stream"):
            return await send_completion(payload, resp)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = list(payload.content_events()) if reply.fault != "garbage" else [GARBAGE]
        if reply.fault not in ("no_finish", "garbage"):
            events.append(payload.finish_event())
            if include_usage:
                events.append(payload.usage_event())
        if reply.fault != "no_finish":
            events.append(DONE)
        if reply.fault == "cut":
            events = events[: max(1, len(events) // 2)]
        with self._lock:  # known now: a client may finish reading before the last bytes go out
            entry.status = 200
        await resp.head(
            200,
            {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "transfer-encoding": "chunked",
            },
        )
        for i, event in enumerate(events):
            if i and reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            await resp.chunk(event)
        if reply.fault == "cut":
            resp.abort()
        else:
            await resp.write(b"0\r\n\r\n")
        return 200

    def _payload(self, body: dict[str, Any], reply: Reply) -> ReplyPayload:
        messages: list[Any] = body["messages"] if isinstance(body.get("messages"), list) else []
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_chars(messages) // 4,
            "completion_tokens": reply.completion_chars() // 4,
        }
        if reply.usage is not None:
            given = reply.usage.model_dump(exclude_none=True)
            if "cached_tokens" in given:
                usage["prompt_tokens_details"] = {"cached_tokens": given.pop("cached_tokens")}
            usage.update(given)
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        with self._lock:
            n = next(self._ids)
            call_ids = [c.id or f"call_{next(self._ids)}" for c in reply.tool_calls]
        model = str(body["model"]) if isinstance(body.get("model"), str) else "scripted"
        return ReplyPayload(
            reply, f"chatcmpl-scripted-{n}", model, int(time.time()), call_ids, usage
        )


def _turns_since_last_prompt(messages: list[Any]) -> int:
    turns = 0
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "user":
            break
        turns += role == "assistant"
    return turns
