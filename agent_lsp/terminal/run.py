"""`agent-lsp run`, the terminal adapter of a run: disk workspace, TTY approvals, streamed output,
sessions that a later `--session ID` continues."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agent_lsp.agent.display import escape_invisible, for_terminal
from agent_lsp.agent.events import Event, StatusEvent
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunHandle, RunPorts, RunRequest
from agent_lsp.agent.loop.budget import BudgetRefused, check_budget
from agent_lsp.agent.loop.prompt_plan import PromptPlan, plan_prompt
from agent_lsp.agent.loop.structured import OutputSchema
from agent_lsp.agent.loop.verify import verification_line
from agent_lsp.agent.messages import CancelCause, RunReport, StopCause, StopReason, Usage
from agent_lsp.agent.ports import Answer, ApprovalRequest, Decision, EventSink
from agent_lsp.agent.state.checkpoints import CheckpointStore
from agent_lsp.agent.state.session import KEPT, Session, new_id
from agent_lsp.agent.state.sessions import SessionError, SessionStore
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.frontend import allowed_tools_consent, model_lister, on_signals, shut_down
from agent_lsp.langservers.hub import plug as plug_language_servers
from agent_lsp.langservers.hub import with_diagnostics
from agent_lsp.settings import Settings
from agent_lsp.telemetry.hub import OtelTelemetry
from agent_lsp.terminal import startup
from agent_lsp.terminal.ids import Ambiguous, expand_prefix
from agent_lsp.terminal.project_consent import plug_permissions
from agent_lsp.terminal.stream import TerminalStream
from agent_lsp.terminal.stream_json import StreamJson
from agent_lsp.terminal.style import Style, read_line_async

if TYPE_CHECKING:
    from agent_lsp.terminal.worktrees import WorktreeRun

EXIT_CODES = {
    StopReason.DONE: 0,
    StopReason.FATAL: 1,
    StopReason.MAX_TURNS: 3,
    StopReason.CANCELLED: 130,
}
EXIT_USAGE = 2
SHOWN_LINES = 40  # lines of an approval's detail shown before asking (v shows the rest)
SIGNAL_CAUSES = {  # Ctrl-C is the user; SIGTERM and SIGHUP came from elsewhere (Decision 24)
    signal.SIGINT: CancelCause(StopCause.USER),
    signal.SIGTERM: CancelCause(StopCause.SIGNAL, "SIGTERM"),
    signal.SIGHUP: CancelCause(StopCause.SIGNAL, "SIGHUP (the terminal closed)"),
}
NOBODY = "no one could be asked (no terminal to ask on; pass --yes to approve side effects)"


class TerminalApprover:
    def __init__(self, yes: bool, out: TextIO, interactive: bool):
        self.yes = yes
        self.out = out
        self.interactive = interactive
        self.style = Style.for_stream(out)

    async def ask(self, request: ApprovalRequest) -> Answer:
        s = self.style
        # The detail is escaped where it is made; escaped again here because a terminal must
        # never get a control character, whoever built the request.
        lines = for_terminal(request.detail).splitlines()
        tool = for_terminal(request.tool)
        first = lines[0] if lines else tool
        if self.yes and not request.must_ask:
            self.out.write(f"\n  {s.ok()} approved (--yes): {first}\n")
            return Answer(Decision.ALLOW)
        if not self.interactive:
            why = (
                f"{NOBODY}; --yes does not cover it ({request.must_ask})"
                if request.must_ask
                else NOBODY
            )
            self.out.write(f"\n  {s.bad()} denied: {why}: {first}\n")
            return Answer(Decision.DENY, why=why)
        self.out.write(f"\n  {s('35;1', '?')} {s.bold(tool)} wants to:\n")
        full = _whole_detail(lines, request)
        self._show(full[:SHOWN_LINES])
        hidden = len(full) - SHOWN_LINES
        if hidden > 0:
            self.out.write(
                f"      {s.dim(f'… {hidden} more line(s) not shown (v shows them all)')}\n"
            )
        question = "    [a]llow / allow for [s]ession / [d]eny (d REASON to say why)"
        if request.always_rule:  # Decision 27: the choice names the rule it saves
            rule = for_terminal(request.always_rule)
            question += f" / al[w]ays allow (saves the rule {rule} to your settings)"
        while True:
            # No time limit: a person is thinking (CONTRACT Decision 10).
            answer = await read_line_async(
                question + (" / [v]iew all? " if hidden > 0 else "? "), self.out
            )
            text = (answer or "d").strip()
            choice = text.lower()[:1]
            if choice == "v" and hidden > 0:
                self.out.write(f"\n  {s.bold(tool)} wants to (all {len(full)} lines):\n")
                self._show(full)
                continue
            if choice in ("a", "y"):
                return Answer(Decision.ALLOW)
            if choice == "s":
                return Answer(Decision.ALLOW_SESSION)
            if choice == "w" and request.always_rule:
                return Answer(Decision.ALLOW_ALWAYS)
            reason = (
                text[1:].strip() if choice == "d" and len(text) > 1 and text[1] == " " else None
            )
            return Answer(Decision.DENY, reason or None, "the user said no")

    def _show(self, lines: list[str]) -> None:
        s = self.style
        for line in lines:
            color = "32" if line.startswith("+") else "31" if line.startswith("-") else "0"
            self.out.write(f"      {s(color, line)}\n")


def _whole_detail(lines: list[str], request: ApprovalRequest) -> list[str]:
    """Every line a person may want before deciding: for an edit, its first line and the whole
    diff (the detail holds a short one); otherwise the detail itself."""
    if not request.diff:
        return lines
    diff = for_terminal(escape_invisible(request.diff)).splitlines()
    cut = ["(the diff is cut at 1 MB)"] if request.diff_truncated else []
    return [*lines[:1], *diff, *cut]


def print_report(
    report: RunReport,
    out: TextIO,
    paths: PathGuard | None = None,
    *,
    rewind_id: str | None = None,
    session_kept: bool = True,
) -> None:
    """The report for a person: the summary (it starts with how the run stopped), the files,
    the usage, then where to find the run again: its id, its session and how to rewind it."""
    s = Style.for_stream(out)
    mark = s.ok() if report.stop_reason == StopReason.DONE else s.bad()
    out.write(f"\n{mark} {for_terminal(report.summary)}\n")
    if report.edited_files:
        out.write(
            "edited: "
            + for_terminal(", ".join(_relative(u, paths) for u in report.edited_files))
            + "\n"
        )
    if report.stop_reason == StopReason.DONE and (
        verified := verification_line(report.verification)
    ):
        out.write(for_terminal(verified) + "\n")
    usage = report.usage
    cost = f", ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    cached = f" ({usage.cached_tokens} cached)" if usage.cached_tokens else ""
    out.write(
        s.dim(
            f"usage: {usage.prompt_tokens} prompt{cached} + "
            f"{usage.completion_tokens} completion tokens{cost}; "
            f"context {report.context_tokens}/{report.context_window}\n"
        )
    )
    session = (
        f"session {report.session_id}"
        if session_kept
        else "no session kept (the model never answered)"
    )
    where = f"run {report.run_id} · {session}"
    if report.rewindable:
        where += f" · rewind with `agent-lsp rewind {rewind_id or report.run_id}`"
    out.write(s.dim(for_terminal(where) + "\n"))
    out.write(s.dim(for_terminal(f"transcript: {report.transcript}") + "\n"))


def _relative(uri: str, paths: PathGuard | None) -> str:
    return uri if paths is None else paths.display_uri(uri)


async def run_headless(
    task: str,
    workspace: Path,
    settings: Settings,
    yes: bool,
    as_json: bool = False,
    *,
    session_id: str | None = None,
    mode: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    output_format: str | None = None,
    output_schema: OutputSchema | None = None,
    prompt_from_stdin: bool = False,
    worktree: WorktreeRun | None = None,
) -> int:
    """One run in the terminal. With --json, stdout holds exactly the report (the stream goes to
    stderr); with stream-json, the stream's JSON lines and last the result line (human lines go
    to stderr). SIGINT, SIGTERM and SIGHUP cancel the run (exit 130) after killing its commands.
    A prompt read from stdin leaves no terminal to ask approvals on."""
    fmt = output_format or ("json" if as_json else "text")
    stdout = out or sys.stdout
    stream_out = (err or sys.stderr) if fmt != "text" else stdout
    host = AgentHost(telemetry=OtelTelemetry())
    plug_language_servers(host, lambda: settings)
    roots = [workspace.resolve()]
    opened = await open_session(host, roots, session_id, err or sys.stderr)
    if opened is None:
        return EXIT_USAGE
    session, store = opened
    interactive = sys.stdin.isatty() and not prompt_from_stdin
    plug_permissions(host, stream_out, interactive)  # before the plan: its consent asks here
    plan = await _plan(task, roots, settings, host, session, err or sys.stderr)
    if plan is None:
        return EXIT_USAGE
    ws = with_diagnostics(host, DiskWorkspace(roots))
    await mcp_on_the_terminal(host, roots, settings, stream_out, interactive)
    approver = TerminalApprover(yes, stream_out, interactive=interactive)
    run_id = worktree.run_id if worktree is not None else new_id("r")
    shown = TerminalStream(stream_out, endpoint_of(settings, session.model))
    machine = _machine(fmt, stdout, run_id, worktree)
    # A CI log shows the run on stderr.
    stream: EventSink = _resume_after_first_call(
        shown if machine is None else _both(machine, shown)
    )
    hint = f'run `agent-lsp run --session {session.id} "..."` in {workspace} to continue'
    if worktree is not None:  # the run works in its worktree (Decision 42)
        hint = worktree.continue_hint(session.id)
    hosted = host.start(
        RunRequest(
            plan.prompt,
            session,
            store,
            settings,
            RunPorts(ws, approver, stream),
            mode=mode,
            continue_hint=hint,
            run_id=run_id,
            output_schema=output_schema,
            title=task,
            plan=plan,
        )
    )
    task_ = hosted.task
    assert task_ is not None
    await _until_ended(hosted, task_, host, machine, worktree, task)
    return await _outcome(hosted.report, fmt, stdout, stream_out, host, session, worktree, roots)


def _machine(
    fmt: str, stdout: TextIO, run_id: str, worktree: WorktreeRun | None
) -> StreamJson | None:
    """stream-json's writer (its lines name the run's worktree), None for the other formats."""
    if fmt != "stream-json":
        return None
    extra = {"worktree": worktree.to_dict()} if worktree is not None else None
    return StreamJson(stdout, run_id, extra)


async def _until_ended(
    hosted: RunHandle,
    task_: asyncio.Task[None],
    host: AgentHost,
    machine: StreamJson | None,
    worktree: WorktreeRun | None,
    task: str,
) -> None:
    """Wait for the run, the signals cancelling it; then the host shut down and, once every
    process of the run has ended, its worktree's files final."""
    # The report's stopCause says which: `user` for Ctrl-C, `signal` for the others.
    try:
        with on_signals(
            {
                signum: functools.partial(hosted.cancel, cause)
                for signum, cause in SIGNAL_CAUSES.items()
            }
        ):
            try:
                await asyncio.shield(task_)
            except asyncio.CancelledError:
                if not task_.done():  # our own wait was cancelled: let the run close its report
                    await asyncio.wait([task_], timeout=5)
            if machine is not None:  # from the run id on, every outcome ends with one result line
                machine.result(hosted.report or _no_report(hosted))
    finally:
        startup.resume()  # a run that ended before its first model call
        if machine is not None:
            machine.result(hosted.report or _no_report(hosted))
        await shut_down(host, deadline=None)
        if worktree is not None:  # every process of the run has ended: its files are final
            await asyncio.to_thread(worktree.finish, task)


