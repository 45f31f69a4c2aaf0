"""Context compaction (a side path of the loop): the middle of a long history is summarised;
the user's requests, the files changed and the open problems survive verbatim."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_lsp.agent.images import content_text
from agent_lsp.agent.messages import Outcome
from agent_lsp.agent.model.tokens import TokenEstimator
from agent_lsp.agent.state.session import Entry

COMPACTION_PROMPT = (
    "You compact an AI coding agent's conversation. Summarise the messages below for the agent "
    "itself: what was learned (files, functions, facts with paths and line numbers), what was "
    "done, what failed and why, and what remains. Be concise and exact; no preamble."
)


@dataclass
class CompactionPlan:
    start: int  # history[start:end] is replaced by a summary + the requests kept verbatim
    end: int
    middle: list[Entry]
    kept_prompts: list[Entry]


def plan_compaction(
    history: list[Entry], keep_tokens: int, estimator: TokenEstimator
) -> CompactionPlan | None:
    """The session's first request stays at the top; the recent tail (starting at a user or
    assistant message, so an assistant's tool calls are never split from their results) stays
    verbatim; every user request in between is kept verbatim too while they fit in a sixth of
    the budget, and always the newest one (the current run's)."""
    start = next((i + 1 for i, e in enumerate(history) if e.kind == "prompt"), 0)
    end = len(history)
    used = 0
    for index in range(len(history) - 1, start - 1, -1):
        used += estimator.estimate(history[index].message)
        if used > keep_tokens:
            break
        if history[index].kind != "tool":
            end = index
    # never leave the newest exchange out of the tail even if it alone is large
    if end == len(history):
        end = next(
            (i for i in range(len(history) - 1, start - 1, -1) if history[i].kind != "tool"),
            len(history),
        )
    end = max(end, start)
    middle = history[start:end]
    if not any(e.kind != "prompt" for e in middle):
        return None
    prompts = [e for e in middle if e.kind == "prompt"]
    kept: list[Entry] = []
    room = max(keep_tokens // 2, 1)
    for entry in reversed(prompts):  # newest first: the current request always survives
        size = estimator.estimate(entry.message)
        if kept and size > room:
            continue
        kept.insert(0, entry)
        room -= size
    return CompactionPlan(start, end, middle, kept)


def render_for_summary(entries: list[Entry], clip: int = 1500) -> str:
    """The old messages as text for the summariser; bulky tool output squeezed first."""
    lines: list[str] = []
    for entry in entries:
        message = entry.message
        role = message.get("role")
        content = content_text(message.get("content"))
        if entry.kind == "tool" and len(content) > clip:
            content = (
                content[: clip // 2]
                + f"\n[... {len(content) - clip} characters ...]\n"
                + content[-clip // 2 :]
            )
        if entry.kind == "tool" and entry.outcome not in (None, Outcome.OK):
            content = f"({entry.outcome}) {content}"
        if role == "assistant" and message.get("tool_calls"):
            calls = ", ".join(
                f"{c['function']['name']}({c['function']['arguments'][:300]})"
                for c in message["tool_calls"]
            )
            content = f"{content}\n[called: {calls}]".strip()
        lines.append(f"## {role}\n{content}")
    return "\n\n".join(lines)


def open_problems(entries: list[Entry], limit: int = 3) -> list[str]:
    """The last failing tool results among the summarised entries, one line each; the problems
    an earlier summary carried over come along."""
    found: list[str] = []
    for entry in entries:
        if entry.kind == "tool" and entry.outcome == Outcome.ERROR:
            content = str(entry.message.get("content") or "")
            found.append((content.splitlines() or [""])[0][:300])
        elif entry.kind == "summary":
            found += list(entry.problems)
    return found[-limit:]


def summary_entry(
    summary: str,
    edited: list[str],
    problems: list[str],
    dropped: int,
    kept_prompts: int,
    run_id: str,
) -> Entry:
    parts = [
        f"[Context compacted: {dropped} earlier messages were summarised"
        + ("; the user's requests among them follow verbatim" if kept_prompts else "")
        + ".]",
        summary.strip(),
    ]
    parts.append("Files changed so far: " + (", ".join(edited) if edited else "none"))
    if problems:
        parts.append(
            "Open problems seen before compaction:\n" + "\n".join(f"- {p}" for p in problems)
        )
    message: dict[str, Any] = {"role": "user", "content": "\n\n".join(parts)}
    return Entry(message, "summary", run_id, problems=tuple(problems))


# -- squeezing: bulky old results become stubs the model can re-read ---------------------------
STUB_MIN_CHARS = 2000  # results smaller than this stay as they are
KEEP_RECENT_TURNS = 2  # the results of the last assistant turns stay whole


def plan_squeeze(history: list[Entry]) -> list[tuple[int, Entry]]:
    """(index, stub) for every bulky successful tool result older than the last
    KEEP_RECENT_TURNS assistant turns. One squeeze breaks the provider's prompt cache once and
    frees most of the history, where keeping them would re-send them with every request."""
    turns = [i for i, e in enumerate(history) if e.kind == "assistant"]
    if len(turns) <= KEEP_RECENT_TURNS:
        return []
    recent = turns[-KEEP_RECENT_TURNS]
    calls: dict[str, dict[str, Any]] = {}
    out: list[tuple[int, Entry]] = []
    for index, entry in enumerate(history[:recent]):
        for call in entry.message.get("tool_calls") or []:
            calls[call["id"]] = call
        content = entry.message.get("content")
        if (
            entry.kind != "tool"
            or entry.outcome != Outcome.OK
            or not isinstance(content, str)
            or len(content) < STUB_MIN_CHARS
        ):
            continue
        call = calls.get(entry.message.get("tool_call_id", ""), {})
        function = call.get("function") or {}
        what = f"{function.get('name', 'a tool')} {function.get('arguments', '')[:200]}".strip()
        stub = (
            f"[squeezed to save context: the result of {what} "
            f"({len(content)} characters) was here; "
            "call the tool again if you need it]"
        )
        out.append(
            (index, Entry({**entry.message, "content": stub}, "tool", entry.run_id, entry.outcome))
        )
    return out


# -- fitting: the newest results cut when nothing else makes the context fit -------------------
FIT_MIN_CHARS = 1000  # a result is never cut below this (its head and tail still say something)


def plan_fit(history: list[Entry], excess_chars: int) -> list[tuple[int, int]]:
    """(index, characters to keep) for the newest tool results, newest first, until
    `excess_chars` are freed: compaction keeps the newest exchange whole, so a result too big
    for a small window (with many tool schemas) would otherwise stop the run."""
    out: list[tuple[int, int]] = []
    for index in range(len(history) - 1, -1, -1):
        if excess_chars <= 0:
            break
        entry = history[index]
        content = entry.message.get("content")
        if entry.kind != "tool" or not isinstance(content, str) or len(content) <= FIT_MIN_CHARS:
            continue
        keep = max(FIT_MIN_CHARS, len(content) - excess_chars)
        out.append((index, keep))
        excess_chars -= len(content) - keep
    return out
