"""The one reader of Claude Code's settings files (Decision 29) and the generic project consent
store (Decision 30): what each file gives, what it ignores, its error; answers per workspace and
entry."""

from __future__ import annotations

import json
from pathlib import Path

from agent_lsp.agent.policy.claude_files import claude_files, read_file, user_file_path
from agent_lsp.permissions.consent import ProjectConsent, entry_key


def test_the_user_file_follows_claude_config_dir_then_home(tmp_path: Path):
    assert user_file_path({"CLAUDE_CONFIG_DIR": str(tmp_path / "c"), "HOME": "/h"}) == tmp_path / "c" / "settings.json"
    assert user_file_path({"HOME": str(tmp_path)}) == tmp_path / ".claude" / "settings.json"


def test_only_permissions_hooks_and_disable_all_hooks_are_read(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({
        "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)", 7], "defaultMode": "acceptEdits"},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]},
        "disableAllHooks": True, "apiKeyHelper": "cat key", "enableAllProjectMcpServers": True,
    }))
    found = read_file(path, "project", tmp_path)
    assert found is not None and found.scope == "project" and found.folder == tmp_path
    assert found.permissions == {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"]}
    assert found.hooks["PreToolUse"][0]["matcher"] == "Bash" and found.disable_all_hooks is True
    assert found.ignored == ["permissions.defaultMode", "apiKeyHelper", "enableAllProjectMcpServers"]
    assert found.error and "not rules" in found.error  # the 7, named


def test_a_malformed_file_is_named_with_its_error_and_the_others_still_read(tmp_path: Path):
    home = tmp_path / "claude"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"permissions": {"ask": ["Bash(git push:*)"]}}))
    root = tmp_path / "ws"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "settings.json").write_text('{"permissions": {"allow": [}')
    (root / ".claude" / "settings.local.json").write_text("[1, 2]")
    files = claude_files([root], {"CLAUDE_CONFIG_DIR": str(home)})
    assert [(f.scope, f.path.name) for f in files] == [("user", "settings.json"), ("project", "settings.json"),
                                                       ("project", "settings.local.json")]
    assert files[0].permissions == {"ask": ["Bash(git push:*)"]} and files[0].error is None
    assert "is not valid JSON" in (files[1].error or "") and "line 1" in (files[1].error or "")
    assert "must hold a JSON object" in (files[2].error or "")
    assert claude_files([tmp_path / "absent"], {"CLAUDE_CONFIG_DIR": str(tmp_path / "none")}) == []


def test_consent_is_kept_per_workspace_and_per_entry_as_written(tmp_path: Path):
    store = ProjectConsent(tmp_path / "consent.json")
    store.remember_entry("/ws", "permissions.allow", "Bash(npm test:*)", "allow", "/ws/.claude/settings.json")
    store.remember_entry("/ws", "hook", "echo hi", "deny")
    assert store.answer("/ws", "permissions.allow", "Bash(npm test:*)") == "allow"
    assert store.answer("/ws", "permissions.allow", "Bash(npm test:* )") is None  # not the same text
    assert store.answer("/other", "permissions.allow", "Bash(npm test:*)") is None
    assert store.answer("/ws", "hook", "echo hi") == "deny"
    assert entry_key("hook", "x") != entry_key("permissions.allow", "x")
    assert (tmp_path / "consent.json").stat().st_mode & 0o077 == 0
