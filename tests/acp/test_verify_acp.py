"""Issue 35 "Verified done" through ACP (the official TypeScript client): the verify command is
a tool call like any (asked with session/request_permission), and the turn's last words say what
verified it; the prompt response's report carries `verification`."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.unit.kit import call, tools_reply

CHECK = "from calc import add\nassert add(2, 3) == 5\n"


def test_the_final_message_says_the_run_was_verified(connect, model, workspace: Path):
    (workspace / "check.py").write_text(CHECK)
    line = f"{sys.executable} check.py"
    model.add("fix", [
        tools_reply(call("edit_file", "c-edit", path="calc.py", old_text="return a - b", new_text="return a + b")),
        {"text": "Fixed add."},
    ])
    client = connect(model_settings(model, verify={"commands": [line]}))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow", "allow", otherwise="deny")  # the edit, then verify-1
    response = client.prompt(session_id, "fix the add")

    assert response["stopReason"] == "end_turn"
    assert len(client.of("permission")) == 2, "verify-1 is asked like any command"
    assert client.text(session_id) == f"Fixed add.\n\n(verified: {line} passed)"
    verification = response["_meta"]["agentLsp"]["report"]["verification"]
    assert verification["status"] == "passed" and verification["checks"][0]["command"] == line
    client.close()
