"""Issue 24 / Decisions 25, 29, 31, 32: hook declarations (sources, trust, consent, problems),
matchers over our and Claude Code's tool names, the reading of a hook's answer, and the payload
names."""

from __future__ import annotations

import json
from pathlib import Path

from agent_lsp.agent.policy.hook_config import HookSpec, declared_hooks, setup_rows
from agent_lsp.agent.policy.hook_exec import HookProcess
from agent_lsp.agent.policy.hook_payload import our_arguments, tool_input, tool_names
from agent_lsp.agent.policy.hooks import interpret
from agent_lsp.settings import resolve, without_untrusted


def spec(event: str = "PreToolUse", matcher: str = "") -> HookSpec:
    return HookSpec(event, matcher, "x", 60, "settings", "user")


def group(command: str, matcher: str = "") -> dict:
    return {"matcher": matcher, "hooks": [{"type": "command", "command": command}]}


def test_matchers_take_our_names_and_claude_codes():
    bash, edit, mcp = tool_names("run_command"), tool_names("edit_file"), tool_names("gh__issue", "gh__issue")
    assert spec(matcher="Bash").matches(bash) and spec(matcher="run_command").matches(bash)
    assert spec(matcher="Edit|Write").matches(edit) and spec(matcher="MultiEdit").matches(edit)
    assert not spec(matcher="Edit|Write").matches(bash) and not spec(matcher="Bas").matches(bash)
    assert spec(matcher="").matches(bash) and spec(matcher="*").matches(mcp)
    assert spec(matcher="mcp__gh__.*").matches(mcp) and spec(matcher="mcp__gh__issue").matches(mcp)
    assert spec(matcher="LS").matches(tool_names("list_files")) and spec(matcher="Grep").matches(tool_names("search"))
    assert spec(matcher="Notebook(").matches(("Notebook(",)), "a bad regex matches its exact text"


def test_sources_consent_and_disable(tmp_path: Path):
    config, root = tmp_path / "config", tmp_path / "ws"
    (root / ".claude").mkdir(parents=True)
    config.mkdir()
    (config / "settings.json").write_text(json.dumps({"hooks": {"Stop": [group("user-stop")]}, "model": "x"}))
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [group("proj", "Bash")]}}))
    (root / ".claude" / "settings.local.json").write_text("{not json")
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    table = declared_hooks({"PostToolUse": [group("ours")], "Nope": []}, [root], env=env)
    states = {s.command: (s.scope, s.state) for s in table.specs}
    assert states == {"ours": ("user", "active"), "user-stop": ("user", "active"), "proj": ("project", "needs-consent")}
    assert any("settings.local.json" in p and "not valid JSON" in p for p in table.problems)
    assert any("`Nope`" in p for p in table.problems)
    assert [r["state"] for r in setup_rows(table)] == ["active", "active", "needs-consent"]
    consented = declared_hooks({}, [root], env=env, consented=lambda s: s.command == "proj")
    assert {s.command: s.state for s in consented.specs}["proj"] == "active"

    # A project cannot switch off the user's hooks; the user's own file can switch off all.
    (root / ".claude" / "settings.json").write_text(json.dumps(
        {"disableAllHooks": True, "hooks": {"PreToolUse": [group("proj", "Bash")]}}))
    states = {s.command: s.state for s in declared_hooks({}, [root], env=env).specs}
    assert states == {"user-stop": "active", "proj": "ignored"}
    (config / "settings.json").write_text(json.dumps({"disableAllHooks": True, "hooks": {"Stop": [group("user-stop")]}}))
    assert {s.state for s in declared_hooks({"Stop": [group("ours")]}, [root], env=env).specs} == {"ignored"}


def test_bad_entries_are_named_and_the_rest_kept(tmp_path: Path):
    table = declared_hooks(
        {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "prompt", "prompt": "?"},
                                                      {"command": "ok", "timeout": -1}, {"nocommand": 1}]}]},
        [tmp_path], env={"CLAUDE_CONFIG_DIR": str(tmp_path / "none")},
    )
    assert [(s.command, s.timeout) for s in table.specs] == [("ok", 60.0)]
    assert len(table.problems) == 3 and any("type `prompt`" in p for p in table.problems)


