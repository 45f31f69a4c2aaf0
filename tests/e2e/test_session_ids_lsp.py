"""Issue 32 P14 over LSP: `agentLsp.run` with a sessionId that cannot be one (5,000 characters)
is InvalidParams (-32602) naming `sessionId`, and the server goes on."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.test_commands_settings import execute_raw, still_answers


@pytest.mark.parametrize("caps", ["visual-studio-code"])
async def test_a_5000_character_session_id_is_invalid_params(open_editor, model, caps):
    editor = await open_editor(caps)
    with pytest.raises(JsonRpcException) as error:
        await execute_raw(editor, "agentLsp.run", [{"prompt": "hi", "sessionId": "s" * 5000}])
    assert error.value.code == -32602, error.value
    message = str(error.value)
    assert "sessionId" in message and "invalid session id" in message and "Traceback" not in message
    assert len(message) < 1000
    assert model.requests == []
    await still_answers(editor)
