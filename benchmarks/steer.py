"""Steering: a steer reaches the next model request within one turn boundary, with no added
model call (a conversation's speed target).

A headless run (run_task, in process) against the scripted model: a `run_command` of a command
that takes STEP seconds, then the final answer. Two set-ups interleaved run by run: without a
steer, and with `agentLsp.steer`'s entry point (the run's handle) called 0.1 s into the command.
Figures: the model calls of each (the target: equal), where the steer landed (the request right
after the command's result), the time from the steer to that request (the command's remaining
time plus the turn's own overhead), and the wall time ratio (target ~1.0x).

    python benchmarks/steer.py [--runs R]
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

STEP = 0.5  # seconds the agent's command takes
STEER_AFTER = 0.1  # seconds into the command
STEER = "also check mul, please"


async def one_run(
    steer: bool, model: Any, root: Path, prompt: str
) -> tuple[float, int, float | None, int | None]:
    """Wall time, model calls, seconds from the steer to its landing (the `steer` event, sent
    right before the model call that carries it), and which request (1-based) held it."""
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.handle import RunHandle
    from agent_lsp.agent.loop.run import run_task
    from agent_lsp.agent.ports import Decision
    from agent_lsp.agent.state.session import Session
    from agent_lsp.settings import Settings

    class Yes:
        async def ask(self, request: Any) -> Decision:
            return Decision.ALLOW

    session = Session()
    handle = RunHandle("r-bench", session, task=asyncio.current_task(), started=True)
    steered_at: list[float] = []
    landed_at: list[float] = []

    def emit(event: Any) -> None:
        if getattr(event, "kind", "") == "steer":  # sent where it lands: before the model call
            landed_at.append(time.perf_counter())
        if steer and not steered_at and getattr(event, "kind", "") == "toolCall":
            def now() -> None:
                steered_at.append(time.perf_counter())
                assert handle.steer(STEER)
            asyncio.get_running_loop().call_later(STEER_AFTER, now)

    settings = Settings.model_validate({"model": "m", "baseUrl": model.base_url})
    before = len(model.requests)
    t0 = time.perf_counter()
    report = await run_task(
        prompt, session=session, settings=settings, workspace=DiskWorkspace([root]),
        approver=Yes(), emit=emit, handle=handle,
        env={**os.environ, "OPENAI_API_KEY": "sk-bench-000000"},
    )
    wall = time.perf_counter() - t0
    if report.stop_reason != "done":
        raise RuntimeError(f"steer={steer}: {report.stop_reason}: {report.error}")
    requests = model.requests[before:]
    landed = next((i for i, r in enumerate(requests, 1) if STEER in json.dumps(r)), None)
    delay = landed_at[0] - steered_at[0] if steered_at and landed_at else None
    return wall, len(requests), delay, landed


async def main(runs: int) -> dict[str, Any]:
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    work = Path(tempfile.mkdtemp(prefix="bench-steer-"))
    os.environ["AGENT_LSP_STATE_DIR"] = str(work / "state")
    os.environ["CLAUDE_CONFIG_DIR"] = str(work / "claude")  # the machine's own hooks stay out
    root = work / "ws"
    root.mkdir()
    command = f"{sys.executable} -c 'import time; time.sleep({STEP})'"
    walls: dict[bool, list[float]] = {False: [], True: []}
    calls: dict[bool, set[int]] = {False: set(), True: set()}
    delays: list[float] = []
    landed_in: set[int | None] = set()
    with ScriptedModelServer() as model:
        for rep in range(runs + 1):  # the first round warms up
            for steer in (False, True):
                prompt = f"bench {rep} {steer}"
                model.add(prompt, [
                    {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
                    {"text": "done"},
                ])
                wall, n, delay, landed = await one_run(steer, model, root, prompt)
                calls[steer].add(n)
                if steer:
                    landed_in.add(landed)
                if rep:
                    walls[steer].append(wall)
                    if delay is not None:
                        delays.append(delay)
    plain, steered = median(walls[False]), median(walls[True])
    return {
        "model calls without / with a steer (target: equal)": f"{sorted(calls[False])} / "
        f"{sorted(calls[True])}",
        "the steer landed in request (the one after the command's result)": sorted(
            x for x in landed_in if x is not None
        ) or "never",
        "steer -> where it lands, before the next model call (the command's remaining "
        f"{ms(STEP - STEER_AFTER)} plus the turn)": ms(median(delays)) if delays else "n/a",
        "run without a steer": ms(plain),
        "run with a steer": ms(steered),
        "ratio with / without (target ~1.0x)": f"{steered / plain:.2f}x",
        "runs": runs,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.runs)), indent=2, ensure_ascii=False))
