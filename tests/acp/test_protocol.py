"""The protocol surface through the official TypeScript client: initialize, sessions, errors."""

from __future__ import annotations

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError


def test_initialize_answers_the_capabilities(connect, model):
    client = connect(model_settings(model))
    result = client.initialize()
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": True, "audio": False, "embeddedContext": True}
    assert caps["mcpCapabilities"] == {"http": True, "sse": False}
    assert caps["sessionCapabilities"] == {"list": {}, "delete": {}, "additionalDirectories": {}}
    assert result["agentInfo"]["name"] == "agent-lsp" and result["agentInfo"]["version"]
    assert client.close()["code"] == 0


def test_unknown_method_and_malformed_params_are_errors_and_the_agent_keeps_serving(connect, model, workspace):
    client = connect(model_settings(model))
    client.initialize()
    with pytest.raises(AcpError) as unknown:
        client.request("agentLsp/noSuchMethod", {})
    assert unknown.value.code == -32601
    with pytest.raises(AcpError) as malformed:
        client.request("session/new", {"cwd": 5, "mcpServers": "nope"})
    assert malformed.value.code == -32602
    with pytest.raises(AcpError) as relative:
        client.request("session/new", {"cwd": "relative/dir", "mcpServers": []})
    assert relative.value.code == -32602 and "absolute" in relative.value.message
    with pytest.raises(AcpError) as ext:
        client.request("_agentLsp/noSuchExtension", {})
    assert ext.value.code == -32601
    with pytest.raises(AcpError) as bad_session:
        client.request("session/prompt", {"sessionId": "s-nope", "prompt": [{"type": "text", "text": "hi"}]})
    assert bad_session.value.code == -32002
    session_id = client.new_session(workspace)  # still serving
    assert session_id
    commands = client.wait_for(lambda e: e["type"] == "update" and e["params"]["update"]["sessionUpdate"] == "available_commands_update")
    assert {c["name"] for c in commands["params"]["update"]["availableCommands"]} == {"plan", "rewind"}
    assert client.close()["code"] == 0
