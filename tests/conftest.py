"""Shared fixtures: a scripted model server, a sample workspace, an isolated state dir, and a
PATH without the language servers agent-lsp would auto-detect."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer
from tests import beside, forkserver
from tests.demo import thinking

SAMPLE = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "README.md": "# sample\n",
}


# The slow process tests (`slow` marker, pyproject.toml): `./scripts/test-all --fast` leaves them
# out, the default run (and .ci/run) keeps them. Files that start a real third-party language
# server (basedpyright, ty, jedi-language-server: node or a cold index, seconds per start), the
# demo end to end, and tests that wait out a process tree's timeout or signal. One list, so a
# file's slowness is decided in one place; a test may also carry @pytest.mark.slow itself. And
# by measure: the slowest test functions of one recorded run (tests/slow_tests.txt, written by
# scripts/rank-slow) are `slow` too, so --fast stays within its three minutes.
SLOW_FILES = frozenset({
    "acp/test_langservers_acp.py",
    "acp/test_rename_acp.py",
    "benchmarks/test_smoke.py",
    "benchmarks/test_standalone.py",
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
}) | {  # and the slowest of one measured run (scripts/rank-slow writes the file)
    line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    # the jobs played beside the others from the start (tests/beside.py) are read last, when
    # they are over (a file at a time: each of their files goes last; under xdist, see below)
    last = beside.files(BESIDE)
    items.sort(key=lambda item: item.path in last)
    for item in items:
        try:
            name = item.path.relative_to(here).as_posix()
        except ValueError:
            continue
        if name in SLOW_FILES or f"{name}::{item.name.split('[')[0]}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def _vscode_session(module: str) -> Callable[[Path], dict[str, Any]]:
    """A VS Code session of tests/editors/<module>.py, played in this process's thread."""

    def play(folder: Path) -> dict[str, Any]:
        found: dict[str, Any] = _editors_module(module).play(folder, folder.parent / "agent-lsp-vsix")
        return found

    return play


def _editors_module(name: str) -> Any:
    """A module of tests/editors (no package: its modules import each other by name)."""
    editors = str(Path(__file__).parent / "editors")
    if editors not in sys.path:
        sys.path.insert(0, editors)
    return importlib.import_module(name)


def _end_vscode_sessions() -> None:
    _editors_module("test_vscode").kill_marked(_editors_module("test_vscode").MARKER)


def _thinking_demo(folder: Path) -> dict[str, Any]:
    path = _path_without_analysers(lambda name: Path(tempfile.mkdtemp(prefix=name, dir=folder)))
    return thinking.play_beside(folder, path)


# What the controlling pytest process plays beside the workers from the run's start: mostly
# waiting (a person thinking two minutes; code-server driven by a browser, 110-150 s each, of
# which Chromium and code-server use 40-50 s of CPU). The VS Code sessions play one after the
# other, the longest first, at nice 10: they take the CPU the workers leave idle (about a
# quarter of it in a whole run) instead of slowing their tests.
BESIDE = [
    beside.Job("thinking-demo", "demo/test_demo.py", _thinking_demo, lane="thinking",
               timeout=thinking.THINKING + 140, cancel=thinking.cancel,
               tests=frozenset({"test_demo_waits_for_a_person_thinking_over_an_approval"})),
    *([] if os.environ.get("AGENT_LSP_SKIP_VSCODE") == "1" else [
        beside.Job(name, f"editors/{module}.py", _vscode_session(module), lane="vscode", timeout=1500,
                   cancel=_end_vscode_sessions, nice=10)
        for name, module in (("vscode-chat", "test_vscode_chat"), ("vscode", "test_vscode"),
                             ("vscode-code-intel", "test_vscode_code_intel"))]),
]


def pytest_configure(config: pytest.Config) -> None:
    """The controlling pytest process starts what mostly waits (BESIDE) at once, when the run
    will read it, so the waits overlap the other tests instead of holding a worker."""
    beside.start(config, BESIDE)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadfile":
        return beside.last_scheduler(config, log, BESIDE)
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if lines := beside.summary():
        terminalreporter.write_sep("-", "played beside the tests from the run's start")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    beside.stop()


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
    return _path_without_analysers(tmp_path_factory.mktemp)


