"""CONTRACT "Code intelligence", Source 1: the editor. agent-lsp asks a client that advertised
`experimental.agentLsp.codeIntel` with `agentLsp/codeIntel {method, params}` and takes the
method's LSP result from it, here a test editor answering from a real jedi-language-server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from agent_lsp.server.rpc import plain
from tests.e2e.code_intel_backend import RealServer
from tests.e2e.harness import capabilities, make_client

PROBE = Path(__file__).with_name("code_intel_probe.py")

LIB = '''class Greeter:
    def greet(self, name):
        return "hello " + name


def make():
    return Greeter()
'''
APP = '''from lib import Greeter, make

g = Greeter()
print(g.greet("a"), make().greet("b"))  # greet in a comment
'''


def caps(code_intel: bool, encodings: list[str] | None = None) -> types.ClientCapabilities:
    found = capabilities("visual-studio-code")
    found.experimental = {"agentLsp": {"codeIntel": True}} if code_intel else None
    if encodings:
        found.general = types.GeneralClientCapabilities(position_encodings=encodings)
    return found


async def start(root: Path, code_intel: bool, answer: Any, encodings: list[str] | None = None):
    client = make_client()
    asked: list[dict[str, Any]] = []

    @client.feature("agentLsp/codeIntel")
    async def on_code_intel(ls: Any, params: Any) -> Any:
        request = plain(params)
        asked.append(request)
        return await answer(request)

    await client.start_io(sys.executable, str(PROBE), cwd=str(root))
    await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=caps(code_intel, encodings), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options={"model": "m"})), 30)
    return client, asked


async def probe(client: Any, method: str, params: dict[str, Any], path: Path) -> dict[str, Any]:
    found = await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentLspTest.codeIntel",
        arguments=[{"method": method, "params": params, "path": str(path)}])), 60)
    return plain(found)


async def stop(client: Any) -> None:
    try:
        await asyncio.wait_for(client.shutdown_session(), 10)
    except Exception:  # noqa: BLE001
        pass


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def greet_position() -> dict[str, int]:
    return {"line": 1, "character": LIB.splitlines()[1].index("greet")}


@pytest.mark.timeout(120)
async def test_references_and_rename_come_from_the_editors_language_server(project: Path):
    """The editor's answer reaches agent-lsp unchanged: references from jedi in both files,
    and a rename's WorkspaceEdit keyed by URI (pygls would rename those keys into _0, _1 if the
    result went through its untyped namedtuples)."""
    jedi = RealServer(project)
    await jedi.start(["lib.py", "app.py"])
    client, asked = await start(project, True, lambda r: jedi.answer(r["method"], r["params"]))
    try:
        doc = {"uri": (project / "lib.py").as_uri()}
        refs = await probe(client, "textDocument/references", {
            "textDocument": doc, "position": greet_position(), "context": {"includeDeclaration": False}},
            project / "lib.py")
        assert refs["handles"] is True and refs["encoding"] == "utf-16"
        found = sorted((Path(loc["uri"][7:]).name, loc["range"]["start"]["line"], loc["range"]["start"]["character"])
                       for loc in refs["result"] if loc["uri"].endswith("app.py"))
        assert found == [("app.py", 3, 8), ("app.py", 3, 27)], refs  # not the comment
        assert asked[0]["method"] == "textDocument/references"
        assert asked[0]["params"]["position"] == greet_position()

        rename = await probe(client, "textDocument/rename", {
            "textDocument": doc, "position": greet_position(), "newName": "salute"}, project / "lib.py")
        edit = rename["result"]
        files = {Path(change["textDocument"]["uri"][7:]).name for change in edit.get("documentChanges", [])} \
            | {Path(uri[7:]).name for uri in edit.get("changes") or {}}
        assert files == {"lib.py", "app.py"}, edit
    finally:
        await stop(client)
        await jedi.stop()


@pytest.mark.timeout(60)
async def test_null_error_and_no_capability(project: Path):
    """null stays None (nothing answers: the next source may); an error answer is a clear
    CodeIntelError; a client without the capability gets no editor source at all."""
    async def answer(request: dict[str, Any]) -> Any:
        if request["method"] == "textDocument/hover":
            return None
        raise ValueError("no provider for textDocument/definition")

    client, asked = await start(project, True, answer, encodings=["utf-8", "utf-16"])
    try:
        doc = {"uri": (project / "lib.py").as_uri()}
        hover = await probe(client, "textDocument/hover", {"textDocument": doc, "position": greet_position()},
                            project / "notes.md")
        assert hover["result"] is None and hover["encoding"] == "utf-8" and hover["handles"] is True
        failed = await probe(client, "textDocument/definition",
                             {"textDocument": doc, "position": greet_position()}, project / "lib.py")
        assert failed["error"].startswith("the editor could not answer textDocument/definition: "), failed
        assert "no provider for textDocument/definition" in failed["error"]
    finally:
        await stop(client)
    plain_client, never = await start(project, False, answer)
    try:
        assert await probe(plain_client, "textDocument/hover", {}, project / "lib.py") == {"source": None}
        assert never == []
    finally:
        await stop(plain_client)


# -- through the tools (issue 23): the scripted model asks, the editor's language server answers --


@pytest.mark.timeout(120)
async def test_the_models_find_references_and_rename_come_from_the_editor(project: Path, model):
    """A stock LSP editor that advertises codeIntel and answers from jedi: the model's
    find_references lists Greeter.greet's call in app.py (not the comment), its rename_symbol
    is one approval and one workspace/applyEdit over both files, and the language server was
    asked through the editor (agentLsp/codeIntel) for both."""
    from tests.e2e.harness import start_editor, tool_messages

    (project / ".git").mkdir()
    jedi = RealServer(project)
    await jedi.start(["lib.py", "app.py"])
    model.add("callers of greet", [
        {"tool_calls": [{"id": "refs", "name": "find_references",
                         "arguments": {"path": "lib.py", "line": 2, "symbol": "greet"}}]},
        {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                         "arguments": {"path": "lib.py", "line": 2, "symbol": "greet", "newName": "salute"}}]},
        {"text": "Renamed."},
    ])
    editor = await start_editor(project, caps(True), init_options={
        "model": "m", "baseUrl": model.base_url, "approval": {"default": "ask"}})
    asked: list[str] = []

    @editor.client.feature("agentLsp/codeIntel")
    async def on_code_intel(ls: Any, params: Any) -> Any:
        request = plain(params)
        asked.append(request["method"])
        return await jedi.answer(request["method"], request["params"])

    editor.approval_answers = ["Allow"]
    try:
        started = await editor.run("callers of greet")
        report = await editor.wait_stop(started["runId"], 60)
        assert report["stopReason"] == "done", report
        results = tool_messages(model.requests_for("callers of greet")[2])
        assert "app.py:4:9" in results["refs"], results["refs"]
        assert "textDocument/references" in asked and "textDocument/rename" in asked, asked
        assert len(editor.approval_requests) == 1 and len(editor.edits) == 1, (editor.approval_requests, editor.edits)
        assert "greet(" not in (project / "app.py").read_text() and "salute(" in (project / "app.py").read_text()
        assert "def salute(self, name)" in (project / "lib.py").read_text()
        assert "def greet(self)" not in (project / "lib.py").read_text()  # there is none: only Greeter's
    finally:
        await editor.quit()
        await jedi.stop()
