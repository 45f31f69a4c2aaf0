"""Running one hook command: `bash -c` (else `sh -c`) leading a process group of its own (or inside
the sandbox's PID namespace for a project hook when `sandbox.mode` is on), the JSON payload on
stdin, stdout and stderr kept apart, and the whole group killed when the hook ends, times out or
is cancelled.

Not under the Python reaper run_command uses: a hook runs on every matching tool call, and the
reaper's own interpreter start is several times a hook's whole cost (benchmarks/hooks.py). What a
hook starts in its group dies with it; only a process that leaves the group on purpose (`setsid`)
outlives it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from agent_lsp.agent.exec.process import OutputTail, kill_group, supervise
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.exec.sandbox import Confined

OUTPUT_CAP = 1_000_000  # bytes of each stream kept (head and tail)

# (argv, cwd) -> the command line that confines it (a project hook with the sandbox on) and the
# descriptors it needs, or a refusal.
Confine = Callable[[list[str], Path], Awaitable[Confined]]


class HookRefused(Exception):
    """The hook could not be started as it must be (the sandbox is unavailable)."""


@dataclass(frozen=True)
class HookProcess:
    """What one hook run gave: exit code (None when it never started or was killed at its
    timeout), its two streams, and why it failed to run, if it did."""

    code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str | None = None
    seconds: float = 0.0


def shell_argv(command: str) -> list[str]:
    shell = find_program("bash") or find_program("sh") or "/bin/sh"
    return [shell, "-c", command]


async def run_hook(
    command: str,
    payload: bytes,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    processes: set[asyncio.subprocess.Process],
    confine: Confine | None = None,
) -> HookProcess:
    """One hook, start to end. A cancel kills it (and what it started) and propagates."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    argv = shell_argv(command)
    try:
        confined = await confine(argv, cwd) if confine is not None else Confined(argv)
    except HookRefused as exc:
        return HookProcess(None, "", "", error=str(exc))
    try:
        pipe = asyncio.subprocess.PIPE
        proc = await confined.start(cwd, env, stdin=pipe, stderr=pipe)
    except OSError as exc:
        return HookProcess(None, "", "", error=f"cannot start the hook: {exc.strerror or exc}")
    processes.add(proc)
    out, err = OutputTail(OUTPUT_CAP, OUTPUT_CAP), OutputTail(OUTPUT_CAP, OUTPUT_CAP)

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(payload)
            await proc.stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            proc.stdin.close()

    async def drain(stream: asyncio.StreamReader | None, into: OutputTail) -> None:
        assert stream is not None
        while data := await stream.read(65536):
            into.add(data)

    async def finish() -> None:
        io = asyncio.gather(feed(), drain(proc.stdout, out), drain(proc.stderr, err))
        try:
            # Not proc.wait(): on Python 3.11 it also waits for the pipes, which a job the hook
            # left in the background holds open. The hook's exit ends its group, and the pipes.
            await exited(proc.pid)
            kill_group(proc)
            await io
            await proc.wait()
        finally:
            if not io.done():
                io.cancel()
                await asyncio.gather(io, return_exceptions=True)

    try:  # the whole group, whatever it started, ends with it
        timed_out = await supervise(proc, finish(), timeout, processes)
    finally:
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
    return HookProcess(
        None if timed_out else proc.returncode,
        out.text(),
        err.text(),
        timed_out=timed_out,
        seconds=loop.time() - started,
    )


async def exited(pid: int) -> None:
    """Returns once the process `pid` has exited (reaped or not): a pidfd where Linux has them,
    else a poll of its state."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):
        while _running(pid):  # noqa: ASYNC110 - an exit no event tells of
            await asyncio.sleep(0.01)
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
