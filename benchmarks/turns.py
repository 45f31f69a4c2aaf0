"""Runtime overhead per turn: K tool turns with ~50 KB results, headless and through LSP.

Overhead per turn = (wall time of the run - the time the model server spent answering) /
model calls. The server's answer time runs from the parsed request to the last byte of its
stream (fixed TTFT + chunks); everything else - building and sending the request, reading
the stream, running the tool, bookkeeping - is what the runtime adds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.baselines import floor_run, peer_available, peer_run
from benchmarks.common import Config, make_files, median, ms, tag
from benchmarks.model_process import ModelProcess, Served

RESULT_CHARS = 50_000


def tool_script(files: list[str], k: int, ttft: float) -> list[dict[str, Any]]:
    """K replies that each read one file, then a final answer."""
    replies: list[dict[str, Any]] = [
        {"text": f"Reading part {i + 1}.", "ttft": ttft,
         "tool_calls": [{"name": "read_file", "arguments": {"path": files[i % len(files)]}}]}
        for i in range(k)]
    replies.append({"text": "All parts read.", "ttft": ttft})
    return replies


def overhead(wall: float, served: list[Served]) -> float:
    return (wall - sum(s.seconds for s in served)) / max(1, len(served))


def turn_gaps(t_begin: float, served: list[Served], t_finish: float) -> list[float]:
    """Per turn: the time between model answers when the model was idle (the runtime's part)."""
    ordered = sorted(served, key=lambda s: s.t_start)
    gaps, last = [], t_begin
    for s in ordered:
        gaps.append(s.t_start - last)
        last = s.t_end or s.t_start
    gaps.append(t_finish - last)
    return gaps


def our_settings(base_url: str, work: Path, **extra: Any) -> Any:
    from agent_lsp.settings import Settings

    return Settings.model_validate({"model": "m", "baseUrl": base_url, "approval": {"default": "allow"},
                                    "transcriptDir": str(work / "transcripts"), "maxTurns": 200, **extra})


class AllowAll:
    async def ask(self, request: Any) -> Any:
        from agent_lsp.agent.ports import Decision

        return Decision.ALLOW


async def ours_run(base_url: str, prompt: str, root: Path, work: Path, **settings: Any) -> Any:
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import Session, run_task

    report = await run_task(prompt, session=Session(), settings=our_settings(base_url, work, **settings),
                            workspace=DiskWorkspace([root]), approver=AllowAll(), emit=lambda _e: None)
    if str(report.stop_reason) != "done":
        raise RuntimeError(f"our run stopped with {report.stop_reason}: {report.summary}")
    return report


@dataclass
class Sample:
    wall: float
    cpu: float  # CPU seconds of this process (all threads) during the run
    served: list[Served]

    @property
    def per_turn(self) -> float:
        return overhead(self.wall, self.served)

    @property
    def cpu_per_turn(self) -> float:
        return self.cpu / max(1, len(self.served))


async def one_headless(runtime: str, model: ModelProcess, root: Path, files: list[str], k: int,
                       cfg: Config) -> Sample:
    key = tag(f"turns-{runtime}-k{k}")
    model.add(key, tool_script(files, k, cfg.ttft))
    prompt = f"[{key}] Read the {k} parts one by one."
    t0, c0 = time.monotonic(), time.process_time()
    if runtime == "floor":
        await floor_run(model.base_url, prompt, root)
    elif runtime == "ours":
        await ours_run(model.base_url, prompt, root, cfg.work)
    else:
        await peer_run(model.base_url, prompt, root, max_turns=k + 5)
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    served = model.log(key)
    model.forget(key)
    if len(served) != k + 1:
        raise RuntimeError(f"{runtime} K={k}: {len(served)} model calls, expected {k + 1}")
    return Sample(wall, cpu, served)


async def headless(cfg: Config, model: ModelProcess) -> dict[str, Any]:
    """Medians per runtime and K: {"k10": {"floor": s, "ours": s, "peer": s|None}, ...}."""
    root = cfg.work / "ws-turns"
    files = make_files(root, max(cfg.turn_counts), RESULT_CHARS)
    peer_problem = peer_available()
    runtimes = ["floor", "ours"] + ([] if peer_problem else ["peer"])
    out: dict[str, Any] = {"peer_problem": peer_problem}
    for index, k in enumerate(cfg.turn_counts):
        samples: dict[str, list[float]] = {r: [] for r in runtimes}
        cpu: dict[str, list[float]] = {r: [] for r in runtimes}
        warmup = cfg.warmup if index == 0 else 0  # the first K's warm-up warms the rest
        for rep in range(warmup + cfg.runs):
            for runtime in runtimes:  # interleaved, so background noise hits all alike
                sample = await one_headless(runtime, model, root, files, k, cfg)
                if rep >= warmup:
                    samples[runtime].append(sample.per_turn)
                    cpu[runtime].append(sample.cpu_per_turn)
        out[f"k{k}"] = {r: median(v) for r, v in samples.items()}
        out[f"k{k}_cpu"] = {r: median(v) for r, v in cpu.items()}
        out[f"k{k}_samples"] = samples
    return out


async def through_lsp(cfg: Config, model: ModelProcess, lsp: Any) -> dict[str, Any]:
    """The same K-turn script through `agentLsp.run` on the server subprocess (`lsp`, an
    initialized `LspSession`), each LSP run paired with a headless run right before it, so
    the two are compared under the same background load."""
    from benchmarks.common import cpu_seconds

    files = make_files(lsp.root, max(cfg.turn_counts), RESULT_CHARS)
    out: dict[str, Any] = {}
    for index, k in enumerate(cfg.turn_counts):
        values, cpu, paired, paired_cpu = [], [], [], []
        warmup = cfg.warmup if index == 0 else 0
        for rep in range(warmup + cfg.runs):
            headless_sample = await one_headless("ours", model, lsp.root, files, k, cfg)
            key = tag(f"lsp-k{k}")
            model.add(key, tool_script(files, k, cfg.ttft))
            c0 = cpu_seconds(lsp.pid)
            trace = await lsp.run(f"[{key}] Read the {k} parts one by one.")
            c1 = cpu_seconds(lsp.pid)
            served = model.log(key)
            model.forget(key)
            if trace.report.get("stopReason") != "done" or len(served) != k + 1:
                raise RuntimeError(f"LSP K={k}: {trace.report.get('stopReason')}, {len(served)} calls")
            if rep >= warmup:
                values.append(overhead(trace.t_stop - trace.t_sent, served))
                cpu.append((c1 - c0) / len(served))
                paired.append(headless_sample.per_turn)
                paired_cpu.append(headless_sample.cpu_per_turn)
        out[f"k{k}"], out[f"k{k}_cpu"] = median(values), median(cpu)
        out[f"k{k}_headless"], out[f"k{k}_headless_cpu"] = median(paired), median(paired_cpu)
        out[f"k{k}_samples"], out[f"k{k}_headless_samples"] = values, paired
    return out


def describe(seconds: float | None) -> str:
    return "n/a" if seconds is None else ms(seconds)


def main_for_debug() -> None:  # pragma: no cover - `python -m benchmarks.turns`
    cfg = Config.make(quick=True)
    with ModelProcess() as model:
        print(asyncio.run(headless(cfg, model)))


if __name__ == "__main__":  # pragma: no cover
    main_for_debug()
