"""ACP: a project command's `allowed-tools` ask consent as a permission of kind `other` in the
session (Decision 30), like the project's allow rules; allowed, they apply to its run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.unit.kit import call, last_tool_results, tools_reply


def test_a_project_commands_allowed_tools_ask_consent_then_apply(connect, model, workspace: Path):
    (workspace / ".claude" / "commands").mkdir(parents=True)
    (workspace / ".claude" / "commands" / "mk.md").write_text("---\nallowed-tools: Bash(touch:*)\n---\nmk: make one\n")
    model.add("mk: make one", [tools_reply(call("run_command", "c1", command="touch one")), {"text": "done"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow", otherwise="deny")
    assert client.prompt(session_id, "/mk")["stopReason"] == "end_turn"
    [consent] = client.of("permission")  # the command itself was not asked: allowed-tools allowed it
    call_ = consent["params"]["toolCall"]
    assert call_["kind"] == "other" and "Bash(touch:*)" in json.dumps(call_["content"]), call_
    assert call_["title"] == "Use its allowed-tools for its runs?", call_  # not "allow rules"
    assert "mk.md" in json.dumps(call_["content"])
    assert [o["name"] for o in consent["params"]["options"]] == ["Allow", "Allow always for this workspace", "Deny"]
    assert last_tool_results(model.requests_for("mk: make one")[1])["c1"].startswith("exit code 0")
    assert (workspace / "one").exists()
