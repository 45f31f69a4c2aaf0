"""CONTRACT "The debugger (turn 4)", Source 1 in a real VS Code (code-server): the agent's
debug_start runs in VS Code's own JavaScript debugger (js-debug, shipped with VS Code), the
user sees the paused session in the Run and Debug view, and the agent reads the locals of the
stop through `agentLsp/debug`."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import test_vscode as vs  # noqa: E402
from test_vscode import tools  # noqa: E402, F401 - the setup fixture

pytestmark = vs.pytestmark

TASK = "Find out why average of avg.js is wrong"


def tool_result(requests: list[dict[str, Any]], call_id: str) -> str:
    for request in requests:
        for message in request["messages"]:
            if message.get("tool_call_id") == call_id:
                return str(message["content"])
    raise AssertionError(f"no result for {call_id}")


def test_vscode_debugs_with_its_own_debugger_and_the_agent_reads_the_locals(tmp_path_factory, tools):  # noqa: F811
    """debug_start on avg.js with a breakpoint on `return total / count`: VS Code's CALL STACK
    shows the session paused on the breakpoint (while the debug_eval approval waits; screenshot
    debug.png), the
    model's next request holds `count = 2` and `total = 18` (values only the debugger knows),
    debug_eval, next and a continue to the end work; an uncaught exception stops (crash.js); a
    Python program without the Python Debugger extension is a clear tool error; an endless one
    is paused at its timeout; a
    last session still paused when the run
    ends is ended with it (no debug session left in VS Code)."""
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    tmp = tmp_path_factory.mktemp("vscode-ci-debug")
    wrapper = tmp / "agent-lsp"
    # this checkout's server, whatever agent-lsp the interpreter has installed (code-server
    # passes on no PYTHONPATH)
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(vs.REPO))} exec {shlex.quote(sys.executable)} '
                       '-m agent_lsp "$@"\n')
    wrapper.chmod(0o755)
    with ScriptedModelServer() as model:
        model.add(TASK, [
            {"tool_calls": [{"id": "start", "name": "debug_start", "arguments": {
                "program": "avg.js", "breakpoints": [{"path": "avg.js", "line": 7}]}}]},
            {"tool_calls": [{"id": "eval", "name": "debug_eval",
                             "arguments": {"expression": "total * 2 + count"}}]},
            {"tool_calls": [{"id": "next", "name": "debug_step", "arguments": {"action": "next"}}]},
            {"tool_calls": [{"id": "cont", "name": "debug_step", "arguments": {"action": "continue"}}]},
            {"tool_calls": [{"id": "crash", "name": "debug_start", "arguments": {"program": "crash.js"}}]},
            {"tool_calls": [{"id": "py", "name": "debug_start", "arguments": {"program": "calc.py"}}]},
            {"tool_calls": [{"id": "spin", "name": "debug_start", "arguments": {"program": "spin.js", "timeout": 2}}]},
            {"tool_calls": [{"id": "again", "name": "debug_start", "arguments": {
                "program": "avg.js", "breakpoints": [{"path": "avg.js", "line": 7}]}}]},
            {"text": "count is one short: values.length - 1."},  # the run ends while paused
        ])
        marker = f"agent-lsp-vscode-ci-debug-{os.getpid()}-{tmp.name}"
        env = {**os.environ, **tools, "AGENT_LSP_E2E_MARKER": marker, "AGENT_LSP_SERVER": str(wrapper),
               "AGENT_LSP_MODEL_URL": model.base_url, "AGENT_LSP_SCENARIOS": "debugInVsCode",
               "AGENT_LSP_SCREENSHOT_DIR": str(tmp / "screenshots"),
               "AGENT_LSP_TASKS": json.dumps({"debug": TASK, "configuredModel": "scripted"})}
        try:
            proc = subprocess.run([tools["AGENT_LSP_NODE"], str(vs.HERE / "run-test.mjs")],
                                  capture_output=True, text=True, timeout=900, env=env, cwd=vs.REPO)
        finally:
            leftovers = vs.kill_marked(marker)
        requests = model.requests_for(TASK)
    (tmp / "driver.log").write_text(proc.stderr)
    result = json.loads(proc.stdout)
    scenario = result["scenarios"].get("debugInVsCode")
    assert scenario is not None and "error" not in scenario, \
        f"{scenario}\n{result.get('error')}\nserver log: {result.get('serverLog', '')[-6000:]}"
    assert leftovers == [] and result["orphans"] == []
    # the approval said where it runs
    assert "runs in the editor's debugger" in scenario["startApproval"], scenario["startApproval"]
    assert "debug: $ avg.js" in scenario["startApproval"], scenario["startApproval"]  # not `python3 avg.js`
    # (a) VS Code's own debug view showed the agent's session paused at the breakpoint
    assert re.search(r"Paused on breakpoint", scenario["callStack"], re.I), scenario["callStack"]
    assert "average" in scenario["callStack"] and "avg.js" in scenario["callStack"], scenario["callStack"]
    # (b) the agent got the stop with the locals only the debugger knows
    start = tool_result(requests, "start")
    assert start.startswith("state: stopped (breakpoint)"), start
    assert "location: avg.js:7" in start, start
    assert re.search(r"^count \(.*\) = 2$", start, re.M) and re.search(r"^total \(.*\) = 18$", start, re.M), start
    assert re.search(r"^avg\.js:7 \S*average$", start, re.M), start
    assert tool_result(requests, "eval").endswith("= 38"), tool_result(requests, "eval")
    cont = tool_result(requests, "cont")
    nxt = tool_result(requests, "next")
    # js-debug stops at the end of the return statement and shows what it returns
    assert nxt.startswith("state: stopped (step)\nlocation: avg.js:7"), nxt
    assert re.search(r"^Return value \(.*\) = 9$", nxt, re.M), nxt
    # js-debug sends no DAP `exited` event: VS Code's session ends without an exit code
    assert cont.startswith("state: exited (unknown)") and "average 9" in cont, cont
    # an uncaught exception stops there, though the user's Breakpoints view has it unticked
    crash = tool_result(requests, "crash")
    assert crash.startswith("state: stopped (exception)\nlocation: crash.js:3"), crash
    assert re.search(r"^xs \(.*\) = .*\[1, 2, 3\]$", crash, re.M), crash
    # no Python debugger in this VS Code: a clear tool error, and the run goes on
    py = tool_result(requests, "py")
    assert "VS Code has no Python debugger: install the Python Debugger extension" in py, py
    # a program that never stops is paused at the timeout, where it is (Decision 88)
    spin = tool_result(requests, "spin")
    assert re.match(r"state: stopped \(pause\)\nlocation: spin\.js:[1-4]\n", spin), spin
    again = tool_result(requests, "again")
    assert again.startswith("state: stopped (breakpoint)\nlocation: avg.js:7"), again
    # the session is the agent's, by name, in VS Code's debug view
    assert "Agent: debug avg.js" in scenario["callStack"], scenario["callStack"]
    # the run ended while the second session was paused: it ended with the run
    assert scenario["toolbarAfter"] is False and scenario["debuggeesAfter"] == []
    if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
        shot = tmp / "screenshots" / "debug-paused.png"
        if shot.is_file():
            shutil.copy(shot, vs.EXTENSION / "debug.png")
