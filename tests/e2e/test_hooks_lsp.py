"""Issue 24 / Decisions 25, 31 over LSP: hooks from initializationOptions run (a PreToolUse hook
that blocks `rm -rf` the way Claude Code's documentation shows: no approval is asked, the model
reads why, the `hook` stream event carries the contract's keys); hooks from
workspace/configuration (a cloned repository's settings) never run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)
GUARD = f"{sys.executable} {Path(__file__).parents[1] / 'headless' / 'hooks' / 'block_rm.py'}"


def hooks(event: str, command: str, matcher: str = "") -> dict:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}


async def test_a_pre_tool_use_hook_blocks_before_anyone_is_asked(open_editor, model, workspace):
    (workspace / "build").mkdir()
    model.add("clean", [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "rm -rf build"}}]},
        {"text": "I will not delete it"},
    ])
    editor = await open_editor(init={"hooks": hooks("PreToolUse", GUARD, "Bash")})
    started = await editor.run("clean the build")
    report = await editor.wait_stop(started["runId"], 30)

    assert report["stopReason"] == "done" and report["denied"] == 1
    assert (workspace / "build").is_dir() and editor.approval_requests == []
    [event] = editor.events(started["runId"], "hook")
    assert {k: event[k] for k in ("event", "command", "exitCode", "blocked", "agentId")} == {
        "event": "PreToolUse", "command": GUARD, "exitCode": 2, "blocked": True, "agentId": "main"}
    assert event["message"].startswith("Blocked by policy: recursive forced delete")
    tool = [m for m in model.requests[-1]["messages"] if m.get("role") == "tool"][-1]
    assert "a PreToolUse hook denied it: Blocked by policy" in tool["content"]


async def test_hooks_from_workspace_configuration_never_run(open_editor, model, workspace):
    model.add("hello", [{"text": "hi"}])
    repo = {"hooks": hooks("UserPromptSubmit", "touch repo-hook-ran")}
    editor = await open_editor(configuration=repo)
    await editor.wait_for(lambda: editor.configuration_requests, 10, "workspace/configuration")
    started = await editor.run("hello")
    report = await editor.wait_stop(started["runId"], 30)
    assert report["stopReason"] == "done"
    assert not (workspace / "repo-hook-ran").exists() and editor.events(started["runId"], "hook") == []
