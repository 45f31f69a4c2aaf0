"""The setup view's pieces (agent_lsp/setup_view.py, Decision 37): memory files present as the
run would read them, problems split into {path, error}, the readable lines doctor prints."""

from __future__ import annotations

from pathlib import Path

from agent_lsp.setup_view import _split, memory_rows, setup_lines


def test_memory_files_are_present_only_where_a_run_reads_them(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("x")
    outside = tmp_path / "secret.md"
    outside.write_text("x")
    (root / "LINK.md").symlink_to(outside)
    absolute = tmp_path / "mine.md"
    absolute.write_text("x")
    rows = memory_rows(["AGENTS.md", "LINK.md", "NONE.md", str(absolute)], [root])
    assert rows == [
        {"path": str(root / "AGENTS.md"), "present": True},
        {"path": str(root / "LINK.md"), "present": False},  # resolves outside its folder
        {"path": str(root / "NONE.md"), "present": False},
        {"path": str(absolute), "present": True},
    ]


def test_problems_are_split_at_the_known_file_path():
    known = ["/a b: c/settings.json"]
    assert _split("/a b: c/settings.json: not valid JSON: x", known) == {
        "path": "/a b: c/settings.json", "error": "not valid JSON: x"}
    assert _split("/w/.mcp.json: mcpServers.x: `command` must be a string", []) == {
        "path": "/w/.mcp.json", "error": "mcpServers.x: `command` must be a string"}
    assert _split("something odd", []) == {"path": "", "error": "something odd"}


def test_lines_are_grouped_and_an_empty_group_says_none():
    setup = {k: [] for k in ("rules", "skills", "commands", "agents", "memoryFiles",
                             "languageServers", "mcpServers", "ignored")}
    setup["hooks"] = [{"event": "PreToolUse", "matcher": "Bash", "command": "guard.sh", "timeout": 60.0,
                       "source": "/u/settings.json", "scope": "user", "state": "active"}]
    setup["problems"] = [{"path": "/w/x.md", "error": "bad YAML"}]
    lines = setup_lines(setup)
    assert lines[:4] == [("head", "Permission rules"), ("none", "none"), ("head", "Hooks"),
                         ("row", "active        PreToolUse [Bash]: guard.sh  (user: /u/settings.json)")]
    assert lines[-2:] == [("head", "Problems"), ("bad", "/w/x.md: bad YAML")]


async def test_a_projects_agent_lsp_settings_lists_every_key_but_verify_as_not_read(tmp_path: Path):
    """Decision 83: `.agent-lsp/settings.json` is read for `verify` only; setup names the rest."""
    import json

    from agent_lsp.settings import Settings
    from agent_lsp.setup_view import gather_setup

    (tmp_path / ".agent-lsp").mkdir()
    (tmp_path / ".agent-lsp" / "settings.json").write_text(
        json.dumps({"verify": {"commands": ["pytest -q"]}, "model": "x", "approval": {"default": "allow"}}))
    setup = await gather_setup(Settings(), [tmp_path], env={"CLAUDE_CONFIG_DIR": str(tmp_path / "none")})
    path = str(tmp_path / ".agent-lsp" / "settings.json")
    assert [r for r in setup["ignored"] if r["path"] == path] == [
        {"path": path, "key": "approval (only verify is read)"},
        {"path": path, "key": "model (only verify is read)"},
    ]
