"""Every stop of the core as ACP sees it: end_turn, max_turn_requests, max_tokens, refusal, and a
fatal stop as a JSON-RPC error with the readable message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError
from tests.unit.kit import call, tools_reply


def start(connect, model, workspace: Path, **settings):
    client = connect(model_settings(model, **settings))
    client.initialize()
    return client, client.new_session(workspace)


def test_max_turns_is_max_turn_requests(connect, model, workspace: Path):
    model.add("loop", [tools_reply(call("read_file", path="calc.py"))] * 3)
    client, session_id = start(connect, model, workspace, maxTurns=2)
    assert client.prompt(session_id, "loop: read forever")["stopReason"] == "max_turn_requests"
    client.close()


def test_cut_twice_is_max_tokens(connect, model, workspace: Path):
    model.add("cut", [{"text": "aaaa", "finish_reason": "length"}, {"text": "bbbb", "finish_reason": "length"}])
    client, session_id = start(connect, model, workspace)
    assert client.prompt(session_id, "cut: say a lot")["stopReason"] == "max_tokens"
    client.close()


def test_content_filter_is_refusal(connect, model, workspace: Path):
    model.add("filtered", [{"text": "", "finish_reason": "content_filter"}])
    client, session_id = start(connect, model, workspace)
    assert client.prompt(session_id, "filtered: hmm")["stopReason"] == "refusal"
    client.close()


def test_fatal_is_a_json_rpc_error_and_the_session_goes_on(connect, model, workspace: Path):
    model.add("broken", [{"status": 400, "message": "this model does not exist"}])
    client, session_id = start(connect, model, workspace)
    with pytest.raises(AcpError) as fatal:
        client.prompt(session_id, "broken: hello")
    assert fatal.value.code == -32603
    assert "Stopped by an error" in fatal.value.message and "this model does not exist" in fatal.value.message
    assert fatal.value.data["report"]["stopReason"] == "fatal"
    model.add("broken", [{"text": "better now"}])
    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"
    client.close()
