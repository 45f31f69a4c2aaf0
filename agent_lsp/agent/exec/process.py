"""Running a command so that nothing escapes: a child subreaper (or the sandbox's PID
namespace) around it, and output kept as a head and a rolling tail with the bytes dropped
counted, never silently. (Its environment, without the model's key, is keyguard.child_env's.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
    argv: list[str],
    cwd: Path,
    timeout: float,
    *,
    env: dict[str, str],
    processes: set[asyncio.subprocess.Process],
    on_output: Callable[[bytes], None] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> ProcessResult:
    """Run argv (already wrapped by the reaper or the sandbox) in its own session; a timeout
    or a cancel ends it and everything it started. `pass_fds`: descriptors the wrapper reads
    (the sandbox's seccomp filter)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            pass_fds=pass_fds,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
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

    timed_out = False
    try:
        try:
            await asyncio.wait_for(finish(), timeout)
        except TimeoutError:
            timed_out = True
    finally:
        try:
            await end_process(proc)
        finally:
            processes.discard(proc)
    return ProcessResult(proc.returncode, capture.text(), timed_out, capture.total, capture.dropped)


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
    """stop_process, then a SIGKILL of the whole group if the wrapper did not end in time."""
    stop_process(proc)
    try:
        await asyncio.shield(asyncio.wait_for(proc.wait(), KILL_GRACE))
    except (TimeoutError, asyncio.CancelledError):
        pass
    kill_group(proc)
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.shield(asyncio.wait_for(proc.wait(), KILL_GRACE))
