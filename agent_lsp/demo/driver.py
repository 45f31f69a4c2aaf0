"""The demo: a tiny LSP editor in the terminal driving the real `agent-lsp` server.

It copies the bundled sample workspace to a temp folder, starts the server as a subprocess
over stdio, opens a file, runs the task with the bundled recorded session (`replay:`), and
shows what an editor would: the streamed text, the progress, each approval, and at the end
the diff and the run report. Offline, no API key."""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from agent_lsp.agent.exec.keyguard import child_env
from agent_lsp.demo import TASK
from agent_lsp.demo.edits import apply_text_edits, plain
from agent_lsp.terminal.style import Style, read_line_async

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
TERMINAL_APPROVAL_TIMEOUT = 10 * 365 * 86400.0
EXIT_CANCELLED = 130
SERVER_EXIT_DEADLINE = 3.0  # seconds the server gets to end after shutdown/exit before it is killed
_server_pids: list[int] = []  # killed by run_demo if a second Ctrl-C cuts the cleanup short


class DemoEditor:
    def __init__(self, root: Path, yes: bool, out=sys.stdout):
        self.root = root
        self.out = out
        self.style = Style.for_stream(out)
        self.interactive = sys.stdin.isatty() and not yes
        self.yes = yes
        self.buffers: dict[str, list[Any]] = {}  # uri -> [version, text]
        self.report: dict[str, Any] | None = None
        self.stopped = asyncio.Event()
        self.in_text = False
        self.muted = False  # after Ctrl-C: the user asked for quiet, the late stream is not shown
        self.stderr_tail: list[str] = []
        # (uri, version, text) of buffers an edit changed
        self.changed: list[tuple[str, int, str]] = []

    # -- output -----------------------------------------------------------------------------
    def line(self, text: str = "") -> None:
        if self.muted:
            return
        if self.in_text:
            self.out.write("\n")
            self.in_text = False
        self.out.write(text + "\n")
        self.out.flush()

    def on_stream(self, event: dict[str, Any]) -> None:
        s = self.style
        kind = event.get("kind")
        if kind == "text" and not self.muted:
            self.out.write(s("36", event["text"]))
            self.in_text = True
            self.out.flush()
        elif kind == "toolCall":
            self.line(
                f"  {s('33', '▸')} {s.bold(event['tool'])} {s.dim(_short(event.get('arguments')))}"
            )
        elif kind == "toolResult":
            mark = s("32", "✓") if event.get("ok") else s("31", "✗")
            extra = s.dim(" (truncated, full output spilled)") if event.get("truncated") else ""
            self.line(f"  {mark} {s.dim(event['text'][:110])}{extra}")
        elif kind == "approval" and event.get("state") != "pending":
            self.line(
                f"  {s('35', '⚑')} approval {event['state']}: {event['detail'].splitlines()[0]}"
            )
        elif kind == "compaction":
            self.line(f"  {s.dim('⋯ ' + event['text'])}")
        elif kind == "stop":
            self.report = event.get("report")
            self.stopped.set()

    def on_progress(self, value: dict[str, Any]) -> None:
        kind = value.get("kind")
        if kind == "begin":
            self.line(
                self.style.dim(
                    f"[progress] {value.get('title')} (cancellable: {value.get('cancellable')})"
                )
            )
        elif kind == "report" and "asking the model" in (value.get("message") or ""):
            self.line(self.style.dim(f"[progress] {value.get('message')}"))
        elif kind == "end":
            self.line(
                self.style.dim(f"[progress] ended: {(value.get('message') or '').split(':')[0]}")
            )

    # -- approvals --------------------------------------------------------------------------
    async def approve(self, message: str) -> str | None:
        s = self.style
        self.line("")
        self.line(
            f"  {s('35;1', '? approval requested by the server (window/showMessageRequest)')}"
        )
        for text in message.splitlines()[:14]:
            self.line(f"    {text}")
        if not self.interactive:
            why = "--yes" if self.yes else "no TTY"
            allow = f"→ Allow (approved automatically: {why}; the demo works on a copy)"
            self.line(f"    {s('32', allow)}")
            return "Allow"
        answer = await read_line_async("    [a]llow / allow for [s]ession / [d]eny? ", self.out)
        return {"a": "Allow", "y": "Allow", "s": "Allow for session", "": "Allow"}.get(
            (answer or "d").lower()[:1], "Deny"
        )

    # -- edits, as an editor applies them to its buffers, then saves -----------------------
    def apply(self, edit: Any) -> tuple[bool, str | None]:
        from lsprotocol import types

        changes: list[tuple[str, list[Any]]] = []
        for change in edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                changes.append((change.uri, []))
            elif isinstance(change, types.TextDocumentEdit):
                version = change.text_document.version
                buffer = self.buffers.get(change.text_document.uri)
                if version is not None and buffer is not None and buffer[0] != version:
                    return False, f"document version {version} is stale"
                changes.append((change.text_document.uri, list(change.edits)))
        changes += list((edit.changes or {}).items())
        for uri, edits in changes:
            path = Path(uri.removeprefix("file://"))
            buffer = self.buffers.get(uri)
            old = (
                buffer[1] if buffer else (path.read_text(encoding="utf-8") if path.exists() else "")
            )
            new = apply_text_edits(old, edits)
            path.write_text(new, encoding="utf-8")  # the demo editor saves right after applying
            if buffer is not None:
                buffer[0] += 1
                buffer[1] = new
                self.changed.append((uri, buffer[0], new))
        return True, None


