"""Background processes through the real `agent-lsp run` (issue 35, Decisions 60, 86, 90): the
stream-json `process` lines, the report's `processes`, Claude Code's names and
`run_in_background` in hook payloads, and the terminal's quiet line."""

from __future__ import annotations

import json
import sys

import pytest

from tests.headless.test_hooks import HOOKS, hook, settings, stream_run
from tests.headless.test_run_cli import agent_run, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(90)
PY = sys.executable
SLEEPER = "import time\nprint('zzz', flush=True)\nwhile True:\n    time.sleep(1)\n"
BACKGROUND = {"process_output", "stop_process"}


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request["tools"]} & BACKGROUND


def replies(command: str) -> list[dict]:
    return [
        tools_reply(call("run_command", id="c1", command=command, background=True)),
        tools_reply(call("process_output", id="c2", processId="p1")),
        {"text": "left it running"},
    ]


def test_stream_json_report_and_hooks_carry_the_background_process(model, workspace, tmp_path):
    (workspace / "sleeper.py").write_text(SLEEPER)
    command = f"{PY} -u sleeper.py"
    model.add(replies(command))
    log = tmp_path / "hooks.jsonl"
    record = hook(f"{PY} {HOOKS / 'record.py'} {log}", "Bash|BashOutput")
    proc, lines, report = stream_run(model, workspace, "serve", settings(tmp_path, {"PreToolUse": [record]}))

    assert proc.returncode == 0, proc.stderr
    assert report is not None and report["processes"] == [
        {"processId": "p1", "command": command, "state": "stopped", "exitCode": report["processes"][0]["exitCode"]}
    ]
    processes = [(e["processId"], e["state"]) for e in lines if e.get("type") == "process"]
    assert processes == [("p1", "running"), ("p1", "stopped")]  # the run's end stopped it
    payloads = {e["tool_use_id"]: e for e in map(json.loads, log.read_text().splitlines())}
    assert payloads["c1"]["tool_name"] == "Bash" and payloads["c1"]["tool_input"]["run_in_background"] is True
    assert payloads["c2"]["tool_name"] == "BashOutput" and payloads["c2"]["tool_input"] == {"bash_id": "p1"}


def test_the_terminal_shows_a_quiet_line_per_start_and_end(model, workspace):
    (workspace / "sleeper.py").write_text(SLEEPER)
    model.add(replies(f"{PY} -u sleeper.py"))
    proc = run_cli(agent_run(model, workspace, "serve", json_report=False))

    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout + proc.stderr
    assert "background process p1 started" in shown, shown
    assert "background process p1 stopped" in shown, shown


def test_the_process_tools_are_offered_once_a_background_process_started(model, workspace):
    """Most runs never start one: until then the requests carry neither schema, yet a call
    naming one (a resumed session's history) still reaches it and is answered."""
    (workspace / "sleeper.py").write_text(SLEEPER)
    model.add([
        tools_reply(call("process_output", id="c0", processId="p1")),
        tools_reply(call("run_command", id="f1", command="true")),
        *replies(f"{PY} -u sleeper.py"),
    ])
    proc = run_cli(agent_run(model, workspace, "serve"))

    assert proc.returncode == 0, proc.stderr
    assert [offered(r) for r in model.requests] == [set(), set(), set(), BACKGROUND, BACKGROUND]
    early = last_tool_results(model.requests[1])["c0"]
    assert "no background process 'p1' in this run (this run's: none yet)" in early, early
    assert last_tool_results(model.requests[4])["c2"].startswith("processId: p1 (running)")
