"""ACP with a configured language server agent-lsp starts itself (issue 23, source 2): the
`diagnostics` tool is offered and answered by it, the problems after an edit come from it, and
the server ends with the agent."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.langservers.conftest import BROKEN, tool, wait_gone
from tests.unit.kit import call, last_tool_results, tools_reply


def test_a_configured_server_answers_diagnostics_over_acp(connect, model, workspace: Path):
    model.add("break", [
        tools_reply(call("edit_file", "e1", path="calc.py", old_text="def mul(a, b):", new_text=BROKEN + "\n\ndef mul(a, b):")),
        tools_reply(call("diagnostics", "d1", path="calc.py")),
        {"text": "found it"},
    ])
    servers = {"auto": False, "servers": {"bp": {"command": [tool("basedpyright-langserver"), "--stdio"],
                                                  "extensions": [".py"]}}}
    marker = uuid.uuid4().hex
    client = connect(model_settings(model, languageServers=servers), env={"AGENT_LSP_TEST_MARK": marker})
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow")
    assert client.prompt(session_id, "break it", timeout=90)["stopReason"] == "end_turn"
    requests = model.requests_for("break")
    assert "diagnostics" in {t["function"]["name"] for t in requests[0]["tools"]}
    edited = last_tool_results(requests[1])["e1"]
    assert "calc.py:5:15: error:" in edited and "(basedpyright)" in edited, edited
    asked = last_tool_results(requests[2])["d1"]
    assert "calc.py:5:15: error:" in asked and "not assignable" in asked, asked
    client.close()
    assert wait_gone(marker) == []