def _path_without_analysers(make_dir: Callable[[str], Path]) -> str:
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
        shadow = make_dir(f"path{index}")
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


# The pre-imported parent (tests/forkserver.py, CONTRACT Decision 71): in these folders a test's
# `python -m agent_lsp ...` (a CLI run, the ACP agent its node client spawns) is a child forked
# from a server that imported agent_lsp once, instead of a new interpreter importing it all again.
# Tests that check start-up, the environment block, signals, argv, a process's pid or cmdline, a
# terminal, or the key scrub keep a real process: the files in PROCESS_FILES and the tests in
# PROCESS_TESTS. AGENT_LSP_TEST_SUBPROCESS=1 gives every test a real process again;
# AGENT_LSP_TEST_NO_FORK=1 only these (to compare, or to bisect).
FORK_FOLDERS = frozenset({"acp", "e2e", "headless", "reliability"})
# The Neovim and Emacs tests hand the editor the rewritten argv (tests/editors/editor_env.py:
# agent_lsp_command), and each such test ends by checking that no forked child outlived it
# (an editor ends its server by closing its stdin, SIGTERM or killing its process group).
FORK_EDITOR_FILES = frozenset({
    "editors/test_neovim.py", "editors/test_neovim_chat.py", "editors/test_neovim_code_intel.py",
    "editors/test_emacs.py", "editors/test_emacs_chat.py", "editors/test_emacs_code_intel.py",
    "editors/test_emacs_isolation.py",
})
FORK_PROCESS_FILES = frozenset({
    "e2e/test_lifecycle.py",  # start-up, stdin close, exit, orphans: the server's own process
    "e2e/test_reconfigure_lsp.py",  # the server's child processes (its MCP and language servers)
    "headless/test_telemetry_credentials.py",  # what a child's environment holds
    "headless/test_terminal.py",  # a terminal, Ctrl-C
    "headless/test_chat.py",  # a terminal (prompt_toolkit on a pty), Ctrl-C, Ctrl-D
    "reliability/test_key_children.py",  # the key scrub, /proc/<pid>/environ, non-dumpable
    "reliability/test_sandbox_host.py",  # /proc of the run's children
    "reliability/test_sandbox_seccomp.py",  # which modules a process imported
    "reliability/test_newcomer_demo.py",  # signals, a terminal, /proc
})
FORK_PROCESS_TESTS = frozenset({  # "file::test" without parameters
    # signals
    "acp/test_stop_cause.py::test_the_agent_going_away_mid_turn_says_why",
    "headless/test_debugger.py::test_sigint_while_the_debugged_program_runs_ends_it_with_the_run",
    "headless/test_hooks.py::test_a_hook_is_killed_when_the_run_is_cancelled",
    "headless/test_langservers_run.py::test_sigterm_mid_run_leaves_no_language_server",
    "headless/test_run_cli.py::test_sigint_mid_run_exits_130_and_keeps_the_edit",
    "headless/test_worktrees.py::test_a_running_worktree_is_neither_removed_nor_reused",
    "reliability/test_cli_frictions.py::test_the_printed_sample_copy_can_be_run_twice_without_nesting",
    "reliability/test_cli_newcomer.py::test_sigterm_is_reported_as_a_signal_not_as_the_user",
    "reliability/test_cli_output_schema_hostile.py::test_sigterm_ends_the_run_while_the_answer_is_checked",
    "reliability/test_cli_stream_json.py::test_a_signal_mid_run_ends_with_the_cancelled_result_line",
    "reliability/test_hostile_commands.py::test_headless_signals_cancel_kill_the_tree_and_flush",
    "reliability/test_mcp_hostile.py::test_agent_lsp_run_ends_a_stubborn_server_and_its_setsid_helper",
    "reliability/test_mcp_hostile.py::test_sigkill_of_agent_lsp_ends_a_stubborn_server_and_its_setsid_helper",
    "reliability/test_stop_cause.py::test_who_cancelled_the_terminal_run_is_its_cause",
    # a terminal (the process's controlling tty)
    "headless/test_hooks.py::test_the_consent_for_project_hooks_names_hooks_and_offers_always",
    "headless/test_rules_cli.py::test_a_destructive_command_asks_on_a_terminal_even_with_yes",
    "headless/test_rules_cli.py::test_always_allow_on_the_terminal_is_saved_and_the_next_run_does_not_ask",
    "headless/test_rules_cli.py::test_project_allow_rules_are_not_used_without_a_terminal_and_asked_on_one",
    "headless/test_rules_cli.py::test_always_allow_is_not_offered_on_the_terminal_for_a_pattern_and_the_prompt_says_why",
    "headless/test_rules_prompt_files.py::test_a_project_commands_allowed_tools_apply_after_consent_on_the_terminal",
    "headless/test_rules_prompt_files.py::test_a_denied_project_commands_allowed_tools_are_not_applied_and_the_run_says_so",
    "headless/test_run_cli.py::test_approvals_are_asked_on_the_tty",
    "reliability/test_cli_newcomer.py::test_on_a_tty_the_waiting_line_is_erased_when_the_text_comes",
    "reliability/test_cli_stream_json.py::test_a_prompt_from_a_terminal_leaves_no_terminal_to_ask_on",
    "reliability/test_cli_stream_json.py::test_on_a_terminal_stdout_still_holds_only_json_lines",
    "reliability/test_hostile_display.py::test_every_variant_is_escaped_in_the_terminal_approval_prompt",
    "reliability/test_newcomer_cli.py::test_agent_lsp_acp_on_a_tty_prints_a_hint_takes_typing_and_one_ctrl_c_exits_130",
    # the key out of what children get (the environment block)
    "reliability/test_git_config.py::test_git_keeps_the_users_global_config_and_never_sees_the_key",
    "reliability/test_hostile_commands.py::test_commands_do_not_get_the_model_key_whatever_variable_holds_it",
    # process trees, sessions, pids
    "e2e/test_mcp_lsp.py::test_no_mcp_server_outlives_the_language_server",
    "reliability/test_hostile_commands.py::test_a_setsid_descendant_dies_with_the_command",
    "reliability/test_hostile_commands.py::test_a_setsid_descendant_dies_on_cancel",
    # the server's own process: gone once Emacs quit / once agent-lsp-restart replaced it (the
    # pid Emacs holds is the launcher's, and the fork server would kill a child left behind)
    "editors/test_emacs.py::test_run_applies_the_approved_edit_through_eglot",
    "editors/test_emacs.py::test_cancel_stops_a_running_run",
})


