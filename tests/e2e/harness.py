"""A scripted editor for end-to-end tests: the real server as a subprocess (or, for the files
tests/e2e/conftest.py names, the same server object in this process over real pipes:
tests/e2e/inprocess.py), talked to over real LSP by pytest-lsp's client with a real editor's
recorded capabilities."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Union

import attrs
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import to_fs_path
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from pytest_lsp.protocol import LanguageClientProtocol

from agent_lsp.demo.edits import plain

# Helix's own initialize request, transcribed from helix-editor/helix
# `helix-lsp/src/client.rs` (`Client::initialize`, commit 0ee961433c21): no
# `window.showMessage` (so no showMessageRequest, helix issue 4699), work-done progress,
# documentChanges with create/rename/delete, position encodings utf-8 first.
HELIX_CAPS = Path(__file__).parent / "helix_capabilities.json"


# eglot's capabilities (issue 11.3): none describes `window.showMessage`, yet all answer
# window/showMessageRequest (base protocol). "emacs-29" is pytest-lsp's recording of Emacs 29.1
# as it is (window {workDoneProgress}); "emacs-30" has the window of the eglot built into Emacs 30
# ({showDocument: {support: t}, workDoneProgress: t}, eglot 1.16+); "eglot-1.9" (Emacs 28, ELPA)
# sends no window at all, like the eglot 1.12 of a stock Emacs 29.1.
EGLOT_WINDOWS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "emacs-29": ({"workDoneProgress": True}, "29.1"),
    "emacs-30": ({"showDocument": {"support": True}, "workDoneProgress": True}, "30.1"),
    "eglot-1.9": (None, "28.2"),
}


def _eglot(name: str) -> dict[str, Any]:
    import pytest_lsp.clients

    recorded = json.loads((resources.files(pytest_lsp.clients) / "emacs_v29.1.json").read_text())
    window, version = EGLOT_WINDOWS[name]
    caps = dict(recorded["capabilities"])
    if window is None:
        caps.pop("window", None)
    else:
        caps["window"] = window
    return {"capabilities": caps, "clientInfo": {"name": "Emacs (eglot)", "version": version}}


def capabilities(caps: str | types.ClientCapabilities) -> types.ClientCapabilities:
    """A recorded client's capabilities by name, or the given capabilities as they are."""
    if isinstance(caps, types.ClientCapabilities):
        return caps
    if caps == "helix":
        recorded = json.loads(HELIX_CAPS.read_text())
        return default_converter().structure(recorded["capabilities"], types.ClientCapabilities)
    if caps in EGLOT_WINDOWS:
        return default_converter().structure(_eglot(caps)["capabilities"], types.ClientCapabilities)
    return client_capabilities(caps)


def client_info(caps: str | types.ClientCapabilities) -> types.ClientInfo | None:
    """The `clientInfo` the recorded editor sent along with its capabilities."""
    if not isinstance(caps, str):
        return None
    if caps in EGLOT_WINDOWS:
        recorded = _eglot(caps)
    elif caps == "helix":
        recorded = json.loads(HELIX_CAPS.read_text())
    else:
        import pytest_lsp.clients

        stem = caps.replace("-", "_") + "_v"
        files = [f for f in resources.files(pytest_lsp.clients).iterdir() if f.name.startswith(stem)]
        newest = max(files, key=lambda f: [int(n) for n in f.name.removeprefix(stem).removesuffix(".json").split(".")])
        recorded = json.loads(newest.read_text())
    info = recorded.get("clientInfo")
    return types.ClientInfo(name=info["name"], version=info.get("version")) if info else None


