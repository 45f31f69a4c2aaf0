"""Long session: 30 turns (10 in quick mode) each reading a different 60 KB file. Request bytes against the floor,
and whether every request extends the previous one (so provider prompt caches hit)."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.baselines import floor_run
from benchmarks.common import Config, make_files, tag
from benchmarks.model_process import ModelProcess
from benchmarks.turns import ours_run

RESULT_CHARS = 60_000


def body_bytes(body: dict[str, Any]) -> int:
    """The request body as compact JSON (both runtimes measured the same way)."""
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())


def script(files: list[str], note: str) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = [
        {"text": f"{note} reading file {i + 1}.", "tool_calls": [{"name": "read_file", "arguments": {"path": f}}]}
        for i, f in enumerate(files)]
    replies.append({"text": "Read them all."})
    return replies


def prefix_report(bodies: list[dict[str, Any]]) -> dict[str, int]:
    """For each main-loop request after the first: does it extend the previous one's messages
    (and send the same tools)? A request right after a compaction is counted apart."""
    out = {"requests": 0, "extends": 0, "after_compaction": 0, "broken": 0, "compactions": 0}
    previous: dict[str, Any] | None = None
    compacted = False
    for body in bodies:
        messages = body.get("messages", [])
        if messages and messages[0].get("role") == "system" and messages[0].get("content", "").startswith("You compact"):
            out["compactions"] += 1
            compacted = True
            continue
        out["requests"] += 1
        if previous is not None:
            old = previous["messages"]
            if messages[: len(old)] == old and body.get("tools") == previous.get("tools"):
                out["extends"] += 1
            elif compacted:
                out["after_compaction"] += 1
            else:
                out["broken"] += 1
        previous, compacted = body, False
    return out


async def measure(cfg: Config, model: ModelProcess) -> dict[str, Any]:
    root = cfg.work / "ws-session"
    files = make_files(root, cfg.session_turns, RESULT_CHARS, prefix="long")
    out: dict[str, Any] = {}
    for runtime in ("floor", "ours"):
        key = tag(f"session-{runtime}")
        note = f"[{key}-note]"  # in every assistant text: routes the compaction request
        model.add(key, script(files, note))
        model.add(note, [{"text": "Summary: files 1..N were read; each holds numbered lines of filler text.",
                          "repeat": 10}])
        prompt = f"[{key}] Read the {cfg.session_turns} long files one by one."
        if runtime == "floor":
            await floor_run(model.base_url, prompt, root)
        else:
            await ours_run(model.base_url, prompt, root, cfg.work, **cfg.session_settings)
        bodies = model.requests(key, note)
        model.forget(key, note)
        out[runtime] = {"bytes": sum(body_bytes(b) for b in bodies), "requests": len(bodies),
                        "largest": max(body_bytes(b) for b in bodies), **prefix_report(bodies)}
    out["ratio"] = out["ours"]["bytes"] / out["floor"]["bytes"]
    out["turns"] = cfg.session_turns
    return out
