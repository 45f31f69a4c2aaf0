"""Model clients: any OpenAI-compatible endpoint (openai imported lazily) and the replay model."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.messages import Reply
from agent_lsp.agent.model.openai_sdk import (
    close_stream,
    connection_reason,
    fast_path_types,
    import_openai,
    new_client,
    status_message,
    usage_of,
)
from agent_lsp.agent.model.request_body import RequestEncoder
from agent_lsp.agent.model.retry_notes import RetryNotes, noting_retries
from agent_lsp.agent.model.stream_assembly import (
    MAX_ARGUMENT_CHARS,
    MAX_REPLY_CHARS,
    StreamAssembly,
    StreamError,
    TextSink,
    describe_error,
)
from agent_lsp.agent.model.wire import wire_messages

log = logging.getLogger(__name__)

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_REPLY_CHARS",
    "Model",
    "ModelError",
    "OpenAIModel",
    "ReplayModel",
    "TextSink",
    "make_model",
]


class ModelError(Exception):
    """The model request failed. `retryable`: the same request may be sent again (a stream
    cut before anything of it reached the user); `streamed`: characters already shown;
    `empty`: an answer with nothing in it (sent again once, then a stop)."""

    def __init__(
        self, message: str, retryable: bool = False, streamed: int = 0, empty: bool = False
    ):
        super().__init__(message)
        self.retryable = retryable
        self.streamed = streamed
        self.empty = empty  # the endpoint answered, with nothing in it (CONTRACT Decision 68)


class _OwnBug(Exception):
    """Our own code failed while handling a stream (the text sink that feeds the front ends, our
    request call): not the endpoint's fault, so never reported as a bad stream nor sent again.
    (The accumulator's failures stay data errors: they come from the shape of what was sent.)"""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _ours(step: Callable[..., Any], *args: Any) -> Any:
    try:
        return step(*args)
    except Exception as exc:
        raise _OwnBug(exc) from exc


class Model(Protocol):
    name: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink,
        *,
        agent_id: str,
        turn: int,
        purpose: str = "turn",
        timeout: float | None = None,
        on_thinking: TextSink | None = None,
        on_status: TextSink | None = None,
    ) -> Reply: ...


