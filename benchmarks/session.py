"""Long session: 30 turns (10 in quick mode) each reading a different 60 KB file. Request bytes against the floor;
whether each request extends the previous one (so provider prompt caches hit); and the cached share: how much of
all request bytes is a byte-identical prefix of the previous request (what a provider's prompt cache could serve)."""

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


SQUEEZED = "[squeezed to save context"  # agent_lsp/agent/compaction.py plan_squeeze's stubs


def is_compaction(body: dict[str, Any]) -> bool:
    messages = body.get("messages", [])
    return bool(messages) and messages[0].get("role") == "system" and str(messages[0].get("content", "")).startswith("You compact")


def squeezed_only(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    """`new` extends `old` except that some of old's tool results became squeeze stubs."""
    if len(new) < len(old):
        return False
    changed = [i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
    return bool(changed) and all(new[i].get("role") == "tool" and str(new[i].get("content", "")).startswith(SQUEEZED)
                                 for i in changed)


def prefix_report(bodies: list[dict[str, Any]]) -> dict[str, int]:
    """For each main-loop request after the first: does it extend the previous one's messages
    unchanged (and send the same tools)? One that does not is counted by its cause: right after a
    compaction, right after a squeeze (old results replaced by stubs, the rest extended), or
    broken (any other change: a prompt-cache break with no reason)."""
    out = {"requests": 0, "extends": 0, "after_compaction": 0, "after_squeeze": 0, "broken": 0, "compactions": 0}
    previous: dict[str, Any] | None = None
    compacted = False
    for body in bodies:
        messages = body.get("messages", [])
        if is_compaction(body):
            out["compactions"] += 1
            compacted = True
            continue
        out["requests"] += 1
        if previous is not None:
            old = previous["messages"]
            same_tools = body.get("tools") == previous.get("tools")
            if messages[: len(old)] == old and same_tools:
                out["extends"] += 1
            elif compacted:
                out["after_compaction"] += 1
            elif squeezed_only(old, messages) and same_tools:
                out["after_squeeze"] += 1
            else:
                out["broken"] += 1
        previous, compacted = body, False
    return out


def cache_view(body: dict[str, Any]) -> bytes:
    """The request as a provider's prompt cache sees it: the tools first (chat templates put
    them before the messages), then the messages, as compact JSON."""
    return json.dumps({"tools": body.get("tools"), "messages": body.get("messages", [])}, ensure_ascii=False,
                      separators=(",", ":")).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix (binary search on slices: C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def cached_share(bodies: list[dict[str, Any]]) -> float:
    """Share of all request bytes (compaction requests included) that are a byte-identical
    prefix of the previous request, in arrival order: what a provider prompt cache holding the
    last request could serve."""
    views = [cache_view(b) for b in bodies]
    total = sum(len(v) for v in views)
    cached = sum(common_prefix(prev, cur) for prev, cur in zip(views, views[1:], strict=False))
    return cached / total if total else 0.0


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
        report = prefix_report(bodies)
        out[runtime] = {"bytes": sum(body_bytes(b) for b in bodies), "requests": len(bodies),
                        "largest": max(body_bytes(b) for b in bodies), "cached_share": cached_share(bodies), **report,
                        "extend_share": report["extends"] / max(1, report["requests"] - 1)}
    out["ratio"] = out["ours"]["bytes"] / out["floor"]["bytes"]
    out["turns"] = cfg.session_turns
    return out
