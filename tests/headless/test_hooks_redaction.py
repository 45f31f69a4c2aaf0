"""Issue 32 P6: what hooks print reaches the model only after the same redaction as a tool's
result: SessionStart's and UserPromptSubmit's context, a PreToolUse reason, a PostToolUse note
and a Stop hook's exit-2 reason, through the real `agent-lsp run` against the scripted model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.headless.test_hooks import hook, hook_events, settings, stream_run
from tests.unit.kit import API_KEY, call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(90)
LEAK = Path(__file__).with_name("hooks") / "leak_key.py"


def test_no_hook_output_brings_the_key_to_the_model(model, workspace, tmp_path):
    secret_file = tmp_path / "dotenv"
    secret_file.write_text(API_KEY + "\n")
    leak = hook(f"{sys.executable} {LEAK} {secret_file}")
    model.add([
        tools_reply(call("run_command", id="c1", command="echo ran"),
                    call("list_files", id="l1")),
        {"text": "finished"},
        {"text": "done now"},
    ])
    path = settings(tmp_path, {
        "SessionStart": [leak], "UserPromptSubmit": [leak], "Stop": [leak],
        "PreToolUse": [hook(f"{sys.executable} {LEAK} {secret_file}", "Bash")],
        "PostToolUse": [hook(f"{sys.executable} {LEAK} {secret_file}", "Glob")],
    })
    proc, lines, report = stream_run(model, workspace, "go", path)

    assert proc.returncode == 0, proc.stderr
    assert report["stopReason"] == "done" and report["finalText"] == "done now"
    assert len(model.requests) == 3
    for request in model.requests:
        assert API_KEY not in json.dumps(request), "a hook's output brought the key to the model"
    # Each channel did reach the model, redacted (the fix is not a dropped message).
    first = json.dumps(model.requests[0])
    assert "session context: token [redacted]" in first and "prompt context [redacted]" in first
    results = last_tool_results(model.requests[1])
    assert "a PreToolUse hook denied it: denied, see [redacted]" in results["c1"]
    assert "PostToolUse hook: post-tool note [redacted]" in results["l1"]
    assert model.requests[2]["messages"][-1] == {
        "role": "user", "content": "before you stop, use [redacted]"}
    assert API_KEY not in proc.stdout + proc.stderr
    assert len(hook_events(lines)) == 6
    assert API_KEY not in Path(report["transcript"]).read_text()
