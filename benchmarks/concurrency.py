"""20 concurrent runs x 10 turns (3 in quick mode) in one server: all finish, p99 overhead per turn, peak RSS;
and the floor in the same minutes: 20 bare openai-SDK loops sharing one client in one process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Config, cpu_seconds, make_files, median, percentile, rss_bytes, tag
from benchmarks.lsp_client import LspSession
from benchmarks.model_process import REPO, ModelProcess
from benchmarks.turns import RESULT_CHARS, tool_script, turn_gaps

RUNS_AT_ONCE = 20


class PeakRss:
    """Samples a process's RSS every few milliseconds in a thread; `peak` is the maximum."""

    def __init__(self, pid: int, interval: float = 0.005):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(self.pid))


async def measure(cfg: Config, model: ModelProcess, env: dict[str, str]) -> dict[str, Any]:
    root = cfg.work / "ws-concurrent"
    files = make_files(root, cfg.concurrent_turns * 2, RESULT_CHARS)
    init = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "allow"}}
    rounds = []
    async with LspSession(root, env, init) as lsp:
        await asyncio.sleep(0.3)  # `initialized` and its configuration pull settle
        rss_initialized = rss_bytes(lsp.pid)
        if cfg.warmup:  # one short run loads what the first run loads (the openai SDK)
            key = tag("conc-warmup")
            model.add(key, tool_script(files, 1, cfg.ttft))
            await lsp.run(f"[{key}] Read one part.")
            model.forget(key)
        for _index in range(cfg.runs):
            keys = [tag(f"conc{i}") for i in range(RUNS_AT_ONCE)]
            for i, key in enumerate(keys):
                model.add(key, tool_script(files[i % len(files):] + files, cfg.concurrent_turns, cfg.concurrent_ttft))
            c0, m0, t0 = cpu_seconds(lsp.pid), cpu_seconds(model.pid), time.monotonic()
            with PeakRss(lsp.pid) as peak:
                traces = await asyncio.gather(*(lsp.start_run(f"[{key}] Read the parts one by one.") for key in keys))
                await asyncio.wait_for(asyncio.gather(*(t.stopped.wait() for t in traces)), 300)
            wall = time.monotonic() - t0
            busy, model_busy = (cpu_seconds(lsp.pid) - c0) / wall, (cpu_seconds(model.pid) - m0) / wall
            done = sum(1 for t in traces if t.report.get("stopReason") == "done" and t.report.get("turns") == cfg.concurrent_turns + 1)
            stats = _round(model, keys, [t.t_sent for t in traces], [t.t_stop for t in traces])
            rounds.append({**stats, "done": done, "peak_rss": peak.peak, "busy": busy, "model_busy": model_busy,
                           "cpu_per_turn": (cpu_seconds(lsp.pid) - c0) / max(1, stats["calls"])})
    floor = await _floor(cfg, model, root, files)
    pooled = [g for r in rounds for g in r["gaps"]]
    return {"all_done": all(r["done"] == RUNS_AT_ONCE for r in rounds),
            "done": [r["done"] for r in rounds],
            "p99": median([r["p99"] for r in rounds]), "p99_pooled": percentile(pooled, 99),
            "p50": median([r["p50"] for r in rounds]), "max": max(r["max"] for r in rounds),
            "peak_rss": max(r["peak_rss"] for r in rounds), "rss_initialized": rss_initialized,
            "samples": len(pooled), "turns": cfg.concurrent_turns,
            "start_p99": median([r["start_p99"] for r in rounds]), "between_p99": median([r["between_p99"] for r in rounds]),
            "busy": median([r["busy"] for r in rounds]), "model_busy": median([r["model_busy"] for r in rounds]),
            "cpu_per_turn": median([r["cpu_per_turn"] for r in rounds]), "floor": floor}


def _round(model: ModelProcess, keys: list[str], sent: list[float], stopped: list[float]) -> dict[str, Any]:
    """One round's gaps from the model server's log (then forgotten), run by run."""
    served = {key: model.log(key) for key in keys}
    model.forget(*keys)
    per_run = [turn_gaps(t_sent, served[key], t_stop) for key, t_sent, t_stop in zip(keys, sent, stopped, strict=True)]
    gaps = [g for run in per_run for g in run]
    # where the tail comes from: each run's first gap (the command to its first model request:
    # 20 run starts at once queue on one loop) vs the gaps between model calls
    starts, between = [run[0] for run in per_run], [g for run in per_run for g in run[1:-1]]
    return {"p99": percentile(gaps, 99), "p50": percentile(gaps, 50), "max": max(gaps), "gaps": gaps,
            "start_p99": percentile(starts, 99), "between_p99": percentile(between, 99),
            "calls": sum(len(v) for v in served.values())}


async def _floor(cfg: Config, model: ModelProcess, root: Path, files: list[str]) -> dict[str, Any]:
    """The same rounds run by 20 bare openai-SDK loops sharing one client in a process of their own
    (benchmarks/floor_fanout.py): what the SDK alone costs at this concurrency on this machine."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "benchmarks.floor_fanout", model.base_url, str(root),
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    async def fan_out(keys: list[str]) -> tuple[float, dict[str, Any]]:
        assert proc.stdin is not None and proc.stdout is not None
        t_sent = time.monotonic()
        proc.stdin.write(json.dumps({"keys": keys}).encode() + b"\n")
        await proc.stdin.drain()
        return t_sent, json.loads(await asyncio.wait_for(proc.stdout.readline(), 300))

    rounds = []
    try:
        if cfg.warmup:  # like our server's warm-up run: the SDK imported, the client's pool open
            key = tag("floor-warmup")
            model.add(key, tool_script(files, 1, cfg.ttft))
            await fan_out([key])
            model.forget(key)
        for _round_index in range(cfg.runs):
            keys = [tag(f"floor{i}") for i in range(RUNS_AT_ONCE)]
            for i, key in enumerate(keys):
                model.add(key, tool_script(files[i % len(files):] + files, cfg.concurrent_turns, cfg.concurrent_ttft))
            t_sent, answer = await fan_out(keys)
            stats = _round(model, keys, [t_sent] * len(keys), [answer["done"][key] for key in keys])
            rounds.append({**stats, "cpu_per_turn": answer["cpu"] / max(1, stats["calls"])})
    finally:
        proc.stdin.write(b"\n")
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    return {key: median([r[key] for r in rounds]) for key in ("p99", "p50", "start_p99", "between_p99", "cpu_per_turn")}
