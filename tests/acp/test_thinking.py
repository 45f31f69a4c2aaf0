"""Decision 40: ACP shows the model's reasoning (`thinking`) as agent_thought_chunk, apart from
the answer's agent_message_chunk; seen through the official TypeScript client."""

from __future__ import annotations

from pathlib import Path

from tests.acp.conftest import model_settings
from tests.endpoints import deepseek


def test_reasoning_is_a_thought_chunk(connect, model, workspace: Path):
    model.add("think first", [{"raw": deepseek.THINK_THEN_CALL}, {"raw": deepseek.THINK_THEN_ANSWER}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow")
    response = client.prompt(session_id, "think first: what does add do")
    assert response["stopReason"] == "end_turn"
    thoughts = "".join(u["content"]["text"] for u in client.updates(session_id, "agent_thought_chunk"))
    assert thoughts == "The user asks about add(); I should read calc.py first.add() subtracts."
    assert client.text(session_id) == "add() returns a - b."
