"""CONTRACT "The debugger (turn 4)", source 1 over real LSP: a client that advertises
`experimental.agentLsp.debug` is asked `agentLsp/debug {action, …}` (Decision 61) and its answer
is what the model reads; with the sandbox on, the editor is not asked and the program runs under
debugpy started by agent-lsp, sandboxed (Decision 87). The test editor's own "debugger" is the
real debugpy, driven by the core's DAP client."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from agent_lsp.agent.tools.debugger.launcher import Debugger
from agent_lsp.agent.tools.debugger.session import Launch
from agent_lsp.agent.tools.runner import CommandRunner
from agent_lsp.server.rpc import plain
from agent_lsp.settings import SandboxSettings
from tests.e2e.harness import capabilities, tool_messages

PROGRAM = "def average(values):\n    count = len(values) - 1\n    return sum(values) / count\n\n\nprint(average([3, 5, 10]))\n"


class EditorDebugger:
    """What an editor's debug UI would do with `agentLsp/debug`: here debugpy, really."""

    def __init__(self, root: Path):
        runner = CommandRunner(env=dict(os.environ), secret_names=[], secrets=[], sandbox=SandboxSettings(),
                               roots=[root], hidden=[])
        self.root = root
        self.debugger = Debugger(runner, lambda p: os.path.relpath(p, root))
        self.asked: list[dict[str, Any]] = []

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        from agent_lsp.agent.tools.debugger.session import Breakpoint

        self.asked.append(request)
        if request["action"] == "start":
            launch = Launch(sys.executable, str(self.root / request["program"]), None, request.get("args") or [],
                            request["cwd"], bool(request.get("stopOnEntry")))
            bps = [Breakpoint(str(self.root / b["path"]), b["line"], b.get("condition")) for b in request["breakpoints"]]
            stop = await self.debugger.start(launch, bps, request.get("timeout", 60))
        elif request["action"] == "step":
            stop = await self.debugger.step(request["kind"], [], request.get("timeout", 60))
        elif request["action"] == "eval":
            value, kind = await self.debugger.evaluate(request["expression"], request.get("frame", 0))
            return {"value": value, "type": kind}
        else:
            await self.debugger.stop()
            return {}
        return {"state": stop.state, "reason": stop.reason, "location": stop.location, "frames": stop.frames,
                "locals": [{"name": n, "type": t, "value": v} for n, t, v in stop.locals], "output": stop.output}


def calls(*items: dict) -> dict:
    return {"tool_calls": [{"id": f"c{i}", **item} for i, item in enumerate(items)]}


async def start_debugging_editor(open_editor, workspace: Path, **init: Any):
    caps = capabilities("visual-studio-code")
    caps.experimental = {"agentLsp": {"debug": True}}
    editor = await open_editor(caps, init={"approval": {"default": "ask"}, **init})
    editor.approval_answers = ["Allow"] * 3
    backend = EditorDebugger(workspace.resolve())

    @editor.client.feature("agentLsp/debug")
    async def on_debug(ls: Any, params: Any) -> Any:
        return await backend.answer(plain(params))

    return editor, backend


async def test_the_editor_that_advertises_a_debugger_runs_the_session(open_editor, model, workspace):
    (workspace / "avg.py").write_text(PROGRAM)
    model.add("debug it", [
        calls({"name": "debug_start", "arguments": {"program": "avg.py", "breakpoints": [{"path": "avg.py", "line": 3}]}}),
        {"tool_calls": [{"id": "e", "name": "debug_eval", "arguments": {"expression": "count * 10"}}]},
        {"tool_calls": [{"id": "x", "name": "debug_stop", "arguments": {}}]},
        {"text": "count is one short"},
    ])
    editor, backend = await start_debugging_editor(open_editor, workspace)

    started = await editor.run("debug it")
    report = await editor.wait_stop(started["runId"], 60)

    assert report["stopReason"] == "done", report
    start = backend.asked[0]
    assert start["action"] == "start" and start["program"] == "avg.py"
    assert start["breakpoints"] == [{"path": "avg.py", "line": 3}] and start["stopOnEntry"] is False
    assert [a["action"] for a in backend.asked] == ["start", "eval", "stop"]
    results = tool_messages(model.requests[-1])
    assert results["c0"].startswith("state: stopped (breakpoint)\nlocation: avg.py:3\nframes:\navg.py:3 average")
    assert "count (int) = 2" in results["c0"]
    assert results["e"] == "count * 10 (int) = 20"
    assert results["x"] == "state: exited (stopped by debug_stop)"
    approval = [e for e in editor.events(started["runId"], "approval") if e.get("tool") == "debug_start"]
    assert approval and "runs in the editor's debugger" in approval[0]["detail"]
    assert len(editor.approval_requests) == 2  # debug_start and debug_eval asked; debug_stop not
    health = await editor.execute("agentLsp.health", {})
    check = next(c for c in plain(health)["checks"] if c["name"] == "debug")
    assert check["ok"] and check["detail"].startswith("editor, debugpy "), check


async def test_with_the_sandbox_on_the_editor_is_not_asked(open_editor, model, workspace):
    (workspace / "avg.py").write_text(PROGRAM)
    model.add("debug boxed", [
        calls({"name": "debug_start", "arguments": {"program": "avg.py", "breakpoints": [{"path": "avg.py", "line": 3}]}}),
        {"text": "ok"},
    ])
    editor, backend = await start_debugging_editor(open_editor, workspace, sandbox={"mode": "workspace-write"})

    started = await editor.run("debug boxed")
    await editor.wait_stop(started["runId"], 60)

    assert backend.asked == []
    result = tool_messages(model.requests[-1])["c0"]
    assert result.startswith("state: stopped (breakpoint)") and "count (int) = 2" in result, result
