"""Permission rules over LSP (issue 24): "Always allow" saved in the user settings file and
honoured by the next server process; Claude Code's files (the user's trusted, a project's deny
at once and its allow rules only after consent, remembered per workspace); a destructive command
asks whatever allows it, and says why."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.harness import tool_messages


def command_call(command: str, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": "run_command", "arguments": {"command": command}}]}


def user_settings() -> Path:
    return Path(os.environ["AGENT_LSP_SETTINGS"])  # a temp file (tests/conftest.py)


async def test_always_allow_saves_the_exact_rule_and_the_next_process_honours_it(open_editor, model, workspace):
    user_settings().write_text(json.dumps({"permissions": {"deny": ["Bash(curl:*)"]}, "toolOutputLimit": 5000}))
    model.add("first", [command_call("touch one", "c1"), {"text": "done"}])
    editor = await open_editor("neovim")
    editor.approval_answers = ["Always allow"]
    report = await editor.wait_stop((await editor.run("first"))["runId"])
    assert report["stopReason"] == "done" and (workspace / "one").exists()
    [request] = editor.approval_requests
    assert "Always allow saves the rule Bash(touch one)" in request.message
    saved = json.loads(user_settings().read_text())
    assert saved == {"permissions": {"deny": ["Bash(curl:*)"], "allow": ["Bash(touch one)"]}, "toolOutputLimit": 5000}
    await editor.quit()

    (workspace / "one").unlink()
    model.add("again", [command_call("touch one", "c2"), command_call("touch two", "c3"), {"text": "done"}])
    restarted = await open_editor("neovim")
    restarted.approval_answers = ["Deny"]
    await restarted.wait_stop((await restarted.run("again"))["runId"])
    asked = [r.message for r in restarted.approval_requests]
    assert len(asked) == 1 and "touch two" in asked[0], asked  # `touch one` ran without asking
    assert (workspace / "one").exists() and not (workspace / "two").exists()


async def test_always_allow_is_not_offered_when_the_settings_file_cannot_be_parsed(open_editor, model, workspace):
    user_settings().write_text("{ not json")
    model.add("first", [command_call("touch one", "c1"), {"text": "done"}])
    editor = await open_editor()
    editor.approval_answers = ["Allow"]
    await editor.wait_stop((await editor.run("first"))["runId"])
    assert [a.title for a in editor.approval_requests[0].actions] == ["Allow", "Allow for session", "Deny"]


def project_rules(workspace: Path, data: dict, local: bool = False) -> None:
    folder = workspace / ".claude"
    folder.mkdir(exist_ok=True)
    (folder / ("settings.local.json" if local else "settings.json")).write_text(json.dumps(data))


async def test_project_allow_rules_need_consent_and_allow_always_is_remembered(open_editor, model, workspace):
    project_rules(workspace, {"permissions": {"allow": ["Bash(touch:*)"]}, "apiKeyHelper": "cat /etc/passwd"})
    model.add("first", [command_call("touch one", "c1"), {"text": "done"}])
    model.add("second", [command_call("touch two", "c2"), {"text": "done"}])
    editor = await open_editor()
    editor.approval_answers = ["Allow always for this workspace"]
    await editor.wait_stop((await editor.run("first"))["runId"])
    [consent] = editor.approval_requests
    assert "Bash(touch:*)" in consent.message and ".claude/settings.json" in consent.message
    assert [a.title for a in consent.actions] == ["Allow", "Allow always for this workspace", "Deny"]
    assert (workspace / "one").exists()
    await editor.quit()

    again = await open_editor()  # a new process: the consent was kept for this workspace
    await again.wait_stop((await again.run("second"))["runId"])
    assert again.approval_requests == [] and (workspace / "two").exists()


async def test_a_denied_consent_leaves_project_allow_rules_out_but_its_deny_rules_apply(open_editor, model, workspace):
    project_rules(workspace, {"permissions": {"allow": ["Bash(touch:*)"], "deny": ["Read(./.env)"]}})
    (workspace / ".env").write_text("TOKEN=hunter2\n")
    model.add("first", [{"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": ".env"}},
                                        {"id": "s", "name": "search", "arguments": {"pattern": "hunter"}}]},
                        command_call("touch one", "c1"), {"text": "done"}])
    editor = await open_editor()
    editor.approval_answers = ["Deny", "Deny"]  # the consent, then the command's own approval
    await editor.wait_stop((await editor.run("first"))["runId"])
    results = tool_messages(model.requests[1])
    assert results["r"].startswith("denied:") and "hunter" not in results["s"]
    assert len(editor.approval_requests) == 2 and "touch one" in editor.approval_requests[1].message
    assert not (workspace / "one").exists()


@pytest.mark.parametrize("rules", [{"permissions": {"allow": ["Bash(git:*)"]}}, {"approval": {"default": "allow"}}])
async def test_a_destructive_command_asks_whatever_allows_it_and_says_why(open_editor, model, workspace, rules):
    model.add("clean", [command_call("git stash drop", "c1"), {"text": "done"}])
    editor = await open_editor(init=rules)
    editor.approval_answers = ["Deny"]
    await editor.wait_stop((await editor.run("clean"))["runId"])
    [request] = editor.approval_requests
    assert "destructive" in request.message and "git stash drop" in request.message
    assert "Always allow" not in [a.title for a in request.actions]


async def test_the_users_claude_code_rules_apply(open_editor, model, workspace):
    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    claude.mkdir(parents=True, exist_ok=True)
    (claude / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(touch:*)"], "deny": ["Bash(rm:*)"]}}))
    model.add("go", [command_call("touch one", "c1"), command_call("rm one", "c2"), {"text": "done"}])
    editor = await open_editor()
    await editor.wait_stop((await editor.run("go"))["runId"])
    assert editor.approval_requests == []
    results = tool_messages(model.requests[-1])
    assert results["c1"].startswith("exit code 0") and results["c2"].startswith("denied:")
    assert (workspace / "one").exists()


def project_hook(workspace: Path) -> Path:
    """A Claude Code PreToolUse hook in the repository's .claude/settings.json that logs each
    command it sees; returns the log's path."""
    log = workspace.parent / "hook-ran.log"
    hook = {"type": "command", "command": f"(cat; echo) >> {log}"}
    project_rules(workspace, {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}})
    return log


