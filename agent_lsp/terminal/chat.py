"""`agent-lsp chat`: a conversation with one session in the terminal (CONTRACT "Conversation
(turn 4)", Decision 55). Each line is a run of the session, streamed as `run` streams it, its
Markdown rendered with `rich`; a line typed while a run runs steers it; the questions a run asks
(approvals, consent) are answered on the same input line. prompt_toolkit and rich are imported
here only: `agent-lsp run` never loads them."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agent_lsp.agent.display import for_terminal
from agent_lsp.agent.events import Event, TextDelta
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.agent.loop.budget import BudgetRefused, check_budget
from agent_lsp.agent.loop.handle import BY_USER, RunHandle
from agent_lsp.agent.loop.prompt_plan import plan_prompt
from agent_lsp.agent.state.session import Session
from agent_lsp.agent.state.sessions import SessionError, SessionStore
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.frontend import allowed_tools_consent, model_lister, shut_down
from agent_lsp.langservers.hub import plug as plug_language_servers
from agent_lsp.langservers.hub import with_diagnostics
from agent_lsp.settings import Settings
from agent_lsp.telemetry.hub import OtelTelemetry
from agent_lsp.terminal import style
from agent_lsp.terminal.project_consent import plug_permissions
from agent_lsp.terminal.run import (
    EXIT_USAGE,
    TerminalApprover,
    endpoint_of,
    mcp_on_the_terminal,
    open_session,
    print_report,
)
from agent_lsp.terminal.stream import TerminalStream

NOT_A_TTY = (
    "agent-lsp chat: needs a terminal on stdin and stdout; "
    'for one task without a terminal, use `agent-lsp run "TASK"`'
)
PROMPT = "› "
RUNNING = "… "  # the prompt while a run runs: a line typed now steers it


@dataclass
class Question:
    """A question a run asks (an approval, a consent): the next line typed answers it."""

    prompt: str
    answer: asyncio.Future[str | None]


@dataclass
class Chat:
    host: AgentHost
    roots: list[Path]
    settings: Settings
    session: Session
    store: SessionStore
    out: TextIO
    mode: str | None = None
    running: RunHandle | None = None
    questions: list[Question] = field(default_factory=list)
    finishing: set[asyncio.Task[Any]] = field(default_factory=set)
    prompt: Any = None  # the PromptSession (prompt_toolkit), made in talk()

    def message(self) -> str:
        if self.questions:
            return self.questions[0].prompt
        return RUNNING if self.running is not None else PROMPT

    async def ask(self, prompt: str, out: TextIO) -> str | None:
        """terminal/style.read_line_async while the chat owns the input: the question shows as
        the prompt and the next line answers it."""
        question = Question(prompt.lstrip("\n"), asyncio.get_running_loop().create_future())
        self.questions.append(question)
        self._redraw()
        try:
            return await question.answer
        finally:
            self.questions.remove(question)
            self._redraw()

    def _redraw(self) -> None:
        app = getattr(self.prompt, "app", None)
        if app is not None:
            app.invalidate()

    async def talk(self) -> int:
        from prompt_toolkit.patch_stdout import patch_stdout

        self.prompt = _prompt_session(self)
        with patch_stdout(raw=True), style.lines_from(self.ask):
            while True:
                try:
                    line = await self.prompt.prompt_async(self.message)
                except KeyboardInterrupt:
                    if self.running is not None:  # Ctrl-C cancels the run, not the chat
                        self.running.cancel(BY_USER)
                        continue
                    break
                except EOFError:  # Ctrl-D at an empty prompt
                    break
                await self.take(line)
            await self._leave()
        return 0

    async def take(self, line: str) -> None:
        """A typed line: the answer to a question, a steer, or the next run of the session."""
        if self.questions:
            waiting = self.questions[0].answer
            if not waiting.done():
                waiting.set_result(line)
            return
        if not line.strip():
            return
        if self.running is not None:  # the run takes it before its next model call
            if not self.running.steer(line):
                self.say("the run is ending: this line was not sent; send it again")
            return
        await self.start(line)

    async def start(self, text: str) -> None:
        plan = await plan_prompt(
            text,
            self.roots,
            self.settings,
            lister=model_lister(self.host, self.settings),
            consent=allowed_tools_consent(self.host, self.roots),
        )
        if plan.unknown is not None:  # Decision 55: an unknown /word sends nothing
            self.say(f"/{plan.unknown} is not a known command or skill: nothing was sent")
            return
        try:
            check_budget(plan.settings, plan.model or self.session.model or self.settings.model)
        except BudgetRefused as exc:
            self.say(str(exc))
            return
        lines = TerminalStream(self.out, endpoint_of(self.settings, self.session.model))
        lines.tty = False  # no transient line: the input line sits below the stream
        stream = MarkdownStream(lines)
        approver = TerminalApprover(False, self.out, interactive=True)
        workspace = with_diagnostics(self.host, DiskWorkspace(self.roots))
        try:
            hosted = self.host.start(
                RunRequest(
                    plan.prompt,
                    self.session,
                    self.store,
                    self.settings,
                    RunPorts(workspace, approver, stream),
                    mode=self.mode,
                    continue_hint="type a follow-up to continue",
                    title=text,
                    plan=plan,
                )
            )
        except (SessionError, BudgetRefused) as exc:
            self.say(str(exc))
            return
        self.running = hosted
        self._redraw()
        finish = asyncio.ensure_future(self._finish(hosted))
        self.finishing.add(finish)
        finish.add_done_callback(self.finishing.discard)

    async def _finish(self, hosted: RunHandle) -> None:
        try:
            await hosted.wait()
        finally:
            self.running = None
            if hosted.report is not None:
                print_report(hosted.report, self.out, PathGuard(self.roots))
            else:
                self.out.write("\ncancelled\n")
            self.out.flush()
            self._redraw()

    async def _leave(self) -> None:
        if self.running is not None:
            self.running.cancel(BY_USER)
        if self.finishing:
            await asyncio.wait(list(self.finishing))

    def say(self, text: str) -> None:
        self.out.write(f"  {style.Style.for_stream(self.out).dim(for_terminal(text))}\n")
        self.out.flush()


class MarkdownStream:
    """The main agent's text rendered as Markdown, a block at a time (a block ends at a blank
    line outside a code fence, or at the next event); every other event as `run` shows it."""

    def __init__(self, lines: TerminalStream):
        self.lines = lines
        self.pending = ""

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta) and event.agent_id == "main":
            self.pending += event.text
            done, self.pending = split_blocks(self.pending)
            if done:
                self.lines.write_rendered(render_markdown(done, self.lines.style.enabled))
            return
        self.flush()
        self.lines(event)

    def flush(self) -> None:
        if self.pending.strip():
            self.lines.write_rendered(render_markdown(self.pending, self.lines.style.enabled))
        self.pending = ""


def split_blocks(text: str) -> tuple[str, str]:
    """(the complete Markdown blocks of `text`, the rest): a block ends at a blank line that is
    not inside a ``` fence."""
    cut = 0
    fenced = False
    at = 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        if not line.endswith("\n"):
            break
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not line.strip() and not fenced:
            cut = at
    return text[:cut], text[cut:]


def render_markdown(text: str, colour: bool) -> str:
    """Markdown as a terminal shows it (rich), the text's own control characters escaped first."""
    import io
    import shutil

    from rich.console import Console
    from rich.markdown import Markdown

    buffer = io.StringIO()
    width = shutil.get_terminal_size((100, 24)).columns
    console = Console(
        file=buffer, force_terminal=colour, width=width, color_system="standard" if colour else None
    )
    console.print(Markdown(for_terminal(text)))
    return buffer.getvalue()


def show_history(history: dict[str, Any], out: TextIO) -> None:
    """A session's earlier runs (`agentLsp.history`'s shape) the way the chat showed them: the
    prompt, the Markdown, each tool call and result, steers, and how the run ended."""
    s = style.Style.for_stream(out)
    for run in history.get("runs", []):
        out.write(f"{PROMPT}{for_terminal(str(run.get('prompt', '')))}\n")
        for event in run.get("events", []):
            line = _history_line(event, s)
            if line is not None:
                out.write(line)
        report = run.get("report") or {}
        if report.get("summary"):
            mark = s.ok() if run.get("stop") == "done" else s.bad()
            out.write(f"{mark} {for_terminal(str(report['summary']))}\n\n")
    out.flush()


def _history_line(event: dict[str, Any], s: style.Style) -> str | None:
    kind, text = event.get("kind"), str(event.get("text") or "")
    shown = for_terminal(text)
    if kind == "text":
        return render_markdown(text, s.enabled)
    if kind == "thinking":
        return s.dim(shown) + "\n"
    marks = {"toolCall": s("33", "▸"), "steer": s("36", "»"), "compaction": s.dim("⋯")}
    if kind in marks:
        return f"  {marks[kind]} {shown}\n"
    if kind == "toolResult":
        tail = "".join(
            f"      {s.dim('│ ' + t)}\n" for t in for_terminal(event.get("tail") or "").splitlines()
        )
        return f"  {s.ok() if event.get('ok') else s.bad()} {shown}\n{tail}"
    if kind == "hook":
        return f"  {s.dim('· ' + shown)}\n"
    return None  # approvals were asked, the stop is the report's line, unknown kinds skipped


def _prompt_session(chat: Chat) -> Any:
    """prompt_toolkit's line editor: history, Alt+Enter for a new line, Ctrl-C clears a typed
    line (and with nothing typed ends the chat, or the running run)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

    keys = KeyBindings()

    @keys.add("c-c")
    def _interrupt(event: Any) -> None:
        buffer = event.app.current_buffer
        if buffer.text and chat.running is None:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    @keys.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    return PromptSession(key_bindings=keys)


async def chat_in_terminal(
    workspace: Path,
    settings: Settings,
    *,
    session_id: str | None = None,
    mode: str | None = None,
    err: TextIO | None = None,
) -> int:
    """`agent-lsp chat`: exit 2 without a terminal, else 0 when the person leaves."""
    err = err or sys.stderr
    if not (style.isatty(sys.stdin) and style.isatty(sys.stdout)):
        err.write(NOT_A_TTY + "\n")
        return EXIT_USAGE
    host = AgentHost(telemetry=OtelTelemetry())
    plug_language_servers(host, lambda: settings)
    roots = [workspace.resolve()]
    opened = await open_session(host, roots, session_id, err, "chat")
    if opened is None:
        return EXIT_USAGE
    session, store = opened
    out = sys.stdout
    chat = Chat(host, roots, settings, session, store, out, mode=mode)
    if session.runs:  # a resumed session: its past as it was shown live
        from agent_lsp.agent.state.history import session_history

        show_history(await session_history(session), out)
    plug_permissions(host, out, True)  # their questions are asked on the chat's input line
    await mcp_on_the_terminal(host, roots, settings, out, True)
    out.write(
        style.Style.for_stream(out).dim(
            f"session {session.id} · Enter sends, Alt+Enter a new line, "
            "Ctrl-C cancels a run, Ctrl-D leaves\n"
        )
    )
    try:
        return await chat.talk()
    finally:
        await shut_down(host, deadline=None)
