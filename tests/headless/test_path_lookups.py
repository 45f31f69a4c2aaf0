"""Issue 32 P7 / Decision 62: the programs agent-lsp starts itself (git for snapshots, the
auto-detected language server, the hook shell, a command's program) are looked up only in PATH's
absolute entries: a repository's own `./git`, `./ty`, `./bash` never run through an empty, `.` or
relative PATH entry. The real CLI against the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of
from tests.headless.test_worktrees import git_repo
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(120)

TRAPPED = ("git", "ty", "bash", "sh", "basedpyright-langserver", "pyright-langserver", "pyrefly")


def plant(folder: Path, marker: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name in TRAPPED:
        trap = folder / name
        trap.write_text(f'#!/bin/sh\necho "{folder.name}/{name} $*" >> {marker}\nexit 1\n')
        trap.chmod(0o755)


@pytest.mark.parametrize("shape", ["empty-first", "dot-and-relative", "double-colon-and-trailing"])
def test_a_repository_s_own_programs_never_run_through_the_path(model, workspace, tmp_path, shape):
    git_repo(workspace)
    marker = tmp_path / "trap-ran.txt"
    plant(workspace, marker)
    plant(workspace / "bin", marker)
    real = os.environ["PATH"]
    path = {
        "empty-first": f":{real}",
        "dot-and-relative": f".:bin:{real}",
        "double-colon-and-trailing": f"{real.replace(os.pathsep, '::', 1)}:",
    }[shape]
    hook_log = tmp_path / "hook.txt"
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [
        {"matcher": "", "hooks": [{"type": "command", "command": f"echo hooked >> {hook_log}"}]}]}}))
    model.add([
        tools_reply(call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")),
        tools_reply(call("find_definition", id="d", path="calc.py", line=1, symbol="add")),
        tools_reply(call("run_command", id="g", command="git --version")),
        {"text": "done"},
    ])

    proc = subprocess.run(agent_run(model, workspace, "fix add", "--settings", str(settings)),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90,
                          cwd=workspace, env={**os.environ, "PATH": path})

    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), f"a program of the repository ran: {marker.read_text()}"
    assert report_of(proc.stdout)["stopReason"] == "done"
    assert "return a + b" in (workspace / "calc.py").read_text()
    assert hook_log.read_text() == "hooked\n", "the hook ran, under the real shell"
    assert "git version" in last_tool_results(model.requests[-1])["g"], "the real git ran"
