"""Issue 32 P10-P11, `agent-lsp run --output-schema`: a `pattern` that backtracks without end
ends the run with a clear error (the check runs in a worker killed at its limit) and SIGTERM
ends the run while it is being checked; a schema nested hundreds of levels deep is a usage error
(exit 2), and an answer nested thousands deep a validation error, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.reliability.test_cli_output_schema import schema_file

pytestmark = pytest.mark.timeout(90)
CATASTROPHIC = {"type": "string", "pattern": "^(a+)+$"}
ANSWER = json.dumps("a" * 40 + "!")  # `^(a+)+$` tries 2^40 ways before it says no


def workers_of(pid: int) -> list[int]:
    """The schema-check workers the run started (children whose command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == pid and stat[0] != b"Z" and b"schema_check" in cmdline:
            found.append(int(entry))
    return found


def test_a_catastrophic_pattern_ends_the_run_with_a_clear_error(model, workspace, tmp_path):
    model.add([{"text": ANSWER}])
    proc = run_cli(agent_run(model, workspace, "answer", "--output-schema", schema_file(tmp_path, CATASTROPHIC)))

    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "fatal" and report["stopCause"] == "schema", report
    assert report["error"].startswith("the answer could not be checked against the output schema within")
    assert "pattern" in report["error"] and report["finalText"] == ANSWER
    assert "Traceback" not in proc.stderr
    assert len(model.requests) == 1, "no repair turn: the schema is at fault, not the answer"


def test_sigterm_ends_the_run_while_the_answer_is_checked(model, workspace, tmp_path):
    model.add([{"text": ANSWER}])
    argv = agent_run(model, workspace, "answer", "--output-schema", schema_file(tmp_path, CATASTROPHIC))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (workers := workers_of(proc.pid)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the answer's check never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out + err
    assert report_of(out)["stopReason"] == "cancelled"
    assert not any(Path(f"/proc/{pid}").exists() and b"schema_check" in Path(f"/proc/{pid}/cmdline").read_bytes()
                   for pid in workers), "the worker was killed with the run"


def test_a_schema_nested_300_levels_is_a_usage_error(model, workspace, tmp_path):
    schema: dict = {"type": "string"}
    for _ in range(300):
        schema = {"type": "array", "items": schema}
    proc = run_cli(agent_run(model, workspace, "answer", "--output-schema", schema_file(tmp_path, schema)))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nests deeper than 64 levels" in proc.stderr and "Traceback" not in proc.stderr
    assert model.requests == []


def test_an_answer_nested_thousands_deep_is_a_validation_error(model, workspace, tmp_path):
    model.add([{"text": "[" * 5000 + "]" * 5000}, {"text": "[1]"}])
    proc = run_cli(agent_run(model, workspace, "answer", "--output-schema", schema_file(tmp_path, {"type": "array"})))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["structuredOutput"] == [1] and report["turns"] == 2
    repair = model.requests[1]["messages"][-1]["content"]
    assert "nests too deep" in repair, repair


def test_a_quadratic_unique_items_check_ends_with_the_same_clear_error(model, workspace, tmp_path):
    # jsonschema compares objects pairwise for uniqueItems: 40,000 of them is 8e8 comparisons
    model.add([{"text": json.dumps([{"n": i} for i in range(40_000)])}])
    schema = {"type": "array", "uniqueItems": True}
    proc = run_cli(agent_run(model, workspace, "answer", "--output-schema", schema_file(tmp_path, schema)))

    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopCause"] == "schema", report
    assert report["error"].startswith("the answer could not be checked against the output schema within")
