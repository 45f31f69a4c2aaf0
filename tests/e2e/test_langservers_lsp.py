"""The LSP server for a stock client (no agentLsp/diagnostics) with a language server it starts
itself, configured in initializationOptions (issue 23, source 2): the `diagnostics` tool and the
problems after an edit come from it; a repository's workspace/configuration cannot configure
one (trusted key, Decision 25); it ends with the server's shutdown."""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.harness import tool_messages
from tests.langservers.conftest import BROKEN, marked, tool, wait_gone

pytestmark = pytest.mark.timeout(120)


def calls(*items: dict) -> dict:
    return {"tool_calls": [{"id": f"c{i}", **item} for i, item in enumerate(items)]}


async def stop(editor, prompt: str, timeout: float = 90, **extra) -> dict:
    started = await editor.run(prompt, **extra)
    return await editor.wait_stop(started["runId"], timeout)


def servers() -> dict:
    return {"auto": False, "servers": {"bp": {"command": [tool("basedpyright-langserver"), "--stdio"], "extensions": [".py"]}}}


async def test_a_configured_server_serves_a_stock_client(open_editor, model, workspace):
    model.add("break", [
        calls({"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "def mul(a, b):",
                                                  "new_text": BROKEN + "\n\ndef mul(a, b):"}}),
        calls({"name": "diagnostics", "arguments": {"path": "calc.py"}}),
        {"text": "found it"},
    ])
    marker = uuid.uuid4().hex
    editor = await open_editor(init={"approval": {"default": "allow"}, "languageServers": servers()},
                               env={"AGENT_LSP_TEST_MARK": marker})
    report = await stop(editor, "break it")
    assert report["stopReason"] == "done", report
    assert "diagnostics" in {t["function"]["name"] for t in model.requests[0]["tools"]}
    edited = tool_messages(model.requests[1])["c0"]
    assert "calc.py:5:15: error:" in edited and "(basedpyright)" in edited, edited
    asked = tool_messages(model.requests[2])["c0"]
    assert "calc.py:5:15: error:" in asked and "not assignable" in asked, asked
    assert marked(marker), "the language server runs until the editor quits"
    await editor.quit()
    assert wait_gone(marker) == []


async def test_a_repositorys_settings_cannot_start_a_server(open_editor, model, workspace):
    model.add("plain", [{"text": "ok"}])
    editor = await open_editor(configuration={"languageServers": servers()})
    await stop(editor, "plain")
    assert "diagnostics" not in {t["function"]["name"] for t in model.requests[0]["tools"]}