async def test_a_project_hook_without_consent_never_runs(open_editor, model, workspace):
    log = project_hook(workspace)
    model.add("first", [command_call("touch one", "c1"), {"text": "done"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    editor.approval_answers = ["Deny"]
    await editor.wait_stop((await editor.run("first"))["runId"])
    [consent] = editor.approval_requests
    assert f"PreToolUse[Bash]: (cat; echo) >> {log}" in consent.message and "hooks" in consent.message
    assert (workspace / "one").exists() and not log.exists(), "a hook without consent never runs"


async def test_a_project_hook_runs_after_consent_which_is_remembered(open_editor, model, workspace):
    log = project_hook(workspace)
    model.add("first", [command_call("touch one", "c1"), {"text": "done"}])
    model.add("second", [command_call("touch two", "c2"), {"text": "done"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    editor.approval_answers = ["Allow always for this workspace"]
    await editor.wait_stop((await editor.run("first"))["runId"])
    assert len(editor.approval_requests) == 1
    await editor.quit()
    again = await open_editor(init={"approval": {"default": "allow"}})  # a new process
    await again.wait_stop((await again.run("second"))["runId"])
    assert again.approval_requests == [], "the consent was remembered"
    assert [json.loads(line)["tool_input"]["command"] for line in log.read_text().splitlines()] == [
        "touch one", "touch two"]


@pytest.mark.parametrize("line", ["{ git stash drop; }", "if true; then git clean --forc; fi"])
async def test_a_destructive_command_inside_a_group_or_a_body_asks_over_lsp(open_editor, model, workspace, line):
    model.add("clean", [command_call(line, "c1"), {"text": "done"}])
    editor = await open_editor(init={"permissions": {"allow": ["Bash(git:*)"]}, "approval": {"default": "allow"}})
    editor.approval_answers = ["Deny"]
    await editor.wait_stop((await editor.run("clean"))["runId"])
    [request] = editor.approval_requests
    assert "destructive" in request.message and "Always allow" not in [a.title for a in request.actions]
    assert tool_messages(model.requests[1])["c1"].startswith("denied:")


async def test_always_allow_is_not_offered_for_a_pattern_and_the_message_says_why(open_editor, model, workspace):
    model.add("list", [command_call("find . -name '*'", "c1"), {"text": "done"}])
    editor = await open_editor()
    editor.approval_answers = ["Allow for session"]
    await editor.wait_stop((await editor.run("list"))["runId"])
    [request] = editor.approval_requests
    assert [a.title for a in request.actions] == ["Allow", "Allow for session", "Deny"]
    assert "Always allow is not offered" in request.message and "`*`, `?` or `[`" in request.message
    assert json.loads(user_settings().read_text()) == {}  # nothing saved
