"""Issue 24 / Decisions 24, 31 over ACP: a PreToolUse hook blocks `rm -rf` (no permission asked,
the hook's line shown as a thought), and a refused prompt (UserPromptSubmit exit 2) is a fatal
stop whose report's cause is `hook`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError
from tests.unit.kit import call, tools_reply

GUARD = f"{sys.executable} {Path(__file__).parents[1] / 'headless' / 'hooks' / 'block_rm.py'}"


def hooks(event: str, command: str, matcher: str = "") -> dict:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}


def test_a_pre_tool_use_hook_blocks_rm_rf(connect, model, workspace: Path):
    (workspace / "build").mkdir()
    model.add("clean", [tools_reply(call("run_command", id="c1", command="rm -rf build")), {"text": "kept it"}])
    client = connect(model_settings(model, hooks=hooks("PreToolUse", GUARD, "Bash")))
    client.initialize()
    session_id = client.new_session(workspace)
    response = client.prompt(session_id, "clean the build")
    assert response["stopReason"] == "end_turn"
    assert (workspace / "build").is_dir() and client.of("session/request_permission") == []
    thoughts = [u["content"]["text"] for u in client.updates(session_id, "agent_thought_chunk")]
    assert any(t.startswith("[hook] PreToolUse hook") and "blocked: Blocked by policy" in t for t in thoughts), thoughts
    failed = [u for u in client.updates(session_id, "tool_call_update") if u.get("status") == "failed"]
    assert failed, "the denied call ends failed"
    client.close()


def test_a_refused_prompt_is_a_fatal_hook_stop(connect, model, workspace: Path):
    refuse = "echo 'not in this repository' >&2; exit 2"
    client = connect(model_settings(model, hooks=hooks("UserPromptSubmit", refuse)))
    client.initialize()
    with pytest.raises(AcpError) as fatal:
        client.prompt(client.new_session(workspace), "deploy to production")
    assert fatal.value.code == -32603 and "not in this repository" in fatal.value.message
    report = fatal.value.data["report"]
    assert (report["stopReason"], report["stopCause"]) == ("fatal", "hook")
    assert model.requests == []
    client.close()
