"""A blocking read that runs started together share.

Twenty runs started in the same moment each read the same prompt files and Claude Code files;
in worker threads that wait on the GIL while the loop is busy, twenty copies of one read
delayed every run's first model call. Callers that arrive while a read of the same key is in
flight share its result; a caller after it ended reads afresh: nothing is cached, so a run
never sees files older than a read that started before it did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class SharedRead:
    """Callers of the same key while its read is in flight share it (one caller's cancel does
    not cancel the others' read); the next caller after it ended starts another."""

    def __init__(self) -> None:
        self._flying: dict[Hashable, asyncio.Future[Any]] = {}

    async def __call__(self, key: Hashable, read: Callable[..., T], *args: Any) -> T:
        """The blocking `read(*args)`, off the event loop."""
        return await self.join(key, lambda: asyncio.to_thread(read, *args))

    async def join(self, key: Hashable, start: Callable[[], Awaitable[T]]) -> T:
        """The awaitable `start()` begins, or the one in flight for `key`."""
        future = self._flying.get(key)
        if future is None or future.get_loop() is not asyncio.get_running_loop():
            future = asyncio.ensure_future(start())
            self._flying[key] = future

            def landed(done: asyncio.Future[Any], key: Hashable = key) -> None:
                if self._flying.get(key) is done:
                    del self._flying[key]
                if not done.cancelled():
                    done.exception()  # retrieved: every waiter may have been cancelled

            future.add_done_callback(landed)
        result: T = await asyncio.shield(future)
        return result
