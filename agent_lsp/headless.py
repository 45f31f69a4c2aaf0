"""The terminal adapter for `agent-lsp run`: disk workspace, TTY approvals, streamed output."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
from pathlib import Path
from typing import TextIO

from agent_lsp.agent.disk_workspace import DiskWorkspace
from agent_lsp.agent.messages import Event, RunReport, StopReason
from agent_lsp.agent.ports import ApprovalRequest, Decision
from agent_lsp.agent.run import Session, run_task
from agent_lsp.settings import Settings

EXIT_CODES = {StopReason.DONE: 0, StopReason.FATAL: 1, StopReason.MAX_TURNS: 3, StopReason.CANCELLED: 130}


def read_line_async(prompt: str, out: TextIO) -> asyncio.Future[str | None]:
    """input() in a daemon thread, so a Ctrl-C never waits on a blocked read."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def reader() -> None:
        out.write(prompt)
        out.flush()
        line = sys.stdin.readline()
        value = line.strip() if line else None
        loop.call_soon_threadsafe(lambda: future.done() or future.set_result(value))

    threading.Thread(target=reader, daemon=True).start()
    return future


class TerminalApprover:
    def __init__(self, yes: bool, out: TextIO, interactive: bool):
        self.yes = yes
        self.out = out
        self.interactive = interactive

    async def ask(self, request: ApprovalRequest) -> Decision:
        if self.yes:
            self.out.write(f"\n  ✔ approved (--yes): {request.detail.splitlines()[0]}\n")
            return Decision.ALLOW
        if not self.interactive:
            self.out.write(f"\n  ✘ denied (no TTY to ask; pass --yes to approve): {request.detail.splitlines()[0]}\n")
            return Decision.DENY
        self.out.write(f"\n  ? {request.tool} wants to:\n")
        for line in request.detail.splitlines()[:30]:
            self.out.write(f"      {line}\n")
        answer = await read_line_async("    [a]llow / allow for [s]ession / [d]eny? ", self.out)
        choice = (answer or "d").lower()[:1]
        return {"a": Decision.ALLOW, "y": Decision.ALLOW, "s": Decision.ALLOW_SESSION}.get(choice, Decision.DENY)


class TerminalStream:
    """Model text as it comes; every other event as its own short line."""

    def __init__(self, out: TextIO):
        self.out = out
        self.in_text = False

    def __call__(self, event: Event) -> None:
        if event.kind == "text":
            self.out.write(event.text)
            self.in_text = True
        elif event.kind in ("toolCall", "toolResult", "compaction", "status"):
            if event.kind == "status" and "asking the model" in event.text:
                return
            if self.in_text:
                self.out.write("\n")
                self.in_text = False
            who = "" if event.agent_id == "main" else f"[{event.agent_id}] "
            self.out.write(f"  ▸ {who}{event.text}\n")
        self.out.flush()


def print_report(report: RunReport, out: TextIO, as_json: bool) -> None:
    if as_json:
        out.write("\n" + json.dumps(report.to_dict()) + "\n")
        return
    out.write(f"\n── {report.stop_reason} ──\n{report.summary}\n")
    if report.edited_files:
        out.write("edited: " + ", ".join(report.edited_files) + "\n")
    out.write(f"usage: {report.usage.prompt_tokens} prompt + {report.usage.completion_tokens} completion tokens\n")
    out.write(f"transcript: {report.transcript}\n")


async def run_headless(task: str, workspace: Path, settings: Settings, yes: bool, as_json: bool = False,
                       out: TextIO = sys.stdout) -> int:
    approver = TerminalApprover(yes, out, interactive=sys.stdin.isatty())
    runner = asyncio.ensure_future(run_task(task, session=Session(), settings=settings, workspace=DiskWorkspace([workspace]),
                                            approver=approver, emit=TerminalStream(out)))
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, runner.cancel)
        loop.add_signal_handler(signal.SIGTERM, runner.cancel)
    except (NotImplementedError, RuntimeError):
        pass
    try:
        report = await runner
    except asyncio.CancelledError:  # a second Ctrl-C while the stop was being written
        out.write("\ncancelled\n")
        return EXIT_CODES[StopReason.CANCELLED]
    print_report(report, out, as_json)
    return EXIT_CODES[report.stop_reason]
