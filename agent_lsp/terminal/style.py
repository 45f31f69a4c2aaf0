"""Terminal output shared by `agent-lsp run`, `demo`, `sessions`, `rewind` and `doctor`:
colour only on a TTY and never with NO_COLOR set, and one way to read a line without blocking
the event loop."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

LineReader = Callable[[str, TextIO], Awaitable[str | None]]
# Who reads the lines that answer the terminal's questions: none, stdin in a thread; in
# `agent-lsp chat`, its input line (chat.py), which owns the terminal meanwhile.
_reader: LineReader | None = None


class Style:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    @classmethod
    def for_stream(cls, out: TextIO) -> Style:
        return cls(isatty(out) and "NO_COLOR" not in os.environ)

    def __call__(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return self("2", text)

    def bold(self, text: str) -> str:
        return self("1", text)

    def ok(self, text: str = "✓") -> str:
        return self("32", text)

    def bad(self, text: str = "✗") -> str:
        return self("31", text)


def isatty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def lines_from(reader: LineReader) -> Iterator[None]:
    """Every question asked with read_line_async is answered by `reader` inside the block."""
    global _reader
    before, _reader = _reader, reader
    try:
        yield
    finally:
        _reader = before


def read_line_async(prompt: str, out: TextIO) -> asyncio.Future[str | None]:
    """input() in a daemon thread, so a Ctrl-C never waits on a blocked read (or the reader
    lines_from installed)."""
    if _reader is not None:
        return asyncio.ensure_future(_reader(prompt, out))
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def reader() -> None:
        out.write(prompt)
        out.flush()
        line = sys.stdin.readline()
        value = line.strip() if line else None

        def answer() -> None:
            if not future.done():
                future.set_result(value)

        loop.call_soon_threadsafe(answer)

    threading.Thread(target=reader, daemon=True).start()
    return future
