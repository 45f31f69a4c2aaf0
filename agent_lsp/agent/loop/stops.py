"""How a loop stops: the fatal stop it raises (StopRun), the outcome it returns (LoopOutcome),
and what a reply cut short is told, or stopped with (CONTRACT Decisions 5 and 6)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agent_lsp.agent.messages import ReplyCut, StopCause, StopReason

CUT_NOTE = "not run: your reply was cut at the output limit; send smaller calls"
CAP_NOTES = {
    ReplyCut.ARGUMENT_CAP: (
        "not run: one tool call's arguments passed the 1 MB cap, so the reply was cut off and "
        "nothing of it ran; send smaller calls (e.g. several edit_file calls instead of one huge "
        "write)"
    ),
    ReplyCut.REPLY_CAP: (
        "not run: the whole reply passed the 4 MB cap, so it was cut off and nothing of it ran; "
        "send smaller calls"
    ),
}
CUT_STOPS = {  # the message, and the typed cause front ends map from
    ReplyCut.OUTPUT_LIMIT: (
        "the model's reply was cut at its output limit (twice in a row)",
        StopCause.OUTPUT_LIMIT,
    ),
    ReplyCut.ARGUMENT_CAP: (
        "the model's reply passed the 1 MB cap on one call's arguments twice in a row",
        StopCause.ARGUMENT_CAP,
    ),
    ReplyCut.REPLY_CAP: (
        "the model's reply passed the 4 MB cap on one reply twice in a row",
        StopCause.ARGUMENT_CAP,
    ),
}
CONTINUE_NOTE = (
    "(Your last reply was cut at the output limit. Continue exactly where it stopped, more "
    "briefly.)"
)


class StopRun(Exception):
    """Typed loop control: the loop cannot go on (a fatal stop); `cause` says why, typed."""

    def __init__(self, message: str, cause: StopCause):
        super().__init__(message)
        self.cause = cause


@dataclass
class LoopOutcome:
    cause: StopCause  # decided where the stop is; the reason follows from it
    final_text: str
    turns: int
    error: str | None = None
    # For the summary: why a max_turns stop came early (a spiral), who cancelled (a signal's name).
    note: str | None = None

    @property
    def reason(self) -> StopReason:
        return self.cause.reason


def cancel_if_asked() -> None:
    """Raise the cancel a finished wait swallowed: on Python 3.11, asyncio.wait_for returns the
    result when the awaited answer and a cancel arrive together (an approval answered
    "cancelled" right after session/cancel), and the run would go on as if never cancelled."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
