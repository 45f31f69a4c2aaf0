"""Verified done (CONTRACT "Working beside the user", Decisions 59, 84, 85): which checks ran
after the run's last edit, the verify commands run before a run with edits ends `done` (a
failure goes back to the model for at most `maxRounds` rounds), and the report's
`verification`."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_lsp.agent.events import StatusEvent
from agent_lsp.agent.messages import Outcome, ToolCall, ToolResult
from agent_lsp.agent.ports import diagnostics_of
from agent_lsp.agent.state.changes import RunChanges
from agent_lsp.agent.tools.base import Prepared, ToolContext
from agent_lsp.agent.tools.diagnostics import format_diagnostics
from agent_lsp.agent.tools.paths import PathGuard, PathRefused
from agent_lsp.settings_schema import VerifySettings

# The tools whose success is an edit (Decision 84); a command that is no check is one when it
# changed files (the run's checkpoint sees them).
EDIT_TOOLS = frozenset({"edit_file", "write_file", "rename_symbol", "remember"})
FAILURE_HEAD, FAILURE_TAIL = 1500, 2500  # characters of a failing check's output fed back


@dataclass
class Check:
    """One check that ran: a command's exit code or a diagnostics call's error count."""

    kind: str  # "command" | "diagnostics"
    key: str  # what repeats it: the command line, or the diagnostics target
    ok: bool
    summary: str
    edit: int  # the run's edit count when it ran: after the last edit when it is the last
    command: str | None = None
    exit_code: int | None = None
    errors: int | None = None
    files: list[Path] | None = None  # what a diagnostics check covers (None: every file)
    output: str = ""  # what failed, for the model (not in the report)

    def covers(self, path: Path) -> bool:
        return self.files is None or any(path == f or path.is_relative_to(f) for f in self.files)


class CallRunner(Protocol):
    """The loop's tool-call runner (approval, hooks, sandbox): verify commands go through it."""

    async def run(self, calls: list[ToolCall], turn: int) -> list[ToolResult]: ...


class Verification:
    """The run's checks, observed as its tool calls end, and its verify step."""

    def __init__(self, settings: VerifySettings, ctx: ToolContext, paths: PathGuard):
        self.settings = settings
        self.ctx = ctx
        self.paths = paths
        self.changes: RunChanges = ctx.changes
        self.edits = 0  # edits so far: a check ran after the last edit when it saw them all
        self._seen = self.changes.touched
        self.checks: list[Check] = []
        self.rounds = 0  # failures fed back
        self.numbered = 0  # verify-N
        self._recognized = [_program(p) for p in [*settings.recognize, *settings.commands]]
        self._commands = [(line, _key(line)) for line in settings.commands]

    # -- observing the agent's own calls ----------------------------------------------------
    def is_check(self, command: str) -> bool:
        """A line that starts with a recognised runner (on parsed argv; `.venv/bin/pytest` is
        pytest), or a verify command."""
        argv = _program(command)
        return bool(argv) and any(p and argv[: len(p)] == p for p in self._recognized)

    def observe(self, call: ToolCall, prepared: Prepared, result: ToolResult) -> None:
        """A call that ran: an edit moves the last edit; a check is recorded."""
        touched, self._seen = self.changes.touched != self._seen, self.changes.touched
        plan = prepared.command
        if plan is not None and plan.ended is not None and self.is_check(plan.command):
            code = plan.ended.code
            ok = code == 0
            said = "passed" if ok else ("timed out" if code is None else f"failed (exit {code})")
            check = Check("command", _key(plan.command), ok, f"{plan.command} {said}", self.edits)
            check.command, check.exit_code, check.output = plan.command, code, result.content
            self.checks.append(check)
            return
        if call.name == "diagnostics" and result.outcome == Outcome.OK:
            self._diagnostics_call(call, result)
            return
        if touched or (call.name in EDIT_TOOLS and result.outcome == Outcome.OK):
            self.edits += 1

    def _diagnostics_call(self, call: ToolCall, result: ToolResult) -> None:
        try:
            asked = json.loads(call.arguments or "{}").get("path")
            files = [self.paths.resolve(asked)] if asked else None
        except (ValueError, AttributeError, PathRefused):  # the call's own result said why
            return
        errors = sum(1 for line in result.content.splitlines() if ": error: " in line)
        target = self.paths.display(files[0]) if files else "the workspace"
        self._record_diagnostics(target, files, errors, result.content)

    def _record_diagnostics(
        self, target: str, files: list[Path] | None, errors: int, output: str
    ) -> None:
        said = "no errors" if not errors else f"{errors} error{'s' if errors != 1 else ''}"
        check = Check("diagnostics", f"diagnostics {target}", not errors, "", self.edits)
        check.summary = f"diagnostics of {target}: {said}"
        check.errors, check.files, check.output = errors, files, output
        self.checks.append(check)

    # -- the verify step ---------------------------------------------------------------------
    def current(self) -> list[Check]:
        """The last run of each check since the last edit."""
        last: dict[str, Check] = {}
        for check in self.checks:
            if check.edit == self.edits:
                last[check.key] = check
        return list(last.values())

    async def step(
        self, runner: CallRunner, turn: int, emit: Callable[[Any], None], can_go_on: bool
    ) -> str | None:
        """A run that would end `done`: the verify commands not already passed after the last
        edit, then the edited files' diagnostics; the failure for the model (None: passed, no
        edits, nothing to verify, or the rounds are spent and the failure is reported)."""
        if self.edits == 0 or not (self.settings.commands or self.settings.diagnostics):
            return None
        passed = {c.key for c in self.current() if c.ok}
        for line, key in self._commands:
            if key in passed:
                continue
            self.numbered += 1
            call = ToolCall(f"verify-{self.numbered}", "run_command", json.dumps({"command": line}))
            await runner.run([call], turn)
        if self.settings.diagnostics:
            await self._check_diagnostics(emit, turn)
        failed = [c for c in self.current() if not c.ok]
        if not failed or self.rounds >= self.settings.max_rounds or not can_go_on:
            return None
        self.rounds += 1
        return failure_message(failed, self.rounds, self.settings.max_rounds)

    async def _check_diagnostics(self, emit: Callable[[Any], None], turn: int) -> None:
        """The edited files' errors from the editor or the started language servers."""
        passed = [c for c in self.current() if c.kind == "diagnostics" and c.ok]
        edited = [p for p in self.changes if p.is_file()]
        if all(any(c.covers(p) for c in passed) for p in edited):  # none left to ask about
            return
        source = diagnostics_of(self.ctx.workspace)
        items = (
            await source.diagnostics(edited, None)
            if source is not None and source.has_diagnostics
            else None
        )
        if items is None:
            emit(StatusEvent("verify: no diagnostics answered for the edited files", turn))
            return
        lines = [
            line
            for line in format_diagnostics(items, self.paths, severe_only=True)
            if ": error: " in line
        ]
        target = ", ".join(self.paths.display(p) for p in edited)
        self._record_diagnostics(target, edited, len(lines), "\n".join(lines))
        emit(StatusEvent(f"verify: {self.checks[-1].summary}", turn))

    # -- the report --------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """`{status, checks, unverifiedFiles}` (Decision 59), paths workspace-relative."""
        current = self.current()
        status = (
            "none" if not current else "failed" if any(not c.ok for c in current) else "passed"
        )
        uncovered = [
            self.paths.display(p)
            for p in self.changes
            if not any(c.covers(p) for c in current)
        ]
        return {
            "status": status,
            "checks": [self._check_dict(c) for c in self.checks],
            "unverifiedFiles": uncovered,
        }

    def _check_dict(self, check: Check) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": check.kind}
        if check.command is not None:
            out["command"] = check.command
            out["exitCode"] = check.exit_code
        if check.errors is not None:
            out["errors"] = check.errors
        out["afterLastEdit"] = check.edit == self.edits
        out["summary"] = check.summary
        return out


