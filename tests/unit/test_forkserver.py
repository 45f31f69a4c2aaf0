"""The tests' pre-imported parent (tests/forkserver.py, Decision 71): a forked `agent-lsp` answers
as `python -m agent_lsp` does (stdout, stderr, exit code, working directory, environment), and a
launcher killed mid-run takes its child with it (no orphan)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver

REAL = [sys.executable, "-m", "agent_lsp"]


@pytest.fixture
def forked() -> Iterator[None]:
    forkserver.activate(True)
    try:
        yield
    finally:
        forkserver.activate(False)


def both(args: list[str], **kwargs) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    real = subprocess.run([*REAL, *args], capture_output=True, text=True, timeout=60, **kwargs)
    argv = forkserver.rewrite([*REAL, *args])
    assert argv[:4] == [sys.executable, "-I", "-S", forkserver.__file__]
    forked = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)
    return real, forked


@pytest.mark.parametrize("args", [["--version"], ["run"], ["sessions", "--help"], ["no-such-command"]])
def test_a_forked_command_answers_as_the_real_one(forked, args):
    real, fork = both(args, stdin=subprocess.DEVNULL)
    assert (fork.returncode, fork.stdout, fork.stderr) == (real.returncode, real.stdout, real.stderr)


def test_the_child_takes_the_callers_directory_and_environment(forked, tmp_path: Path, workspace: Path):
    state = tmp_path / "elsewhere"
    env = {**os.environ, "AGENT_LSP_STATE_DIR": str(state)}
    real, fork = both(["sessions", "--json"], cwd=workspace, env=env, stdin=subprocess.DEVNULL)
    assert (fork.returncode, fork.stdout) == (real.returncode, real.stdout)
    assert real.returncode == 0


def forked_acp(workspace: Path) -> tuple[subprocess.Popen[bytes], int, list[int]]:
    """A launched `acp` (it waits on its stdin for ever), the fork server and its children once
    the forked child runs."""
    proc = subprocess.Popen(forkserver.rewrite([*REAL, "acp"]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=workspace)
    server = forkserver.server_pid()
    deadline = time.monotonic() + 30
    while not (children := forkserver.children_of(server)):
        assert time.monotonic() < deadline, "the forked child never started"
        time.sleep(0.05)
    return proc, server, children


def test_a_killed_launcher_leaves_no_child(forked, workspace: Path):
    """`acp` waits on its stdin for ever: the launcher's SIGKILL (a test's timeout) ends it."""
    proc, server, children = forked_acp(workspace)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 30
    while set(children) & set(forkserver.children_of(server)):
        assert time.monotonic() < deadline, f"the forked child outlived its launcher: {children}"
        time.sleep(0.05)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.stdout.close()


def test_a_forked_child_that_outlives_its_test_is_named_and_killed(forked, workspace: Path):
    """The editor tests' last check (tests/conftest.py): a forked server still running once its
    test is over (here `acp`, its stdin held open) is named by its directory and killed."""
    proc, _, children = forked_acp(workspace)
    left = forkserver.leftover_children(within=0.2)
    assert left == [f"pid {children[0]} in {workspace}"], left
    assert proc.wait(30) == -signal.SIGKILL  # the launcher repeats its child's death
    assert forkserver.leftover_children(within=0) == []
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.stdout.close()
