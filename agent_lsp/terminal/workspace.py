"""Which folder a CLI command works on when `--workspace` is not given (Decision 46): started
from a subfolder, `sessions`, `rewind`, `run` and `doctor` still find the project the editor or
an earlier run used.

Order: the nearest ancestor of the current folder (itself included) that has agent-lsp state
(sessions or checkpoints in the state dir), else the nearest with `.agent-lsp/`, else the git
root, else the current folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent_lsp.agent.state.sessions import workspace_state


def has_state(state: Path, folder: Path) -> bool:
    """A session or checkpoint store of this folder exists (no folder is created by asking)."""
    here = workspace_state(state, folder)
    return (here / "sessions").is_dir() or (here / "checkpoints" / "runs").is_dir()


def find_workspace(cwd: Path, state: Path) -> Path:
    start = cwd.resolve()
    chain = [start, *start.parents]
    tests: list[Callable[[Path], bool]] = [
        lambda folder: has_state(state, folder),
        lambda folder: (folder / ".agent-lsp").is_dir(),
        lambda folder: (folder / ".git").exists(),  # a file in a worktree or a submodule
    ]
    for test in tests:
        for folder in chain:
            try:
                if test(folder):
                    return folder
            except OSError:  # an unreadable ancestor is not the workspace
                continue
    return start
