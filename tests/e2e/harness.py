"""A scripted editor for end-to-end tests: the real server as a subprocess, talked to over
real LSP by pytest-lsp's client with a real editor's recorded capabilities."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

from agent_lsp.demo.edits import apply_text_edits

HELIX_CAPS = Path(__file__).parent / "helix_capabilities.json"


def capabilities(name: str) -> types.ClientCapabilities:
    if name == "helix":
        from pygls.protocol import default_converter

        return default_converter().structure(json.loads(HELIX_CAPS.read_text()), types.ClientCapabilities)
    return client_capabilities(name)


@dataclass
class Editor:
    """What the fake editor holds and does: buffers, approvals answered from a script."""

    client: LanguageClient
    root: Path
    buffers: dict[str, tuple[int, str]] = field(default_factory=dict)  # uri -> (version, text)
    stream: list[dict[str, Any]] = field(default_factory=list)
    approval_answers: list[str | None] = field(default_factory=list)  # "Allow", ..., None = dismiss, "ignore"
    approval_requests: list[types.ShowMessageRequestParams] = field(default_factory=list)
    edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    refuse_edits: bool = False
    server_capabilities: Any = None

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


def plain(value: Any) -> Any:
    """pygls hands unknown notifications' params over as namedtuples: make them JSON again."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


async def start_editor(root: Path, caps: str, *, init_options: dict[str, Any] | None = None,
                       env: dict[str, str] | None = None, configuration: dict[str, Any] | None = None) -> Editor:
    client = make_test_lsp_client()
    editor = Editor(client, root)
    if configuration is not None:
        client._configuration["agentLsp"] = configuration  # answered to workspace/configuration

    @client.feature("agentLsp/stream")
    def on_stream(ls: LanguageClient, params: Any) -> None:
        editor.stream.append(plain(params))

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def on_request(ls: LanguageClient, params: types.ShowMessageRequestParams):
        editor.approval_requests.append(params)
        answer = editor.approval_answers.pop(0) if editor.approval_answers else "ignore"
        if answer == "ignore":
            await asyncio.sleep(3600)  # never answered (until the server withdraws it)
        return None if answer is None else types.MessageActionItem(title=answer)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_edit(ls: LanguageClient, params: types.ApplyWorkspaceEditParams):
        editor.edits.append(params)
        if editor.refuse_edits:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="refused by the test editor")
        return apply_workspace_edit(editor, params.edit)

    env = {**os.environ, **(env or {})}
    await client.start_io(sys.executable, "-m", "agent_lsp", "serve", "--stdio", env=env, cwd=str(root))
    result = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=capabilities(caps), root_uri=root.resolve().as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.resolve().as_uri(), name=root.name)],
        initialization_options=init_options or {})), 15)
    editor.server_capabilities = result.capabilities
    return editor


def apply_workspace_edit(editor: Editor, edit: types.WorkspaceEdit) -> types.ApplyWorkspaceEditResult:
    """Versioned edits to open buffers (refused when stale); other files on disk."""
    changes: list[tuple[str, int | None, list[types.TextEdit]]] = []
    for change in edit.document_changes or []:
        if isinstance(change, types.CreateFile):
            path = Path(change.uri.removeprefix("file://"))
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("")
            continue
        changes.append((change.text_document.uri, change.text_document.version, list(change.edits)))
    for uri, edits in (edit.changes or {}).items():
        changes.append((uri, None, list(edits)))
    for uri, version, _ in changes:
        if version is not None and uri in editor.buffers and editor.buffers[uri][0] != version:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=f"version {version} is stale")
    for uri, _, edits in changes:
        if uri in editor.buffers:
            version, text = editor.buffers[uri]
            editor.buffers[uri] = (version + 1, apply_text_edits(text, edits))
        else:
            path = Path(uri.removeprefix("file://"))
            path.parent.mkdir(parents=True, exist_ok=True)
            old = path.read_text() if path.exists() else ""
            path.write_text(apply_text_edits(old, edits))
    return types.ApplyWorkspaceEditResult(applied=True)