def _short(arguments: Any) -> str:
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    else:
        text = str(arguments)
    return text if len(text) <= 90 else text[:87] + "…"


async def _demo(yes: bool) -> int:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    with tempfile.TemporaryDirectory(prefix="agent-lsp-demo-") as tmp:
        root = Path(tmp) / "sample"
        shutil.copytree(HERE / "sample", root)
        original = {p.name: p.read_text(encoding="utf-8") for p in root.iterdir() if p.is_file()}
        editor = DemoEditor(root, yes)
        s = editor.style
        editor.line(
            s.bold("agent-lsp demo")
            + s.dim("  — the real language server, driven by a tiny terminal editor")
        )
        editor.line(f"  workspace: {s.dim(str(root))} (a copy of the bundled sample)")
        editor.line(f"  model:     {s.dim('replay of a recorded session (offline, no API key)')}")
        editor.line(
            f"  server:    {s.dim(f'{Path(sys.executable).name} -m agent_lsp serve --stdio')}"
        )
        editor.line(f"  task:      {s.bold(TASK)}")
        editor.line("")

        client = LanguageClient("agent-lsp-demo", "1")

        @client.feature("agentLsp/stream")
        def on_stream(ls, params):
            editor.on_stream(plain(params))

        @client.feature(types.PROGRESS)
        def on_progress(ls, params):
            editor.on_progress(plain(params.value))

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_create(ls, params):
            return None

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        async def on_request(ls, params):
            title = await editor.approve(params.message)
            return types.MessageActionItem(title=title) if title else None

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        def on_edit(ls, params):
            applied, reason = editor.apply(params.edit)
            for uri, version, text in editor.changed:
                ls.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(
                            uri=uri, version=version
                        ),
                        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                    )
                )
                ls.text_document_did_save(
                    types.DidSaveTextDocumentParams(
                        text_document=types.TextDocumentIdentifier(uri=uri)
                    )
                )
            editor.changed.clear()
            return types.ApplyWorkspaceEditResult(applied=applied, failure_reason=reason)

        @client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(ls, params):
            editor.line(s("33", f"  server says: {params.message}"))

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(ls, params):
            pass

        # a replayed demo needs no key
        env = {**child_env(), "AGENT_LSP_STATE_DIR": str(Path(tmp) / "state")}
        # Its own session: the terminal's Ctrl-C goes to the demo alone, which then ends the
        # run and the server in order (in our process group the server died mid-cancel).
        await client.start_io(
            sys.executable, "-m", "agent_lsp", "serve", "--stdio", env=env, start_new_session=True
        )
        if client._server is not None:
            _server_pids.append(client._server.pid)
        drain = asyncio.ensure_future(_drain_stderr(client, editor))
        capabilities = types.ClientCapabilities(
            window=types.WindowClientCapabilities(
                work_done_progress=True, show_message=types.ShowMessageRequestClientCapabilities()
            ),
            workspace=types.WorkspaceClientCapabilities(
                apply_edit=True,
                workspace_edit=types.WorkspaceEditClientCapabilities(
                    document_changes=True, resource_operations=[types.ResourceOperationKind.Create]
                ),
            ),
        )
        started: dict[str, Any] = {}
        try:
            await asyncio.wait_for(
                client.initialize_async(
                    types.InitializeParams(
                        capabilities=capabilities,
                        root_uri=root.as_uri(),
                        workspace_folders=[
                            types.WorkspaceFolder(uri=root.as_uri(), name=root.name)
                        ],
                        # A person thinking over an approval in the terminal has no time limit
                        # (Decision 10).
                        initialization_options={
                            "model": f"replay:{HERE / 'session.jsonl'}",
                            "approval": {"default": "ask", "timeout": TERMINAL_APPROVAL_TIMEOUT},
                        },
                    )
                ),
                30,
            )
            client.initialized(types.InitializedParams())
            stats = root / "stats.py"
            uri = stats.as_uri()
            editor.buffers[uri] = [1, stats.read_text(encoding="utf-8")]
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=uri, language_id="python", version=1, text=editor.buffers[uri][1]
                    )
                )
            )
            answer = await asyncio.wait_for(
                client.workspace_execute_command_async(
                    types.ExecuteCommandParams(
                        command="agentLsp.run",
                        arguments=[{"prompt": TASK, "textDocument": {"uri": uri}}],
                    )
                ),
                30,
            )
            started = answer or {}
            editor.line(
                s.dim(
                    f"[agentLsp.run] → runId {started['runId']}, "
                    f"sessionId {started['sessionId']} (answered at once; the run streams)"
                )
            )
            # the run ends itself (maxTurns, requestTimeout); approvals wait for the user
            await editor.stopped.wait()
        except asyncio.CancelledError:  # Ctrl-C (asyncio.run cancels this task on the first SIGINT)
            editor.muted = True
            print("\nagent-lsp demo: cancelled", file=sys.stderr, flush=True)
            await _end_server(client, drain, started.get("runId"))
            return EXIT_CANCELLED
        except (TimeoutError, OSError) as exc:
            editor.line(s("31", f"demo failed: {exc!r}"))
            editor.line("\n".join(editor.stderr_tail[-20:]))
            await _end_server(client, drain, None)
            return 1
        await _end_server(client, drain, None)
        _show_diff(editor, root, original)
        return _show_report(editor)


