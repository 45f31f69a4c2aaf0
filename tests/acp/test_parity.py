"""ACP parity (CONTRACT "ACP parity (turn 4)"), through the official TypeScript client: the
config options a panel shows (mode, model, reasoning level) and switching them, extra folders
from `additionalDirectories`, and session/delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError
from tests.endpoints import deepseek
from tests.unit.kit import call, tools_reply


def _options(answer: dict) -> dict[str, dict]:
    return {o["id"]: o for o in answer["configOptions"]}


def test_config_options_offered_switched_and_refused(connect, model, workspace: Path):
    model.add_model("big-model")
    model.add_model("small-model")
    model.add("pick", [{"text": "first"}, {"text": "second"}])
    client = connect(model_settings(model))
    client.initialize()
    answer = client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    session_id = answer["sessionId"]
    options = _options(answer)
    assert options["mode"]["category"] == "mode" and options["mode"]["currentValue"] == "default"
    assert [o["value"] for o in options["mode"]["options"]] == ["default", "plan"]
    assert options["model"]["category"] == "model" and options["model"]["currentValue"] == "m"
    assert {"m", "big-model", "small-model"} <= {o["value"] for o in options["model"]["options"]}
    assert "thought_level" not in options  # not seen reasoning yet
    assert answer["modes"]["currentModeId"] == "default"  # kept for older clients

    assert client.prompt(session_id, "pick: once")["stopReason"] == "end_turn"
    assert model.requests_for("pick")[0]["model"] == "m"
    switched = client.request("session/set_config_option", {"sessionId": session_id, "configId": "model", "value": "big-model"})
    assert _options(switched)["model"]["currentValue"] == "big-model"
    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"
    assert model.requests_for("pick")[1]["model"] == "big-model"  # the next request uses it

    planned = client.request("session/set_config_option", {"sessionId": session_id, "configId": "mode", "value": "plan"})
    assert _options(planned)["mode"]["currentValue"] == "plan"
    client.wait_for(lambda e: e["type"] == "update" and e["params"]["update"].get("currentModeId") == "plan")
    for config_id, value in (("model", "no-such-model"), ("mode", "yolo"), ("colour", "red"), ("thought_level", "high")):
        with pytest.raises(AcpError) as refused:
            client.request("session/set_config_option", {"sessionId": session_id, "configId": config_id, "value": value})
        assert refused.value.code == -32602, (config_id, value)
    client.close()


def test_reasoning_level_offered_once_the_model_reasons(connect, model, workspace: Path):
    model.add("think first", [{"raw": deepseek.THINK_THEN_CALL}, {"raw": deepseek.THINK_THEN_ANSWER}, {"text": "ok"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "think first: what does add do")["stopReason"] == "end_turn"
    [update] = client.updates(session_id, "config_option_update")  # announced once it reasoned
    level = _options(update)["thought_level"]
    assert level["category"] == "thought_level" and [o["value"] for o in level["options"]] == ["off", "low", "medium", "high"]
    client.request("session/set_config_option", {"sessionId": session_id, "configId": "thought_level", "value": "high"})
    assert client.prompt(session_id, "and now?")["stopReason"] == "end_turn"
    requests = model.requests_for("think first")
    assert "reasoning_effort" not in requests[0] and requests[-1]["reasoning_effort"] == "high"
    client.close()


def test_additional_directories_are_roots_read_edited_and_rewound(connect, model, workspace: Path, tmp_path: Path):
    extra = tmp_path / "notes"
    extra.mkdir()
    (extra / "todo.txt").write_text("buy milk\n")
    model.add("extra", [
        tools_reply(call("read_file", "r1", path="notes/todo.txt")),
        tools_reply(call("edit_file", "e1", path="notes/todo.txt", old_text="buy milk", new_text="buy bread")),
        {"text": "done"},
    ])
    client = connect(model_settings(model, approval={"default": "allow"}))
    client.initialize()
    with pytest.raises(AcpError) as missing:
        client.request("session/new", {"cwd": str(workspace), "additionalDirectories": [str(tmp_path / "nope")], "mcpServers": []})
    assert missing.value.code == -32602 and "nope" in missing.value.message
    session_id = client.request("session/new", {"cwd": str(workspace), "additionalDirectories": [str(extra)], "mcpServers": []})["sessionId"]
    assert client.prompt(session_id, "extra: change the note")["stopReason"] == "end_turn"
    read = model.requests_for("extra")[1]["messages"][-1]
    assert read["role"] == "tool" and "buy milk" in read["content"]
    assert (extra / "todo.txt").read_text() == "buy bread\n"
    assert client.prompt(session_id, "/rewind")["stopReason"] == "end_turn"
    assert (extra / "todo.txt").read_text() == "buy milk\n"
    client.close()


def test_session_delete(connect, model, workspace: Path):
    model.add("", [{"text": "ok", "repeat": 5}])
    client = connect(model_settings(model))
    capabilities = client.initialize()["agentCapabilities"]["sessionCapabilities"]
    assert "delete" in capabilities and "additionalDirectories" in capabilities
    keep, gone = client.new_session(workspace), client.new_session(workspace)
    for session_id in (keep, gone):
        assert client.prompt(session_id, "hello")["stopReason"] == "end_turn"
    listed = {s["sessionId"] for s in client.request("session/list", {"cwd": str(workspace)})["sessions"]}
    assert listed == {keep, gone}
    assert client.request("session/delete", {"sessionId": gone}) == {}
    listed = {s["sessionId"] for s in client.request("session/list", {"cwd": str(workspace)})["sessions"]}
    assert listed == {keep}
    with pytest.raises(AcpError) as gone_error:  # not loadable any more
        client.request("session/load", {"sessionId": gone, "cwd": str(workspace), "mcpServers": []})
    assert gone_error.value.code == -32002
    with pytest.raises(AcpError):
        client.request("session/prompt", {"sessionId": gone, "prompt": [{"type": "text", "text": "hi"}]})
    client.close()
