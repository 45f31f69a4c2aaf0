"""Issue 24 / Decision 37 headless: `agent-lsp doctor` prints what was found of the user's setup,
grouped (and under `setup` with `--json`, the object `agentLsp.setup` answers), and exits 1 when a
file of it is malformed, naming the file and the error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def doctor(workspace: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    settings = write(tmp_path / "settings.json", json.dumps({"model": "replay:none.jsonl"}))
    env = {**os.environ, "HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
           "AGENT_LSP_SETTINGS": str(settings), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace), *extra],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)


def test_doctor_prints_the_setup_grouped_and_exits_1_on_a_malformed_file(workspace, tmp_path):
    write(tmp_path / "claude" / "settings.json", json.dumps({
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/guard.sh"}]}]},
        "apiKeyHelper": "print-key.sh"}))
    write(workspace / ".claude" / "settings.json", json.dumps({
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "make check"}]}]},
        "permissions": {"allow": ["Bash(make:*)"], "deny": ["Read(./.env)"]}}))
    write(tmp_path / "home" / ".agents" / "skills" / "style" / "SKILL.md", "---\nname: style\ndescription: House style.\n---\nx\n")
    write(workspace / ".claude" / "commands" / "explain.md", "---\ndescription: Explain code\n---\nExplain.\n")
    done = doctor(workspace, tmp_path)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "Your setup (what agent-lsp found, and from where):" in out, out
    hooks = out.split("  Hooks:\n")[1].split("\n  Skills:")[0]
    assert f"active        PreToolUse [Bash]: ~/guard.sh  (user: {tmp_path / 'claude' / 'settings.json'})" in hooks, hooks
    assert f"needs-consent Stop: make check  (project: {workspace / '.claude' / 'settings.json'})" in hooks, hooks
    rules = out.split("  Permission rules:\n")[1].split("\n  Hooks:")[0]
    project = workspace / ".claude" / "settings.json"
    assert f"active        deny  Read(./.env)  (project: {project})" in rules, rules
    assert f"needs-consent allow Bash(make:*)  (project: {project})" in rules, rules
    assert "    style: House style.  (user: " in out
    assert "    explain: Explain code  (project: " in out
    assert f"{tmp_path / 'claude' / 'settings.json'}: apiKeyHelper" in out
    assert "  Problems:\n    none" in out

    broken = write(workspace / ".claude" / "agents" / "broken.md", "---\nname: [unclosed\n---\nx\n")
    done = doctor(workspace, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    problems = done.stdout.split("  Problems:\n")[1]
    assert f"    ✗ {broken.resolve()}: " in problems and "YAML" in problems, problems
    assert "Traceback" not in done.stderr

    as_json = json.loads(doctor(workspace, tmp_path, "--json").stdout)
    setup = as_json["setup"]
    assert [p["path"] for p in setup["problems"]] == [str(broken.resolve())]
    assert [(h["event"], h["state"]) for h in setup["hooks"]] == [("PreToolUse", "active"), ("Stop", "needs-consent")]
    assert as_json["checks"]  # the health checks are still there, unchanged
