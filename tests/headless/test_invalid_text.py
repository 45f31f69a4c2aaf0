"""Issue 32 P9, headless: text no UTF-8 writer can encode (a lone surrogate: `"\\ud800"` in the
model's JSON, undecodable bytes in argv) never kills `agent-lsp run`. In a tool's arguments it is
a tool error the model reads; in a prompt it becomes U+FFFD; the stream, the report, the
transcript and the session survive it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import last_tool_results

pytestmark = pytest.mark.timeout(60)
LONE = r"\ud800"  # as the model's JSON spells it
CALLS = {
    "l1": ("list_files", {"path": LONE}),
    "r1": ("read_file", {"path": f"calc{LONE}.py"}),
    "s1": ("search", {"pattern": f"x{LONE}"}),
    "c1": ("run_command", {"command": f"echo {LONE}"}),
    "w1": ("write_file", {"path": "new.py", "content": f"x = '{LONE}'"}),
    "e1": ("edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": f"a {LONE} b"}),
}


def raw_arguments(args: dict[str, str]) -> str:
    """The arguments as the model sends them: JSON text holding the escape itself."""
    return "{" + ", ".join(f'"{k}": "{v}"' for k, v in args.items()) + "}"


def test_lone_surrogates_in_tool_arguments_are_tool_errors(model, workspace):
    calls = [{"name": name, "id": i, "arguments": raw_arguments(args)} for i, (name, args) in CALLS.items()]
    model.add([{"tool_calls": calls}, {"text": "I will send valid text"}])
    proc = run_cli(agent_run(model, workspace, "go", "--output-format", "stream-json", json_report=False))

    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    report = lines[-1]["report"]
    assert report["stopReason"] == "done" and report["finalText"] == "I will send valid text"
    results = last_tool_results(model.requests[1])
    for call_id, (name, args) in CALLS.items():
        [key] = [k for k, v in args.items() if LONE in v]
        assert results[call_id] == (
            f"error: invalid characters in argument `{key}` of {name}: it holds a lone surrogate "
            "(\\ud800), which is not a Unicode character; send valid text"), results[call_id]
    assert "a - b" in (workspace / "calc.py").read_text() and not (workspace / "new.py").exists()
    shown = [e for e in lines if e["type"] == "toolResult"]
    assert len(shown) == len(CALLS) and not any(e["ok"] for e in shown)
    Path(report["transcript"]).read_text(encoding="utf-8")  # valid UTF-8 throughout


def test_undecodable_bytes_in_the_prompt_become_replacement_characters(model, workspace):
    model.add([{"text": "fine"}])
    argv = [a.encode() for a in agent_run(model, workspace, "PROMPT")]
    argv[argv.index(b"PROMPT")] = b"fix \xff this"  # argv's surrogateescape makes it '\udcff'
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=45)

    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    report = report_of(proc.stdout.decode())
    assert report["stopReason"] == "done" and report["finalText"] == "fine"
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "fix \ufffd this"}
    assert "\ufffd" in Path(report["transcript"]).read_text(encoding="utf-8")
    # the session was saved: a follow-up continues it
    model.add([{"text": "again"}])
    again = run_cli(agent_run(model, workspace, "more", "--session", report["sessionId"]))
    assert again.returncode == 0, again.stderr
    assert report_of(again.stdout)["finalText"] == "again"
