"""Recorded SSE answers of real OpenAI-compatible servers, one module per server family, each
written from the server's documented (or reported) behaviour with its source in a comment.
Replayed verbatim by the scripted model server (`Reply.raw`) in tests/reliability/test_endpoints.py."""

from __future__ import annotations


def split_sse(recording: str) -> list[str]:
    """A recording (events separated by blank lines, as on the wire) -> one string per event,
    each sent as its own HTTP chunk."""
    events = [e.strip("\n") for e in recording.strip("\n").split("\n\n")]
    return [e + "\n\n" for e in events if e.strip()]
