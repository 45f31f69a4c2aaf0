"""`agent-lsp run --worktree` and `agent-lsp worktrees` end to end (issue 25, CONTRACT Decision
42): the real CLI as subprocesses against the scripted model server, the data dir in tmp."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(120)

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


@pytest.fixture(autouse=True)
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """platformdirs' user data dir follows XDG_DATA_HOME: the worktrees land in tmp."""
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=n", *args], cwd=folder, check=True,
                          capture_output=True, text=True).stdout


def git_repo(workspace: Path) -> Path:
    git(workspace, "init", "-q")
    (workspace / ".gitignore").write_text("*.log\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "init")
    return workspace


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_lsp", *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, cwd=cwd)


def listed(workspace: Path) -> dict[str, dict]:
    proc = cli("worktrees", "--workspace", str(workspace), "--json")
    assert proc.returncode == 0, proc.stderr
    return {item["name"]: item for item in json.loads(proc.stdout)}


def test_uncommitted_changes_are_carried_over_and_the_run_works_in_the_worktree(model, workspace, data_home):
    git_repo(workspace)
    (workspace / "README.md").write_text("# staged\n")
    git(workspace, "add", "README.md")
    (workspace / "test_calc.py").write_text("# unstaged\n")
    (workspace / "notes.txt").write_text("untracked\n")
    (workspace / "debug.log").write_text("ignored\n")
    model.add([tools_reply(FIX), tools_reply(call("read_file", id="r", path="notes.txt")), {"text": "fixed"}])

    proc = run_cli(agent_run(model, workspace, "fix add", "--worktree", "w1"))

    assert proc.returncode == 0, proc.stderr
    report = report_of(proc.stdout)
    tree = Path(report["worktree"]["path"])
    assert report["worktree"]["branch"] == "agent/w1" and tree.name == "w1"
    assert tree.parent.parent == data_home / "agent-lsp" / "worktrees"
    # Decision 70: the last line says how to see the run's change and how to take it.
    assert proc.stderr.rstrip().splitlines()[-1] == (
        f"worktree: {tree} · branch agent/w1 · see the run's change: git diff agent/w1~1 agent/w1"
        " · take it: git merge agent/w1")
    # Carried over: staged, unstaged, untracked; the ignored file stays behind.
    assert (tree / "README.md").read_text() == "# staged\n" and (tree / "test_calc.py").read_text() == "# unstaged\n"
    assert (tree / "notes.txt").read_text() == "untracked\n" and not (tree / "debug.log").exists()
    # Committed on the branch as two commits by agent-lsp: what was carried over, then the run's.
    assert git(tree, "status", "--porcelain") == "", "nothing left uncommitted"
    assert git(tree, "branch", "--show-current").strip() == "agent/w1"
    log = git(workspace, "log", "--format=%s|%an <%ae>|%cn <%ce>", "agent/w1").splitlines()
    me = "agent-lsp <agent-lsp@localhost>"
    assert log == [f"agent-lsp {report['runId']}: fix add|{me}|{me}", f"carried over from the workspace|{me}|{me}",
                   "init|n <a@b>|n <a@b>"]
    assert git(workspace, "rev-parse", "agent/w1~2") == git(workspace, "rev-parse", "HEAD")
    carried = git(workspace, "diff", "--name-status", "agent/w1~2", "agent/w1~1").splitlines()
    assert sorted(carried) == ["A\tnotes.txt", "M\tREADME.md", "M\ttest_calc.py"]
    # The printed command shows exactly the run's change.
    change = git(workspace, "diff", "agent/w1~1", "agent/w1")
    assert "-    return a - b\n+    return a + b" in change and change.count("diff --git") == 1
    # The run worked there only: the edit, the file it read, the report's paths.
    assert "return a + b" in (tree / "calc.py").read_text() and "return a - b" in (workspace / "calc.py").read_text()
    assert "untracked" in last_tool_results(model.requests[2])["r"]
    assert report["editedFiles"] == [(tree / "calc.py").as_uri()]
    assert sorted(git(workspace, "status", "--porcelain").splitlines()) == sorted([
        "?? notes.txt", "M  README.md", " M test_calc.py"]), "the workspace itself is untouched"


def test_two_parallel_runs_never_see_each_others_changes(model, workspace):
    git_repo(workspace)
    for name in ("a", "b"):
        model.add(f"task {name}", [
            tools_reply(call("write_file", path=f"{name}.txt", content=f"{name}\n")),
            tools_reply(call("run_command", id="ls", command="ls"), ttft=1.5),  # the other run writes meanwhile
            {"text": f"{name} done"},
        ])
    procs = {name: subprocess.Popen(agent_run(model, workspace, f"task {name}", "--worktree", name),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")}
    outs = {name: proc.communicate(timeout=60) for name, proc in procs.items()}

    for name, other in (("a", "b"), ("b", "a")):
        assert procs[name].returncode == 0, outs[name][1]
        tree = Path(report_of(outs[name][0])["worktree"]["path"])
        assert (tree / f"{name}.txt").exists() and not (tree / f"{other}.txt").exists()
        ls = last_tool_results(model.requests_for(f"task {name}")[-1])["ls"]
        assert f"{name}.txt" in ls and f"{other}.txt" not in ls
    assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


def test_list_and_remove_keep_work_and_the_branch(model, workspace):
    git_repo(workspace)
    model.add("edit", [tools_reply(FIX), {"text": "edited"}])
    model.add("look", [{"text": "nothing to change"}])
    edited = report_of(run_cli(agent_run(model, workspace, "edit", "--worktree", "dirty")).stdout)
    assert report_of(run_cli(agent_run(model, workspace, "look", "--worktree", "clean")).stdout)["stopReason"] == "done"
    # The run's edit is committed (Decision 70); a change made after the run is not.
    (Path(edited["worktree"]["path"]) / "later.txt").write_text("after the run\n")

    items = listed(workspace)
    assert set(items) == {"dirty", "clean"}
    item = items["dirty"]
    assert item["path"] == edited["worktree"]["path"] and item["branch"] == "agent/dirty"
    assert item["runId"] == edited["runId"] and item["running"] is False and item["dirty"] is True
    assert item["created"].endswith("Z") and items["clean"]["dirty"] is False

    refused = cli("worktrees", "remove", "dirty", "--workspace", str(workspace))
    assert refused.returncode == 1 and "uncommitted" in refused.stderr and Path(item["path"]).is_dir()
    assert cli("worktrees", "remove", "nope", "--workspace", str(workspace)).returncode == 2
    for name, extra in (("dirty", ["--force"]), ("clean", [])):
        removed = cli("worktrees", "remove", name, *extra, "--workspace", str(workspace))
        assert removed.returncode == 0, removed.stderr
        assert f"branch agent/{name} is kept" in removed.stdout
        assert git(workspace, "branch", "--list", f"agent/{name}").strip()
    assert listed(workspace) == {}
    again = run_cli(agent_run(model, workspace, "edit", "--worktree", "clean"))
    assert again.returncode == 2 and "git branch -D agent/clean" in again.stderr, "a kept branch is never reset"
    assert not Path(item["path"]).exists()
    assert git(workspace, "worktree", "list").count("\n") == 1, "git knows no worktree of ours any more"
    text = cli("worktrees", "--workspace", str(workspace))
    assert text.returncode == 0 and "no worktrees" in text.stdout


def test_a_running_worktree_is_neither_removed_nor_reused(model, workspace):
    git_repo(workspace)
    model.add("slow", [{"text": "late", "ttft": 30}])
    model.add("second", [{"text": "never"}])
    proc = subprocess.Popen(agent_run(model, workspace, "slow", "--worktree", "busy"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not model.log:  # the run is waiting for its model
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert listed(workspace)["busy"]["running"] is True
        refused = cli("worktrees", "remove", "busy", "--force", "--workspace", str(workspace))
        assert refused.returncode == 1 and "running" in refused.stderr
        again = run_cli(agent_run(model, workspace, "second", "--worktree", "busy"))
        assert again.returncode == 2 and "running" in again.stderr
        assert model.requests_for("second") == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert listed(workspace)["busy"]["running"] is False, "the lock goes with the process"


def test_a_workspace_outside_git_is_refused(model, workspace, data_home):
    proc = run_cli(agent_run(model, workspace, "anything", "--worktree"))

    assert proc.returncode == 2 and "git" in proc.stderr and proc.stdout == ""
    assert model.requests == [] and not (data_home / "agent-lsp" / "worktrees").exists()
    bad = run_cli(agent_run(model, git_repo(workspace), "anything", "--worktree", "../up"))
    assert bad.returncode == 2 and "NAME" in bad.stderr


def test_an_idle_name_is_reused_and_its_session_continues(model, workspace):
    git_repo(workspace)
    model.add("first", [tools_reply(FIX), {"text": "one"}])
    model.add("first", [{"text": "two"}])  # the continued session's first message is still "first"
    first = report_of(run_cli(agent_run(model, workspace, "first", "--worktree", "re")).stdout)

    second = run_cli(agent_run(model, workspace, "more", "--session", first["sessionId"], "--worktree", "re"))

    assert second.returncode == 0, second.stderr
    report = report_of(second.stdout)
    assert report["worktree"] == first["worktree"] and report["sessionId"] == first["sessionId"]
    contents = [m.get("content") for m in model.requests[-1]["messages"]]
    assert "one" in contents and "more" in str(contents), "the model saw the earlier run"
    assert "return a + b" in (Path(first["worktree"]["path"]) / "calc.py").read_text(), "nothing was made anew"
    assert listed(workspace)["re"]["runId"] == report["runId"]
    # Decision 70: the continued run's commit goes on top of the first run's.
    assert git(workspace, "log", "--format=%s", "agent/re").splitlines() == [
        f"agent-lsp {report['runId']}: more", f"agent-lsp {first['runId']}: first",
        "carried over from the workspace", "init"]
    assert "return a + b" in git(workspace, "diff", "agent/re~2", "agent/re~1")
    unnamed = run_cli(agent_run(model, workspace, "more", "--session", first["sessionId"], "--worktree"))
    assert unnamed.returncode == 2 and "NAME" in unnamed.stderr


def test_rewind_works_inside_the_worktree(model, workspace):
    git_repo(workspace)
    model.add([tools_reply(FIX), {"text": "fixed"}])

    proc = run_cli(agent_run(model, workspace, "fix add", "--worktree", "rw", json_report=False))

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    tree = Path(lines[-1].split("worktree: ")[1].split(" · ")[0])
    assert lines[-1].startswith(f"worktree: {tree} · branch agent/rw · "), "the last line names the worktree and its branch"
    hint = next(line for line in lines if "rewind with" in line)
    assert f"--workspace {tree}" in hint
    run_id = hint.split("`agent-lsp rewind ")[1].split()[0]
    assert "return a + b" in (tree / "calc.py").read_text()

    rewound = cli("rewind", run_id, cwd=tree)  # from inside the worktree, no --workspace needed

    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert "return a - b" in (tree / "calc.py").read_text()
    assert "return a - b" in (workspace / "calc.py").read_text()


def test_a_repository_config_naming_programs_never_runs_them(model, workspace, tmp_path):
    """Filters (clean, smudge, process), fsmonitor, hooksPath and hooks in .git/hooks: none runs
    while a worktree is made (with changes to carry), used, listed and removed."""
    (workspace / ".gitattributes").write_text("* filter=x diff=x\n")  # committed: a checkout would smudge
    git_repo(workspace)
    marker = tmp_path / "trap-ran.txt"
    trap = tmp_path / "trap.sh"
    trap.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n")
    trap.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "reference-transaction", "post-index-change", "pre-commit"):
        for folder in (hooks, workspace / ".git" / "hooks"):
            (folder / hook).write_text(f"#!/bin/sh\nexec {trap} </dev/null\n")
            (folder / hook).chmod(0o755)
    with (workspace / ".git" / "config").open("a") as config:
        config.write(f'[filter "x"]\n\tclean = {trap}\n\tsmudge = {trap}\n\tprocess = {trap}\n\trequired = true\n'
                     f'[core]\n\tfsmonitor = {trap}\n\thooksPath = {hooks}\n[diff "x"]\n\ttextconv = {trap}\n')
    (workspace / "calc.py").write_text((workspace / "calc.py").read_text() + "# changed\n")  # something to carry
    (workspace / "new.txt").write_text("new\n")
    model.add([tools_reply(call("write_file", path="made.txt", content="made\n")), {"text": "ok"}])

    proc = run_cli(agent_run(model, workspace, "make a file", "--worktree", "trapped"))

    assert proc.returncode == 0, proc.stderr
    tree = Path(report_of(proc.stdout)["worktree"]["path"])
    assert (tree / "calc.py").read_text().endswith("# changed\n") and (tree / "new.txt").exists()
    assert listed(workspace)["trapped"]["dirty"] is False, "committed, without running anything"
    assert git(workspace, "log", "--format=%s", "agent/trapped").splitlines()[:2] == [
        f"agent-lsp {report_of(proc.stdout)['runId']}: make a file", "carried over from the workspace"]
    removed = cli("worktrees", "remove", "trapped", "--force", "--workspace", str(workspace))
    assert removed.returncode == 0, removed.stderr
    assert not marker.exists(), f"the repository's program ran: {marker.read_text()}"
    subprocess.run(["git", "status"], cwd=workspace, capture_output=True, check=False)
    assert marker.exists(), "the trap is armed: the user's own git runs it"


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed")
def test_with_the_sandbox_on_only_the_worktree_is_writable(model, workspace, tmp_path):
    git_repo(workspace)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"sandbox": {"mode": "workspace-write"}, "approval": {"default": "allow"}}))
    outside = workspace / "outside.txt"
    model.add([tools_reply(call("run_command", id="c", command=f"sh -c 'echo in > inside.txt; echo out > {outside}'")),
               {"text": "ok"}])

    proc = run_cli(agent_run(model, workspace, "write", "--worktree", "boxed", "--settings", str(settings)))

    assert proc.returncode == 0, proc.stderr
    tree = Path(report_of(proc.stdout)["worktree"]["path"])
    assert (tree / "inside.txt").read_text() == "in\n"
    assert not outside.exists(), "the workspace the worktree came from is not writable"
    assert "sandbox" in last_tool_results(model.requests[-1])["c"] or "Read-only" in last_tool_results(model.requests[-1])["c"]


def test_the_stream_json_result_names_the_worktree(model, workspace):
    """Decision 42's `worktree: {path, branch}` is in the report whatever the output format:
    stream-json's last line carries it too."""
    git_repo(workspace)
    model.add([tools_reply(FIX), {"text": "fixed"}])

    proc = run_cli(agent_run(model, workspace, "fix add", "--worktree", "sj", "--output-format", "stream-json",
                             json_report=False))

    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    result = lines[-1]
    assert result["type"] == "result" and result["report"]["worktree"]["branch"] == "agent/sj"
    tree = Path(result["report"]["worktree"]["path"])
    assert "return a + b" in (tree / "calc.py").read_text()
    assert {line["runId"] for line in lines[:-1]} == {result["report"]["runId"]}


def test_remove_without_force_keeps_a_nested_repository_s_uncommitted_work(model, workspace):
    """Issue 32 P8: the worktree itself is clean (the nested repository is committed as a commit
    id), but the nested repository holds changed and untracked files: refused, nothing deleted."""
    git_repo(workspace)
    model.add([{"text": "nothing to do"}])
    tree = Path(report_of(run_cli(agent_run(model, workspace, "look", "--worktree", "nest")).stdout)["worktree"]["path"])
    inner = tree / "lib"
    inner.mkdir()
    (inner / "a.txt").write_text("committed\n")
    git(inner, "init", "-q")
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "lib")
    git(tree, "add", "lib")
    git(tree, "commit", "-qm", "add lib")
    assert listed(workspace)["nest"]["dirty"] is False, "clean as committed"
    (inner / "a.txt").write_text("changed, not committed\n")
    (inner / "new.txt").write_text("untracked\n")

    refused = cli("worktrees", "remove", "nest", "--workspace", str(workspace))

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "uncommitted" in refused.stderr and "lib/a.txt" in refused.stderr and "--force" in refused.stderr
    assert (inner / "a.txt").read_text() == "changed, not committed\n" and (inner / "new.txt").exists()
    assert listed(workspace)["nest"]["dirty"] is True
    (inner / "a.txt").write_text("committed\n")
    (inner / "new.txt").unlink()
    assert cli("worktrees", "remove", "nest", "--workspace", str(workspace)).returncode == 0, "clean again: removed"
    assert not tree.exists()
