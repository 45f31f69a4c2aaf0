"""Stdio server processes: their stderr tail, the server under its reaper, the end of their group.

Each server runs under a reaper (stdio.py) that kills all it leaves behind, `setsid` escapes
included. Its own process group (the server leads a new session) is also ended after the
connection, and any group or reaper still alive at interpreter exit is ended then.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
from collections import deque

log = logging.getLogger(__name__)

STDERR_LINES = 20
_LIVE_GROUPS: set[int] = set()  # process groups of running stdio servers
_LIVE_REAPERS: set[int] = set()  # the reapers they run under (agent/exec/reaper.py)


class StderrTail:
    """The server's stderr through a pipe: the last lines kept, each logged at debug level.

    A pipe read as it fills, not a temp file: a chatty server costs no disk, and the tail is
    there even when the server dies at once."""

    def __init__(self, name: str):
        self.name = name
        read, write = os.pipe()
        os.set_blocking(read, False)
        self.writer = os.fdopen(write, "w")  # given to the SDK as the server's errlog
        self._read = read
        self._lines: deque[str] = deque(maxlen=STDERR_LINES)
        self._partial = b""
        self._loop = asyncio.get_running_loop()
        try:
            self._loop.add_reader(read, self._drain)
            self._watching = True
        except NotImplementedError:  # a loop without add_reader: read what is there at the end
            self._watching = False

    def close_writer(self) -> None:
        """Once the server is spawned only it (and its children) hold the write end."""
        if not self.writer.closed:
            self.writer.close()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._stop_watching()
                return
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            if len(self._partial) > 4096:
                lines.append(self._partial)
                self._partial = b""
            for line in lines:
                self._keep(line)

    def _keep(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip()[:500]
        if text:
            self._lines.append(text)
            log.debug("[mcp %s] %s", self.name, text)

    def _stop_watching(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._read)
            self._watching = False

    def finish(self) -> list[str]:
        """Read what is left, close the pipe, and return the last lines."""
        self.close_writer()
        if self._read >= 0:
            self._drain()
            self._stop_watching()
            os.close(self._read)
            self._read = -1
            self._keep(self._partial)
            self._partial = b""
        return list(self._lines)


def keep_group(pgid: int) -> None:
    """A running server's process group, killed at interpreter exit if nobody ended it."""
    _LIVE_GROUPS.add(pgid)


def keep_reaper(pid: int) -> None:
    """A server's reaper: told to end (it kills every descendant) at interpreter exit."""
    _LIVE_REAPERS.add(pid)


def forget_reaper(pid: int) -> None:
    _LIVE_REAPERS.discard(pid)


async def end_process_group(pgid: int) -> None:
    """SIGTERM the group, SIGKILL what is left after a second. Returns at once when it is gone."""
    _LIVE_GROUPS.discard(pgid)
    for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        for _ in range(int(wait / 0.02)):
            await asyncio.sleep(0.02)
            if not _group_alive(pgid):
                return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@atexit.register
def kill_live_groups() -> None:
    """Every server ends with agent-lsp, even when nobody called `aclose()`. (When agent-lsp is
    killed outright, each reaper gets SIGTERM from the kernel instead: PR_SET_PDEATHSIG.)"""
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    for pid in list(_LIVE_REAPERS):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def server_pid(reaper_pid: int) -> int | None:
    """The server: the reaper's first child (it forks the server before anything else can
    come to it)."""
    try:
        with open(f"/proc/{reaper_pid}/task/{reaper_pid}/children") as handle:
            children = [int(p) for p in handle.read().split()]
    except (OSError, ValueError):  # a kernel without /proc/PID/task/TID/children: scan
        children = [pid for pid, parent, _ in _processes() if parent == reaper_pid]
    started = sorted((start, pid) for pid, _, start in _processes(children))
    return started[0][1] if started else None


def _processes(pids: list[int] | None = None) -> list[tuple[int, int, int]]:
    """(pid, parent, start time) of the given processes, or of all."""
    if pids is None:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            out.append((pid, int(fields[1]), int(fields[19])))
        except (OSError, IndexError, ValueError):
            continue
    return out
