"""Starting debugpy's adapter for one run: under the reaper, or inside the same bwrap as the
program when the sandbox is on (Decision 87), DAP over its stdio."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agent_lsp.agent.exec.process import end_process
from agent_lsp.agent.tools.debugger.dap import DapClient
from agent_lsp.agent.tools.debugger.session import Breakpoint, DapSession, DebugFailed, Launch, Stop
from agent_lsp.agent.tools.debugger.sources import debugpy_dir
from agent_lsp.agent.tools.runner import CommandRunner

STDERR_CHARS = 2000


class DebugSource(Protocol):
    """What the debug tools drive: debugpy's adapter here, or the editor's debugger."""

    async def start(
        self, launch: Launch, breakpoints: list[Breakpoint], timeout: float
    ) -> Stop: ...

    async def step(self, action: str, breakpoints: list[Breakpoint], timeout: float) -> Stop: ...

    async def evaluate(self, expression: str, frame: int) -> tuple[str, str]: ...

    async def finish(self) -> str: ...

    async def stop(self) -> int | None: ...


def _own_tools(python: str, adapter: Path) -> tuple[Path, ...]:
    """What a sandboxed debug session needs to see of the host: each folder the interpreter's
    symbolic links pass through (a venv's root with its `pyvenv.cfg`) and the folder debugpy is
    installed in. Already visible on most machines; not under a private /tmp (a checkout or a
    venv there)."""
    seen: list[Path] = []
    path = Path(python)
    for _ in range(16):  # a chain of links, never a loop
        seen.append(path.parent)
        if (path.parent.parent / "pyvenv.cfg").is_file():
            seen.append(path.parent.parent)
        if not path.is_symlink():
            break
        path = path.parent / os.readlink(path)
    seen.append(adapter.parent)
    return tuple(dict.fromkeys(p.resolve() if p.is_symlink() else p for p in seen))


class Debugger:
    """The run's one debug session (CONTRACT: one at a time, ended with the run)."""

    def __init__(self, runner: CommandRunner, show: Callable[[str], str]):
        self.runner = runner
        self.show = show
        self.session: DapSession | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr = ""
        self._drain: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        return self.session is not None and not self.session.ended

    def _adapter_argv(self, launch: Launch) -> tuple[list[str], tuple[Path, ...]]:
        """The adapter's argv and the host folders a sandboxed session needs to see."""
        if launch.adapter is not None:  # debugAdapters: the user's own adapter
            program = launch.adapter.argv[0]
            return launch.adapter.argv, _own_tools(program, Path(program))
        adapter = debugpy_dir()
        if adapter is None:
            raise DebugFailed("debugpy is not installed in agent-lsp's environment")
        return [launch.python, str(adapter / "adapter")], _own_tools(launch.python, adapter)

    async def start(self, launch: Launch, breakpoints: list[Breakpoint], timeout: float) -> Stop:
        argv, tools = self._adapter_argv(launch)
        await self.stop()
        cwd = Path(launch.cwd)
        confined, _ = await self.runner.wrap(argv, cwd, "debug_start", tools=tools)
        try:
            pipe = asyncio.subprocess.PIPE
            proc = await confined.start(cwd, self.runner.child_env(), stdin=pipe, stderr=pipe)
        except OSError as exc:
            raise DebugFailed(f"cannot start the debug adapter: {exc.strerror or exc}") from None
        self.proc = proc
        self.runner.processes.add(proc)  # the run's end ends it, whatever happens here
        assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
        self._drain = asyncio.ensure_future(self._read_stderr(proc.stderr))
        session = DapSession(DapClient(proc.stdout, _Writer(proc.stdin)), self.show)
        session.client.on_event = session.on_event
        self.session = session
        try:
            return await session.start(launch, breakpoints, timeout)
        except DebugFailed as exc:
            await self.stop()
            said = self._stderr.strip().splitlines()
            why = f" (the adapter said: {said[-1]})" if said else ""
            if launch.adapter is not None:
                why += f" [debugAdapters.{launch.adapter.name}: {shlex.join(launch.adapter.argv)}]"
            raise DebugFailed(f"{exc}{why}") from None

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while data := await stream.read(65536):
            self._stderr = (self._stderr + data.decode(errors="replace"))[-STDERR_CHARS:]

    def current(self) -> DapSession:
        if self.session is None:
            raise DebugFailed("no debug session: start one with debug_start")
        if self.session.ended:
            code = self.session.exit_code
            raise DebugFailed(
                f"the debug session has ended (the program exited with code {code}); "
                "start another with debug_start"
            )
        return self.session

    async def step(self, action: str, breakpoints: list[Breakpoint], timeout: float) -> Stop:
        session = self.current()
        notes = await session.set_breakpoints(breakpoints) if breakpoints else []
        stop = await session.step(action, timeout)
        stop.notes = notes + stop.notes
        return stop

    async def evaluate(self, expression: str, frame: int) -> tuple[str, str]:
        return await self.current().evaluate(expression, frame)

    async def finish(self) -> str:
        """debug_stop's answer."""
        if self.session is None:
            return "no debug session was running"
        ended = self.session.ended
        code = await self.stop()
        if ended:
            return f"state: exited ({'unknown' if code is None else code})"
        return "state: exited (stopped by debug_stop)"

    async def stop(self) -> int | None:
        """End the session and every process of it; the exit code when the program had one."""
        session, proc, self.session, self.proc = self.session, self.proc, None, None
        code = None
        if session is not None:
            code = session.exit_code
            await session.disconnect()
        if proc is not None:
            try:
                await end_process(proc)
            finally:
                self.runner.processes.discard(proc)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(BaseException):
                await self._drain
            self._drain = None
        return code


class _Writer:
    """The adapter's stdin as the DAP client writes to it."""

    def __init__(self, stdin: asyncio.StreamWriter):
        self._stdin = stdin

    def write(self, data: bytes) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._stdin.write(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stdin.close()