class RecordingProtocol(LanguageClientProtocol):
    """Also remembers every `$/cancelRequest` the server sends (pygls consumes it itself), and
    the raw JSON of its message requests (the typed params drop their action items' extra
    properties: runId and callId)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cancelled_ids: list[Any] = []
        self.raw_message_requests: list[dict[str, Any]] = []

    def structure_message(self, data: dict[str, Any]) -> Any:
        if data.get("method") == types.WINDOW_SHOW_MESSAGE_REQUEST:
            self.raw_message_requests.append(data.get("params") or {})
        return super().structure_message(data)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if method_name == types.CANCEL_REQUEST:
            self.cancelled_ids.append(getattr(params, "id", None))
        super()._handle_notification(method_name, params)


@dataclass
class Editor:
    """What the fake editor holds and does: buffers, approvals answered from a script."""

    client: LanguageClient
    root: Path
    buffers: dict[str, tuple[int, str]] = field(default_factory=dict)  # uri -> (version, text)
    stream: list[dict[str, Any]] = field(default_factory=list)
    stream_times: list[float] = field(default_factory=list)  # monotonic arrival time of each event
    # "Allow", ..., None = dismiss, "ignore" = never answered; or a callable (sync or async)
    # taking the request params and returning one of those.
    approval_answers: list[Any] = field(default_factory=list)
    approval_requests: list[types.ShowMessageRequestParams] = field(default_factory=list)
    approval_request_ids: list[Any] = field(default_factory=list)
    edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    edit_times: list[tuple[float, float]] = field(default_factory=list)  # (asked, answered), monotonic
    edit_request_ids: list[Any] = field(default_factory=list)
    edit_delay: float = 0.0  # seconds before the editor answers an applyEdit
    edit_hold: asyncio.Event | None = None  # the editor answers an applyEdit once it is set
    did_change_delay: float = 0.0  # seconds before the didChange of an applied edit (Neovim debounces 150 ms)
    refuse_edits: bool = False
    refuse_reason: str | None = "refused by the test editor"  # None: applied false without a reason (a preview's Discard)
    # A Refactor Preview as VS Code shows it: edits whose annotation needs confirmation start
    # unticked, the others ticked; these annotation ids the user unticked (None: no preview).
    preview_unticked: set[str] | None = None
    preview_confirmed: bool = False  # the user also ticks the preview's entries that ask
    error_edits: bool = False  # answer applyEdit with a JSON-RPC error (like eglot on a stale version)
    configuration_requests: list[types.ConfigurationParams] = field(default_factory=list)
    server_capabilities: Any = None
    # agentLsp/diagnostics: what this editor "shows" per uri, and the requests it got
    diagnostics: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    diagnostics_requests: list[dict[str, Any]] = field(default_factory=list)
    encoding: str = "utf-16"
    stderr: list[str] = field(default_factory=list)  # the server's log lines
    shut_down: bool = False  # a shutdown request was sent (a second one is never answered)

    # -- documents ------------------------------------------------------------------------
    def uri(self, rel: str) -> str:
        return (self.root / rel).resolve().as_uri()

    def open(self, rel: str, text: str | None = None) -> str:
        uri = self.uri(rel)
        text = (self.root / rel).read_text() if text is None else text
        self.buffers[uri] = (1, text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        return uri

    def type_into(self, rel: str, text: str) -> None:
        uri = self.uri(rel)
        version = self.buffers[uri][0] + 1
        self.buffers[uri] = (version, text)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def type_locally(self, rel: str, text: str) -> None:
        """A change the server has not heard of yet (its didChange still in flight)."""
        uri = self.uri(rel)
        self.buffers[uri] = (self.buffers[uri][0] + 1, text)

    def text(self, rel: str) -> str:
        return self.buffers[self.uri(rel)][1]

    # -- commands -------------------------------------------------------------------------
    async def execute(self, command: str, argument: Any) -> Any:
        return await asyncio.wait_for(self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=[argument])), 10)

    async def run(self, prompt: str, **extra: Any) -> dict[str, str]:
        return await self.execute("agentLsp.run", {"prompt": prompt, **extra})

    def events(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.stream if e["runId"] == run_id and (kind is None or e["kind"] == kind)]

    async def wait_for(self, predicate, timeout: float = 15.0, what: str = "condition") -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if (value := predicate()):
                return value
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; stream so far: {self.stream[-8:]}")

    async def wait_stop(self, run_id: str, timeout: float = 15.0) -> dict[str, Any]:
        stop = await self.wait_for(lambda: self.events(run_id, "stop"), timeout, f"the stop of {run_id}")
        return stop[0]["report"]

    def progress(self, run_id: str) -> list[Any]:
        return self.client.progress_reports.get(run_id, [])

    async def wait_progress(self, run_id: str, kind: type, timeout: float = 15.0) -> Any:
        found = await self.wait_for(lambda: [p for p in self.progress(run_id) if isinstance(p, kind)],
                                    timeout, f"a {kind.__name__} progress of {run_id}")
        return found[0]

    @property
    def cancelled_ids(self) -> list[Any]:
        return self.client.protocol.cancelled_ids

    @property
    def raw_approval_requests(self) -> list[dict[str, Any]]:
        return self.client.protocol.raw_message_requests

    @property
    def process(self) -> asyncio.subprocess.Process:
        return self.client._server

    def close_stdin(self) -> None:
        """What the server sees when its editor dies: stdin reaches EOF."""
        self.process.stdin.close()

    def die(self) -> None:
        """The editor is gone altogether: stdin at EOF and nobody reading stdout (writes fail
        with a broken pipe)."""
        self.close_stdin()
        self.process._transport.get_pipe_transport(1).close()

    async def wait_exit(self, timeout: float) -> int:
        return await asyncio.wait_for(self.process.wait(), timeout)

    async def shutdown(self, timeout: float = 10) -> None:
        """The `shutdown` request, remembered so that `quit` does not send a second one."""
        self.shut_down = True
        await asyncio.wait_for(self.client.shutdown_async(None), timeout)

    async def quit(self) -> None:
        """What an editor does when it closes: shutdown, exit, close the pipe; then the process
        is waited for (killed if it hangs) and the client's transports are closed, so nothing
        is left for the garbage collector to close after the test's event loop is gone."""
        process = self.process
        if process is not None and process.returncode is None and self.client.error is None:
            with contextlib.suppress(Exception):
                if not self.shut_down:
                    await self.shutdown()
                self.client.exit(None)
                self.close_stdin()
                await asyncio.wait_for(process.wait(), 10)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.stop(), 5)