async def open_session(
    host: AgentHost,
    roots: list[Path],
    session_id: str | None,
    err: TextIO,
    command: str = "run",
) -> tuple[Session, SessionStore] | None:
    """The run's session (or the chat's): new, or the one `--session` names (a unique prefix
    names it, as `rewind` takes a run's); None (said on `err`) when there is none such."""
    try:
        if session_id is not None:
            known = await asyncio.to_thread(host.store(roots).ids)
            session_id = expand_prefix(session_id, known, "session")
        return await host.open_session(roots, session_id)
    except (SessionError, Ambiguous) as exc:
        err.write(f"agent-lsp {command}: {for_terminal(str(exc))}\n")
        return None


async def _plan(
    task: str,
    roots: list[Path],
    settings: Settings,
    host: AgentHost,
    session: Session,
    err: TextIO,
) -> PromptPlan | None:
    """What the task runs: a `/name args` task runs that prompt file (Decision 34; the
    session's title keeps it as typed). None (said on `err`) for a budget that could not be
    kept: a usage error, before any MCP server starts."""
    plan = await plan_prompt(
        task,
        roots,
        settings,
        lister=model_lister(host, settings),
        consent=allowed_tools_consent(host, roots),
    )
    try:
        check_budget(plan.settings, plan.model or session.model or settings.model)
    except BudgetRefused as exc:
        err.write(f"agent-lsp run: {for_terminal(str(exc))}\n")
        return None
    return plan


