"""Drive the real server over stdio as an editor would: pygls's LanguageClient for runs, and a
raw JSON-RPC exchange for start-up (the least client code between spawn and the answer)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.demo.edits import plain
from benchmarks.common import rss_bytes

SERVER_ARGV = [sys.executable, "-m", "agent_lsp", "serve", "--stdio"]
BARE_ARGV = [sys.executable, str(Path(__file__).with_name("bare_server.py"))]


def editor_capabilities(diagnostics: bool = False) -> Any:
    """What a VS Code-like editor announces for what the agent uses; `diagnostics`: it also
    answers `agentLsp/diagnostics` (CONTRACT "Editor diagnostics")."""
    from lsprotocol import types

    return types.ClientCapabilities(
        experimental={"agentLsp": {"diagnostics": True}} if diagnostics else None,
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_message=types.ShowMessageRequestClientCapabilities()),
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True, configuration=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True,
                resource_operations=[types.ResourceOperationKind.Create])))


@dataclass
class RunTrace:
    """One `agentLsp.run` as the client saw it (times: `time.monotonic()` at receipt)."""

    run_id: str = ""
    t_sent: float = 0.0
    t_stop: float = 0.0
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def report(self) -> dict[str, Any]:
        return self.events[-1][1].get("report", {}) if self.events else {}


class LspSession:
    """The real server as a subprocess, initialized, ready for `run`s.

    `edits`: how the client answers `workspace/applyEdit`: None, not at all (the client has no
    handler: read-only figures); "ack", `applied: true` without touching the disk (the script
    can run again on the same files); "disk", applied to the files on disk, as an editor that
    saves after an agent edit. Each request's arrival time is kept in `edit_times`.
    `diagnostics`: the client advertises `experimental.agentLsp.diagnostics` and answers
    `agentLsp/diagnostics` at once with this one diagnostic for every file asked about."""

    def __init__(self, root: Path, env: dict[str, str], init_options: dict[str, Any], *, edits: str | None = None,
                 diagnostics: dict[str, Any] | None = None):
        self.root, self.env, self.init_options = root, env, init_options
        self.edits, self.diagnostics = edits, diagnostics
        self.client: Any = None
        self.pid = 0
        self.edit_times: list[float] = []  # time.monotonic() at each workspace/applyEdit received
        self.diagnostics_asked = 0
        self._runs: dict[str, RunTrace] = {}
        self._early: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self._stderr_task: asyncio.Task[Any] | None = None

    async def start(self) -> LspSession:
        from lsprotocol import types
        from pygls.lsp.client import LanguageClient

        client = LanguageClient("agent-lsp-bench", "1")
        # pygls 2 passes the client itself only to handlers whose first parameter is `ls`.
        self.client = client

        @client.feature("agentLsp/stream")
        def on_stream(params: Any) -> None:
            now = time.monotonic()
            event = plain(params)
            trace = self._runs.get(event["runId"])
            if trace is None:  # arrived before executeCommand's answer
                self._early.setdefault(event["runId"], []).append((now, event))
                return
            trace.events.append((now, event))
            if event["kind"] == "stop":
                trace.t_stop = now
                trace.stopped.set()

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_progress_create(_params: Any) -> None:
            return None

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def on_configuration(params: Any) -> list[Any]:
            return [None for _ in params.items]

        for method in (types.PROGRESS, types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE):
            client.feature(method)(lambda _params: None)

        if self.edits is not None:
            @client.feature(types.WORKSPACE_APPLY_EDIT)
            def on_apply_edit(params: Any) -> Any:
                self.edit_times.append(time.monotonic())
                if self.edits == "disk":
                    apply_to_disk(params.edit)
                return types.ApplyWorkspaceEditResult(applied=True)

        if self.diagnostics is not None:
            @client.feature("agentLsp/diagnostics")
            def on_diagnostics(params: Any) -> list[dict[str, Any]]:
                self.diagnostics_asked += 1
                asked = plain(params) or {}
                return [{"uri": uri, "diagnostics": [self.diagnostics]} for uri in asked.get("uris") or []]

        await client.start_io(*SERVER_ARGV, env=self.env, cwd=str(self.root))
        self.pid = client._server.pid
        self._stderr_task = asyncio.ensure_future(_drain(client._server.stderr))
        uri = self.root.resolve().as_uri()
        await asyncio.wait_for(client.initialize_async(types.InitializeParams(
            capabilities=editor_capabilities(self.diagnostics is not None), root_uri=uri, process_id=None,
            workspace_folders=[types.WorkspaceFolder(uri=uri, name=self.root.name)],
            initialization_options=self.init_options)), 30)
        client.initialized(types.InitializedParams())
        return self

    async def start_run(self, prompt: str, **more: Any) -> RunTrace:
        """`agentLsp.run {prompt, **more}` (e.g. `sessionId`); returns once it is answered."""
        from lsprotocol import types

        trace = RunTrace(t_sent=time.monotonic())
        result = await asyncio.wait_for(self.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="agentLsp.run", arguments=[{"prompt": prompt, **more}])), 30)
        trace.run_id = plain(result)["runId"]
        self._runs[trace.run_id] = trace
        for now, event in self._early.pop(trace.run_id, []):
            trace.events.append((now, event))
            if event["kind"] == "stop":
                trace.t_stop = now
                trace.stopped.set()
        return trace

    async def run(self, prompt: str, timeout: float = 120, **more: Any) -> RunTrace:
        trace = await self.start_run(prompt, **more)
        await asyncio.wait_for(trace.stopped.wait(), timeout)
        return trace

    async def command(self, name: str, argument: dict[str, Any], timeout: float = 60) -> Any:
        """Any `workspace/executeCommand`, its result as plain JSON."""
        from lsprotocol import types

        result = await asyncio.wait_for(self.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=name, arguments=[argument])), timeout)
        return plain(result)

    async def close(self) -> None:
        client = self.client
        if client is None:
            return
        try:
            await asyncio.wait_for(client.shutdown_async(None), 5)
            client.exit(None)
        except Exception:
            pass
        server = client._server
        try:
            await asyncio.wait_for(server.wait(), 5)
        except TimeoutError:
            server.kill()
        try:
            await asyncio.wait_for(client.stop(), 5)
        except Exception:
            pass
        if self._stderr_task:
            self._stderr_task.cancel()

    async def __aenter__(self) -> LspSession:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def apply_to_disk(edit: Any) -> None:
    """A WorkspaceEdit applied to the files on disk (no open buffers here), as an editor that
    saves every file an agent edit touched: CreateFile, DeleteFile, text edits (UTF-16)."""
    from lsprotocol import types
    from pygls.uris import to_fs_path

    from agent_lsp.demo.edits import apply_text_edits

    def edit_file(uri: str, edits: list[Any]) -> None:
        path = Path(to_fs_path(uri))
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(apply_text_edits(old, edits), encoding="utf-8")

    for change in edit.document_changes or []:
        if isinstance(change, types.CreateFile):
            path = Path(to_fs_path(change.uri))
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("", encoding="utf-8")
        elif isinstance(change, types.DeleteFile):
            Path(to_fs_path(change.uri)).unlink(missing_ok=True)
        elif isinstance(change, types.TextDocumentEdit):
            edit_file(change.text_document.uri, list(change.edits))
    for uri, edits in (edit.changes or {}).items():
        edit_file(uri, list(edits))


async def _drain(stream: Any) -> None:
    """Read the server's stderr (a full pipe would block it)."""
    while stream is not None and await stream.read(65536):
        pass


