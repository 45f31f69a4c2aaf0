"""The SDK's own retries made visible: each failed response it will send again becomes a status
line with the server's reason (LiteLLM's and the SDK's retries once absorbed eight 500s in 28 s
of silence). Observed with an httpx response hook; the SDK's retry logic is left as it is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from agent_lsp.agent.model.stream_assembly import describe_error

MAX_RETRY_AFTER = 60  # seconds: the SDK does not retry past a longer `retry-after`


@dataclass(frozen=True)
class RetryNotes:
    """Where one model call's retry lines go, and what to name them with."""

    on_status: Callable[[str], None]
    endpoint: str
    max_retries: int


# Set around one model call (its task): the HTTP client is shared by every run of a model.
_CURRENT: ContextVar[RetryNotes | None] = ContextVar("agent_lsp_retry_notes", default=None)


@contextmanager
def noting_retries(notes: RetryNotes | None) -> Iterator[None]:
    token = _CURRENT.set(notes)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def sdk_retries(response: Any) -> bool:
    """Whether the openai SDK sends the request again after this answer (its documented rule:
    `x-should-retry` first, then 408, 409, 429 and 5xx, unless `retry-after` is too long)."""
    headers = response.headers
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        return bool(should == "true")
    try:
        if float(headers.get("retry-after") or 0) > MAX_RETRY_AFTER:
            return False
    except ValueError:
        pass
    status = int(response.status_code)
    return status in (408, 409, 429) or status >= 500


async def note_retry(response: Any) -> None:
    """httpx response hook: a failed answer the SDK will retry becomes a status line."""
    notes = _CURRENT.get()
    if notes is None or response.status_code < 400:
        return
    try:
        attempt = int(response.request.headers.get("x-stainless-retry-count") or 0)
    except ValueError:
        attempt = 0
    if attempt >= notes.max_retries or not sdk_retries(response):
        return
    try:
        await response.aread()  # kept by the response: the SDK reads the same bytes later
        words = describe_error(response.text, limit=200)
    except Exception:  # a body that cannot be read says nothing more
        words = ""
    reason = f" ({words})" if words else ""
    notes.on_status(
        f"the model endpoint {notes.endpoint} answered HTTP {response.status_code}{reason}; "
        f"retrying ({attempt + 2}/{notes.max_retries + 1})"
    )
