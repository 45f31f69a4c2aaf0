"""Delegation: 4 `delegate` calls in one reply run their sub-agents concurrently."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import Config, median, tag
from benchmarks.model_process import ModelProcess
from benchmarks.turns import ours_run

SUBAGENT_TTFT = 0.3


async def one(cfg: Config, model: ModelProcess, count: int) -> tuple[float, list[float]]:
    key = tag(f"delegate{count}")
    subs = [f"{key}-sub{i}" for i in range(count)]
    calls = [{"name": "delegate", "arguments": {"task": f"[{sub}] Find where parse() is defined."}} for sub in subs]
    model.add(key, [{"text": "Delegating.", "tool_calls": calls, "ttft": cfg.ttft},
                    {"text": "Summary of the findings.", "ttft": cfg.ttft}])
    for sub in subs:
        model.add(sub, [{"text": "parse() is defined in src/parse.py:10.", "ttft": SUBAGENT_TTFT}])
    root = cfg.work / "ws-delegate"
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    await ours_run(model.base_url, f"[{key}] Investigate the parser.", root, cfg.work)
    wall = time.monotonic() - t0
    starts = [s.t_start for s in model.log(*subs)]
    model.forget(key, *subs)
    if len(starts) != count:
        raise RuntimeError(f"delegate x{count}: {len(starts)} sub-agent calls reached the model")
    return wall, starts


async def measure(cfg: Config, model: ModelProcess) -> dict[str, Any]:
    walls: dict[int, list[float]] = {1: [], 4: []}
    spreads = []
    for rep in range(cfg.warmup + cfg.runs):
        for count in (1, 4):
            wall, starts = await one(cfg, model, count)
            if rep >= cfg.warmup:
                walls[count].append(wall)
                if count == 4:
                    spreads.append(max(starts) - min(starts))
    return {"one": median(walls[1]), "four": median(walls[4]), "start_spread": median(spreads),
            "samples": walls}
