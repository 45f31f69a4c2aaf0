"""A real language server behind a test editor's `agentLsp/codeIntel` answers: the editor side
of CONTRACT "Code intelligence" (Source 1) played by pygls's LSP client in front of
jedi-language-server, so the JSON that reaches agent-lsp is a real server's."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from pathlib import Path
from typing import Any

import attrs
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from agent_lsp.server.rpc import plain

# The methods an editor is asked for (CONTRACT "Code intelligence") and their params' types.
PARAMS: dict[str, type] = {
    types.TEXT_DOCUMENT_DEFINITION: types.DefinitionParams,
    types.TEXT_DOCUMENT_REFERENCES: types.ReferenceParams,
    types.TEXT_DOCUMENT_HOVER: types.HoverParams,
    types.TEXT_DOCUMENT_DOCUMENT_SYMBOL: types.DocumentSymbolParams,
    types.WORKSPACE_SYMBOL: types.WorkspaceSymbolParams,
    types.TEXT_DOCUMENT_PREPARE_CALL_HIERARCHY: types.CallHierarchyPrepareParams,
    types.CALL_HIERARCHY_INCOMING_CALLS: types.CallHierarchyIncomingCallsParams,
    types.CALL_HIERARCHY_OUTGOING_CALLS: types.CallHierarchyOutgoingCallsParams,
    types.TEXT_DOCUMENT_PREPARE_RENAME: types.PrepareRenameParams,
    types.TEXT_DOCUMENT_RENAME: types.RenameParams,
}


def jedi_command() -> list[str]:
    found = shutil.which("jedi-language-server") or str(Path(sys.executable).parent / "jedi-language-server")
    return [found]


class RealServer:
    """One language server over stdio, its workspace's files opened, answering LSP JSON."""

    def __init__(self, root: Path, command: list[str] | None = None):
        self.root = root
        self.command = command or jedi_command()
        self.client = LanguageClient("agent-lsp-test-editor", "1")
        self.converter = self.client.protocol._converter
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def start(self, files: list[str]) -> None:
        await self.client.start_io(*self.command)
        await asyncio.wait_for(self.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=self.root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=self.root.as_uri(), name=self.root.name)],
        )), 30)
        self.client.initialized(types.InitializedParams())
        for rel in files:
            path = self.root / rel
            self.client.text_document_did_open(types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=path.as_uri(), language_id="python",
                                                     version=1, text=path.read_text())))

    async def answer(self, method: str, params: dict[str, Any]) -> Any:
        """The LSP result of `method` as JSON (camelCase), None when the server has none."""
        self.asked.append((method, params))
        kind = PARAMS.get(method)
        if kind is None:
            return None
        typed = self.converter.structure(params, kind)
        result = await asyncio.wait_for(self.client.protocol.send_request_async(method, typed), 30)
        if result is None:
            return None
        if attrs.has(type(result)) or isinstance(result, list):
            return self.converter.unstructure(result)
        return plain(result)

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        except Exception:  # noqa: BLE001 - already gone
            pass
        # pygls's stop waits for the process: one that missed its shutdown or exit (a busy
        # server under load) is killed rather than waited for forever
        process = getattr(self.client, "_server", None)
        if process is not None and process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
        # its reader may never see EOF (a helper process of the server keeps the pipe open):
        # the server is gone, so its client's last wait is given up rather than failing the test
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.client.stop(), 10)