class _ForkingPopen(subprocess.Popen):  # type: ignore[type-arg]
    """subprocess.Popen (and so asyncio's subprocesses) with `python -m agent_lsp` forked."""

    def __init__(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(forkserver.rewrite(args), *rest, **kwargs)


@pytest.fixture(autouse=True)
def fork_agent_lsp(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """Whether this test's `python -m agent_lsp` processes are forked (see FORK_FOLDERS)."""
    here = Path(__file__).parent
    try:
        name = request.path.relative_to(here).as_posix()
    except ValueError:
        name = ""
    forked = ((name.split("/")[0] in FORK_FOLDERS or name in FORK_EDITOR_FILES)
              and name not in FORK_PROCESS_FILES
              and f"{name}::{request.node.originalname}" not in FORK_PROCESS_TESTS
              and not os.environ.get("AGENT_LSP_TEST_SUBPROCESS") and not os.environ.get("AGENT_LSP_TEST_NO_FORK"))
    if not forked:
        yield False
        return
    monkeypatch.setattr(subprocess, "Popen", _ForkingPopen)
    forkserver.activate(True)
    try:
        yield True
    finally:
        forkserver.activate(False)
    if name in FORK_EDITOR_FILES:  # the editor is gone by now: so must be what it started
        left = forkserver.leftover_children(within=15)
        if left:
            pytest.fail(f"a forked agent-lsp outlived its editor (killed now): {left}")


@pytest.fixture(scope="session", autouse=True)
def _fork_server_stopped() -> Iterator[None]:
    yield
    forkserver.stop()