def code_units(char: str, encoding: str = "utf-16") -> int:
    if encoding == "utf-8":
        return len(char.encode("utf-8"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(char) > 0xFFFF else 1


LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def apply_text_edits(text: str, edits: list[types.TextEdit], encoding: str = "utf-16") -> str:
    """Apply LSP edits (positions in the negotiated encoding) to text, like an editor would:
    only \n, \r\n and \r end a line (a form feed or U+2028 does not)."""
    lines = LINE.findall(text)

    def offset(pos: types.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        start = sum(len(line) for line in lines[: pos.line])
        body = lines[pos.line].rstrip("\r\n")
        units = 0
        for index, char in enumerate(body):
            if units >= pos.character:
                return start + index
            units += code_units(char, encoding)
        return start + len(body)

    spans = [(offset(e.range.start), offset(e.range.end), e.new_text) for e in edits]
    for start, end, new in sorted(spans, key=lambda span: span[:2], reverse=True):
        text = text[:start] + new + text[end:]
    return text


def make_converter():
    """pygls's converter, except that a code action whose `command` is an object is read as a
    CodeAction (the stock union hook turns it into a Command with a stringified command)."""
    converter = default_converter()
    either = Union[types.Command, types.CodeAction]  # noqa: UP007 - the exact type lsprotocol registers

    def command_or_action(obj: Any, _: Any) -> Any:
        kind = types.Command if isinstance(obj.get("command"), str) else types.CodeAction
        return converter.structure(obj, kind)

    converter.register_structure_hook(either, command_or_action)
    return converter


def make_client() -> LanguageClient:
    client = LanguageClient(protocol_cls=RecordingProtocol, converter_factory=make_converter)
    # pytest-lsp's own handlers, except workspace/configuration: start_editor records that one
    register_lsp_features(client, {method: handler for method, handler in DEFAULT_CLIENT_FEATURES.items()
                                   if method != types.WORKSPACE_CONFIGURATION})
    return client


async def start_editor(root: Path, caps: str | types.ClientCapabilities, *, init_options: dict[str, Any] | None = None,
                       env: dict[str, str] | None = None, configuration: dict[str, Any] | None = None,
                       folders: list[tuple[Path, str]] | None = None, inprocess: bool = False) -> Editor:
    """The server as a subprocess (`python -m agent_lsp serve --stdio`, in `root` with `env`), or
    with `inprocess` (and no `env` of its own) the same server object in this process over real
    pipes (tests/e2e/inprocess.py, Decision 71)."""
    client = make_client()
    editor = Editor(client, root)
    if configuration is not None:
        client.set_configuration(configuration, section="agentLsp")  # answered to workspace/configuration

    @client.feature("agentLsp/stream")
    def on_stream(ls: LanguageClient, params: Any) -> None:
        editor.stream.append(plain(params))
        editor.stream_times.append(time.monotonic())

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def on_request(ls: LanguageClient, params: types.ShowMessageRequestParams):
        editor.approval_requests.append(params)
        editor.approval_request_ids.append(ls.protocol.msg_id)
        answer = editor.approval_answers.pop(0) if editor.approval_answers else "ignore"
        if callable(answer):
            answer = answer(params)
            if inspect.isawaitable(answer):
                answer = await answer
        if answer == "ignore":
            await asyncio.sleep(3600)  # never answered (until the server withdraws it)
        if isinstance(answer, dict):  # an action item with extra properties: {title, reason}
            return answer
        return None if answer is None else types.MessageActionItem(title=answer)

    @client.feature("agentLsp/diagnostics")
    def on_diagnostics(ls: LanguageClient, params: Any) -> list[dict[str, Any]]:
        asked = plain(params) or {}
        editor.diagnostics_requests.append(asked)
        uris = asked.get("uris") or list(editor.diagnostics)
        return [{"uri": uri, "diagnostics": editor.diagnostics.get(uri, [])} for uri in uris]

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def on_configuration(ls: LanguageClient, params: types.ConfigurationParams):
        answer = [ls.get_configuration(section=item.section, scope_uri=item.scope_uri) for item in params.items]
        editor.configuration_requests.append(params)
        return answer

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    async def on_edit(ls: LanguageClient, params: types.ApplyWorkspaceEditParams):
        editor.edits.append(params)
        editor.edit_request_ids.append(ls.protocol.msg_id)
        asked = time.monotonic()
        if editor.edit_delay:
            await asyncio.sleep(editor.edit_delay)  # a slow editor (or one asking the user first)
        if editor.edit_hold is not None:  # the user looks at the preview until the test says
            await editor.edit_hold.wait()
        editor.edit_times.append((asked, time.monotonic()))
        if editor.error_edits:
            raise ValueError("the test editor cannot apply this edit")
        if editor.refuse_edits:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=editor.refuse_reason)
        if editor.preview_unticked is not None:
            ticked = ticked_only(params.edit, editor.preview_unticked, editor.preview_confirmed)
            if not ticked.document_changes:  # Apply with nothing ticked
                return types.ApplyWorkspaceEditResult(applied=False)
            return apply_workspace_edit(editor, ticked)
        return apply_workspace_edit(editor, params.edit)

    if inprocess and env is None:
        from tests.e2e.inprocess import connect

        await connect(client)
    else:
        env = {**os.environ, **(env or {})}
        await client.start_io(sys.executable, "-m", "agent_lsp", "serve", "--stdio", env=env, cwd=str(root))
    if client._stderr_forwarder is not None:  # ours keeps a copy of what the server logs
        client._stderr_forwarder.cancel()
    client._stderr_forwarder = asyncio.create_task(keep_stderr(editor))
    folders = folders or [(root, root.name)]
    result = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=capabilities(caps), client_info=client_info(caps), root_uri=root.resolve().as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=path.resolve().as_uri(), name=name) for path, name in folders],
        initialization_options=init_options or {})), 15)
    editor.server_capabilities = result.capabilities
    editor.encoding = str(result.capabilities.position_encoding or "utf-16")
    return editor


