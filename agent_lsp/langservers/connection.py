"""One running language server, through pygls's LSP client (no hand-written JSON-RPC): started
under the agent's reaper (nothing it starts outlives it, even when agent-lsp is killed),
initialized with the workspace root and the position encodings we can convert, its
`workspace/configuration` answered from the user's `settings`, documents opened and changed as
the agent reads and edits them, and its published diagnostics kept. Nothing here writes to our
own stdout: the server's stdout is our pipe, its stderr is drained into the debug log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)

from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.exec.process import REAPER
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.langservers import process
from agent_lsp.langservers.config import ServerSpec
from agent_lsp.langservers.readiness import Readiness

log = logging.getLogger(__name__)

ENCODINGS = ("utf-16", "utf-8", "utf-32")  # offered in `general.positionEncodings`
STDERR_LINES = 20
SHUTDOWN_GRACE = 0.5  # for `shutdown` to be answered and the process to exit after `exit`


class ServerFailed(Exception):
    """The server could not start, or died; the message says which and why."""


class ServerTimeout(Exception):
    """The server did not answer in time (it is still running)."""


LANGUAGE_IDS = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".jsx": "javascriptreact",
    ".ts": "typescript", ".tsx": "typescriptreact", ".rs": "rust", ".go": "go", ".c": "c",
    ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".java": "java", ".rb": "ruby",
    ".lua": "lua", ".sh": "shellscript", ".cs": "csharp", ".php": "php", ".kt": "kotlin",
}  # fmt: skip


def language_id(path: Path) -> str:
    return LANGUAGE_IDS.get(path.suffix.lower(), path.suffix.lstrip(".").lower() or "plaintext")


class _JsonProtocol(LanguageServerProtocol):
    """pygls's protocol with the messages FROM the server kept as JSON: lsprotocol's typed
    structuring rejects shapes real servers send (ty's `notebookDocumentSync`), and a message
    it cannot structure is dropped, leaving our request waiting. The tools want JSON anyway."""

    def get_message_type(self, method: str) -> Any:  # type: ignore[override]
        return None

    def get_result_type(self, method: str) -> Any:  # type: ignore[override]
        return None


def _json_converter() -> Any:
    """lsprotocol's converter, with untyped params and results left as the JSON they are
    (pygls's default turns them into namedtuples, renaming keys such as a rename's URIs)."""
    from lsprotocol import converters

    converter = converters.get_converter()

    def keep(obj: dict[str, Any], cls: type) -> Any:
        return cls(**obj)

    for kind in (JsonRPCRequestMessage, JsonRPCResponseMessage, JsonRPCNotification):
        converter.register_structure_hook(kind, keep)
    return converter


class _Client(LanguageClient):
    def __init__(self, owner: Connection):
        super().__init__(
            "agent-lsp", _version(), protocol_cls=_JsonProtocol, converter_factory=_json_converter
        )
        self.owner = owner

    def json(self, value: Any) -> Any:
        """An lsprotocol object as the JSON it is sent as."""
        return self.protocol._converter.unstructure(value)

    def notify(self, method: str, params: Any) -> None:
        self.protocol.notify(method, self.json(params))

    async def server_exit(self, server: asyncio.subprocess.Process) -> None:
        self.owner._exited(server.returncode)

    def report_server_error(self, error: Exception, source: Any) -> None:
        log.debug("[%s] %s: %s", self.owner.spec.name, source.__name__, error)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("agent-lsp-server")
    except Exception:
        return "0"


class Connection:
    """One server for one workspace root. `start()` then requests; `close()` ends it for good."""

    def __init__(self, spec: ServerSpec, root: Path, *, api_key_env: str = "OPENAI_API_KEY"):
        self.spec = spec
        self.root = root
        self.api_key_env = api_key_env
        self.encoding = "utf-16"
        self.capabilities: dict[str, Any] = {}
        self.exit_code: int | None = None
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.opened: dict[Path, tuple[int, str]] = {}  # path -> (our version, text sent)
        # uri -> (the diagnostics, the version they are for or None, when they came)
        self.diagnostics: dict[str, tuple[list[dict[str, Any]], int | None, float]] = {}
        self.published = asyncio.Condition()
        self.readiness = Readiness(spec.name)  # its initial reading of the workspace
        self._client: _Client | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._closed = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self.exit_code is None and not self._closed

    @property
    def pid(self) -> int | None:
        """The reaper's pid (the server is its child, in its process group)."""
        return self._proc.pid if self._proc is not None else None

    # -- start ------------------------------------------------------------------------------
    async def start(self, timeout: float) -> None:
        program, *args = self.spec.command
        env = keyguard.child_env(names=[self.api_key_env])
        if os.sep not in program and find_program(program, env.get("PATH", "")) is None:
            raise ServerFailed(
                f"language server `{self.spec.name}` cannot start: "
                f"`{program}` was not found on PATH (absolute entries only)"
            )
        _quiet_client_log()
        client = self._client = _Client(self)
        self._handlers(client)
        import sys

        await client.start_io(
            sys.executable, "-I", "-S", str(REAPER), "--", program, *args,
            cwd=str(self.root), env=env, start_new_session=True,
        )  # fmt: skip
        self._proc = client._server
        assert self._proc is not None
        process.keep(self._proc.pid)
        if self._proc.stderr is not None:
            self._tasks.append(asyncio.create_task(self._drain(self._proc.stderr)))
        try:
            params = client.json(self._initialize_params())
            result = await self._call(types.INITIALIZE, params, timeout)
        except BaseException:
            await self.close()
            raise
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        chosen = self.capabilities.get("positionEncoding")
        self.encoding = chosen if chosen in ENCODINGS else "utf-16"
        client.notify(types.INITIALIZED, types.InitializedParams())
        self.readiness.initialized()
        if self.spec.settings:
            client.notify(
                types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                types.DidChangeConfigurationParams(settings=self.spec.settings),
            )

    def _initialize_params(self) -> types.InitializeParams:
        uri = self.root.as_uri()
        return types.InitializeParams(
            process_id=os.getpid(),
            root_uri=uri,
            root_path=str(self.root),
            workspace_folders=[types.WorkspaceFolder(uri=uri, name=self.root.name or uri)],
            client_info=types.ClientInfo(name="agent-lsp", version=_version()),
            initialization_options=self.spec.initialization_options,
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=True),
                general=types.GeneralClientCapabilities(
                    position_encodings=[types.PositionEncodingKind(e) for e in ENCODINGS]
                ),
                workspace=types.WorkspaceClientCapabilities(
                    configuration=True,
                    workspace_folders=True,
                    did_change_configuration=types.DidChangeConfigurationClientCapabilities(),
                    symbol=types.WorkspaceSymbolClientCapabilities(),
                ),
                text_document=types.TextDocumentClientCapabilities(
                    synchronization=types.TextDocumentSyncClientCapabilities(),
                    definition=types.DefinitionClientCapabilities(),
                    references=types.ReferenceClientCapabilities(),
                    hover=types.HoverClientCapabilities(
                        content_format=[types.MarkupKind.Markdown, types.MarkupKind.PlainText]
                    ),
                    document_symbol=types.DocumentSymbolClientCapabilities(
                        hierarchical_document_symbol_support=True
                    ),
                    call_hierarchy=types.CallHierarchyClientCapabilities(),
                    rename=types.RenameClientCapabilities(prepare_support=True),
                    publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                        version_support=True
                    ),
                ),
            ),
        )

    def _handlers(self, client: _Client) -> None:
        # params arrive as JSON (see _JsonProtocol)
        @client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params: Any) -> list[Any]:
            items = params.get("items") if isinstance(params, dict) else None
            return [
                _section(
                    self.spec.settings, item.get("section") if isinstance(item, dict) else None
                )
                for item in items or []
            ]

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        async def diagnostics(params: Any) -> None:
            if not isinstance(params, dict) or not isinstance(params.get("uri"), str):
                return
            items = [d for d in params.get("diagnostics") or [] if isinstance(d, dict)]
            version = params.get("version")
            version = version if isinstance(version, int) else None
            self.diagnostics[params["uri"]] = (items, version, time.monotonic())
            async with self.published:
                self.published.notify_all()

        @client.feature(types.WORKSPACE_WORKSPACE_FOLDERS)
        def folders(params: Any) -> list[dict[str, str]]:
            return [{"uri": self.root.as_uri(), "name": self.root.name}]

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: Any) -> dict[str, Any]:
            return {"applied": False, "failureReason": "agent-lsp applies edits itself"}

        @client.feature(types.PROGRESS)
        def progress(params: Any) -> None:
            self.readiness.progress(params)

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def logged(params: Any) -> None:
            self.readiness.logged(params)

        def nothing(params: Any) -> None:
            return None

        for method in (
            types.CLIENT_REGISTER_CAPABILITY,
            types.CLIENT_UNREGISTER_CAPABILITY,
            types.WINDOW_WORK_DONE_PROGRESS_CREATE,
            types.WINDOW_SHOW_MESSAGE_REQUEST,
            types.WINDOW_SHOW_MESSAGE,
            types.TELEMETRY_EVENT,
            types.WORKSPACE_SEMANTIC_TOKENS_REFRESH,
            types.WORKSPACE_INLAY_HINT_REFRESH,
            types.WORKSPACE_DIAGNOSTIC_REFRESH,
            types.WORKSPACE_CODE_LENS_REFRESH,
        ):
            client.feature(method)(nothing)

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while line := await stream.readline():
                text = line.decode("utf-8", "replace").rstrip()[:500]
                if text:
                    self.stderr.append(text)
                    log.debug("[%s] %s", self.spec.name, text)

    def _exited(self, code: int | None) -> None:
        self.exit_code = code if code is not None else -1
        if self._proc is not None:
            process.forget(self._proc.pid)

    # -- requests ---------------------------------------------------------------------------
    async def _call(self, method: str, params: Any, timeout: float) -> Any:
        client = self._client
        if client is None or not self.alive:
            raise ServerFailed(self.why_dead())
        msg_id = str(uuid.uuid4())
        future = client.protocol.send_request_async(method, params, msg_id=msg_id)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            with contextlib.suppress(Exception):
                client.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise ServerTimeout(
                f"language server `{self.spec.name}` did not answer {method} within {timeout:g} s"
            ) from None
        except RuntimeError as exc:  # pygls: the process exited with the request pending
            if self.alive:
                raise
            raise ServerFailed(self.why_dead()) from exc

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """`params` as JSON (camelCase), the result as JSON; LSP errors come back as raised
        pygls JsonRpcException."""
        return await self._call(method, params, timeout)

    def start_failure(self) -> str:
        """Why it ended before it answered `initialize`, in one line: its exit code and the
        line of its output that names the error (its log lines themselves go to the debug log)."""
        reason = error_line(list(self.stderr))
        return f"exited with code {self.exit_code}" + (f": {reason}" if reason else "")

    def why_dead(self) -> str:
        if self.exit_code is None:
            return f"language server `{self.spec.name}` was stopped"
        code = f" (exit code {self.exit_code})"
        reason = error_line(list(self.stderr))  # one line of its output, not its log
        tail = f": {reason}" if reason else ""
        command = " ".join(self.spec.command)
        return f"language server `{self.spec.name}` ({command}) exited{code}{tail}"

    # -- documents --------------------------------------------------------------------------
    def sync(self, path: Path, text: str) -> None:
        """didOpen the first time, didChange (the whole text) when it changed."""
        if self._client is None or not self.alive:
            return
        uri = path.as_uri()
        known = self.opened.get(path)
        if known is None:
            self.opened[path] = (1, text)
            self._client.notify(
                types.TEXT_DOCUMENT_DID_OPEN,
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=uri, language_id=language_id(path), version=1, text=text
                    )
                ),
            )
        elif known[1] != text:
            version = known[0] + 1
            self.opened[path] = (version, text)
            self._client.notify(
                types.TEXT_DOCUMENT_DID_CHANGE,
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                ),
            )

    # -- the end ----------------------------------------------------------------------------
    async def close(self) -> None:
        """shutdown + exit when it still runs, then the reaper's whole group ends."""
        if self._closed:
            return
        client, proc = self._client, self._proc
        if client is not None and self.alive:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    client.protocol.send_request_async(types.SHUTDOWN, None), SHUTDOWN_GRACE
                )
                client.protocol.notify(types.EXIT, None)
        self._closed = True
        if client is not None:
            client._stop_event.set()
        if proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), SHUTDOWN_GRACE)
            await process.end(proc)
        for task in [*self._tasks, *(client._async_tasks if client is not None else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if client is not None:
            await asyncio.gather(*client._async_tasks, return_exceptions=True)


def _section(settings: dict[str, Any], section: str | None) -> Any:
    """A `workspace/configuration` item: the whole settings, the dotted key as written, or the
    nested path (`python.analysis` -> settings["python"]["analysis"])."""
    if not section:
        return settings
    if section in settings:
        return settings[section]
    node: Any = settings
    for part in section.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


_FRAME = re.compile(r"^\s+(at |File \")")  # a stack frame of a Node or Python traceback
_NAMES_ERROR = re.compile(r"(?i)(error|exception|cannot|can't|failed|not found|no such)")


def error_line(lines: list[str], limit: int = 300) -> str:
    """The line of a program's output that says what went wrong: the last one naming an error
    that is not a stack frame (a traceback's own message), else its last line."""
    named = [ln.strip() for ln in lines if _NAMES_ERROR.search(ln) and not _FRAME.match(ln)]
    plain = [ln.strip() for ln in lines if ln.strip()]
    found = named[-1] if named else plain[-1] if plain else ""
    return found if len(found) <= limit else found[: limit - 1] + "…"


class _QuietClientLog(logging.Filter):
    """pygls's client logs a server's unreadable output with a traceback at ERROR: for the
    servers we start that is the server's problem, said once as why it failed; the details go
    to the debug log, never to the user's terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return True
        log.debug("pygls: %s", record.getMessage(), exc_info=record.exc_info)
        return False


def _quiet_client_log() -> None:
    client_log = logging.getLogger("pygls.client")
    if not any(isinstance(f, _QuietClientLog) for f in client_log.filters):
        client_log.addFilter(_QuietClientLog())
