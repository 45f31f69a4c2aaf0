"""Model text for a front end: adjacent deltas joined and sent at most ~25 times a second,
never lost (the concatenation of what is sent equals the model's output). Shared by the LSP
and ACP front ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

TEXT_INTERVAL = 1 / 25  # at most ~30 text events per second per run: 25 leaves room for jitter


class TextCoalescer:
    def __init__(self, send: Callable[[str], None], interval: float = TEXT_INTERVAL):
        self._send = send
        self._interval = interval
        self._text: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0

    def add(self, text: str) -> None:
        self._text.append(text)
        if self._timer is None:
            delay = max(0.0, self._last + self._interval - time.monotonic())
            self._timer = asyncio.get_running_loop().call_later(delay, self.flush)

    def flush(self) -> None:
        """Send what is held now (before any other event, so the order stays)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._text:
            text, self._text = "".join(self._text), []
            self._last = time.monotonic()
            self._send(text)
