"""Issue 32 P14 over ACP: a value that cannot be a session id (5,000 characters) is -32602 in
session/load and session/prompt (an unknown valid id stays -32002), and the agent goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError


def test_a_value_that_cannot_be_a_session_id_is_invalid_params(connect, model, workspace: Path):
    client = connect(model_settings(model))
    client.initialize()
    long = "s" * 5000
    with pytest.raises(AcpError) as load:
        client.request("session/load", {"sessionId": long, "cwd": str(workspace), "mcpServers": []})
    assert load.value.code == -32602 and "invalid session id" in str(load.value)
    with pytest.raises(AcpError) as prompt:
        client.request("session/prompt", {"sessionId": long, "prompt": [{"type": "text", "text": "hi"}]})
    assert prompt.value.code == -32602
    assert client.request("session/list", {"cwd": str(workspace)})["sessions"] == []  # it goes on
    client.close()