async def _outcome(
    report: RunReport | None,
    fmt: str,
    stdout: TextIO,
    stream_out: TextIO,
    host: AgentHost,
    session: Session,
    worktree: WorktreeRun | None,
    roots: list[Path],
) -> int:
    """The run's report as `--output-format` asks (text, json; stream-json wrote its result
    line already), the worktree's line, and the exit code."""
    if report is None:
        stream_out.write("\ncancelled\n")
        _worktree_line(worktree, stream_out)
        return EXIT_CODES[StopReason.CANCELLED]
    if fmt == "json":
        data = report.to_dict()
        if worktree is not None:
            data["worktree"] = worktree.to_dict()
        stdout.write(json.dumps(data) + "\n")
        stdout.flush()
    elif fmt == "text":
        kept = any(r.reached for r in session.runs if r.kind in KEPT)
        short = (
            await asyncio.to_thread(short_run_id, host.checkpoint_store(roots), report.run_id)
            if report.rewindable
            else None
        )
        if short is not None and worktree is not None:
            short = worktree.rewind_command(short)
        print_report(report, stdout, PathGuard(roots), rewind_id=short, session_kept=kept)
    _worktree_line(worktree, stream_out)
    return EXIT_CODES[report.stop_reason]


def _worktree_line(worktree: WorktreeRun | None, out: TextIO) -> None:
    """The terminal's last line names the run's worktree and branch (on stderr with --json)."""
    if worktree is not None:
        out.write(Style.for_stream(out).dim(worktree.last_line()) + "\n")
        out.flush()


