"""Shared fixtures: a scripted model server, a sample workspace, an isolated state dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer

SAMPLE = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "README.md": "# sample\n",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in SAMPLE.items():
        (root / name).write_text(text)
    return root


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("AGENT_LSP_STATE_DIR", str(state))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key-1234567890")
    # Never the machine's own Claude Code rules (Decision 29), and "Always allow" never writes
    # the machine's own user settings file (Decision 27).
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    user_settings = tmp_path / "user-settings.json"
    user_settings.write_text("{}\n")
    monkeypatch.setenv("AGENT_LSP_SETTINGS", str(user_settings))
    for name in ("AGENT_LSP_MODEL", "AGENT_LSP_BASE_URL", "AGENT_LSP_MAX_TURNS", "AGENT_LSP_TRANSCRIPT_DIR", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return state


@pytest.fixture
def model():
    server = ScriptedModelServer()
    with server:
        yield server
