"""Running a command so that nothing escapes: a child subreaper (or the sandbox's PID
namespace) around it, and output kept as a head and a rolling tail with the bytes dropped
counted, never silently. (Its environment, without the model's key, is keyguard.child_env's.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_lsp.agent.exec.sandbox import Confined

REAPER = Path(__file__).with_name("reaper.py")
HEAD_BYTES = 1_000_000
TAIL_BYTES = 4_000_000
KILL_GRACE = 2.0


class CommandNotStarted(Exception):
    """The command could not be started at all; the message is for the model."""


@dataclass
class ProcessResult:
    code: int | None
    output: str
    timed_out: bool
    total_bytes: int
    dropped_bytes: int


class OutputTail:
    """The first HEAD bytes and the last TAIL bytes of a stream; what lies between is
    counted, not kept."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES):
        self.head_limit = head
        self.tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:  # trim in batches: amortised O(1) per byte
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def dropped(self) -> int:
        return max(0, self.total - len(self.head) - min(len(self.tail), self.tail_limit))

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail else b""
        if not self.dropped:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace")
        head = bytes(self.head).decode("utf-8", errors="replace")
        return (
            f"{head}\n[... {self.dropped} bytes of output dropped here: not kept anywhere ...]\n"
            f"{tail.decode('utf-8', errors='replace')}"
        )


def reaped(argv: list[str]) -> list[str]:
    return [sys.executable, "-I", "-S", str(REAPER), "--", *argv]


async def run_process(
    confined: Confined,
    cwd: Path,
    timeout: float,
    *,
    env: dict[str, str],
    processes: set[asyncio.subprocess.Process],
    on_output: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    """Run a command (already wrapped by the reaper or the sandbox) in its own session; a
    timeout or a cancel ends it and everything it started."""
    argv = confined.argv
    try:
        proc = await confined.start(
            cwd, env, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.STDOUT
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise CommandNotStarted(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    processes.add(proc)
    capture = OutputTail()

    async def finish() -> None:  # one coroutine, not a gather: nothing left unretrieved on cancel
        assert proc.stdout is not None
        while data := await proc.stdout.read(65536):
            capture.add(data)
            if on_output is not None:
                on_output(data)
        await proc.wait()

    timed_out = await supervise(proc, finish(), timeout, processes)
    return ProcessResult(proc.returncode, capture.text(), timed_out, capture.total, capture.dropped)


async def supervise(
    proc: asyncio.subprocess.Process,
    work: Awaitable[None],
    timeout: float,
    processes: set[asyncio.subprocess.Process],
) -> bool:
    """`work` (reading the process to its end) within `timeout`; whatever happens (a timeout, a
    cancel, an error) the process and everything it started end and it leaves `processes`.
    True when the timeout ended it."""
    timed_out = False
    try:
        try:
            await asyncio.wait_for(work, timeout)
        except TimeoutError:
            timed_out = True
    finally:
        try:
            await end_process(proc)
        finally:
            processes.discard(proc)
    return timed_out


def stop_process(proc: asyncio.subprocess.Process) -> None:
    """Ask the wrapper (reaper or bwrap) to end the command and all it started; the wrapper
    kills its descendants itself. Safe to call on a finished process."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.kill(proc.pid, signal.SIGTERM)


def kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)


async def end_process(proc: asyncio.subprocess.Process) -> None:
    """stop_process, then a SIGKILL of the whole group if the wrapper did not end in time.
    Returns once what the wrapper was running is gone too: a sandbox's processes die with its
    PID namespace a moment AFTER bwrap itself has exited."""
    inside = descendants(proc.pid) if proc.returncode is None else set()
    stop_process(proc)
    try:
        await asyncio.shield(asyncio.wait_for(proc.wait(), KILL_GRACE))
    except (TimeoutError, asyncio.CancelledError):
        pass
    kill_group(proc)
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.shield(asyncio.wait_for(proc.wait(), KILL_GRACE))
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.shield(_until_gone(inside, KILL_GRACE))


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent pid (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            after_name = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return after_name[0].decode(), int(after_name[1])


def descendants(pid: int) -> set[int]:
    """Every living process below `pid` (one pass over /proc: no per-process children file
    on every kernel)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (st := _stat(int(name))) is not None:
                children.setdefault(st[1], []).append(int(name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


async def _until_gone(pids: set[int], limit: float) -> None:
    """Wait (at most `limit`) until none of `pids` runs any more (a zombie counts as gone)."""
    deadline = asyncio.get_running_loop().time() + limit
    while any((st := _stat(p)) is not None and st[0] != "Z" for p in pids):
        if asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(0.02)
