"""Issue 10.4, 10.7, 10.12, 10.13: commands that try to get more than they were allowed. Allowlist
prefixes that would write outside, the model's key in a command's environment, descendants that
escape a timeout or a cancel, SIGHUP, and output past what is kept."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.ports import Decision
from tests.unit.kit import (
    API_KEY,
    Events,
    ScriptedApprover,
    alive,
    call,
    last_tool_results,
    make_settings,
    run,
    tools_reply,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def git_workspace(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-q", "--allow-empty", "-m", "i"], cwd=workspace, check=True)
    return workspace


# -- 10.4 / Decision 11: allowCommands ---------------------------------------------------------
@pytest.mark.parametrize("command", [
    "git diff --output=/tmp/agent-lsp-pwned-{n}",
    "git diff --output /tmp/agent-lsp-pwned-{n}",
    "git diff -o/tmp/agent-lsp-pwned-{n}",
    "git -c core.pager=touch diff",
    "git -C /tmp diff",
    "git --git-dir=/tmp diff",
    "git --work-tree=/ diff",
    "git diff --ext-diff",
    "git format-patch --output-directory /tmp/agent-lsp-pwned-{n} HEAD",
    "git diff ../../outside",
    "git diff /etc/passwd",
    "git diff ~/secret",
])
async def test_an_allowlisted_prefix_with_a_write_anywhere_option_still_asks(model, git_workspace, command):
    command = command.format(n=os.getpid())
    model.add([tools_reply(call("run_command", id="c", command=command)), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)
    await run("diff", model, git_workspace, approver=approver, approval={"allowCommands": ["git diff", "git", "git format-patch"]})
    assert len(approver.requests) == 1, "asked, not run unasked"
    assert last_tool_results(model.requests[-1])["c"].startswith("denied:")
    assert not Path(f"/tmp/agent-lsp-pwned-{os.getpid()}").exists()


@pytest.mark.parametrize(("entry", "command", "asked"), [
    ("git status $", "git status", False),
    ("git status $", "git status --short", True),
    ("exact:git status", "git status", False),
    ("exact:git status", "git status -uall", True),
    ("git status", "git status --short", False),
    ("pytest", "pytest tests/unit", False),
])
async def test_exact_entries_match_the_whole_argv_only(model, git_workspace, entry, command, asked):
    model.add([tools_reply(call("run_command", id="c", command=command)), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)
    await run("status", model, git_workspace, approver=approver, approval={"allowCommands": [entry]})
    assert (len(approver.requests) == 1) == asked


# -- 10.7: the key never reaches a command ------------------------------------------------------
async def test_commands_do_not_get_the_model_key_whatever_variable_holds_it(model, workspace):
    env = {**os.environ, "OPENAI_API_KEY": API_KEY, "MY_KEY": "sk-other-secret-key-99999", "ALIAS": API_KEY}
    model.add([tools_reply(call("run_command", id="c", command="env")), {"text": "ok"}])
    await run("env", model, workspace, env=env, apiKeyEnv="MY_KEY", approval={"default": "allow"})
    output = last_tool_results(model.requests[-1])["c"]
    assert "PATH=" in output
    for banned in ("OPENAI_API_KEY", "MY_KEY=", "ALIAS=", API_KEY, "sk-other-secret-key-99999"):
        assert banned not in output, banned


# -- 10.12: nothing escapes ---------------------------------------------------------------------
ESCAPER = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    ready, told = os.pipe()
    if os.fork() == 0:
        open(sys.argv[1], "w").write(str(os.getpid()))
        os.write(told, b"x")
        time.sleep(300)
    os.read(ready, 1)  # the command ends only once the grandchild has said where it is
    os._exit(0)
os.waitpid(pid, 0)
{tail}
"""


async def _escaper_pid(marker: Path) -> int:
    for _ in range(500):
        if marker.exists() and marker.read_text():
            return int(marker.read_text())
        await asyncio.sleep(0.02)
    raise AssertionError("the escaping child never started")


