"""Streaming through LSP: 20,000 characters at 1 ms a chunk become few, lossless, prompt
`agentLsp/stream` notifications."""

from __future__ import annotations

from typing import Any

from benchmarks.common import Config, median, tag
from benchmarks.lsp_client import LspSession
from benchmarks.model_process import ModelProcess

TEXT_CHARS = 20_000
CHUNK_CHARS = 20  # 1,000 chunks
CHUNK_DELAY = 0.001
TAIL_EVENTS = 3  # finish, usage and [DONE] follow the last text chunk, CHUNK_DELAY apart


def stream_text(chars: int = TEXT_CHARS) -> str:
    """Prose with code, tabs, and non-ASCII (an emoji is two UTF-16 units) to check losslessness."""
    line = "Le café du coin — naïve façade 🚀 `def f(x):\treturn x * 2` and some plain words. "
    return (line * (chars // len(line) + 1))[:chars]


def analyse(trace: Any, expected: str, model_end: float) -> dict[str, Any]:
    texts = [(t, e) for t, e in trace.events if e["kind"] == "text"]
    if not texts:
        return {"identical": False, "rate": float("nan"), "window_max": 0, "last_delay": float("nan"), "events": 0}
    t_first, t_last = texts[0][0], texts[-1][0]
    # Every agentLsp/stream notification that arrived while the text streamed counts.
    window = [t for t, _ in trace.events if t_first <= t <= t_last]
    span = t_last - t_first
    rate = (len(window) - 1) / span if span > 0 else float("inf")
    busiest = max(sum(1 for u in window if t <= u < t + 1.0) for t in window)
    last_chunk = model_end - TAIL_EVENTS * CHUNK_DELAY
    return {"identical": "".join(e["text"] for _, e in texts) == expected, "rate": rate,
            "window_max": busiest, "last_delay": t_last - last_chunk, "events": len(texts), "span": span}


async def measure(cfg: Config, model: ModelProcess, lsp: LspSession) -> dict[str, Any]:
    text = stream_text()
    results = []
    for rep in range(cfg.warmup + cfg.runs):
        key = tag("stream")
        model.add(key, [{"text": text, "chunk_size": CHUNK_CHARS, "chunk_delay": CHUNK_DELAY, "ttft": cfg.ttft}])
        trace = await lsp.run(f"[{key}] Write a long answer.")
        served = model.log(key)
        model.forget(key)
        if rep >= cfg.warmup:
            results.append(analyse(trace, text, served[0].t_end or served[0].t_start))
    return {"rate": median([r["rate"] for r in results]),
            "window_max": max(r["window_max"] for r in results),
            "identical": all(r["identical"] for r in results),
            "last_delay": median([r["last_delay"] for r in results]),
            "events": median([r["events"] for r in results]),
            "span": median([r["span"] for r in results]),
            "runs": results}
