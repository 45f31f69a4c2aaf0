"""The openai SDK's edges: imported lazily off the event loop, its usage objects read, its
streams closed, its errors put in the server's own words."""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import sys
from typing import Any
from urllib.parse import urlparse

from agent_lsp.agent.messages import Usage
from agent_lsp.agent.model.retry_notes import note_retry
from agent_lsp.agent.model.stream_assembly import describe_error

log = logging.getLogger(__name__)


async def import_openai() -> Any:
    """`import openai` costs ~0.4 s (seconds on a loaded machine): never on the start-up path,
    and never on the event loop, where it would delay a cancel or an approval."""
    module = sys.modules.get("openai")
    if module is not None and hasattr(module, "AsyncOpenAI"):  # not one still being imported
        return module
    return await asyncio.to_thread(importlib.import_module, "openai")


# httpx's default TLS context (verify=True), one per value of the variables it reads
_TLS_CONTEXTS: dict[tuple[str | None, str | None], Any] = {}


def new_client(openai: Any, **options: Any) -> Any:
    """`openai.AsyncOpenAI(**options)` with the HTTP client the SDK would build itself
    (`openai.DefaultAsyncHttpxClient`: the SDK's limits, redirects and timeout, closed with
    the SDK client), except that its TLS context is made once per process: building one loads
    the CA bundle (~25 ms of CPU), which every client built again (a headless run builds
    one). The context is the one httpx makes for `verify=True` (its default): certifi or the
    system store, or SSL_CERT_FILE / SSL_CERT_DIR, keyed by their values. Each failed answer
    the SDK retries is shown by `note_retry` (a response hook). Runs off the loop."""
    import httpx2  # the SDK's HTTP stack (openai 3.x)

    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    tls = _TLS_CONTEXTS.get(key)
    if tls is None:
        tls = _TLS_CONTEXTS.setdefault(key, httpx2.create_ssl_context())
    http = _closing_client(openai.DefaultAsyncHttpxClient)(
        timeout=options.get("timeout"), verify=tls, event_hooks={"response": [note_retry]}
    )
    return openai.AsyncOpenAI(**options, http_client=http)


@functools.cache
def _closing_client(base: type) -> type:
    """`base` (openai.DefaultAsyncHttpxClient) closed when dropped unclosed, as the SDK's own
    client is."""

    def __del__(self: Any) -> None:
        if self.is_closed:
            return
        try:
            asyncio.get_running_loop().create_task(self.aclose())
        except Exception:  # no running loop: nothing to close it on
            pass

    return type("HttpClient", (base,), {"__del__": __del__})


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


def is_google(endpoint: str) -> bool:
    host = (urlparse(endpoint).hostname or "").lower()
    return host == "generativelanguage.googleapis.com" or "aiplatform" in host


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
