"""`agent-lsp run --output-format stream-json` (CONTRACT "Headless at scale", Decision 40): one
JSON object per line on stdout, each stream event as over LSP (`agentLsp/stream`: the same
`to_wire`, the same numbering from 0, text deltas coalesced the same way) with `type` in place
of `kind`; no `stop` line: the last line is `{type: "result", seq, report}`."""

from __future__ import annotations

import json
from typing import Any, TextIO

from agent_lsp.agent.coalesce import TextCoalescer
from agent_lsp.agent.events import Event, StopEvent, TextDelta, ThinkingDelta, to_wire
from agent_lsp.agent.messages import RunReport


class StreamJson:
    """The event sink of a stream-json run; `result` writes its last line (once)."""

    def __init__(self, out: TextIO, run_id: str, report_extra: dict[str, Any] | None = None):
        self.out = out
        self.run_id = run_id
        # What the terminal adds to the report (its worktree).
        self.report_extra = report_extra or {}
        self.seq = 0
        self.done = False
        self._text = TextCoalescer(lambda text: self._send(TextDelta(text)))
        self._thinking = TextCoalescer(lambda text: self._send(ThinkingDelta(text)))

    def __call__(self, event: Event) -> None:
        if self.done:  # nothing after the result line
            return
        if isinstance(event, TextDelta):  # only the main loop streams text (as over LSP)
            self._thinking.flush()
            self._text.add(event.text)
            return
        if isinstance(event, ThinkingDelta):
            self._text.flush()
            self._thinking.add(event.text)
            return
        self.flush()
        if isinstance(event, StopEvent):  # its report is the result line's (Decision 40)
            return
        self._send(event)

    def flush(self) -> None:
        self._thinking.flush()
        self._text.flush()

    def result(self, report: RunReport) -> None:
        if self.done:
            return
        self.flush()
        self._line(
            {"type": "result", "seq": self.seq, "report": {**report.to_dict(), **self.report_extra}}
        )
        self.done = True

    def _send(self, event: Event) -> None:
        self._line(to_wire(event, self.run_id, self.seq, tag="type"))
        self.seq += 1

    def _line(self, payload: dict[str, Any]) -> None:
        # ASCII: any stdout encoding, lone surrogates escaped.
        self.out.write(json.dumps(payload) + "\n")
        self.out.flush()