def test_hooks_are_trusted_and_the_union_of_the_users_sources():
    kept, dropped = without_untrusted({"Hooks": {"Stop": [group("evil")]}, "model": "m"})
    assert dropped == ["Hooks"] and "Hooks" not in kept
    settings, problems = resolve({"hooks": {"Stop": [group("a")]}}, {"hooks": {"Stop": [group("b")],
                                                                            "PreToolUse": [group("c")]}})
    assert not problems
    assert [g["hooks"][0]["command"] for g in settings.hooks["Stop"]] == ["a", "b"]
    assert settings.hooks["PreToolUse"][0]["hooks"][0]["command"] == "c"


def proc(code: int | None, out: str = "", err: str = "", **extra) -> HookProcess:
    return HookProcess(code, out, err, **extra)


def test_the_answer_is_read_as_claude_code_reads_it():
    pre = spec("PreToolUse")
    a = interpret(pre, proc(2, '{"hookSpecificOutput": {"permissionDecision": "allow"}}', "no"))
    assert a.permission == "deny" and a.blocked and a.reason == "no", "exit 2 ignores stdout"
    a = interpret(pre, proc(0, json.dumps({"decision": "approve"})))
    assert a.permission == "allow" and not a.blocked
    a = interpret(pre, proc(0, json.dumps({"decision": "block", "reason": "r"})))
    assert (a.permission, a.reason, a.blocked) == ("deny", "r", True)
    a = interpret(pre, proc(0, json.dumps({"hookSpecificOutput": {"permissionDecision": "ask",
                                                                  "permissionDecisionReason": "sure?",
                                                                  "updatedInput": {"command": "ls"}}})))
    assert (a.permission, a.reason, a.updated_input) == ("ask", "sure?", {"command": "ls"})
    a = interpret(pre, proc(0, json.dumps({"continue": False, "stopReason": "halt",
                                           "hookSpecificOutput": {"permissionDecision": "allow"}})))
    assert a.stop == "halt" and a.blocked, "continue: false beats any decision"
    assert interpret(pre, proc(1, "", "boom")).failed and interpret(pre, proc(None, timed_out=True)).failed
    assert interpret(spec("SessionStart"), proc(0, "ctx")).context == "ctx"
    assert interpret(spec("PostToolUse"), proc(0, "plain")).context is None
    a = interpret(spec("SessionEnd"), proc(2, "", "x"))
    assert not a.blocked and a.message == "x"
    assert interpret(spec("Stop"), proc(2, "", "e" * 900)).message == "e" * 499 + "…"


def test_payload_names_both_ways(tmp_path: Path):
    assert tool_input("write_file", {"path": "a.py", "content": "x"}, tmp_path) == {
        "file_path": str(tmp_path / "a.py"), "content": "x"}
    assert tool_input("search", {"pattern": "p", "ignoreCase": True, "glob": "*.py"}, tmp_path) == {
        "pattern": "p", "glob": "*.py", "-i": True}
    assert tool_input("delegate", {"task": "find callers"}, tmp_path)["subagent_type"] == "general-purpose"
    assert our_arguments("edit_file", {"file_path": str(tmp_path / "b.py"), "old_string": "a", "new_string": "b"},
                         tmp_path) == {"path": "b.py", "old_text": "a", "new_text": "b"}
    assert our_arguments("run_command", {"command": "ls", "timeout": 5000}, tmp_path) == {"command": "ls", "timeout": 5.0}


def test_hooks_read_claude_codes_files_with_the_rules_reader(tmp_path: Path):
    """One reader for Claude Code's files (Decision 29): the hooks name what stops their own
    reading (a file that is not JSON, `hooks` that is not an object), not the rules' problems."""
    config, root = tmp_path / "config", tmp_path / "ws"
    (root / ".claude").mkdir(parents=True)
    config.mkdir()
    (config / "settings.json").write_text(json.dumps({"permissions": {"allow": "Bash"}, "hooks": {"Stop": [group("s")]}}))
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": ["not", "an", "object"]}))
    table = declared_hooks({}, [root], env={"CLAUDE_CONFIG_DIR": str(config)})
    assert [s.command for s in table.specs] == ["s"]
    assert table.problems == [f"{root / '.claude' / 'settings.json'}: `hooks` must be an object, got list"]
