"""Permission rules over ACP (issue 24): "Always allow" is an option of kind allow_always beside
"Allow for session", naming the rule; choosing it writes the rule into the user's settings file
(the rest kept) and a new agent process honours it; a project's allow rules ask consent as a
permission of kind `other`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.unit.kit import call, last_tool_results, tools_reply


def test_always_allow_is_saved_and_honoured_by_the_next_process(connect, model, workspace: Path):
    model.add("one", [tools_reply(call("run_command", "c1", command="touch one")), {"text": "done"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allowAlways", otherwise="deny")
    assert client.prompt(session_id, "one: make it")["stopReason"] == "end_turn"
    [permission] = client.of("permission")
    options = permission["params"]["options"]
    assert [(o["optionId"], o["kind"], o["name"]) for o in options] == [
        ("allow", "allow_once", "Allow"), ("allowSession", "allow_always", "Allow for session"),
        ("allowAlways", "allow_always", "Always allow"), ("deny", "reject_once", "Deny")]
    texts = [c.get("content", {}).get("text", "") for c in permission["params"]["toolCall"]["content"]]
    assert any("Always allow saves the rule Bash(touch one)" in t for t in texts), texts
    saved = json.loads(client.settings_file.read_text())
    assert saved["permissions"] == {"allow": ["Bash(touch one)"]} and saved["model"] == "m"
    assert (workspace / "one").exists()

    (workspace / "one").unlink()
    model.add("again", [tools_reply(call("run_command", "c2", command="touch one")), {"text": "done"}])
    again = connect(saved)  # a new agent process reading the same settings
    again.initialize()
    second = again.new_session(workspace)
    again.permissions(otherwise="deny")
    assert again.prompt(second, "again: make it")["stopReason"] == "end_turn"
    assert again.of("permission") == [] and (workspace / "one").exists()
    assert last_tool_results(model.requests[-1])["c2"].startswith("exit code 0")


def test_project_allow_rules_ask_consent_as_a_permission_of_kind_other(connect, model, workspace: Path):
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}}))
    model.add("one", [tools_reply(call("run_command", "c1", command="touch one")), {"text": "done"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow", otherwise="deny")
    assert client.prompt(session_id, "one: make it")["stopReason"] == "end_turn"
    [consent] = client.of("permission")  # the command itself was not asked: the rule allowed it
    call_ = consent["params"]["toolCall"]
    assert call_["kind"] == "other" and "Bash(touch:*)" in json.dumps(call_["content"])
    assert call_["title"] == "Use these allow rules?"
    assert [o["name"] for o in consent["params"]["options"]] == ["Allow", "Allow always for this workspace", "Deny"]
    assert (workspace / "one").exists()


def test_always_allow_is_not_an_option_for_a_pattern_and_the_permission_says_why(connect, model, workspace: Path):
    model.add("list", [tools_reply(call("run_command", "c1", command="find . -name '*'")), {"text": "done"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allowSession", otherwise="deny")
    assert client.prompt(session_id, "list: the files")["stopReason"] == "end_turn"
    [permission] = client.of("permission")
    assert [o["name"] for o in permission["params"]["options"]] == ["Allow", "Allow for session", "Deny"]
    texts = [c.get("content", {}).get("text", "") for c in permission["params"]["toolCall"]["content"]]
    assert any("Always allow is not offered" in t and "`*`, `?` or `[`" in t for t in texts), texts
    assert "permissions" not in json.loads(client.settings_file.read_text())  # nothing saved
    assert last_tool_results(model.requests[-1])["c1"].startswith("exit code 0")
