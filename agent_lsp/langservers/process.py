"""The started servers' processes: each runs under agent/exec/reaper.py in a process group of
its own (the reaper leads it, the server is in it). Ended by `end()`; any still alive when the
interpreter exits, or when a front end leaves through os._exit (frontend.last_rites), are killed
then; when agent-lsp is killed outright the kernel tells each reaper (PR_SET_PDEATHSIG), which
kills all it holds."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import time

_LIVE: set[int] = set()  # reaper pids, each its group's leader
GRACE = 1.0


def keep(pid: int) -> None:
    _LIVE.add(pid)


def forget(pid: int) -> None:
    _LIVE.discard(pid)


def live() -> list[int]:
    return sorted(_LIVE)


async def end(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the reaper (it kills every descendant, setsid escapes included), then SIGKILL
    the whole group if anything is left after GRACE seconds."""
    forget(proc.pid)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.shield(asyncio.wait_for(proc.wait(), GRACE))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.shield(asyncio.wait_for(proc.wait(), GRACE))


@atexit.register
def kill_live() -> None:
    """Every server ends with agent-lsp, even when nobody closed it."""
    pids = list(_LIVE)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)  # the reaper kills all the server started, then exits
    if pids:
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    _LIVE.clear()
