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


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_an_image_reaches_the_model_and_bad_ones_are_refused(connect, model, workspace: Path):
    model.add("look", [{"text": "a red dot"}])
    model.add("vision", [{"status": 400, "message": "this model does not support image input"}, {"text": "text works"}])
    client = connect(model_settings(model))
    capabilities = client.initialize()["agentCapabilities"]["promptCapabilities"]
    assert capabilities["image"] is True
    session_id = client.new_session(workspace)
    image = {"type": "image", "mimeType": "image/png", "data": PNG}
    assert client.prompt(session_id, [{"type": "text", "text": "look: what is this?"}, image])["stopReason"] == "end_turn"
    [content] = [m["content"] for m in model.requests_for("look")[0]["messages"] if m["role"] == "user"]
    assert content[0] == {"type": "text", "text": "look: what is this?"}
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert client.text(session_id) == "a red dot"

    for bad in ({"mimeType": "image/tiff", "data": PNG}, {"mimeType": "image/png", "data": "not base64!"},
                {"mimeType": "image/png", "data": "A" * (7 * 1024 * 1024)}):
        with pytest.raises(AcpError) as refused:
            client.prompt(session_id, [{"type": "text", "text": "and this?"}, {"type": "image", **bad}])
        assert refused.value.code == -32602
    assert len(model.requests_for("look")) == 1  # none reached the model

    # a model that refuses images: the turn stops with the server's words, and the session goes on
    other = client.new_session(workspace)
    with pytest.raises(AcpError) as failed:
        client.prompt(other, [{"type": "text", "text": "vision: see this"}, image])
    assert "does not support image input" in failed.value.message
    assert client.prompt(other, "vision: then read calc.py")["stopReason"] == "end_turn"
    follow_up = model.requests_for("vision")[-1]["messages"]
    assert [m["content"] for m in follow_up if m["role"] == "user"] == ["vision: then read calc.py"]
    client.close()


def test_a_slow_model_listing_does_not_hold_up_a_new_session(connect, model, workspace: Path):
    """session/new answers with the current model alone when GET /models is slow (ACP's
    `session/new` waited up to the request timeout), and the picker gets the list when it lands."""
    model.add_model("big-model")
    model.models_delay = 6.0  # the agent waits MODELS_WAIT (3 s) at most; the client 10 s
    client = connect(model_settings(model))
    client.initialize()
    answer = client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    offered = [o["value"] for o in _options(answer)["model"]["options"]]
    assert offered == ["m"]  # answered before the listing came
    session_id = answer["sessionId"]
    client.wait_for(
        lambda e: e["type"] == "update"
        and e["params"]["sessionId"] == session_id
        and "big-model" in str(e["params"]["update"].get("configOptions")),
        timeout=30,
    )
    client.close()
