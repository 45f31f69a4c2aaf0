"""Verify: what the `verify` setting adds when the agent already ran the same check after its
last edit ("Verified done").

A headless run (run_task, in process) against the scripted model: an `edit_file`, then the
agent's own `run_command` of the check (`python -m unittest -q check`, a recognised runner),
then its final answer. Two set-ups
interleaved run by run: without `verify`, and with `verify.commands` holding that same check line.
The verify step finds the check already passed after the last edit and runs nothing, so the
target is a ratio of ~1.0x (wall time of the run with verify / without). For context: a third
set-up where the agent did not run the check itself, so verify runs it (the cost of one check).

    python benchmarks/verify.py [--runs R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import median, ms  # noqa: E402

CHECK = (
    "import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
)


def script(line: str, agent_checks: bool, flip: bool) -> list[dict[str, Any]]:
    old, new = ("a + b", "b + a") if flip else ("b + a", "a + b")
    edit = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": old, "new_text": new}}
    replies: list[dict[str, Any]] = [{"tool_calls": [edit]}]
    if agent_checks:
        replies.append({"tool_calls": [{"name": "run_command", "arguments": {"command": line}}]})
    return [*replies, {"text": "done"}]


async def one_run(
    kind: str, base_url: str, root: Path, line: str
) -> tuple[float, float, dict[str, Any]]:
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import run_task
    from agent_lsp.agent.ports import Decision
    from agent_lsp.agent.state.session import Session
    from agent_lsp.settings import Settings

    class Yes:
        async def ask(self, request: Any) -> Decision:
            return Decision.ALLOW

    verify = {"commands": [line]} if kind != "none" else {}
    settings = Settings.model_validate({"model": "m", "baseUrl": base_url, "verify": verify})
    t0, c0 = time.perf_counter(), time.process_time()
    report = await run_task(
        f"bench {kind}", session=Session(), settings=settings, workspace=DiskWorkspace([root]),
        approver=Yes(), emit=lambda _e: None, env={**os.environ, "OPENAI_API_KEY": "sk-bench-000000"},
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if report.stop_reason != "done":
        raise RuntimeError(f"{kind}: {report.stop_reason}: {report.error}")
    return wall, cpu, report.verification


async def step_cost(root: Path, line: str, count: int = 2000) -> float:
    """The verify step's own cost (in process) when the check already passed after the edit."""
    from agent_lsp.agent.loop.verify import Verification
    from agent_lsp.agent.messages import Outcome, ToolCall, ToolResult
    from agent_lsp.agent.tools.base import CommandExit, CommandPlan, Prepared, ToolContext
    from agent_lsp.agent.tools.paths import PathGuard
    from agent_lsp.settings_schema import VerifySettings

    async def nothing() -> str:
        return ""

    class NoRunner:
        async def run(self, calls: list[ToolCall], turn: int) -> list[ToolResult]:
            raise AssertionError("verify ran a command the agent already passed")

    paths = PathGuard([root], [root.name])
    verify = Verification(
        VerifySettings(commands=[line]), ToolContext(workspace=None, paths=paths), paths  # type: ignore[arg-type]
    )
    verify.changes.add(root / "calc.py")
    edit = ToolCall("e", "edit_file", "{}")
    verify.observe(edit, Prepared("", nothing), ToolResult("e", Outcome.OK, "applied"))
    plan = CommandPlan(line, ended=CommandExit(0))
    check = ToolCall("c", "run_command", "{}")
    verify.observe(check, Prepared("", nothing, command=plan), ToolResult("c", Outcome.OK, "ok"))
    t0 = time.perf_counter()
    for _ in range(count):
        assert await verify.step(NoRunner(), 1, lambda _e: None, True) is None
    return (time.perf_counter() - t0) / count


async def main(runs: int) -> dict[str, Any]:
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    work = Path(tempfile.mkdtemp(prefix="bench-verify-"))
    os.environ["AGENT_LSP_STATE_DIR"] = str(work / "state")
    os.environ["CLAUDE_CONFIG_DIR"] = str(work / "claude")  # the machine's own hooks stay out
    root = work / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    (root / "check.py").write_text(CHECK)
    line = f"{sys.executable} -m unittest -q check"  # a recognised runner: a check either way
    # (set-up, whether the agent runs the check itself)
    kinds = (("none", True), ("verify", True), ("verify-runs-it", False))
    walls: dict[str, list[float]] = {k: [] for k, _ in kinds}
    cpus: dict[str, list[float]] = {k: [] for k, _ in kinds}
    checks: dict[str, int] = {}
    flip = False
    with ScriptedModelServer() as model:
        for rep in range(runs + 1):  # the first round warms up
            for kind, agent_checks in kinds:
                model.add(script(line, agent_checks, flip))
                flip = not flip
                wall, cpu, verification = await one_run(kind, model.base_url, root, line)
                checks[kind] = len(verification["checks"])
                if verification["status"] != "passed":
                    raise RuntimeError(f"{kind}: verification {verification}")
                if rep:
                    walls[kind].append(wall)
                    cpus[kind].append(cpu)
        step = await step_cost(root, line)
    med = {k: median(v) for k, v in walls.items()}
    cpu_med = {k: median(v) for k, v in cpus.items()}
    return {
        "run, agent checked, no verify": ms(med["none"]),
        "run, agent checked, verify of the same line": ms(med["verify"]),
        "ratio verify / no verify (target ~1.0x)": f"{med['verify'] / med['none']:.2f}x",
        "agent-lsp's own CPU per run (the scripted model is a thread of this process), no verify / "
        "verify": f"{ms(cpu_med['none'])} / {ms(cpu_med['verify'])} "
        f"({cpu_med['verify'] / cpu_med['none']:.2f}x)",
        "checks run with verify when the agent checked": checks["verify"],
        "the verify step's own cost when the check already passed (in process)": (
            f"{step * 1e6:.1f} µs"
        ),
        "for context: agent did not check, verify runs it": ms(med["verify-runs-it"]),
        "runs": runs,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.runs)), indent=2, ensure_ascii=False))