async def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize("ending", ["exit", "timeout"])
async def test_a_setsid_descendant_dies_with_the_command(model, workspace, tmp_path, ending):
    marker = tmp_path / "escaped.pid"
    script = workspace / "escape.py"
    script.write_text(ESCAPER.format(tail="time.sleep(300)" if ending == "timeout" else "print('left behind')"))
    timeout = {"timeout": 2} if ending == "timeout" else {}
    model.add([tools_reply(call("run_command", id="c", command=f"{sys.executable} escape.py {marker}", **timeout)), {"text": "ok"}])
    report, _, _ = await run("run", model, workspace, approval={"default": "allow"})
    pid = await _escaper_pid(marker)
    assert await _gone(pid), "the setsid() grandchild outlived the command"
    assert report.stop_reason == StopReason.DONE


async def test_a_setsid_descendant_dies_on_cancel(model, workspace, tmp_path):
    marker = tmp_path / "escaped.pid"
    (workspace / "escape.py").write_text(ESCAPER.format(tail="time.sleep(300)"))
    model.add([tools_reply(call("run_command", command=f"{sys.executable} escape.py {marker}")), {"text": "never"}])
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import run_task

    task = asyncio.ensure_future(run_task("run", session=Session(), settings=make_settings(model, approval={"default": "allow"}),
                                          workspace=DiskWorkspace([workspace]), approver=ScriptedApprover(), emit=Events()))
    pid = await _escaper_pid(marker)
    task.cancel()
    report = await asyncio.wait_for(task, 10)
    assert report.stop_reason == StopReason.CANCELLED
    assert await _gone(pid)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_headless_signals_cancel_kill_the_tree_and_flush(model, workspace, tmp_path, sig):
    """Decision 10: SIGINT, SIGTERM and SIGHUP (the terminal closed) all end `agent-lsp run` as
    cancelled (exit 130) after killing the command's process tree and flushing the transcript."""
    marker = tmp_path / "escaped.pid"
    (workspace / "escape.py").write_text(ESCAPER.format(tail="time.sleep(300)"))
    model.add([tools_reply(call("run_command", command=f"{sys.executable} escape.py {marker}")), {"text": "never"}])
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "run", "go", "--base-url", model.base_url, "--model", "m",
                             "--workspace", str(workspace), "--yes", "--json"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pid = int(marker.read_text())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    import json

    report = json.loads(out)
    assert report["stopReason"] == "cancelled"
    assert Path(report["transcript"]).read_text().strip().splitlines()[-1].startswith('{"ts"')
    assert '"type": "stop"' in Path(report["transcript"]).read_text().strip().splitlines()[-1]
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the command's setsid() grandchild survived"


# -- 10.13: output past what is kept ------------------------------------------------------------
async def test_output_past_five_megabytes_keeps_the_real_tail_and_says_what_was_dropped(model, workspace):
    script = workspace / "loud.py"
    script.write_text("import sys\nfor i in range(120000):\n    sys.stdout.write(f'line {i:07d} ' + 'x' * 40 + '\\n')\nprint('THE REAL END')\n")
    model.add([tools_reply(call("run_command", id="c", command=f"{sys.executable} loud.py")), {"text": "ok"}])
    report, events, _ = await run("loud", model, workspace, approval={"default": "allow"})
    result = last_tool_results(model.requests[-1])["c"]
    first = result.splitlines()[0]
    assert "bytes in the middle were dropped" in first and "not saved" in first
    assert result.rstrip().endswith("THE REAL END")
    assert "line 0000000" in result
    spill = wire_fields([e for e in events.of("toolResult") if wire_fields(e).get("spillPath")][0])["spillPath"]
    saved = Path(spill).read_text()
    assert "bytes of output dropped here" in saved and saved.rstrip().endswith("THE REAL END")
    assert "whole result" in result and "full output" not in result