def _stop_problem(what: str, exc: BaseException) -> None:
    """The demo's result is already shown; a server that did not end cleanly is said on stderr
    (it may still be running) and logged, never swallowed."""
    log.warning("demo: the server %s", what, exc_info=exc)
    sys.stderr.write(
        f"agent-lsp demo: the demo's server {what} ({type(exc).__name__}: {exc}); "
        "if an agent-lsp process is left running, end it\n"
    )


def _show_diff(editor: DemoEditor, root: Path, original: dict[str, str]) -> None:
    s = editor.style
    editor.line("")
    editor.line(s.bold("── diff of the workspace copy ──"))
    changed = False
    for name, before in original.items():
        after = (root / name).read_text(encoding="utf-8")
        for line in difflib.unified_diff(
            before.splitlines(), after.splitlines(), f"a/{name}", f"b/{name}", lineterm="", n=2
        ):
            color = (
                "32"
                if line.startswith("+")
                else "31"
                if line.startswith("-")
                else "36"
                if line.startswith("@")
                else "0"
            )
            editor.line(s(color, line))
            changed = True
    if not changed:
        editor.line(s.dim("(no changes)"))


def _show_report(editor: DemoEditor) -> int:
    s = editor.style
    report = editor.report or {}
    editor.line("")
    editor.line(s.bold("── run report ──"))
    editor.line(
        f"  stop:       {s.bold(report.get('stopReason', '?'))} after {report.get('turns')} turns, "
        f"{report.get('toolCalls')} tool calls, {report.get('denied')} denied"
    )
    editor.line(f"  summary:    {report.get('summary')}")
    if report.get("denied"):
        editor.line(
            s.dim(
                "  note:       a recorded model does not hear your answers: it replays its script; "
                "a live one would adapt"
            )
        )
    editor.line(
        f"  transcript: {s.dim(str(report.get('transcript')))} (deleted with the temp copy)"
    )
    editor.line("")
    for text in (
        "Next, still offline: `agent-lsp demo --serve-model` serves this recording as a model "
        "endpoint (it prints",
        "how to point `agent-lsp run` and your editor at it). With a real model: "
        "set OPENAI_API_KEY, or pass",
        '--base-url to a local server (Ollama, llama.cpp), then `agent-lsp run "TASK"` '
        "or your editor (README.md).",
    ):
        editor.line(s.dim(text))
    return 0 if report.get("stopReason") == "done" else 1


async def _end_server(client: Any, drain: asyncio.Future[None], run_id: str | None) -> None:
    """Cancel the run (if any), shut the server down as an editor does, and kill it if it is
    still there after the deadline: the demo never leaves a server behind."""
    from lsprotocol import types

    server = getattr(client, "_server", None)
    try:
        if run_id:
            await asyncio.wait_for(
                client.workspace_execute_command_async(
                    types.ExecuteCommandParams(
                        command="agentLsp.cancel", arguments=[{"runId": run_id}]
                    )
                ),
                SERVER_EXIT_DEADLINE,
            )
        await asyncio.wait_for(client.shutdown_async(None), SERVER_EXIT_DEADLINE)
        client.exit(None)
        await asyncio.wait_for(client.stop(), SERVER_EXIT_DEADLINE)
    except Exception as exc:  # a dead or stuck server: said, and the kill below ends it
        _stop_problem("did not shut down in time (it is killed)", exc)
    finally:
        _kill(server)
        if server is not None and server.returncode is None:
            try:
                await asyncio.wait_for(server.wait(), SERVER_EXIT_DEADLINE)
            except (TimeoutError, ProcessLookupError):
                pass
        drain.cancel()


def _kill(server: Any) -> None:
    if server is not None and server.returncode is None:
        try:
            server.kill()
        except ProcessLookupError:
            pass


async def _drain_stderr(client: Any, editor: DemoEditor) -> None:
    """The server logs to stderr; read it so its pipe never fills, keep the tail for errors."""
    server = getattr(client, "_server", None)
    if server is None or server.stderr is None:
        return
    while line := await server.stderr.readline():
        editor.stderr_tail = (editor.stderr_tail + [line.decode(errors="replace").rstrip()])[-50:]


def run_demo(yes: bool = False) -> int:
    try:
        return asyncio.run(_demo(yes))
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was being handled
        for pid in _server_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print("\nagent-lsp demo: cancelled", file=sys.stderr, flush=True)
        return EXIT_CANCELLED
