"""A run's background processes (`run_command {background: true}`, CONTRACT "Background
processes", Decisions 60 and 86): at most four per run, named `p1`..`p4`, each in its own process
group under the reaper or the sandbox like any command; their output kept since the last read
(head and tail capped like run_command's), a `process` event when one starts and when it ends,
and every one stopped at the run's end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_lsp.agent.events import Event, ProcessEvent
from agent_lsp.agent.exec.process import CommandNotStarted, OutputTail, end_process
from agent_lsp.agent.exec.sandbox import Confined

log = logging.getLogger(__name__)

MAX_PER_RUN = 4
LIMIT_MESSAGE = f"at most {MAX_PER_RUN} background processes per run"
FIRST_WAIT = 1.0  # seconds run_command waits before it answers with the output so far
# ... and at most this much more while the command has written nothing at all (a slow start)
SILENT_WAIT = 2.0

State = Literal["running", "exited", "stopped"]


@dataclass(frozen=True)
class Output:
    """What a process wrote since the last read."""

    text: str
    total_bytes: int
    dropped_bytes: int


@dataclass(eq=False)
class BackgroundProcess:
    process_id: str
    command: str
    proc: asyncio.subprocess.Process
    state: State = "running"
    exit_code: int | None = None
    unread: OutputTail = field(default_factory=OutputTail)
    reader: asyncio.Task[None] | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    wrote: asyncio.Event = field(default_factory=asyncio.Event)  # its first bytes came

    async def first_wait(self) -> None:
        """About a second (FIRST_WAIT), less when it ends sooner, up to SILENT_WAIT more while
        it has written nothing yet."""
        for event, seconds in ((self.ended, FIRST_WAIT), (self.wrote, SILENT_WAIT)):
            if self.ended.is_set() or event.is_set():
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_either(self.ended, event), seconds)

    def take_output(self) -> Output:
        """The output since the last read; the next read starts after it."""
        unread, self.unread = self.unread, OutputTail()
        return Output(unread.text(), unread.total, unread.dropped)

    def status(self) -> str:
        if self.state == "running":
            return "running"
        if self.state == "stopped":
            return f"stopped (exit code {self.exit_code})"
        return f"exited with code {self.exit_code}"

    def summary(self, redact: Callable[[str], str] = str) -> dict[str, Any]:
        """Its line in the run's report (Decision 60)."""
        return {
            "processId": self.process_id,
            "command": redact(self.command),
            "state": self.state,
            "exitCode": self.exit_code,
        }


async def _either(first: asyncio.Event, second: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


class BackgroundProcesses:
    """This run's background processes. `emit` gets their `process` events."""

    def __init__(self, emit: Callable[[Event], None]):
        self.emit = emit
        self.processes: dict[str, BackgroundProcess] = {}
        self._starting = 0

    def check_room(self) -> None:
        """ValueError with the limit's message when the run has started its four."""
        if len(self.processes) + self._starting >= MAX_PER_RUN:
            raise ValueError(LIMIT_MESSAGE)

    async def start(
        self,
        confined: Confined,
        cwd: Path,
        env: dict[str, str],
        command: str,
        *,
        group: set[asyncio.subprocess.Process],
        on_end: Callable[[], Awaitable[None]] | None = None,
    ) -> BackgroundProcess:
        """Start `command` (already confined); `group`: the runner's processes, which its own
        stop_all ends too; `on_end` runs once it ended (the checkpoint's look at what it
        changed). ValueError at the limit, CommandNotStarted when it cannot start."""
        self.check_room()
        self._starting += 1
        try:
            try:
                proc = await confined.start(
                    cwd, env, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.STDOUT
                )
            except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
                raise CommandNotStarted(
                    f"cannot start {confined.argv[0]!r}: {exc.strerror or exc}"
                ) from None
        finally:
            self._starting -= 1
        process_id = f"p{len(self.processes) + 1}"
        entry = BackgroundProcess(process_id, command, proc)
        self.processes[process_id] = entry
        group.add(proc)
        entry.reader = asyncio.create_task(self._follow(entry, group, on_end))
        self._event(entry)
        return entry

    async def _follow(
        self,
        entry: BackgroundProcess,
        group: set[asyncio.subprocess.Process],
        on_end: Callable[[], Awaitable[None]] | None,
    ) -> None:
        proc = entry.proc
        try:
            assert proc.stdout is not None
            while data := await proc.stdout.read(65536):
                entry.unread.add(data)
                entry.wrote.set()
            await proc.wait()
        finally:
            await end_process(proc)  # what it left behind ends with it (the reaper's group)
            group.discard(proc)
            entry.exit_code = proc.returncode
            if entry.state == "running":
                entry.state = "exited"
            if on_end is not None:
                try:
                    await on_end()
                except Exception:  # its checkpoint record only: the process is over anyway
                    log.exception("after background process %s", entry.process_id)
            entry.ended.set()
            self._event(entry)

    def _event(self, entry: BackgroundProcess) -> None:
        verb = {"running": "started", "exited": entry.status(), "stopped": "stopped"}
        text = f"background process {entry.process_id} {verb[entry.state]}: {entry.command}"
        self.emit(
            ProcessEvent(
                text,
                entry.process_id,
                entry.command,
                entry.state,
                exit_code=None if entry.state == "running" else entry.exit_code,
            )
        )

    def get(self, process_id: str) -> BackgroundProcess | None:
        return self.processes.get(process_id)

    async def stop(self, process_id: str) -> bool:
        """End one (its process group); True when it was running."""
        entry = self.processes.get(process_id)
        if entry is None or entry.state != "running":
            return False
        if entry.proc.returncode is not None:  # it ended on its own: its reader says so
            if entry.reader is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(entry.reader)
            return False
        entry.state = "stopped"
        await end_process(entry.proc)
        if entry.reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(entry.reader)
        return True

    async def stop_all(self) -> None:
        """The run's end: every one still running stops, its changes looked at."""
        running = [p for p, e in self.processes.items() if e.state == "running"]
        if running:
            await asyncio.gather(*(self.stop(p) for p in running), return_exceptions=True)
        readers = [e.reader for e in self.processes.values() if e.reader is not None]
        if readers:  # those that exited on their own: their end is recorded before the report
            await asyncio.gather(*readers, return_exceptions=True)

    def report(self, redact: Callable[[str], str] = str) -> list[dict[str, Any]]:
        return [e.summary(redact) for e in self.processes.values()]