class OpenAIModel:
    """Streamed chat completions through the official SDK; the SDK retries 429/5xx itself,
    within one deadline for the whole call that the loop holds."""

    def __init__(
        self,
        name: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int = 2,
        stream_usage: bool = True,
        reasoning_effort: str | None = None,
    ):
        self.name = name
        self.reasoning_effort = reasoning_effort  # sent as `reasoning_effort` when set
        self._base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        self._stream_usage = stream_usage
        self._client: Any = None
        self._encoder = RequestEncoder()
        self.fast_path_calls = 0  # requests sent through the SDK's post() (tests check this)

    @property
    def endpoint(self) -> str:
        return self._base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    async def _get_client(self) -> Any:
        if self._client is None:
            openai = await import_openai()
            if not self._api_key and not self._base_url and not os.environ.get("OPENAI_BASE_URL"):
                raise ModelError(
                    "no API key: set the environment variable named by `apiKeyEnv` "
                    "(default OPENAI_API_KEY), or point `baseUrl` at a local server"
                )
            # Off the loop: the client's HTTP stack imports (and the first TLS context loads).
            self._client = await asyncio.to_thread(
                new_client,
                openai,
                api_key=self._api_key or "not-needed",
                base_url=self._base_url or None,
                timeout=self._timeout,
                max_retries=self._max_retries,
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (its connections would otherwise outlive the run)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def list_models(self) -> list[str]:
        """`GET /models`; ModelError with a readable reason."""
        client = await self._get_client()
        openai = sys.modules["openai"]
        try:
            page = await client.models.list(timeout=min(self._timeout, 15))
            return sorted(str(m.id) for m in page.data)
        except openai.APIStatusError as exc:
            raise ModelError(
                f"{self.endpoint} answered GET /models with HTTP {exc.status_code}: "
                f"{status_message(exc)}"
            ) from None
        except openai.APITimeoutError:
            raise ModelError(f"{self.endpoint} did not answer GET /models in time") from None
        except openai.APIConnectionError as exc:
            raise ModelError(
                f"cannot connect to the model endpoint {self.endpoint}: {connection_reason(exc)}"
            ) from None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink,
        *,
        agent_id: str,
        turn: int,
        purpose: str = "turn",
        timeout: float | None = None,
        on_thinking: TextSink | None = None,
        on_status: TextSink | None = None,
    ) -> Reply:
        client = await self._get_client()
        body: dict[str, Any] = {
            "model": self.name,
            "messages": wire_messages(messages, self.endpoint),
            "stream": True,
        }
        if self._stream_usage:  # some servers refuse the field (setting streamUsage: false)
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        # The sinks are our code (the front ends' streams): their failures are bugs of ours,
        # never the endpoint's bad data.
        acc = StreamAssembly(
            lambda text: _ours(on_text, text),
            (lambda text: _ours(on_thinking, text)) if on_thinking is not None else None,
        )
        notes = RetryNotes(on_status, self.endpoint, self._max_retries) if on_status else None
        with noting_retries(notes):
            await self._read_stream(client, body, timeout, acc)
        if acc.chunks == 0 and acc.finish is None:  # llama.cpp past its n_ctx, among others
            raise ModelError(
                f"the model endpoint {self.endpoint} answered HTTP 200 with an empty stream "
                "(no text, no tool calls)",
                retryable=True,
                empty=True,
            )
        if acc.finish is None and acc.cut is None:
            raise ModelError(
                f"the model's stream from {self.endpoint} ended without a finish reason "
                "(cut short)",
                retryable=acc.streamed == 0,
                streamed=acc.streamed,
            )
        reply = acc.reply()
        if reply.empty:  # LiteLLM turns an upstream empty stream into a finish with nothing
            raise ModelError(
                f"the model endpoint {self.endpoint} sent an empty reply (no text, no tool calls)",
                retryable=True,
                empty=True,
            )
        return reply

    async def _read_stream(
        self, client: Any, body: dict[str, Any], timeout: float | None, acc: StreamAssembly
    ) -> None:
        """Send the request and feed every chunk to `acc`; the endpoint's failures become a
        ModelError in its own words, with its URL."""
        openai = sys.modules["openai"]
        received = False
        try:
            try:
                stream = await self._open_stream(client, openai, body, timeout)
            except openai.OpenAIError:
                raise
            except Exception as exc:  # nothing of the endpoint's data is read yet: a bug of ours
                raise _OwnBug(exc) from exc
            try:
                async for chunk in stream:
                    received = True
                    # the fast path's chunks are parsed JSON; create()'s are SDK objects
                    acc.feed(chunk.to_dict() if hasattr(chunk, "to_dict") else chunk, usage_of)
                    if acc.cut is not None:  # past a size cap: stop reading, run nothing of it
                        break
            finally:
                await close_stream(stream)
        # only errors of the stream's data are the endpoint's; this one is ours
        except _OwnBug as bug:
            log.error(
                "internal error while reading the stream from %s", self.endpoint, exc_info=bug.error
            )
            raise bug.error from None
        except openai.APIStatusError as exc:
            raise ModelError(
                f"the model endpoint {self.endpoint} answered HTTP {exc.status_code}: "
                f"{status_message(exc)}"
                f"{self._path_hint(exc.status_code)}"
            ) from None
        except openai.APITimeoutError:
            raise ModelError(
                f"the model endpoint {self.endpoint} did not answer within requestTimeout "
                f"({self._timeout:g} s)",
                streamed=acc.streamed,
            ) from None
        except openai.APIConnectionError as exc:
            if received:  # a stream cut mid-reply: the SDK does not retry it
                raise ModelError(
                    f"the stream from {self.endpoint} was cut mid-reply ({connection_reason(exc)})",
                    retryable=acc.streamed == 0,
                    streamed=acc.streamed,
                ) from None
            raise ModelError(
                f"cannot connect to the model endpoint {self.endpoint}: {connection_reason(exc)}"
            ) from None
        # an `{"error": ...}` object inside the stream (OpenRouter, vLLM, OpenAI)
        except openai.APIError as exc:
            words = describe_error(exc.body) or describe_error(exc.message)
            raise ModelError(
                f"the model endpoint {self.endpoint} sent an error in its stream: {words}",
                streamed=acc.streamed,
            ) from None
        except StreamError as exc:
            raise ModelError(
                f"the model endpoint {self.endpoint} sent an error in its stream: {exc}",
                streamed=acc.streamed,
            ) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"the model endpoint {self.endpoint} sent something that is not a valid completion "
                f"stream: {exc}",
                retryable=acc.streamed == 0,
                streamed=acc.streamed,
            ) from None

    def _path_hint(self, status: int) -> str:
        """A 404 from a base URL without a version segment is nearly always a missing `/v1`."""
        if status != 404:
            return ""
        path = urlparse(self.endpoint).path
        if any(re.fullmatch(r"v\d+\w*", part) for part in path.split("/")):
            return ""
        return (
            " (the base URL has no /v1: "
            f"most servers want {self.endpoint.rstrip('/')}/v1 as baseUrl)"
        )

    async def _open_stream(
        self, client: Any, openai: Any, body: dict[str, Any], timeout: float | None
    ) -> Any:
        """`chat.completions.create(**body)` minus its per-request walk over every message to
        "transform" params already in wire format (~1 ms per message per turn). `post` is the
        SDK's public low-level call: its retries, timeouts and error classes; the path is
        decided before anything is sent, so a request is never sent twice."""
        options = {"timeout": timeout} if timeout else {}
        fast = fast_path_types(client, openai)
        if fast is None:
            return await client.chat.completions.create(**body, **options)
        completion, stream_cls = fast
        self.fast_path_calls += 1
        return await client.post(
            "/chat/completions",
            content=self._encoder.body(body),  # the bytes `body=body` would send
            cast_to=completion,
            stream=True,
            stream_cls=stream_cls,
            options=options,
        )


