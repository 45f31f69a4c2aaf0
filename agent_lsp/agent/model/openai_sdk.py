"""The openai SDK's edges: imported lazily off the event loop, its usage objects read, its
streams closed, its errors put in the server's own words."""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from typing import Any

from agent_lsp.agent.messages import Usage
from agent_lsp.agent.model.stream_assembly import describe_error

log = logging.getLogger(__name__)


async def import_openai() -> Any:
    """`import openai` costs ~0.4 s (seconds on a loaded machine): never on the start-up path,
    and never on the event loop, where it would delay a cancel or an approval."""
    module = sys.modules.get("openai")
    if module is not None and hasattr(module, "AsyncOpenAI"):  # not one still being imported
        return module
    return await asyncio.to_thread(importlib.import_module, "openai")


def usage_of(raw: Any) -> Usage:
    """Usage from a chunk's `usage` object (parsed JSON): cached tokens from
    prompt_tokens_details, and the endpoint's own cost where it reports one (OpenRouter's
    `usage.cost`). Anything but an object counts as zero usage."""
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cost = raw.get("cost")
    return Usage(
        int(raw.get("prompt_tokens") or 0),
        int(raw.get("completion_tokens") or 0),
        int(cached or 0),
        float(cost) if isinstance(cost, int | float) else None,
    )


def fast_path_types(client: Any, openai: Any) -> tuple[Any, Any] | None:
    """What `post()` needs for a streamed completion whose chunks stay parsed JSON: the
    non-streamed result type and `AsyncStream[object]` (the SDK yields each event's JSON as
    is for `object`: no model object built per chunk)."""
    try:
        from openai.types.chat import ChatCompletion
    except ImportError:
        return None
    stream = getattr(openai, "AsyncStream", None)
    if not callable(getattr(client, "post", None)) or stream is None:
        return None
    return ChatCompletion, stream[object]


async def close_stream(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        try:
            await close()
        except Exception as exc:  # closing a broken stream must not hide why it broke
            log.debug("closing the stream failed: %s", exc)


def connection_reason(exc: Any) -> str:
    cause = exc.__cause__ or exc
    text = str(cause).strip() or type(cause).__name__
    return text.rstrip(".")


def status_message(exc: Any) -> str:
    """The server's own words, whatever the shape of its error body (the SDK's own message,
    `Error code: 400`, says nothing)."""
    words = describe_error(getattr(exc, "body", None))
    if not words:
        response = getattr(exc, "response", None)
        try:
            words = describe_error(response.text) if response is not None else ""
        except Exception:  # a streamed body not read: nothing more to say
            words = ""
    return (words or str(getattr(exc, "message", "")) or type(exc).__name__).strip().rstrip(".")
