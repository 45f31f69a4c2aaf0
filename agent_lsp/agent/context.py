"""The context side paths: result truncation with spill, token estimates, compaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiofiles

CHARS_PER_TOKEN = 4.0


@dataclass
class Truncated:
    content: str
    truncated: bool
    spill_path: Path | None


async def truncate_tool_output(text: str, limit: int, spill_dir: Path, call_id: str) -> Truncated:
    """Keep head + tail within `limit` characters; the full text goes to a spill file."""
    if len(text) <= limit:
        return Truncated(text, False, None)
    safe_id = "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)[:80] or "call"
    spill = spill_dir / f"{safe_id}.txt"
    try:
        spill_dir.mkdir(parents=True, exist_ok=True)
        async with aiofiles.open(spill, "w", encoding="utf-8") as handle:
            await handle.write(text)
        where = f"The full output ({len(text)} characters, {text.count(chr(10)) + 1} lines) is saved at {spill}; read_file it with offset/limit to see the rest."
    except OSError as exc:
        spill, where = None, f"(the full output could not be saved: {exc.strerror})"
    head = text[: int(limit * 0.6)]
    tail = text[len(text) - int(limit * 0.3) :]
    omitted = len(text) - len(head) - len(tail)
    return Truncated(f"{head}\n\n[... {omitted} characters omitted. {where} ...]\n\n{tail}", True, spill)


class TokenEstimator:
    """Characters / 4, calibrated by the prompt tokens the API reports. Message sizes are
    cached (messages are never changed once in the history), so a turn costs O(new messages)."""

    def __init__(self) -> None:
        self.ratio = 1.0
        self._sizes: dict[int, tuple[Any, int]] = {}

    def _size(self, message: Any) -> int:
        hit = self._sizes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        size = len(json.dumps(message, ensure_ascii=False))
        self._sizes[id(message)] = (message, size)
        return size

    def raw(self, payload: Any, extra_chars: int = 0) -> float:
        if isinstance(payload, list):
            if len(self._sizes) > 2 * len(payload) + 256:  # forget messages compaction dropped
                self._sizes = {id(m): self._sizes[id(m)] for m in payload if id(m) in self._sizes}
            chars = sum(self._size(m) for m in payload)
        else:
            chars = len(json.dumps(payload, ensure_ascii=False))
        return (chars + extra_chars) / CHARS_PER_TOKEN

    def estimate(self, payload: Any, extra_chars: int = 0) -> int:
        return int(self.raw(payload, extra_chars) * self.ratio)

    def calibrate(self, payload: Any, prompt_tokens: int, extra_chars: int = 0) -> None:
        raw = self.raw(payload, extra_chars)
        if raw > 200 and prompt_tokens > 0:
            self.ratio = min(4.0, max(0.25, prompt_tokens / raw))


COMPACTION_PROMPT = (
    "You compact an AI coding agent's conversation. Summarise the messages below for the agent "
    "itself: what was learned (files, functions, facts with paths and line numbers), what was "
    "done, what failed and why, and what remains. Be concise and exact; no preamble."
)


def split_for_compaction(history: list[dict[str, Any]], keep_tokens: int, estimator: TokenEstimator) -> tuple[int, int]:
    """(goal_end, tail_start): history[:goal_end] is the goal kept verbatim, history[tail_start:]
    the recent messages kept verbatim; what is between gets summarised. The tail starts at a
    user or assistant message, so an assistant's tool calls are never split from their results."""
    goal_end = next((i + 1 for i, m in enumerate(history) if m.get("role") == "user"), 0)
    tail_start = len(history)
    used = 0
    for index in range(len(history) - 1, goal_end - 1, -1):
        used += estimator.estimate(history[index])
        if used > keep_tokens:
            break
        if history[index].get("role") != "tool":
            tail_start = index
    # Never leave the newest exchange out of the tail even if it alone is large.
    if tail_start == len(history):
        for index in range(len(history) - 1, goal_end - 1, -1):
            if history[index].get("role") != "tool":
                tail_start = index
                break
    return goal_end, max(tail_start, goal_end)


def render_for_summary(messages: list[dict[str, Any]], clip: int = 1500) -> str:
    """The old messages as text for the summariser; bulky tool output squeezed first."""
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "tool" and len(content) > clip:
            content = content[: clip // 2] + f"\n[... {len(content) - clip} characters ...]\n" + content[-clip // 2 :]
        if role == "assistant" and message.get("tool_calls"):
            calls = ", ".join(f"{c['function']['name']}({c['function']['arguments'][:300]})" for c in message["tool_calls"])
            content = f"{content}\n[called: {calls}]".strip()
        lines.append(f"## {role}\n{content}")
    return "\n\n".join(lines)


NOTE_HEAD = "[Context compacted:"
PROBLEMS_HEAD = "Open problems seen before compaction:"


def open_problems(messages: list[dict[str, Any]], limit: int = 3) -> list[str]:
    """The last failing tool results among the summarised messages, one line each; the open
    problems an earlier compaction note listed carry over verbatim."""
    found: list[str] = []
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "tool" and content.startswith("error:"):
            found.append(content.splitlines()[0][:300])
        elif message.get("role") == "user" and content.startswith(NOTE_HEAD) and PROBLEMS_HEAD in content:
            listed = content.split(PROBLEMS_HEAD, 1)[1].splitlines()
            found += [line[2:] for line in listed if line.startswith("- ")]
    return found[-limit:]


def compacted_note(summary: str, edited: list[str], problems: list[str], dropped: int) -> dict[str, Any]:
    parts = [f"{NOTE_HEAD} {dropped} earlier messages were summarised.]", summary.strip()]
    parts.append("Files changed so far: " + (", ".join(edited) if edited else "none"))
    if problems:
        parts.append(f"{PROBLEMS_HEAD}\n" + "\n".join(f"- {p}" for p in problems))
    return {"role": "user", "content": "\n\n".join(parts)}