async def keep_stderr(editor: Editor) -> None:
    """Forward the server's stderr to ours (as pytest-lsp does) and keep a copy."""
    stream = editor.process.stderr
    while line := await stream.readline():
        editor.stderr.append(line.decode(errors="replace"))
        sys.stderr.buffer.write(line)


def ticked_only(edit: types.WorkspaceEdit, unticked: set[str], confirmed: bool = False) -> types.WorkspaceEdit:
    """What a Refactor Preview's Apply applies: the ticked edits (VS Code answers applied:
    false when nothing is ticked: an empty edit here makes the test say so). Entries that need
    confirmation start unticked; `confirmed`: the user ticked them."""
    notes = edit.change_annotations or {}

    def ticked(e: Any) -> bool:
        name = getattr(e, "annotation_id", None)
        return name is None or (name not in unticked and (confirmed or not notes[name].needs_confirmation))

    changes = [attrs.evolve(c, edits=[e for e in c.edits if ticked(e)])
               for c in edit.document_changes or [] if isinstance(c, types.TextDocumentEdit)]
    return attrs.evolve(edit, document_changes=[c for c in changes if c.edits])


def apply_workspace_edit(editor: Editor, edit: types.WorkspaceEdit) -> types.ApplyWorkspaceEditResult:
    """Versioned edits to open buffers (refused when stale); other files on disk."""
    changes: list[tuple[str, int | None, list[types.TextEdit]]] = []
    deletes: list[str] = []
    for change in edit.document_changes or []:
        if isinstance(change, types.CreateFile):
            path = Path(to_fs_path(change.uri))
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("")
            continue
        if isinstance(change, types.DeleteFile):
            deletes.append(change.uri)
            continue
        changes.append((change.text_document.uri, change.text_document.version, list(change.edits)))
    for uri, edits in (edit.changes or {}).items():
        changes.append((uri, None, list(edits)))
    for uri, version, _ in changes:
        if version is not None and uri in editor.buffers and editor.buffers[uri][0] != version:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"version {version} is stale")
    for uri, _, edits in changes:
        if uri in editor.buffers:  # like an editor: change the buffer and tell the server
            version, text = editor.buffers[uri]
            editor.buffers[uri] = (version + 1, apply_text_edits(text, edits, editor.encoding))
            did_change = types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=editor.buffers[uri][1])])
            if editor.did_change_delay:
                asyncio.get_running_loop().call_later(editor.did_change_delay, editor.client.text_document_did_change, did_change)
            else:
                editor.client.text_document_did_change(did_change)
        else:
            path = Path(to_fs_path(uri))
            path.parent.mkdir(parents=True, exist_ok=True)
            old = path.read_text() if path.exists() else ""
            path.write_text(apply_text_edits(old, edits, editor.encoding))
    for uri in deletes:  # like an editor: the file goes, and so does its buffer
        Path(to_fs_path(uri)).unlink(missing_ok=True)
        if editor.buffers.pop(uri, None) is not None:
            editor.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    return types.ApplyWorkspaceEditResult(applied=True)


# -- processes (no psutil: /proc) ---------------------------------------------------------
def process_state(pid: int) -> str | None:
    """The /proc state letter of pid (R, S, Z...), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def is_alive(pid: int) -> bool:
    """Running (a zombie, killed and waiting to be reaped, counts as gone)."""
    state = process_state(pid)
    return state is not None and state != "Z"


def find_processes(argv: list[str]) -> list[int]:
    """Pids of live processes whose command line is exactly argv."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cmdline == wanted and is_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


# -- what the model was sent ----------------------------------------------------------------
def tool_messages(request: dict[str, Any]) -> dict[str, str]:
    """tool_call_id -> content of every tool result in one chat-completions request."""
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m.get("role") == "tool"}


def dangling_tool_calls(request: dict[str, Any]) -> list[str]:
    """Ids of assistant tool calls that have no tool result after them in the request."""
    messages = request["messages"]
    missing = []
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            answered = any(m.get("role") == "tool" and m.get("tool_call_id") == call["id"] for m in messages[index + 1:])
            if not answered:
                missing.append(call["id"])
    return missing
