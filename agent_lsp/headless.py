"""The terminal adapter for `agent-lsp run`: disk workspace, TTY approvals, streamed output,
sessions that a later `--session ID` continues."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from agent_lsp.agent.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts
from agent_lsp.agent.messages import Event, RunReport, StopReason
from agent_lsp.agent.ports import Answer, ApprovalRequest, Decision
from agent_lsp.agent.sessions import SessionError
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.settings import Settings
from agent_lsp.terminal import Style, read_line_async

EXIT_CODES = {StopReason.DONE: 0, StopReason.FATAL: 1, StopReason.MAX_TURNS: 3, StopReason.CANCELLED: 130}
EXIT_USAGE = 2
NOBODY = "no one could be asked (no terminal to ask on; pass --yes to approve side effects)"


class TerminalApprover:
    def __init__(self, yes: bool, out: TextIO, interactive: bool):
        self.yes = yes
        self.out = out
        self.interactive = interactive
        self.style = Style.for_stream(out)

    async def ask(self, request: ApprovalRequest) -> Answer:
        s = self.style
        first = request.detail.splitlines()[0] if request.detail else request.tool
        if self.yes and not request.must_ask:
            self.out.write(f"\n  {s.ok()} approved (--yes): {first}\n")
            return Answer(Decision.ALLOW)
        if not self.interactive:
            why = f"{NOBODY}; --yes does not cover it ({request.must_ask})" if request.must_ask else NOBODY
            self.out.write(f"\n  {s.bad()} denied: {why}: {first}\n")
            return Answer(Decision.DENY, why=why)
        self.out.write(f"\n  {s('35;1', '?')} {s.bold(request.tool)} wants to:\n")
        for line in request.detail.splitlines()[:40]:
            color = "32" if line.startswith("+") else "31" if line.startswith("-") else "0"
            self.out.write(f"      {s(color, line)}\n")
        # No time limit: a person is thinking (CONTRACT Decision 10).
        answer = await read_line_async("    [a]llow / allow for [s]ession / [d]eny (d REASON to say why)? ", self.out)
        text = (answer or "d").strip()
        choice = text.lower()[:1]
        if choice in ("a", "y"):
            return Answer(Decision.ALLOW)
        if choice == "s":
            return Answer(Decision.ALLOW_SESSION)
        reason = text[1:].strip() if choice == "d" and len(text) > 1 and text[1] == " " else None
        return Answer(Decision.DENY, reason or None, "the user said no")


class TerminalStream:
    """Model text as it comes; every other event as its own short line: ✓/✗ for results, the
    last lines of a command's output, paths relative to the workspace."""

    def __init__(self, out: TextIO):
        self.out = out
        self.style = Style.for_stream(out)
        self.in_text = False

    def __call__(self, event: Event) -> None:
        s = self.style
        if event.kind in ("text", "thinking"):  # the model's reasoning dimmed, its answer plain
            self.out.write(event.text if event.kind == "text" else s.dim(event.text))
            self.in_text = True
            self.out.flush()
            return
        line = self._line(event)
        if line is None:
            return
        if self.in_text:
            self.out.write("\n")
            self.in_text = False
        who = "" if event.agent_id == "main" else s.dim(f"[{event.agent_id}] ")
        self.out.write(f"  {who}{line}\n")
        if event.kind == "toolResult" and event.data.get("tail"):
            for tail in str(event.data["tail"]).splitlines():
                self.out.write(f"      {s.dim('│ ' + tail)}\n")
        self.out.flush()

    def _line(self, event: Event) -> str | None:
        s = self.style
        if event.kind == "toolCall":
            return f"{s('33', '▸')} {event.text}"
        if event.kind == "toolResult":
            mark = s.ok() if event.data.get("ok") else s.bad()
            extra = s.dim(" (truncated; the whole result is in a spill file)") if event.data.get("truncated") else ""
            return f"{mark} {event.text}{extra}"
        if event.kind == "compaction":
            return s.dim(f"⋯ {event.text}")
        if event.kind == "status" and "asking the model" not in event.text:
            return s.dim(f"· {event.text}")
        return None


def print_report(report: RunReport, out: TextIO, paths: PathGuard | None = None) -> None:
    s = Style.for_stream(out)
    mark = s.ok() if report.stop_reason == StopReason.DONE else s.bad()
    out.write(f"\n{mark} {s.bold(str(report.stop_reason))}: {report.summary}\n")
    if report.edited_files:
        out.write("edited: " + ", ".join(_relative(u, paths) for u in report.edited_files) + "\n")
    usage = report.usage
    cost = f", ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    cached = f" ({usage.cached_tokens} cached)" if usage.cached_tokens else ""
    out.write(s.dim(f"usage: {usage.prompt_tokens} prompt{cached} + {usage.completion_tokens} completion tokens{cost}; "
                    f"context {report.context_tokens}/{report.context_window}\n"))
    out.write(s.dim(f"session: {report.session_id} · transcript: {report.transcript}\n"))


def _relative(uri: str, paths: PathGuard | None) -> str:
    if paths is None or not uri.startswith("file://"):
        return uri
    from urllib.parse import unquote, urlparse

    return paths.display(Path(unquote(urlparse(uri).path)))


async def run_headless(task: str, workspace: Path, settings: Settings, yes: bool, as_json: bool = False, *,
                       session_id: str | None = None, mode: str | None = None,
                       out: TextIO | None = None, err: TextIO | None = None) -> int:
    """One run in the terminal. With --json, stdout holds exactly the report (the stream goes to
    stderr). SIGINT, SIGTERM and SIGHUP cancel the run (exit 130) after killing its commands."""
    stdout = out or sys.stdout
    stream_out = (err or sys.stderr) if as_json else stdout
    host = AgentHost()
    roots = [workspace.resolve()]
    try:
        session, store = await host.open_session(roots, session_id)
    except SessionError as exc:
        (err or sys.stderr).write(f"agent-lsp run: {exc}\n")
        return EXIT_USAGE
    ws = DiskWorkspace(roots)
    ports = RunPorts(ws, TerminalApprover(yes, stream_out, interactive=sys.stdin.isatty()), TerminalStream(stream_out))
    hint = f"run `agent-lsp run --session {session.id} \"...\"` in {workspace} to continue"
    hosted = host.start(task, session=session, store=store, settings=settings, ports=ports, mode=mode, continue_hint=hint)
    loop = asyncio.get_running_loop()
    task_ = hosted.task
    assert task_ is not None
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, task_.cancel)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        try:
            await asyncio.shield(task_)
        except asyncio.CancelledError:
            if not task_.done():  # our own wait was cancelled: let the run close its report
                await asyncio.wait([task_], timeout=5)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                loop.remove_signal_handler(signum)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        await host.aclose()
    report = hosted.report
    if report is None:
        stream_out.write("\ncancelled\n")
        return EXIT_CODES[StopReason.CANCELLED]
    if as_json:
        stdout.write(json.dumps(report.to_dict()) + "\n")
        stdout.flush()
    else:
        print_report(report, stdout, PathGuard(roots))
    return EXIT_CODES[report.stop_reason]


def print_sessions(items: list[dict[str, Any]], out: TextIO) -> None:
    s = Style.for_stream(out)
    if not items:
        out.write("no sessions in this workspace yet\n")
        return
    for item in items:
        stop = item["lastStop"] or "running"
        out.write(f"{s.bold(item['sessionId'])}  {item['updated']}  {item['runs']} run(s), last: {stop}\n    {item['title']}\n")