def _both(first: EventSink, second: EventSink) -> EventSink:
    def sink(event: Event) -> None:
        first(event)
        second(event)

    return sink


def _resume_after_first_call(sink: EventSink) -> EventSink:
    """The collector back on (startup.py) at the first event after the run began waiting for
    its first model answer: the SDK is imported and the request sent by then (the wait itself
    allocates nothing)."""
    asked = False

    def resume_then(event: Event) -> None:
        nonlocal asked
        if asked:
            startup.resume()
        elif isinstance(event, StatusEvent) and event.waiting == "model":
            asked = True
        sink(event)

    return resume_then


def _no_report(hosted: RunHandle) -> RunReport:
    """The result of a run that ended without its report (it never should): cancelled."""
    cause = hosted.cancel_cause.cause if hosted.cancel_cause is not None else StopCause.SHUTDOWN
    return RunReport(
        run_id=hosted.id,
        session_id=hosted.session.id,
        stop_reason=cause.reason,
        stop_cause=cause,
        turns=0,
        final_text="",
        summary="The run ended without a report.",
        edited_files=[],
        tool_calls=0,
        denied=0,
        usage=Usage(),
        transcript="",
    )


async def mcp_on_the_terminal(
    host: AgentHost, roots: list[Path], settings: Settings, out: TextIO, interactive: bool
) -> None:
    """Workspace MCP servers ask consent on the terminal (none without one, and it says so);
    those already denied are named before the run."""
    from agent_lsp.mcp.hub import McpHooks, McpHub
    from agent_lsp.terminal.mcp_consent import TerminalMcpHooks

    hooks = TerminalMcpHooks(out, interactive)
    host.tool_servers = McpHub(McpHooks(ask_consent=hooks.ask_consent, on_status=hooks.on_status))
    try:
        hooks.show_initial(await host.mcp_status(roots, settings))
    except Exception as exc:  # the run reports MCP problems itself; this is only a heads-up
        out.write(f"  MCP servers could not be read: {exc}\n")


def endpoint_of(settings: Settings, model: str | None) -> str:
    """`m at http://host:port/v1` for the waiting line: the URL without its user, password or
    query."""
    from urllib.parse import urlsplit

    url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    try:
        parts = urlsplit(url)
        shown = (
            f"{parts.scheme}://{parts.hostname or ''}"
            f"{f':{parts.port}' if parts.port else ''}{parts.path}"
            if parts.scheme
            else url
        )
    except ValueError:
        shown = "the configured endpoint"
    return f"{model or settings.model} at {shown}"


def short_run_id(store: CheckpointStore, run_id: str) -> str:
    """The shortest prefix of run_id (at least "r-" and 4 more characters) that no other run or
    rewind of the workspace starts with: what `agent-lsp rewind` accepts."""
    others = [m.run_id for m in store.summaries() if m.run_id != run_id]
    for length in range(min(len(run_id), 6), len(run_id)):
        if not any(o.startswith(run_id[:length]) for o in others):
            return run_id[:length]
    return run_id
