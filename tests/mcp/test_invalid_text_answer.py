"""Issue 32 P12: an MCP server's answer holding a lone surrogate (as a JSON escape, or as the raw
bytes a lax encoder writes) is that call's answer at once, with U+FFFD in its place: never a line
skipped while the call waits out its timeout (set to 300 s here, so the old behaviour fails this
test by its pytest timeout), through the real `agent-lsp run`; over streamable HTTP the answer is
read too (it was a parse error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(90)
SERVER = Path(__file__).with_name("raw_surrogate_server.py")


@pytest.mark.parametrize("spelling", ["escape", "bytes"])
def test_an_answer_with_a_lone_surrogate_arrives_at_once(model, workspace, tmp_path, spelling):
    args = [str(SERVER), *(["--bytes"] if spelling == "bytes" else [])]
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"requestTimeout": 300,
                                    "mcpServers": {"raw": {"command": sys.executable, "args": args}}}))
    model.add([tools_reply(call("raw__weird", id="m1")), {"text": "got it"}])
    proc = run_cli(agent_run(model, workspace, "ask the server", "--settings", str(settings)), timeout=80)

    assert proc.returncode == 0, proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "done" and report["finalText"] == "got it", report
    answer = last_tool_results(model.requests[1])["m1"]
    # one U+FFFD for the escape; for the bytes, one per byte (Python's decoder, like WHATWG's)
    assert answer == "before " + "\ufffd" * (1 if spelling == "escape" else 3) + " after", answer
    Path(report["transcript"]).read_text(encoding="utf-8")


def test_an_http_answer_with_a_lone_surrogate_is_read(model, workspace, tmp_path):
    server = subprocess.Popen([sys.executable, str(SERVER), "--http"], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"requestTimeout": 300, "mcpServers": {"raw": {"url": url}}}))
        model.add([tools_reply(call("raw__weird", id="m1")), {"text": "got it"}])
        proc = run_cli(agent_run(model, workspace, "ask the server", "--settings", str(settings)), timeout=80)
    finally:
        server.kill()
        server.wait()
    assert proc.returncode == 0, proc.stderr
    assert report_of(proc.stdout)["finalText"] == "got it"
    assert last_tool_results(model.requests[1])["m1"] == "before \ufffd after"
