"""One debug session over DAP with an adapter agent-lsp started itself (source 2 of CONTRACT
"The debugger (turn 4)"): launch to the first stop, step, evaluate, stop; every stop read back
as the text of Decision 61."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_lsp.agent.tools.debugger.dap import DapClient, DapError, DapEvent

REQUEST_TIMEOUT = 30.0
START_TIMEOUT = 30.0  # the adapter's `initialized` (the program's own time is `timeout`)
FRAMES = 10
LOCALS = 50
REPR_CHARS = 200
OUTPUT_CHARS = 4000
# debugpy's groups inside a scope, not variables of the program
_GROUPS = frozenset(
    {"special variables", "function variables", "class variables", "protected variables"}
)


class DebugFailed(Exception):
    """The session could not do what was asked; the message is for the model."""


@dataclass
class Breakpoint:
    path: str  # absolute
    line: int
    condition: str | None = None


@dataclass
class Adapter:
    """A debug adapter named in `debugAdapters`: its name (the launch `type`) and its argv, the
    program resolved to a path."""

    name: str
    argv: list[str]


@dataclass
class Launch:
    """What to debug: `program` (a file, absolute) or `module`, with the interpreter to use;
    `adapter` None is debugpy's own adapter."""

    python: str
    program: str | None
    module: str | None
    args: list[str]
    cwd: str
    stop_on_entry: bool = False
    adapter: Adapter | None = None

    def arguments(self) -> dict[str, Any]:
        """The DAP `launch` arguments: debugpy's own, or the generic ones any adapter reads."""
        target = {"program": self.program} if self.program else {"module": self.module}
        common = {"request": "launch", **target, "args": self.args, "cwd": self.cwd}
        if self.adapter is not None:
            return {
                "name": "agent-lsp",
                "type": self.adapter.name,
                **common,
                "stopOnEntry": self.stop_on_entry,
            }
        return {
            "name": "agent-lsp",
            "type": "python",
            **common,
            "python": [self.python],
            "console": "internalConsole",
            "justMyCode": True,
            "stopOnEntry": self.stop_on_entry,
        }


@dataclass
class Stop:
    """Where the program is: stopped (a reason, frames, locals) or exited (a code)."""

    state: str  # stopped | exited
    reason: str
    location: str = ""
    frames: list[str] = field(default_factory=list)
    locals: list[tuple[str, str, str]] = field(default_factory=list)  # name, type, repr
    output: str = ""
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"state: {self.state} ({self.reason})"]
        if self.state == "stopped":
            lines.append(f"location: {self.location}")
            lines.append("frames:")
            lines += self.frames
            lines.append("locals:")
            lines += [f"{n} ({t}) = {v}" for n, t, v in self.locals]
        lines += self.notes
        lines.append("output:")
        if self.output:
            lines.append(self.output.rstrip("\n"))
        return "\n".join(lines)


