"""Start-up: spawn -> `initialize` answered, against a bare pygls server; RSS after initialize."""

from __future__ import annotations

from typing import Any

from benchmarks.common import Config, median
from benchmarks.lsp_client import BARE_ARGV, SERVER_ARGV, spawn_initialize


def measure(cfg: Config, env: dict[str, str]) -> dict[str, Any]:
    cwd = cfg.work / "ws-startup"
    cwd.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    rss: dict[str, list[int]] = {"ours": [], "bare": []}
    at_answer: dict[str, list[int]] = {"ours": [], "bare": []}
    runs = cfg.runs if cfg.quick else cfg.runs + 2  # cheap: two more samples steady the median
    for rep in range(cfg.warmup + runs):
        for name, argv in (("bare", BARE_ARGV), ("ours", SERVER_ARGV)):  # interleaved
            started = spawn_initialize(argv, env, cwd)
            if rep >= cfg.warmup:
                times[name].append(started.seconds)
                rss[name].append(started.rss_settled)
                at_answer[name].append(started.rss_at_answer)
    return {"ours": median(times["ours"]), "bare": median(times["bare"]),
            "rss": median([float(r) for r in rss["ours"]]), "rss_bare": median([float(r) for r in rss["bare"]]),
            "rss_at_answer": median([float(r) for r in at_answer["ours"]]),
            "samples": times}
