"""The server's own wording of a run's prompt (CONTRACT Decision 47): a question about a
selection, the selection quoted in a fence it cannot close, and the plan follow-up. The editor
clients send `question` / `carryOutPlan: true` and never build this text themselves."""

from __future__ import annotations

import re
from typing import Any

CARRY_OUT_PLAN = "Carry out the plan above."
MAX_SELECTION = 50_000  # characters of a selection quoted in a prompt

_BACKTICKS = re.compile(r"`+")
# a fence's info string: never a backtick or a newline
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in `text`: no line of the text can close
    the block (CommonMark closes a fence only with a run at least as long)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def fenced(text: str, language: str = "") -> str:
    """`text` as a fenced code block, cut at MAX_SELECTION characters (saying so)."""
    body = text[:MAX_SELECTION].rstrip("\r\n")
    note = (
        ""
        if len(text) <= MAX_SELECTION
        else (
            f"\n(cut: the selection has {len(text)} characters; "
            f"the first {MAX_SELECTION} are quoted)"
        )
    )
    info = language if _LANGUAGE.fullmatch(language or "") else ""
    fence = fence_for(body)
    return f"{fence}{info}\n{body}\n{fence}{note}"


def line_span(rng: Any) -> str:
    """`line 3` or `lines 3-7` (1-based); a range ending at column 0 of a later line (a whole
    line selected with its newline) ends on the line before."""
    first, last = rng.start.line, rng.end.line
    if last > first and rng.end.character == 0:
        last -= 1
    return f"line {first + 1}" if last == first else f"lines {first + 1}-{last + 1}"


def selection_prompt(question: str, where: str, rng: Any, text: str, language: str = "") -> str:
    """The prompt of a question about a selection: the question, then where the selection is
    and its text, fenced. Also the prompt of the selection code actions."""
    return (
        f"{question.strip()}\n\nSelected text in {where} ({line_span(rng)}):\n"
        f"{fenced(text, language)}"
    )
