"""Source 1 of CONTRACT "The debugger (turn 4)": the editor's own debugger, asked through the
host (`agentLsp/debug`, Decision 61), so the user watches the session in the editor's debug
view. Used when the client advertises it and the sandbox is off (Decision 87)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_lsp.agent.tools.debugger.session import (
    LOCALS,
    REQUEST_TIMEOUT,
    Breakpoint,
    DebugFailed,
    Launch,
    Stop,
    cut,
)

# (the request, seconds to wait for the answer) -> the answer; raises DebugFailed
EditorRequest = Callable[[dict[str, Any], float], Awaitable[Any]]
ANSWER_MARGIN = 15.0  # beyond the program's own timeout: the editor pauses, then answers


class EditorDebugger:
    """The run's one session in the editor's debugger."""

    def __init__(self, request: EditorRequest, show: Callable[[str], str]):
        self._request = request
        self.show = show
        self.started = False
        self.ended = False

    async def _ask(self, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        answer = await self._request(params, timeout)
        if not isinstance(answer, dict):
            raise DebugFailed("the editor's debugger gave no answer")
        return answer

    def _breakpoints(self, breakpoints: list[Breakpoint]) -> list[dict[str, Any]]:
        return [
            {
                "path": self.show(b.path),
                "line": b.line,
                **({"condition": b.condition} if b.condition else {}),
            }
            for b in breakpoints
        ]

    async def start(self, launch: Launch, breakpoints: list[Breakpoint], timeout: float) -> Stop:
        if self.started and not self.ended:
            await self.stop()
        target = (
            {"program": self.show(launch.program)} if launch.program else {"module": launch.module}
        )
        params = {
            "action": "start",
            **target,
            "args": launch.args,
            "cwd": launch.cwd,
            "breakpoints": self._breakpoints(breakpoints),
            "stopOnEntry": launch.stop_on_entry,
            "timeout": timeout,
        }
        self.started, self.ended = True, False
        return self._stop(await self._ask(params, timeout + ANSWER_MARGIN))

    def _live(self) -> None:
        if not self.started:
            raise DebugFailed("no debug session: start one with debug_start")
        if self.ended:
            raise DebugFailed("the debug session has ended; start another with debug_start")

    async def step(self, action: str, breakpoints: list[Breakpoint], timeout: float) -> Stop:
        self._live()
        params: dict[str, Any] = {"action": "step", "kind": action, "timeout": timeout}
        if breakpoints:
            params["breakpoints"] = self._breakpoints(breakpoints)
        return self._stop(await self._ask(params, timeout + ANSWER_MARGIN))

    async def evaluate(self, expression: str, frame: int) -> tuple[str, str]:
        self._live()
        answer = await self._ask(
            {"action": "eval", "expression": expression, "frame": frame}, REQUEST_TIMEOUT
        )
        return cut(str(answer.get("value", ""))), str(answer.get("type") or "?")

    async def finish(self) -> str:
        if not self.started:
            return "no debug session was running"
        if self.ended:
            return "state: exited (the program had ended)"
        await self.stop()
        return "state: exited (stopped by debug_stop)"

    async def stop(self) -> int | None:
        if self.started and not self.ended:
            self.ended = True
            try:
                await self._ask({"action": "stop"}, 5.0)
            except DebugFailed:
                pass
        return None

    def _stop(self, answer: dict[str, Any]) -> Stop:
        state = "exited" if answer.get("state") == "exited" else "stopped"
        self.ended = state == "exited"
        locals_ = [
            (str(v.get("name")), str(v.get("type") or "?"), cut(str(v.get("value", ""))))
            for v in answer.get("locals") or []
            if isinstance(v, dict)
        ][:LOCALS]
        return Stop(
            state,
            str(answer.get("reason") or ("0" if state == "exited" else "pause")),
            location=str(answer.get("location") or ""),
            frames=[str(f) for f in answer.get("frames") or []][:10],
            locals=locals_,
            output=str(answer.get("output") or "")[-4000:],
        )
