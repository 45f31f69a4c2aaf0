"""`agent-lsp run` with a language server it starts itself (issue 23, source 2): basedpyright
auto-detected on PATH answers the `diagnostics` tool and the problems after an edit, and no
process of it is left once the run ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from tests.headless.test_run_cli import agent_run, report_of
from tests.langservers.conftest import BROKEN, marked, only_on_path, wait_gone
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(120)


def test_an_auto_detected_server_answers_diagnostics_and_the_problems_after_an_edit(model, workspace, tmp_path):
    model.add([
        tools_reply(call("edit_file", "e1", path="calc.py", old_text="def mul(a, b):", new_text=BROKEN + "\n\ndef mul(a, b):")),
        tools_reply(call("diagnostics", "d1", path="calc.py")),
        {"text": "found it"},
    ])
    marker = f"AGENT_LSP_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, "PATH": only_on_path(tmp_path, "basedpyright-langserver") + os.pathsep + os.environ["PATH"],
           marker.split("=")[0]: marker.split("=")[1]}
    proc = subprocess.run(agent_run(model, workspace, "break it"), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=100, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report_of(proc.stdout)["stopReason"] == "done"
    assert "diagnostics" in {t["function"]["name"] for t in model.requests[0]["tools"]}  # Decision 39
    edited = last_tool_results(model.requests[1])["e1"]
    assert edited.startswith("applied: edit calc.py"), edited
    assert "calc.py:5:15: error:" in edited and "not assignable" in edited and "(basedpyright)" in edited, edited
    asked = last_tool_results(model.requests[2])["d1"]
    assert "calc.py:5:15: error:" in asked and "(basedpyright)" in asked, asked
    assert wait_gone(marker) == []


def test_without_a_server_there_is_no_diagnostics_tool(model, workspace):
    model.add([{"text": "ok"}])
    proc = subprocess.run(agent_run(model, workspace, "hi"), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "diagnostics" not in {t["function"]["name"] for t in model.requests[0]["tools"]}


def test_sigterm_mid_run_leaves_no_language_server(model, workspace, tmp_path):
    model.add([
        tools_reply(call("diagnostics", "d1", path="calc.py")),
        {"text": "never arrives", "ttft": 60},
    ])
    marker = uuid.uuid4().hex
    env = {**os.environ, "PATH": only_on_path(tmp_path, "basedpyright-langserver") + os.pathsep + os.environ["PATH"],
           "AGENT_LSP_TEST_MARK": marker}
    proc = subprocess.Popen(agent_run(model, workspace, "look"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while len(model.log) < 2:  # diagnostics answered (the server runs), the next call in flight
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not get to its second turn"
            time.sleep(0.05)
        assert marked(marker), "the language server runs"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert report_of(out)["stopReason"] == "cancelled", out + err
    assert wait_gone(marker) == []


FAILS_AT_ONCE = {
    # a server that dies before `initialize` with a traceback of its own on stderr
    "exits": "echo started >> {log}; echo 'Traceback (most recent call last):' >&2; "
             "echo '  File \"server.py\", line 1, in <module>' >&2; echo 'RuntimeError: no config found' >&2; exit 3",
    # one that writes something that is not LSP (pygls would log a traceback reading it), then ends
    "garbage": "echo started >> {log}; printf 'Content-Length: 5\\r\\n\\r\\nhello'; sleep 0.3",
}


@pytest.mark.parametrize("how", sorted(FAILS_AT_ONCE))
def test_a_server_that_fails_to_start_is_one_line_and_is_not_started_again(model, workspace, tmp_path, how):
    """Issue 32: one clear line naming the server and why, no traceback (neither its own nor
    pygls's), and two code-intel calls start it once (again only when its configuration changes)."""
    log = tmp_path / "starts.log"
    command = ["sh", "-c", FAILS_AT_ONCE[how].format(log=log)]
    (tmp_path / "user-settings.json").write_text(json.dumps(
        {"languageServers": {"auto": False, "servers": {"pyls": {"command": command, "extensions": [".py"]}}}}))
    model.add([
        tools_reply(call("hover", "h1", path="calc.py", line=1, symbol="add")),
        tools_reply(call("find_definition", "h2", path="calc.py", line=1, symbol="add")),
        {"text": "no luck"},
    ])
    proc = subprocess.run(agent_run(model, workspace, "look", json_report=False), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "language server `pyls` failed to start: exited with code" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr and "File \"" not in proc.stderr
    if how == "exits":
        assert lines[0].split("exited with code ")[1].startswith("3: RuntimeError: no config found"), lines[0]
    assert log.read_text().splitlines() == ["started"], "started once for both calls"
    for request, call_id in ((model.requests[1], "h1"), (model.requests[2], "h2")):  # the model is told why
        result = last_tool_results(request)[call_id]
        assert "failed to start" in result, result
