"""Issue 20.1 and 20.17: the agent's own git calls (the snapshots that tell what a command changed)
never run what a repository's config names, never hand git the API key, and never count the
state dir as a workspace change; an allowlisted git command in a repository whose config runs
programs asks (CONTRACT Decision 45, 26)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from agent_lsp.agent.ports import Decision
from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import API_KEY, ScriptedApprover, call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(90)


def git_repo(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "init"], cwd=workspace, check=True)
    return workspace


def trap(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves its environment in a marker file when it runs (and passes its input
    through, so a filter that does run changes nothing else)."""
    marker = tmp_path / "trap-ran.txt"
    script = tmp_path / "trap.sh"
    script.write_text(f"#!/bin/sh\nenv > {marker}\ncat\n")
    script.chmod(0o755)
    return script, marker


def hook_dir(tmp_path: Path, script: Path) -> Path:
    folder = tmp_path / "hooks"
    folder.mkdir(exist_ok=True)
    for name in ("post-index-change", "pre-commit", "reference-transaction"):
        (folder / name).write_text(f"#!/bin/sh\nexec {script} </dev/null\n")
        (folder / name).chmod(0o755)
    return folder


# Each way a repository's own config can name a program that `git add`, `git write-tree`,
# `git diff-index` or `git cat-file` would run (the snapshot's calls).
VARIANTS = {
    "filter clean": ('[filter "x"]\n\tclean = {trap}\n', "* filter=x\n"),
    "filter process": ('[filter "x"]\n\tprocess = {trap}\n\trequired = true\n', "* filter=x\n"),
    "filter via include.path": ('[include]\n\tpath = {extra}\n', "* filter=x\n"),
    "filter via includeIf": ('[includeIf "gitdir:/"]\n\tpath = {extra}\n', "* filter=x\n"),
    "core.fsmonitor": ('[core]\n\tfsmonitor = {trap}\n', None),
    "core.hooksPath": ('[core]\n\thooksPath = {hooks}\n', None),
    "diff textconv": ('[diff "x"]\n\ttextconv = {trap}\n', "* diff=x\n"),
    "diff.external": ('[diff]\n\texternal = {trap}\n', None),
}


def plant(workspace: Path, tmp_path: Path, variant: str) -> Path:
    script, marker = trap(tmp_path)
    config, attributes = VARIANTS[variant]
    extra = tmp_path / "extra.gitconfig"
    extra.write_text(f'[filter "x"]\n\tclean = {script}\n')
    with (workspace / ".git" / "config").open("a") as handle:
        handle.write(config.format(trap=script, extra=extra, hooks=hook_dir(tmp_path, script)))
    if attributes:
        (workspace / ".gitattributes").write_text(attributes)
    return marker


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_repository_config_that_names_a_program_never_runs_it(model, workspace, tmp_path, variant):
    git_repo(workspace)
    marker = plant(workspace, tmp_path, variant)
    model.add([tools_reply(call("run_command", id="c", command="sh -c 'echo new > made.txt'")), {"text": "ok"}])

    proc = run_cli(agent_run(model, workspace, "make a file"))

    assert proc.returncode == 0, proc.stderr
    assert not marker.exists(), f"{variant}: the repository's program ran during a snapshot"
    # The snapshot still works: the command's new file is one of the run's changes.
    assert [Path(u).name for u in report_of(proc.stdout)["editedFiles"]] == ["made.txt"]


def test_a_hook_in_the_repository_never_runs(model, workspace, tmp_path):
    git_repo(workspace)
    script, marker = trap(tmp_path)
    for hook in hook_dir(tmp_path, script).iterdir():
        (workspace / ".git" / "hooks" / hook.name).write_bytes(hook.read_bytes())
        (workspace / ".git" / "hooks" / hook.name).chmod(0o755)
    model.add([tools_reply(call("run_command", id="c", command="sh -c 'echo new > made.txt'")), {"text": "ok"}])

    proc = run_cli(agent_run(model, workspace, "make a file"))

    assert proc.returncode == 0 and not marker.exists()