def failure_message(failed: list[Check], round_: int, rounds: int) -> str:
    """What the model is told (a user message): each failing check with its output's head and
    tail, and that the run checks again when it says it is done."""
    parts = [
        f"Verification failed after your last edit (round {round_} of {rounds}); fix it, then "
        "reply when done (the checks run again):"
    ]
    for check in failed:
        output = check.output
        if len(output) > FAILURE_HEAD + FAILURE_TAIL:
            cut = len(output) - FAILURE_HEAD - FAILURE_TAIL
            output = f"{output[:FAILURE_HEAD]}\n[… {cut} characters …]\n{output[-FAILURE_TAIL:]}"
        parts.append(f"## {check.summary}\n{output}".rstrip())
    return "\n\n".join(parts)


def verification_line(verification: dict[str, Any] | None) -> str:
    """The report's verification in one line for every front end: `verified: pytest -q passed`,
    `verification failed: …`, `not verified: a.py`; "" when there is nothing to say."""
    if not verification:
        return ""
    current = [c for c in verification.get("checks", []) if c.get("afterLastEdit")]
    last: dict[str, dict[str, Any]] = {}
    for check in current:
        last[check.get("command") or check["summary"].split(":")[0]] = check
    unverified = verification.get("unverifiedFiles") or []
    status = verification.get("status")
    if status == "failed":
        failed = [c["summary"] for c in last.values() if _failed(c)]
        return "verification failed: " + "; ".join(failed)
    if status == "passed":
        line = "verified: " + "; ".join(c["summary"] for c in last.values())
        return line + (f"; not verified: {', '.join(unverified)}" if unverified else "")
    return f"not verified: {', '.join(unverified)}" if unverified else ""


def _failed(check: dict[str, Any]) -> bool:
    if check.get("kind") == "command":
        return check.get("exitCode") != 0
    return bool(check.get("errors"))


def _key(line: str) -> str:
    """A command line as a check's identity: its argv (spacing and quoting aside)."""
    argv = _argv(line)
    return shlex.join(argv) if argv else line.strip()


def _program(line: str) -> list[str]:
    """The line's argv with its program by name (`.venv/bin/pytest` is `pytest`)."""
    argv = _argv(line)
    return [os.path.basename(argv[0]), *argv[1:]] if argv else []


def _argv(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return []


def end_line(stop_reason: str, summary: str, verification: dict[str, Any] | None) -> str:
    """A run's last line in an editor's progress: `done · verified: pytest -q passed: Done: …`
    (`done: Done: …` when there was nothing to verify; other stops say what stopped them)."""
    line = verification_line(verification) if stop_reason == "done" else ""
    return f"{stop_reason}{f' · {line}' if line else ''}: {summary}"


def stop_text(stop_reason: str, summary: str, verification: dict[str, Any] | None) -> str:
    """The `stop` event's text: the summary, then for a `done` run what verified it
    (`… Verified: pytest -q passed.`), which clients that show the stop's text display."""
    line = verification_line(verification) if stop_reason == "done" else ""
    return f"{summary} {line[:1].upper()}{line[1:]}." if line else summary