def cut(text: str, limit: int = REPR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class DapSession:
    """A launched program under an adapter speaking DAP on `client`; `show` turns an absolute
    path into what the model reads (workspace-relative)."""

    def __init__(self, client: DapClient, show: Callable[[str], str]):
        self.client = client
        self.show = show
        self.output = ""
        self.thread: int | None = None
        self.frame_ids: list[int] = []
        self.exit_code: int | None = None
        self.ended = False

    def on_event(self, event: DapEvent) -> None:
        if event.event == "output" and event.body.get("category") in ("stdout", "stderr", None):
            self.output = (self.output + str(event.body.get("output", "")))[-OUTPUT_CHARS:]
        elif event.event == "exited":
            code = event.body.get("exitCode")
            self.exit_code = code if isinstance(code, int) else None

    async def _call(self, command: str, arguments: dict[str, Any] | None = None) -> Any:
        try:
            return await asyncio.wait_for(self.client.request(command, arguments), REQUEST_TIMEOUT)
        except TimeoutError:
            raise DebugFailed(f"the debug adapter did not answer {command!r} in time") from None
        except DapError as exc:
            raise DebugFailed(str(exc)) from None

    async def start(self, launch: Launch, breakpoints: list[Breakpoint], timeout: float) -> Stop:
        await self._call(
            "initialize",
            {
                "clientID": "agent-lsp",
                "adapterID": launch.adapter.name if launch.adapter else "debugpy",
                "linesStartAt1": True,
                "columnsStartAt1": True,
                "pathFormat": "path",
            },
        )
        launched = self.client.send("launch", launch.arguments())
        try:
            await self._until_initialized(launched)
            notes = await self.set_breakpoints(breakpoints)
            await self._call("setExceptionBreakpoints", {"filters": ["uncaught"]})
            await self._call("configurationDone")
            await asyncio.wait_for(launched, REQUEST_TIMEOUT)
        except TimeoutError:
            raise DebugFailed("the debugger did not start the program in time") from None
        except DapError as exc:
            raise DebugFailed(f"the debugger could not start the program: {exc}") from None
        stop = await self.wait(timeout)
        stop.notes = notes + stop.notes
        return stop

    async def _until_initialized(self, launched: asyncio.Future[Any]) -> None:
        async def initialized() -> None:
            while (event := await self.client.events.get()).event != "initialized":
                if event.event == "agentLsp/closed":
                    raise DapError("the debug adapter ended before the program started")

        waiter = asyncio.ensure_future(initialized())
        try:
            done, _ = await asyncio.wait(
                {waiter, launched}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                raise TimeoutError
            if launched in done and launched.exception() is not None:
                raise launched.exception() or DapError("launch failed")
            if waiter not in done:
                await asyncio.wait_for(waiter, START_TIMEOUT)
        finally:
            waiter.cancel()

    async def set_breakpoints(self, breakpoints: list[Breakpoint]) -> list[str]:
        """Each file's breakpoints replace that file's earlier ones; notes for those the adapter
        could not place."""
        by_file: dict[str, list[Breakpoint]] = {}
        for bp in breakpoints:
            by_file.setdefault(bp.path, []).append(bp)
        notes = []
        for path, bps in by_file.items():
            body = await self._call(
                "setBreakpoints",
                {
                    "source": {"path": path},
                    "breakpoints": [
                        {"line": b.line, **({"condition": b.condition} if b.condition else {})}
                        for b in bps
                    ],
                },
            )
            for bp, got in zip(bps, body.get("breakpoints", []), strict=False):
                if not got.get("verified", True):
                    why = got.get("message") or "not verified"
                    notes.append(f"note: breakpoint {self.show(path)}:{bp.line}: {why}")
        return notes

    async def wait(self, timeout: float) -> Stop:
        """The next stop or the end; at `timeout` the program is paused (Decision 88)."""
        try:
            return await asyncio.wait_for(self._next_stop(), timeout)
        except TimeoutError:
            pass
        thread = self.thread or await self._first_thread()
        if thread is not None:
            with contextlib.suppress(DebugFailed):
                await self._call("pause", {"threadId": thread})
        try:
            return await asyncio.wait_for(self._next_stop(), REQUEST_TIMEOUT)
        except TimeoutError:
            raise DebugFailed(f"the program did not pause after {timeout:g}s") from None

    async def _first_thread(self) -> int | None:
        with contextlib.suppress(DebugFailed):
            threads = (await self._call("threads")).get("threads") or []
            return int(threads[0]["id"]) if threads else None
        return None

    async def _next_stop(self) -> Stop:
        while True:
            event = await self.client.events.get()
            if event.event == "stopped":
                self.thread = event.body.get("threadId", self.thread)
                return await self._describe(str(event.body.get("reason", "pause")))
            if event.event in ("terminated", "agentLsp/closed"):
                self.ended = True
                code = "unknown" if self.exit_code is None else str(self.exit_code)
                return Stop("exited", code, output=self.output)

    async def _describe(self, reason: str) -> Stop:
        body = await self._call("stackTrace", {"threadId": self.thread, "levels": FRAMES})
        frames = body.get("stackFrames") or []
        self.frame_ids = [int(f["id"]) for f in frames]
        shown = [f"{self._where(f)} {f.get('name', '?')}" for f in frames[:FRAMES]]
        stop = Stop("stopped", reason, frames=shown, output=self.output)
        if frames:
            stop.location = self._where(frames[0])
            stop.locals = await self._locals(self.frame_ids[0])
        if reason == "exception":
            with contextlib.suppress(DebugFailed):
                info = await self._call("exceptionInfo", {"threadId": self.thread})
                what = info.get("description") or ""
                stop.notes.append(f"exception: {info.get('exceptionId', '?')}: {cut(what, 500)}")
        return stop

    def _where(self, frame: dict[str, Any]) -> str:
        path = (frame.get("source") or {}).get("path") or "<unknown>"
        return f"{self.show(path)}:{frame.get('line', 0)}"

    async def _locals(self, frame_id: int) -> list[tuple[str, str, str]]:
        scopes = (await self._call("scopes", {"frameId": frame_id})).get("scopes") or []
        scope = next(
            (
                s
                for s in scopes
                if "locals" in (s.get("presentationHint"), str(s.get("name")).lower())
            ),
            scopes[0] if scopes else None,
        )
        if scope is None or not scope.get("variablesReference"):
            return []
        body = await self._call("variables", {"variablesReference": scope["variablesReference"]})
        found = [v for v in body.get("variables") or [] if v.get("name") not in _GROUPS]
        return [
            (str(v.get("name")), str(v.get("type") or "?"), cut(str(v.get("value", ""))))
            for v in found[:LOCALS]
        ]

    async def step(self, action: str, timeout: float) -> Stop:
        if self.thread is None:
            raise DebugFailed("the program is not stopped")
        await self._call(action, {"threadId": self.thread})
        return await self.wait(timeout)

    async def evaluate(self, expression: str, frame: int) -> tuple[str, str]:
        if not self.frame_ids:
            raise DebugFailed("the program is not stopped: nothing to evaluate in")
        if not 0 <= frame < len(self.frame_ids):
            raise DebugFailed(f"frame {frame} does not exist (0 to {len(self.frame_ids) - 1})")
        body = await self._call(
            "evaluate",
            {"expression": expression, "frameId": self.frame_ids[frame], "context": "repl"},
        )
        return cut(str(body.get("result", ""))), str(body.get("type") or "?")

    async def disconnect(self) -> None:
        if not self.client.closed:
            with contextlib.suppress(DebugFailed, DapError):
                await asyncio.wait_for(
                    self.client.request("disconnect", {"terminateDebuggee": True}), 3
                )
        await self.client.close()