def test_config_planted_by_a_command_is_not_run_by_the_next_snapshot(model, workspace, tmp_path):
    git_repo(workspace)
    script, marker = trap(tmp_path)
    plant_it = f"sh -c 'printf \"[filter \\\"x\\\"]\\n\\tclean = {script}\\n\" >> .git/config; echo \"* filter=x\" > .gitattributes'"
    model.add([tools_reply(call("run_command", id="a", command=plant_it)),
               tools_reply(call("run_command", id="b", command="ls")),
               tools_reply(call("run_command", id="c", command="sh -c 'echo x >> README.md'")), {"text": "ok"}])

    proc = run_cli(agent_run(model, workspace, "plant"))

    assert proc.returncode == 0, proc.stderr
    assert "filter" in (workspace / ".git" / "config").read_text(), "the command did plant it"
    assert not marker.exists(), "a planted filter ran during a later snapshot"


def test_git_keeps_the_users_global_config_and_never_sees_the_key(model, workspace, tmp_path):
    git_repo(workspace)
    script, marker = trap(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f'[filter "mine"]\n\tclean = {script}\n')
    (workspace / ".gitattributes").write_text("*.md filter=mine\n")
    model.add([tools_reply(call("run_command", id="c", command="sh -c 'echo more >> README.md'")), {"text": "ok"}])
    env = {**os.environ, "HOME": str(home), "ANOTHER_NAME_FOR_IT": API_KEY}

    proc = subprocess.run(agent_run(model, workspace, "append"), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=45, env=env)

    assert proc.returncode == 0, proc.stderr
    assert marker.exists(), "the user's own global filter still applies (their config is kept)"
    seen = marker.read_text()
    assert API_KEY not in seen and "OPENAI_API_KEY" not in seen and "ANOTHER_NAME_FOR_IT" not in seen


@pytest.mark.parametrize("git_repo_here", [True, False], ids=["git", "no-git"])
def test_the_state_dir_inside_the_workspace_is_never_a_change(model, workspace, tmp_path, git_repo_here):
    if git_repo_here:
        git_repo(workspace)
    state = workspace / ".local" / "state"
    model.add([tools_reply(call("run_command", id="a", command="sh -c 'echo one > a.txt'")),
               tools_reply(call("run_command", id="b", command="sh -c 'echo two > b.txt'")), {"text": "ok"}])
    env = {**os.environ, "AGENT_LSP_STATE_DIR": str(state)}

    proc = subprocess.run(agent_run(model, workspace, "two files"), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=45, env=env)

    assert proc.returncode == 0, proc.stderr
    assert any(state.rglob("*.jsonl")), "the state dir is in the workspace and in use"
    assert sorted(Path(u).name for u in report_of(proc.stdout)["editedFiles"]) == ["a.txt", "b.txt"]


# -- an allowlisted git command in such a repository asks ------------------------------------
EXECUTING_KEYS = {
    "core.fsmonitor": "[core]\n\tfsmonitor = /bin/true\n",
    "core.hooksPath": "[core]\n\thooksPath = /tmp\n",
    "core.sshCommand": "[core]\n\tsshCommand = /bin/true\n",
    "core.pager": "[core]\n\tpager = /bin/cat\n",
    "core.editor": "[core]\n\teditor = /bin/true\n",
    "core.askPass": "[core]\n\taskPass = /bin/true\n",
    "sequence.editor": "[sequence]\n\teditor = /bin/true\n",
    "diff.external": "[diff]\n\texternal = /bin/true\n",
    "diff.x.textconv": '[diff "x"]\n\ttextconv = /bin/cat\n',
    "diff.x.command": '[diff "x"]\n\tcommand = /bin/true\n',
    "filter.x.clean": '[filter "x"]\n\tclean = /bin/cat\n',
    "filter.x.smudge": '[filter "x"]\n\tsmudge = /bin/cat\n',
    "filter.x.process": '[filter "x"]\n\tprocess = /bin/cat\n',
    "merge.x.driver": '[merge "x"]\n\tdriver = /bin/true\n',
    "credential.helper": "[credential]\n\thelper = /bin/true\n",
    "gpg.program": "[gpg]\n\tprogram = /bin/true\n",
    "gpg.ssh.program": '[gpg "ssh"]\n\tprogram = /bin/true\n',
    "uploadpack.packObjectsHook": "[uploadpack]\n\tpackObjectsHook = /bin/true\n",
    "alias with !": "[alias]\n\tst = !/bin/true\n",
    "include.path": "[include]\n\tpath = /dev/null\n",
    "includeIf": '[includeIf "gitdir:/"]\n\tpath = /dev/null\n',
    "upper-case spelling": "[CORE]\n\tFSMonitor = /bin/true\n",
    "old subsection spelling": "[filter.x]\n\tclean = /bin/cat\n",
}


