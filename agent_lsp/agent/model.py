"""Model clients: any OpenAI-compatible endpoint (openai imported lazily) and the replay model."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agent_lsp.agent.messages import Reply, ToolCall, Usage

log = logging.getLogger(__name__)

TextSink = Callable[[str], None]


class ModelError(Exception):
    """The model request failed. `retryable`: the loop may try the same request again
    (a stream cut mid-reply, which the SDK does not retry itself)."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


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
    ) -> Reply: ...


async def import_openai() -> Any:
    """`import openai` costs ~0.4 s (seconds on a loaded machine): never on the start-up path,
    and never on the event loop, where it would delay a cancel or an approval."""
    module = sys.modules.get("openai")
    if module is not None and hasattr(module, "AsyncOpenAI"):  # not one still being imported
        return module
    return await asyncio.to_thread(importlib.import_module, "openai")


class OpenAIModel:
    """Streamed chat completions through the official SDK; the SDK retries 429/5xx itself."""

    def __init__(self, name: str, base_url: str | None, api_key: str | None, timeout: float, max_retries: int = 2):
        self.name = name
        self._base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: Any = None

    async def _get_client(self) -> Any:
        if self._client is None:
            openai = await import_openai()
            if not self._api_key and not self._base_url and not os.environ.get("OPENAI_BASE_URL"):
                raise ModelError("no API key: set the environment variable named by `apiKeyEnv` (default OPENAI_API_KEY), or point `baseUrl` at a local server")
            self._client = openai.AsyncOpenAI(
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

    async def complete(self, messages, tools, on_text, *, agent_id, turn, purpose="turn") -> Reply:
        client = await self._get_client()
        openai = sys.modules["openai"]
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
        if tools:
            kwargs["tools"] = tools
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: Usage | None = None
        received = False
        try:
            stream = await _create_stream(client, openai, kwargs)
            async for chunk in stream:
                received = True
                if chunk.usage:
                    usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
                if not chunk.choices:  # the usage chunk
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta is not None and delta.content:
                    text.append(delta.content)
                    on_text(delta.content)
                for part in (delta.tool_calls if delta is not None else None) or []:
                    acc = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    if part.id:
                        acc["id"] = part.id
                    if part.function is not None:
                        if part.function.name:
                            acc["name"] += part.function.name
                        if part.function.arguments:
                            acc["arguments"] += part.function.arguments
                if choice.finish_reason:
                    finish = choice.finish_reason
        except openai.APIStatusError as exc:
            raise ModelError(f"the model endpoint answered HTTP {exc.status_code}: {_status_message(exc)}") from None
        except openai.APITimeoutError:
            raise ModelError(f"the model request timed out after {self._timeout:g}s (requestTimeout), retries included") from None
        except openai.APIConnectionError as exc:
            # Before any chunk the SDK already retried; after one, the stream was cut mid-reply.
            where = "the stream was cut mid-reply" if received else "could not connect to the model endpoint"
            raise ModelError(f"{where}: {exc.__cause__ or exc}", retryable=received) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(f"the model endpoint sent something that is not a valid completion stream: {exc}", retryable=True) from None
        if finish is None:
            raise ModelError("the model's stream ended without a finish reason (cut short)", retryable=True)
        tool_calls = [
            ToolCall(c["id"] or f"call_{uuid.uuid4().hex[:12]}", c["name"], c["arguments"]) for _, c in sorted(calls.items())
        ]
        return Reply("".join(text), tool_calls, finish, usage)


async def _create_stream(client: Any, openai: Any, body: dict[str, Any]) -> Any:
    """`chat.completions.create(**body)` minus its per-request walk over every message to
    "transform" params that are already in wire format (~1 ms per message per turn: the
    largest CPU cost of a long session). `post` is the SDK's public low-level call; it keeps
    the SDK's retries, timeouts and error classes."""
    try:
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return await client.post("/chat/completions", body=body, cast_to=ChatCompletion, stream=True,
                                 stream_cls=openai.AsyncStream[ChatCompletionChunk])
    except (AttributeError, TypeError, ImportError):  # an SDK without that surface: the ordinary way
        return await client.chat.completions.create(**body)


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", "")) or type(exc).__name__


class ReplayModel:
    """Re-serves the model replies of a recorded transcript by (agentId, turn, purpose)."""

    def __init__(self, path: Path, delay: float = 0.0):
        self.name = f"replay:{path}"
        self._replies: dict[tuple[str, int, str], Reply] = {}
        self._delay = delay
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ModelError(f"cannot read the replay transcript {path}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise ModelError(f"replay transcript {path}:{number} is not JSON") from None
            if record.get("type") == "reply":
                key = (record.get("agentId", "main"), int(record.get("turn", 0)), record.get("purpose", "turn"))
                self._replies[key] = Reply.from_record(record["reply"])

    async def complete(self, messages, tools, on_text, *, agent_id, turn, purpose="turn") -> Reply:
        reply = self._replies.get((agent_id, turn, purpose))
        if reply is None:
            raise ModelError(f"the replay transcript has no reply for agent {agent_id!r} turn {turn} ({purpose})")
        for start in range(0, len(reply.text), 12):
            if self._delay:
                await asyncio.sleep(self._delay)
            on_text(reply.text[start : start + 12])
        return reply


def make_model(settings: Any, env: dict[str, str] | None = None) -> Model:
    """The model the settings name: `replay:PATH` or an OpenAI-compatible endpoint."""
    env = os.environ if env is None else env
    if settings.model.startswith("replay:"):
        return ReplayModel(Path(settings.model.removeprefix("replay:")).expanduser(), delay=0.01)
    return OpenAIModel(settings.model, settings.base_url, env.get(settings.api_key_env), settings.request_timeout)