# -- start-up: spawn -> initialize answered, on raw JSON-RPC ----------------------------
def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _read_message(stream: Any) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed stdout")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length))


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"processId": None, "rootUri": None, "capabilities": {"window": {"workDoneProgress": True}},
               "initializationOptions": {"model": "m", "approval": {"default": "allow"}}},
}


def with_init_options(options: dict[str, Any]) -> dict[str, Any]:
    """The INITIALIZE message with other initializationOptions."""
    return {**INITIALIZE, "params": {**INITIALIZE["params"], "initializationOptions": options}}


@dataclass
class StartUp:
    seconds: float  # spawn -> initialize answer read
    rss_at_answer: int  # bytes, right after the initialize answer
    rss_settled: int  # bytes, once `initialized` was sent and the RSS stopped growing
    children: int = 0  # processes the server had started once its RSS settled


def child_count(pid: int) -> int:
    """How many processes have `pid` as their parent (Linux /proc)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            count += 1
    return count


def settled_rss(pid: int, stable: float = 0.5, limit: float = 4.0, step: float = 0.05) -> int:
    """The RSS once it has not changed for `stable` seconds (a server may warm up in the
    background after `initialized`), or after `limit` seconds."""
    deadline = time.monotonic() + limit
    last, since = rss_bytes(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(step)
        now = rss_bytes(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= stable:
            break
    return last


def spawn_initialize(argv: list[str], env: dict[str, str], cwd: Path, initialize: dict[str, Any] | None = None) -> StartUp:
    """Spawn a server, time until its initialize answer is read, sample its RSS, shut it down."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_frame(initialize or INITIALIZE))
        proc.stdin.flush()
        while _read_message(proc.stdout).get("id") != 1:
            pass
        seconds = time.monotonic() - t0
        at_answer = rss_bytes(proc.pid)
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        proc.stdin.flush()
        settled = settled_rss(proc.pid)
        children = child_count(proc.pid)
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None}))
        proc.stdin.flush()
        while _read_message(proc.stdout).get("id") != 2:
            pass
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit", "params": None}))
        proc.stdin.flush()
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return StartUp(seconds, at_answer, settled, children)