@pytest.mark.parametrize("variant", sorted(EXECUTING_KEYS))
async def test_an_allowlisted_git_command_asks_in_a_repository_whose_config_runs_programs(model, workspace, variant):
    git_repo(workspace)
    with (workspace / ".git" / "config").open("a") as handle:
        handle.write(EXECUTING_KEYS[variant])
    model.add([tools_reply(call("run_command", id="c", command="git status")), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)

    await run("status", model, workspace, approver=approver, approval={"allowCommands": ["git status"]})

    assert len(approver.requests) == 1, f"{variant}: ran without asking"
    assert "git config runs programs" in approver.requests[0].detail
    assert last_tool_results(model.requests[-1])["c"].startswith("denied:")


async def test_an_executable_hook_makes_allowlisted_git_ask_and_a_sample_does_not(model, workspace):
    git_repo(workspace)  # git init leaves *.sample hooks: not enough to ask
    model.add([tools_reply(call("run_command", id="a", command="git status")), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)
    hook = workspace / ".git" / "hooks" / "post-index-change"

    await run("status", model, workspace, approver=approver, approval={"allowCommands": ["git status"]})
    assert approver.requests == [], "a clean repository's allowlisted git status runs without asking"

    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    model.add([tools_reply(call("run_command", id="c", command="git status")), {"text": "ok"}])
    await run("status again", model, workspace, approver=approver, approval={"allowCommands": ["git status"]})
    assert len(approver.requests) == 1 and "hook post-index-change" in approver.requests[0].detail


@pytest.mark.parametrize("allowing", ["default allow", "session grant", "shell line"])
async def test_risky_git_asks_above_every_other_allow(model, workspace, allowing):
    git_repo(workspace)
    with (workspace / ".git" / "config").open("a") as handle:
        handle.write("[core]\n\tfsmonitor = /bin/true\n")
    command = "git status && git log" if allowing == "shell line" else "git status"
    answers = [Decision.ALLOW_SESSION] if allowing == "session grant" else []
    model.add([tools_reply(call("run_command", id="a", command=command)),
               tools_reply(call("run_command", id="b", command=command)), {"text": "ok"}])
    approver = ScriptedApprover(*answers, default=Decision.DENY)

    await run("status", model, workspace, approver=approver, approval={"default": "allow"})

    assert len(approver.requests) == 2, "asked for each call, a session grant notwithstanding"


def test_yes_does_not_pass_risky_git_without_a_terminal(model, workspace):
    git_repo(workspace)
    with (workspace / ".git" / "config").open("a") as handle:
        handle.write('[filter "x"]\n\tclean = /bin/cat\n')
    model.add([tools_reply(call("run_command", id="c", command="git status")), {"text": "ok"}])

    proc = run_cli(agent_run(model, workspace, "status"))

    assert proc.returncode == 0, proc.stderr
    result = last_tool_results(model.requests[-1])["c"]
    assert result.startswith("denied:") and "--yes does not cover it" in result and "filter.x.clean" in result

