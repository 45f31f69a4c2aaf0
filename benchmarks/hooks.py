"""Hooks: what hooks add to a tool call.

A headless run (run_task, in process) of N `list_files` turns against the scripted model, in three
set-ups interleaved run by run: no hooks; ten hooks whose matchers match nothing of it
(`PreToolUse` on `Edit|Write`, `PostToolUse` on `Bash`, ...); one `PreToolUse` hook `exit 0` that
matches every call. Per call: (wall time of the run) / N; the hooks' cost is the difference with
the no-hooks run. Targets: a hook that exits at once adds <= 15 ms per call; hooks that match
nothing add nothing measurable. For context: one hook process on its own (bash leading its own group)
and a bare `bash -c 'exit 0'`.

    python benchmarks/hooks.py [--calls N] [--runs R]
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


def hooks_of(kind: str) -> dict[str, Any]:
    def group(matcher: str, command: str = "exit 0") -> dict[str, Any]:
        return {"matcher": matcher, "hooks": [{"type": "command", "command": command}]}

    if kind == "none":
        return {}
    if kind == "nonmatching":
        return {
            "PreToolUse": [group(m) for m in ("Edit|Write", "Bash", "mcp__.*", "Task", "read_file")],
            "PostToolUse": [group(m) for m in ("Bash", "Edit", "Write", "MultiEdit", "Grep")],
        }
    return {"PreToolUse": [group("*")]}


async def one_run(kind: str, base_url: str, root: Path, calls: int) -> float:
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import run_task
    from agent_lsp.agent.ports import Decision
    from agent_lsp.agent.state.session import Session
    from agent_lsp.settings import Settings

    class Yes:
        async def ask(self, request: Any) -> Decision:
            return Decision.ALLOW

    settings = Settings.model_validate(
        {"model": "m", "baseUrl": base_url, "maxTurns": calls + 5, "hooks": hooks_of(kind)}
    )
    t0 = time.perf_counter()
    report = await run_task(
        f"bench {kind}", session=Session(), settings=settings, workspace=DiskWorkspace([root]),
        approver=Yes(), emit=lambda _e: None, env={**os.environ, "OPENAI_API_KEY": "sk-bench-000000"},
    )
    wall = time.perf_counter() - t0
    if report.stop_reason != "done" or report.tool_calls != calls:
        raise RuntimeError(f"{kind}: {report.stop_reason} after {report.tool_calls} calls: {report.error}")
    return wall / calls


async def spawn_costs(root: Path, count: int) -> dict[str, float]:
    from agent_lsp.agent.policy.hook_exec import run_hook

    times: dict[str, list[float]] = {"hook": [], "bash": []}
    for _ in range(count):
        t0 = time.perf_counter()
        done = await run_hook("exit 0", b"{}", cwd=root, env=dict(os.environ), timeout=30, processes=set())
        assert done.code == 0, done
        times["hook"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", "exit 0", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        await proc.communicate(b"{}")
        times["bash"].append(time.perf_counter() - t0)
    return {k: median(v) for k, v in times.items()}


async def lookup_cost(root: Path, count: int = 2000) -> float:
    """The in-process cost of a call's PreToolUse/PostToolUse when no hook matches it."""
    from agent_lsp.agent.loop.tool_hooks import ToolHooks
    from agent_lsp.agent.messages import ToolCall
    from agent_lsp.agent.policy.hook_config import declared_hooks
    from agent_lsp.agent.policy.hooks import RunHooks
    from agent_lsp.agent.ports import NO_SPAN

    table = declared_hooks(hooks_of("nonmatching"), [root])
    hooks = ToolHooks(RunHooks(table, "s", "t", root, {}, lambda _e: None, None), "main")
    call = ToolCall("c1", "list_files", "{}")
    t0 = time.perf_counter()
    for _ in range(count):
        await hooks.before(call, None, 1, NO_SPAN)
        await hooks.after(call, True, "a.py", 1, NO_SPAN)
    return (time.perf_counter() - t0) / count


async def main(calls: int, runs: int) -> dict[str, Any]:
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    work = Path(tempfile.mkdtemp(prefix="bench-hooks-"))
    os.environ["AGENT_LSP_STATE_DIR"] = str(work / "state")
    os.environ["CLAUDE_CONFIG_DIR"] = str(work / "claude")  # the machine's own hooks stay out
    root = work / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    kinds = ("none", "nonmatching", "exit0")
    per_call: dict[str, list[float]] = {k: [] for k in kinds}
    with ScriptedModelServer() as model:
        for rep in range(runs + 1):  # the first round warms up
            for kind in kinds:
                model.add([{"tool_calls": [{"name": "list_files", "arguments": {}}]}] * calls + [{"text": "done"}])
                value = await one_run(kind, model.base_url, root, calls)
                if rep:
                    per_call[kind].append(value)
        spawn = await spawn_costs(root, 20)
        lookup = await lookup_cost(root)
    med = {k: median(v) for k, v in per_call.items()}
    return {
        "per call, no hooks": ms(med["none"]),
        "per call, 10 non-matching hooks": ms(med["nonmatching"]),
        "added by non-matching hooks": ms(med["nonmatching"] - med["none"]),
        "non-matching hooks' lookup per call (in process)": f"{lookup * 1e6:.1f} µs",
        "per call, one PreToolUse `exit 0`": ms(med["exit0"]),
        "added by a hook that exits at once": ms(med["exit0"] - med["none"]) + " (target <= 15 ms)",
        "one hook process alone (run_hook: bash, its own group)": ms(spawn["hook"]),
        "a bare `bash -c 'exit 0'`": ms(spawn["bash"]),
        "calls per run x runs": f"{calls} x {runs}",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.calls, args.runs)), indent=2, ensure_ascii=False))
