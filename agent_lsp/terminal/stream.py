"""A run's stream as a person reads it in the terminal (stream_json.py is the machine's)."""

from __future__ import annotations

from typing import TextIO, assert_never

from agent_lsp.agent import events as ev
from agent_lsp.agent.display import for_terminal
from agent_lsp.terminal.style import Style, isatty


class TerminalStream:
    """Model text as it comes; every other event as its own short line: ✓/✗ for results, the
    last lines of a command's output, paths relative to the workspace. Everything shown is
    text the model, a file or a command wrote: its control characters are escaped (a raw
    ESC would let it move the cursor, hide text or write the clipboard)."""

    def __init__(self, out: TextIO, endpoint: str = ""):
        self.out = out
        self.style = Style.for_stream(out)
        self.tty = isatty(out)
        # "m at http://…": said while waiting, so a slow or wrong endpoint shows.
        self.endpoint = endpoint
        self.in_text = False
        self.waiting = False  # the transient "asking the model" line is on the screen (TTY only)
        # Without a TTY the wait is said once, as a line (nothing can erase it).
        self.said_waiting = False

    def __call__(self, event: ev.Event) -> None:
        s = self.style
        # The model's reasoning dimmed, its answer plain.
        if isinstance(event, ev.TextDelta | ev.ThinkingDelta):
            self._clear_waiting()
            text = for_terminal(event.text)
            self.out.write(text if isinstance(event, ev.TextDelta) else s.dim(text))
            self.in_text = True
            self.out.flush()
            return
        if (
            isinstance(event, ev.StatusEvent)
            and event.agent_id == "main"
            and event.waiting == "model"
        ):
            self._show_waiting()
            return
        # The last streamed text ends its line (with --json, stderr's last line).
        if isinstance(event, ev.StopEvent):
            self._clear_waiting()
            self._end_text()
            self.out.flush()
            return
        line = self._line(event)
        if line is None:
            return
        self._clear_waiting()
        self._end_text()
        who = "" if event.agent_id == "main" else s.dim(f"[{for_terminal(event.agent_id)}] ")
        self.out.write(f"  {who}{line}\n")
        if isinstance(event, ev.ToolResultEvent) and event.tail:
            for tail in for_terminal(event.tail).splitlines():
                self.out.write(f"      {s.dim('│ ' + tail)}\n")
        self.out.flush()

    def write_rendered(self, text: str) -> None:
        """Text already made safe for a terminal (chat.py's rendered Markdown), written as is."""
        self._clear_waiting()
        self._end_text()
        self.out.write(text)
        self.out.flush()

    def _end_text(self) -> None:
        if self.in_text:
            self.out.write("\n")
            self.in_text = False

    def _show_waiting(self) -> None:
        """Until the first token comes, say whom we wait for: on a TTY one line that the next
        output replaces; elsewhere a plain line, once per run."""
        what = "… asking the model" + (f" ({for_terminal(self.endpoint)})" if self.endpoint else "")
        if not self.tty:
            if not self.said_waiting:
                self._end_text()
                self.out.write(f"  {what}\n")
                self.said_waiting = True
                self.out.flush()
            return
        self._end_text()
        self.out.write("\r\033[K  " + self.style.dim(what))
        self.waiting = True
        self.out.flush()

    def _clear_waiting(self) -> None:
        if self.waiting:
            self.out.write("\r\033[K")
            self.waiting = False

    def _line(self, event: ev.Event) -> str | None:
        """The line an event shows, or None. Every kind is decided here: mypy checks that none
        is missing, and so does a unit test."""
        s = self.style
        text = for_terminal(event.text)
        match event:
            case ev.ToolCallEvent():
                return f"{s('33', '▸')} {text}"
            case ev.ToolResultEvent():
                mark = s.ok() if event.ok else s.bad()
                extra = (
                    s.dim(" (truncated; the whole result is in a spill file)")
                    if event.truncated
                    else ""
                )
                return f"{mark} {text}{extra}"
            case ev.CompactionEvent():
                return s.dim(f"⋯ {text}")
            case ev.SteerEvent():  # the user's own words, as the model gets them
                return f"{s('36', '»')} {text}"
            case ev.HookEvent():  # a hook that blocked or failed stands out; one passed is quiet
                if event.blocked or event.exit_code != 0:
                    return f"{s('35', '⚑')} {text}"
                return s.dim(f"· {text}")
            case ev.ProcessEvent():  # a background process started or ended: a quiet line
                return s.dim(f"· {text}")
            case ev.StatusEvent():  # the wait for the model is the transient waiting line instead
                return None if event.waiting == "model" else s.dim(f"· {text}")
            # Approvals are asked and answered here; the usage is in the report.
            case ev.ApprovalEvent() | ev.UsageEvent():
                return None
            case ev.TextDelta() | ev.ThinkingDelta() | ev.StopEvent():  # written as they come
                return None
            case _:
                assert_never(event)
