"""Shared fixtures: a scripted model server, a sample workspace, an isolated state dir, and a
PATH without the language servers agent-lsp would auto-detect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer

SAMPLE = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "README.md": "# sample\n",
}


# The slow process tests (`slow` marker, pyproject.toml): `./scripts/test-all --fast` leaves them
# out, the default run (and .ci/run) keeps them. Files that start a real third-party language
# server (basedpyright, ty, jedi-language-server: node or a cold index, seconds per start), the
# demo end to end, and tests that wait out a process tree's timeout or signal. One list, so a
# file's slowness is decided in one place; a test may also carry @pytest.mark.slow itself.
SLOW_FILES = frozenset({
    "acp/test_langservers_acp.py",
    "acp/test_rename_acp.py",
    "benchmarks/test_smoke.py",
    "demo/test_demo.py",
    "e2e/test_code_intel_editor.py",
    "e2e/test_code_intel_lsp.py",
    "e2e/test_langservers_lsp.py",
    "e2e/test_rename_preview.py",
    "headless/test_code_intel_run.py",
    "headless/test_langservers_run.py",
    "headless/test_rules_code_intel.py",
    "langservers/test_cold_start.py",
    "langservers/test_real_servers.py",
    "reliability/test_code_intel_real.py",
    "reliability/test_newcomer_demo.py",
})
SLOW_TESTS = frozenset({  # "file::test" without parameters
    "reliability/test_hostile_commands.py::test_a_setsid_descendant_dies_with_the_command",
    "reliability/test_hostile_commands.py::test_a_setsid_descendant_dies_on_cancel",
    "reliability/test_hostile_commands.py::test_headless_signals_cancel_kill_the_tree_and_flush",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        try:
            name = item.path.relative_to(here).as_posix()
        except ValueError:
            continue
        if name in SLOW_FILES or f"{name}::{item.name.split('[')[0]}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in SAMPLE.items():
        (root / name).write_text(text)
    return root


# The test extra installs ty and basedpyright next to python: on PATH, every front end would
# start them (languageServers.auto) and offer their diagnostics. Tests get a PATH whose folders
# hold everything but these; tests of the started servers put them back (tests/langservers).
ANALYSERS = frozenset({"ty", "basedpyright-langserver", "pyright-langserver", "pyrefly"})


@pytest.fixture(scope="session")
def path_without_analysers(tmp_path_factory: pytest.TempPathFactory) -> str:
    parts = []
    for index, entry in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        folder = Path(entry)
        try:
            names = {p.name for p in folder.iterdir()} if entry and folder.is_dir() else set()
        except OSError:
            names = set()
        if not names & ANALYSERS:
            parts.append(entry)
            continue
        shadow = tmp_path_factory.mktemp(f"path{index}")
        for name in sorted(names - ANALYSERS):
            (shadow / name).symlink_to(folder / name)
        parts.append(str(shadow))
    return os.pathsep.join(parts)


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_without_analysers: str) -> Path:
    monkeypatch.setenv("PATH", path_without_analysers)
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
