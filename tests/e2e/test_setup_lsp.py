"""Issue 24 / Decision 37 over LSP (the real server as a subprocess, pytest-lsp): `agentLsp.setup {}`
lists what was found of the user's setup and from where (hooks with their consent state, skills,
commands, agents, memory files, language servers, MCP servers), names a malformed file with its
error and the Claude Code keys it does not read, and starts nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent_lsp.mcp.consent import workspace_key
from agent_lsp.permissions.consent import ProjectConsent
from agent_lsp.permissions.source import CONSENT_KIND
from tests.e2e.harness import capabilities

pytestmark = pytest.mark.timeout(60)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def touching(path: Path) -> list[str]:
    """A command that, if it ever started, would leave `path` behind."""
    return [sys.executable, "-c", f"open({str(path)!r}, 'w').close()"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.delenv("AGENT_LSP_SETTINGS", raising=False)
    return home


async def test_setup_lists_what_was_found_and_starts_nothing(open_editor, model, workspace, home, tmp_path):
    claude = tmp_path / "claude-config"
    write(claude / "settings.json", json.dumps({
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/guard.sh"}]}]},
        "apiKeyHelper": "print-key.sh",
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test:*)", "WebFetch"], "defaultMode": "plan"},
    }))
    write(workspace / ".claude" / "settings.json", json.dumps({
        "hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npm run fmt", "timeout": 30}]}]},
        "enableAllProjectMcpServers": True,
        "permissions": {"allow": ["Bash(make:*)"], "deny": ["Read(./.env)"]},
    }))
    write(claude / "skills" / "style" / "SKILL.md", "---\nname: style\ndescription: House style.\n---\nBe brief.\n")
    broken = write(workspace / ".claude" / "skills" / "broken" / "SKILL.md", "---\ndescription: [unclosed\n---\nx\n")
    write(workspace / ".claude" / "commands" / "explain.md", "---\ndescription: Explain code\n---\nExplain $ARGUMENTS.\n")
    write(home / ".agents" / "agents" / "reviewer.md", "---\nname: reviewer\ndescription: Reviews diffs\ntools: read_file\n---\nReview.\n")
    write(workspace / "AGENTS.md", "Use tabs.\n")
    started = tmp_path / "started"
    editor = await open_editor(init={
        "languageServers": {"auto": False, "servers": {"fake": {"command": touching(started / "ls"), "extensions": [".py"]}}},
        "mcpServers": {"tools": {"command": touching(started / "mcp")[0], "args": touching(started / "mcp")[1:]}},
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]},
        "permissions": {"deny": ["Bash(rm:*)"]},
        "approval": {"allowCommands": ["pytest"]},
    })

    assert "agentLsp.setup" in editor.server_capabilities.execute_command_provider.commands
    setup = await editor.execute("agentLsp.setup", {})
    assert set(setup) == {"rules", "hooks", "skills", "commands", "agents", "memoryFiles",
                          "languageServers", "mcpServers", "problems", "ignored"}

    hooks = {(h["event"], h["command"]): h for h in setup["hooks"]}
    assert hooks[("SessionStart", "echo hi")]["scope"] == "user" and hooks[("SessionStart", "echo hi")]["state"] == "active"
    user_hook = hooks[("PreToolUse", "~/guard.sh")]
    assert (user_hook["matcher"], user_hook["source"], user_hook["scope"], user_hook["state"]) == (
        "Bash", str(claude / "settings.json"), "user", "active")
    project_hook = hooks[("PostToolUse", "npm run fmt")]
    assert (project_hook["source"], project_hook["scope"], project_hook["state"], project_hook["timeout"]) == (
        str(workspace / ".claude" / "settings.json"), "project", "needs-consent", 30)

    assert [(s["name"], s["scope"]) for s in setup["skills"] if "error" not in s] == [("style", "user")]
    bad = [s for s in setup["skills"] if "error" in s]
    assert len(bad) == 1 and bad[0]["path"] == str(broken.resolve()) and "YAML" in bad[0]["error"], bad
    assert [(c["name"], c["description"], c["scope"]) for c in setup["commands"]] == [("explain", "Explain code", "project")]
    assert [(a["name"], a["scope"]) for a in setup["agents"]] == [("reviewer", "user")]
    assert {"path": str(workspace / "AGENTS.md"), "present": True} in setup["memoryFiles"]
    assert {"path": str(workspace / ".agent-lsp/memory.md"), "present": False} in setup["memoryFiles"]

    [server] = setup["languageServers"]
    assert (server["name"], server["command"], server["source"], server["state"]) == (
        "fake", touching(started / "ls"), "configured", "active")
    [mcp] = setup["mcpServers"]
    assert (mcp["name"], mcp["state"]) == ("tools", "idle"), mcp

    assert setup["problems"] == [{"path": str(broken.resolve()), "error": bad[0]["error"]}]
    assert sorted((i["path"], i["key"]) for i in setup["ignored"]) == [
        (str(claude / "settings.json"), "apiKeyHelper"),
        (str(claude / "settings.json"), "model"),
        (str(claude / "settings.json"), "permissions.defaultMode"),
        (str(workspace / ".claude" / "settings.json"), "enableAllProjectMcpServers"),
    ]
    user_file, project_file = str(claude / "settings.json"), str(workspace / ".claude" / "settings.json")
    rules = [(r["rule"], r["effect"], r["source"], r["scope"], r["state"]) for r in setup["rules"]]
    assert rules == [
        ("Bash(rm:*)", "deny", "permissions", "user", "active"),
        ("Bash(pytest:*)", "allow", "allowCommands", "user", "active"),
        ("Bash(npm test:*)", "allow", user_file, "user", "active"),
        ("WebFetch", "allow", user_file, "user", "ignored"),
        ("Read(./.env)", "deny", project_file, "project", "active"),  # a project's deny: at once
        ("Bash(make:*)", "allow", project_file, "project", "needs-consent"),  # its allow: asked first
    ], rules
    assert setup["rules"][3]["why"] == "agent-lsp has no such tool"

    # nothing was started: no language server, no MCP server, no hook
    assert not started.exists()


async def test_setup_names_an_unreadable_claude_file_and_the_editor_as_a_source(open_editor, model, workspace, home, tmp_path,
                                                                                 state_dir):
    claude_file = write(tmp_path / "claude-config" / "settings.json", "{not json")
    project_file = write(workspace / ".claude" / "settings.json",
                         json.dumps({"permissions": {"allow": ["Bash(make:*)", "Bash(ls:*)"]}}))
    store = ProjectConsent(state_dir / "project-consent.json")  # the user answered earlier
    store.remember_entry(workspace_key([workspace]), CONSENT_KIND, "Bash(make:*)", "deny")
    store.remember_entry(workspace_key([workspace]), CONSENT_KIND, "Bash(ls:*)", "allow")
    caps = capabilities("visual-studio-code")
    caps.experimental = {"agentLsp": {"codeIntel": True}}
    editor = await open_editor(caps)
    setup = await editor.execute("agentLsp.setup", {})
    [problem] = setup["problems"]
    assert problem["path"] == str(claude_file) and problem["error"].startswith("not valid JSON"), problem
    assert setup["languageServers"][0] == {"name": "editor", "command": [], "source": "editor", "state": "active"}
    assert [(r["rule"], r["source"], r["state"]) for r in setup["rules"]] == [
        ("Bash(make:*)", str(project_file), "denied"), ("Bash(ls:*)", str(project_file), "active")]
