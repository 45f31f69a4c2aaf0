"""A blocking read that runs started together share.

Twenty runs started in the same moment each read the same prompt files and Claude Code files;
in worker threads that wait on the GIL while the loop is busy, twenty copies of one read
delayed every run's first model call. Callers that arrive while a read of the same key is in
flight share its result; a caller after it ended reads afresh: nothing is cached, so a run
never sees files older than a read that started before it did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class SharedRead:
    def __init__(self) -> None:
        self._flying: dict[Hashable, asyncio.Future[Any]] = {}

    async def __call__(self, key: Hashable, read: Callable[..., T], *args: Any) -> T:
        future = self._flying.get(key)
        if future is None or future.get_loop() is not asyncio.get_running_loop():
            future = asyncio.ensure_future(asyncio.to_thread(read, *args))
            self._flying[key] = future

            def landed(done: asyncio.Future[Any], key: Hashable = key) -> None:
                if self._flying.get(key) is done:
                    del self._flying[key]

            future.add_done_callback(landed)
        # one caller's cancel must not cancel the others' read
        result: T = await asyncio.shield(future)
        return result
