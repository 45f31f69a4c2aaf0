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
from agent_lsp.demo.editor import DemoEditor
from agent_lsp.demo.edits import plain

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
TERMINAL_APPROVAL_TIMEOUT = 10 * 365 * 86400.0
EXIT_CANCELLED = 130
SERVER_EXIT_DEADLINE = 3.0  # seconds the server gets to end after shutdown/exit before it is killed
_server_pids: list[int] = []  # killed by run_demo if a second Ctrl-C cuts the cleanup short


async def _demo(yes: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="agent-lsp-demo-") as tmp:
        root = Path(tmp) / "sample"
        shutil.copytree(HERE / "sample", root)
        original = {p.name: p.read_text(encoding="utf-8") for p in root.iterdir() if p.is_file()}
        editor = DemoEditor(root, yes)
        s = editor.style
        _banner(editor, root)
        client = _client(editor)
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
        started: dict[str, Any] = {}
        try:
            await _initialize(client, root)
            started = await _open_and_run(client, editor, root)
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


def _banner(editor: DemoEditor, root: Path) -> None:
    s = editor.style
    editor.line(
        s.bold("agent-lsp demo")
        + s.dim("  — the real language server, driven by a tiny terminal editor")
    )
    editor.line(f"  workspace: {s.dim(str(root))} (a copy of the bundled sample)")
    editor.line(f"  model:     {s.dim('replay of a recorded session (offline, no API key)')}")
    editor.line(f"  server:    {s.dim(f'{Path(sys.executable).name} -m agent_lsp serve --stdio')}")
    editor.line(f"  task:      {s.bold(TASK)}")
    editor.line("")


def _client(editor: DemoEditor) -> Any:
    """The tiny editor's LSP client: what it shows of the stream, the progress and the
    server's messages, how it asks approvals and applies edits (telling the server)."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("agent-lsp-demo", "1")
    s = editor.style

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
        offered = [a.title for a in params.actions or []]
        answer = await editor.approve(params.message, offered)
        if isinstance(answer, dict):  # Deny with a reason: the item's extra property
            return answer
        return types.MessageActionItem(title=answer) if answer else None

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_edit(ls, params):
        applied, reason = editor.apply(params.edit)
        for uri, version, text in editor.changed:
            ls.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                )
            )
            ls.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
        editor.changed.clear()
        return types.ApplyWorkspaceEditResult(applied=applied, failure_reason=reason)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(ls, params):
        editor.line(s("33", f"  server says: {params.message}"))

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(ls, params):
        pass

    return client


async def _initialize(client: Any, root: Path) -> None:
    """`initialize` as an editor with progress, approvals and edits, the workspace the sample's
    copy, the model the recorded session."""
    from lsprotocol import types

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
    await asyncio.wait_for(
        client.initialize_async(
            types.InitializeParams(
                capabilities=capabilities,
                root_uri=root.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
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


async def _open_and_run(client: Any, editor: DemoEditor, root: Path) -> dict[str, Any]:
    """The sample's file opened and the task run on it: `agentLsp.run`'s answer (its ids)."""
    from lsprotocol import types

    s = editor.style
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
    started: dict[str, Any] = answer or {}
    editor.line(
        s.dim(
            f"[agentLsp.run] → runId {started['runId']}, "
            f"sessionId {started['sessionId']} (answered at once; the run streams)"
        )
    )
    return started


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