class ReplayModel:
    """Re-serves the model replies of a recorded transcript by (agentId, turn, purpose)."""

    def __init__(self, path: Path, delay: float = 0.0):
        self.name = f"replay:{path}"
        self.path = path
        self._replies: dict[tuple[str, int, str], Reply] | None = None
        self._delay = delay

    def _load(self) -> dict[tuple[str, int, str], Reply]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ModelError(
                f"cannot read the replay transcript {self.path}: {exc.strerror}"
            ) from None
        replies: dict[tuple[str, int, str], Reply] = {}
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise ModelError(f"replay transcript {self.path}:{number} is not JSON") from None
            if record.get("type") == "reply":
                key = (
                    record.get("agentId", "main"),
                    int(record.get("turn", 0)),
                    record.get("purpose", "turn"),
                )
                replies[key] = Reply.from_record(record["reply"])
        return replies

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink,
        *,
        agent_id: str,
        turn: int,
        purpose: str = "turn",
        **_: Any,  # a recorded reply has no timeout, thinking or status to report
    ) -> Reply:
        if self._replies is None:  # read once, off the event loop
            self._replies = await asyncio.to_thread(self._load)
        reply = self._replies.get((agent_id, turn, purpose))
        if reply is None:
            raise ModelError(
                f"the replay transcript has no reply for agent {agent_id!r} turn {turn} ({purpose})"
            )
        for start in range(0, len(reply.text), 12):
            if self._delay:
                await asyncio.sleep(self._delay)
            on_text(reply.text[start : start + 12])
        return reply

    async def list_models(self) -> list[str]:
        return [self.name]


def make_model(
    settings: Any,
    env: dict[str, str] | None = None,
    name: str | None = None,
    reasoning_effort: str | None = None,
) -> Model:
    """The model the settings name (or `name`, a run's override): `replay:PATH` or an
    OpenAI-compatible endpoint (its requests carry `reasoning_effort` when given)."""
    source: Mapping[str, str] = keyguard.environment() if env is None else env
    name = name or settings.model
    if name.startswith("replay:"):
        return ReplayModel(Path(name.removeprefix("replay:")).expanduser(), delay=0.01)
    return OpenAIModel(
        name,
        settings.base_url,
        source.get(settings.api_key_env),
        settings.request_timeout,
        stream_usage=settings.stream_usage,
        reasoning_effort=reasoning_effort,
    )
