"""`agent-lsp run` end to end: the real CLI as a subprocess against the scripted server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.kit import API_KEY, call, tools_reply

pytestmark = pytest.mark.timeout(60)


def agent_run(model, workspace: Path, task: str, *extra: str, yes: bool = True, json_report: bool = True,
              base_url: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "agent_lsp", "run", task, "--base-url", base_url or model.base_url, "--model", "m",
            "--workspace", str(workspace)]
    if yes:
        argv.append("--yes")
    if json_report:
        argv.append("--json")
    return [*argv, *extra]


def run_cli(argv: list[str], timeout: float = 45) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def run_on_a_tty(argv: list[str], typed: bytes, timeout: float = 45) -> tuple[int, str, str]:
    """The CLI with a terminal to ask on (stdin a pty), `typed` already typed into it."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(slave)
        os.write(master, typed)
        out, err = proc.communicate(timeout=timeout)
    finally:
        os.close(master)
    return proc.returncode, out, err


def report_of(out: str) -> dict:
    """With --json, stdout holds exactly one JSON object: the report (CONTRACT)."""
    return json.loads(out)


def test_multi_turn_task_reads_searches_edits_and_runs_a_command(model, workspace):
    (workspace / "check.py").write_text("from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('CHECK OK')\n")
    model.add([
        tools_reply(call("read_file", path="calc.py"), text="Reading calc.py. "),
        tools_reply(call("search", pattern=r"add\("), text="Looking for callers. "),
        tools_reply(call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")),
        tools_reply(call("run_command", id="run", command=f"{sys.executable} check.py")),
        {"text": "Fixed add(): it subtracted."},
    ])

    proc = run_cli(agent_run(model, workspace, "fix add"))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "def add(a, b):\n    return a + b\n" in (workspace / "calc.py").read_text()
    report = report_of(proc.stdout)
    assert report["stopReason"] == "done" and report["turns"] == 5 and report["toolCalls"] == 4
    assert report["finalText"] == "Fixed add(): it subtracted."
    assert report["editedFiles"] == [(workspace / "calc.py").resolve().as_uri()]
    # The text was streamed to the terminal (stderr with --json), tool steps shown as they happened,
    # with the last lines of the command's output and workspace-relative paths.
    assert "Reading calc.py." in proc.stderr and "Fixed add(): it subtracted." in proc.stderr
    assert "approved (--yes)" in proc.stderr
    assert "│ CHECK OK" in proc.stderr and "✓ run_command ok: exit code 0" in proc.stderr
    assert "file://" not in proc.stderr
    # The command ran on the edited file and the model saw its output.
    results = {m["tool_call_id"]: m["content"] for m in model.requests[4]["messages"] if m["role"] == "tool"}
    assert results["run"].startswith("exit code 0") and "CHECK OK" in results["run"]
    search = [m["content"] for m in model.requests[2]["messages"] if m["role"] == "tool"][-1]
    assert "test_calc.py:5:" in search
    assert API_KEY not in proc.stdout + proc.stderr
    assert Path(report["transcript"]).exists()


def test_fatal_exits_1(model, workspace):
    model.add([{"status": 500, "message": "the model is down", "retry_after": 0.01, "repeat": 3}])
    proc = run_cli(agent_run(model, workspace, "anything"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "fatal" and "the model is down" in report["error"]


@pytest.mark.parametrize("bad", [["--max-turns", "x"], ["--max-turns", "0"], ["--workspace", "/no/such/dir"], ["--bogus"]])
def test_usage_errors_exit_2(model, workspace, bad):
    proc = run_cli([*agent_run(model, workspace, "anything"), *bad])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip(), "a usage error says what is wrong"
    assert model.requests == []


def test_max_turns_exits_3_and_flags_beat_the_environment(model, workspace):
    model.add([tools_reply(call("list_files"), text="still looking", repeat=5)])
    env = {**os.environ, "AGENT_LSP_MAX_TURNS": "4", "AGENT_LSP_MODEL": "env-model"}
    proc = subprocess.run(agent_run(model, workspace, "loop", "--max-turns", "2"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=45, env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "max_turns" and report["turns"] == 2
    assert "turn limit" in report["summary"]
    assert len(model.requests) == 2
    assert model.requests[0]["model"] == "m"


def test_sigint_mid_run_exits_130_and_keeps_the_edit(model, workspace):
    model.add([
        tools_reply(call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")),
        {"text": "never arrives", "ttft": 30},
    ])
    proc = subprocess.Popen(agent_run(model, workspace, "fix add"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(model.log) < 2:  # the edit is done and the second model call is in flight
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not get to its second turn"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert "return a + b" in (workspace / "calc.py").read_text()
    report = report_of(out)
    assert report["stopReason"] == "cancelled" and "kept" in report["summary"]
    assert report["editedFiles"] == [(workspace / "calc.py").resolve().as_uri()]


def test_without_a_tty_and_without_yes_side_effects_are_denied(model, workspace):
    model.add([
        tools_reply(call("edit_file", id="e", path="calc.py", old_text="return a - b", new_text="return a + b"),
                    call("run_command", id="c", command="touch ran.txt")),
        {"text": "I was not allowed to change anything."},
    ])

    proc = run_cli(agent_run(model, workspace, "fix add", yes=False, json_report=False))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "return a - b" in (workspace / "calc.py").read_text()
    assert not (workspace / "ran.txt").exists()
    results = {m["tool_call_id"]: m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"}
    assert results["e"].startswith("denied:") and results["c"].startswith("denied:")
    assert "pass --yes" in proc.stdout
    # Nobody was asked, and the model is told exactly that (not "the user said no").
    assert "no one could be asked" in results["e"] and "the user said no" not in results["e"]
    # The human-readable report.
    assert "I was not allowed to change anything." in proc.stdout
    assert "✗ Done" not in proc.stdout and "✓ Done: " in proc.stdout and "done: Done:" not in proc.stdout
    assert "(2 denied)" in proc.stdout and "edited no files" in proc.stdout
    assert "transcript:" in proc.stdout and "\x1b[" not in proc.stdout, "no colour without a TTY"


def test_approvals_are_asked_on_the_tty(model, workspace):
    model.add([
        tools_reply(call("edit_file", id="e", path="calc.py", old_text="return a - b", new_text="return a + b")),
        tools_reply(call("run_command", id="c1", command="echo hi")),
        tools_reply(call("run_command", id="c2", command="echo hi")),
        tools_reply(call("write_file", id="w", path="new.txt", content="new\n")),
        {"text": "finished"},
    ])
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(agent_run(model, workspace, "go", yes=False), stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(slave)
        # deny the edit with a reason, allow `echo hi` for the session (the second one is not
        # asked), allow the write
        os.write(master, b"d not like this\ns\na\n")
        out, err = proc.communicate(timeout=45)
    finally:
        os.close(master)
    assert proc.returncode == 0, out + err
    assert err.count("[a]llow / allow for [s]ession / [d]eny") == 3
    assert "edit_file wants to:" in err and "-    return a - b" in err
    assert "return a - b" in (workspace / "calc.py").read_text()
    assert (workspace / "new.txt").read_text() == "new\n"
    results = {m["tool_call_id"]: m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"}
    assert results["e"].startswith("denied: the user said no; the user's reason: not like this")
    assert results["c1"] == results["c2"] == "exit code 0\nhi"
    assert report_of(out)["denied"] == 1
