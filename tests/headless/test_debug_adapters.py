"""`debugAdapters` (CONTRACT "The debugger (turn 4)", source 2, issue 36): a DAP adapter the user
names for a language is started by agent-lsp itself and driven like debugpy's; a bad one is a
clear tool error; `doctor` lists them. The real adapter here is debugpy's, named by the user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.agent.ports import Decision
from tests.headless.test_debugger import BUGGY, RETURN_LINE, _processes_in
from tests.unit.kit import ScriptedApprover, call, last_tool_results, run, tools_reply

pytestmark = [pytest.mark.timeout(120)]

MYPY = {"command": [sys.executable, "-m", "debugpy.adapter"], "languages": ["python"]}


async def test_an_adapter_named_in_debug_adapters_debugs_the_program(model, workspace: Path):
    """The user's adapter wins over agent-lsp's own debugpy: the approval names it, and the
    program runs under it although `debug.python` (debugpy's interpreter) does not exist."""
    (workspace / "buggy.py").write_text(BUGGY)
    model.add([
        tools_reply(call("debug_start", id="start", program="buggy.py",
                         breakpoints=[{"path": "buggy.py", "line": RETURN_LINE}])),
        tools_reply(call("debug_step", id="cont", action="continue")),
        {"text": "count is one short"},
    ])
    approver = ScriptedApprover()

    report, _, _ = await run("why is the average wrong?", model, workspace, approver=approver,
                             debugAdapters={"mypy": MYPY}, debug={"python": "/nonexistent/python3"})

    assert report.stop_reason == "done", report
    detail = approver.requests[0].detail
    assert detail.startswith("debug: $ buggy.py"), detail  # the adapter runs it, not `python3`
    assert f"debug adapter mypy: $ {sys.executable} -m debugpy.adapter" in detail, detail
    start = last_tool_results(model.requests[1])["start"]
    assert start.startswith(f"state: stopped (breakpoint)\nlocation: buggy.py:{RETURN_LINE}"), start
    assert "total (int) = 18" in start and "count (int) = 2" in start, start
    cont = last_tool_results(model.requests[2])["cont"]
    assert cont.startswith("state: exited (0)") and "average 9.0" in cont, cont
    assert not _processes_in(workspace)


async def test_a_bad_adapter_command_is_a_clear_tool_error(model, workspace: Path):
    """A program that is not there is refused before anything is asked; one that dies at once
    is a tool error with what it said and the setting that named it. Nothing hangs."""
    (workspace / "buggy.py").write_text(BUGGY)
    model.add([
        tools_reply(call("debug_start", id="missing", program="buggy.py")),
        tools_reply(call("debug_start", id="dies", program="buggy.py")),
        {"text": "ok"},
    ])
    dies = [sys.executable, "-c", "import sys; sys.stderr.write('adapter: bad flag\\n'); sys.exit(3)"]
    adapters = {"gone": {"command": ["/nonexistent/dap-adapter"], "languages": ["python"]}}
    approver = ScriptedApprover()

    await run("debug", model, workspace, approver=approver, debugAdapters=adapters)
    missing = last_tool_results(model.requests[1])["missing"]
    assert "debugAdapters.gone: '/nonexistent/dap-adapter' is not an executable program" in missing
    assert approver.requests == []

    model.add([tools_reply(call("debug_start", id="dies", program="buggy.py")), {"text": "ok"}])
    await run("debug again", model, workspace, debugAdapters={"dying": {"command": dies, "languages": ["py"]}})
    result = last_tool_results(model.requests[-1])["dies"]
    assert result.startswith("error: debugger:") or "debugger:" in result, result
    assert "adapter: bad flag" in result and "[debugAdapters.dying:" in result, result
    assert not (workspace / "pid.txt").exists()


async def test_a_program_debugpy_cannot_run_names_the_setting(model, workspace: Path):
    (workspace / "avg.js").write_text("console.log(1)\n")
    model.add([tools_reply(call("debug_start", id="js", program="avg.js")), {"text": "ok"}])

    await run("debug", model, workspace)

    result = last_tool_results(model.requests[1])["js"]
    assert "cannot debug javascript programs" in result and "debugAdapters" in result, result


async def test_a_compiled_program_goes_to_an_adapter_for_native_code(model, workspace: Path):
    """An ELF program has no extension: it is `native`, debugged by an adapter listing `native`,
    `c`, `cpp` or `rust` (lldb-dap's languages), never handed to debugpy as Python."""
    shutil.copy("/bin/true", workspace / "app")
    (workspace / "lldb-dap").write_text("#!/bin/sh\nexit 0\n")
    (workspace / "lldb-dap").chmod(0o755)
    model.add([tools_reply(call("debug_start", id="bare", program="app")), {"text": "ok"}])
    await run("debug", model, workspace)
    bare = last_tool_results(model.requests[-1])["bare"]
    assert "cannot debug native programs" in bare and "debugAdapters" in bare, bare

    model.add([tools_reply(call("debug_start", id="lldb", program="app")), {"text": "ok"}])
    approver = ScriptedApprover(Decision.DENY)
    lldb = {"command": [str(workspace / "lldb-dap")], "languages": ["c", "cpp", "rust"]}
    await run("debug it", model, workspace, approver=approver, debugAdapters={"lldb": lldb})
    assert f"debug adapter lldb: $ {workspace / 'lldb-dap'}" in approver.requests[0].detail
    assert approver.requests[0].detail.startswith("debug: $ app"), approver.requests[0].detail


def test_doctor_lists_the_configured_adapters(workspace: Path, tmp_path: Path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "replay:none", "debugAdapters": {
        "mypy": MYPY, "gone": {"command": "dap-adapter-nowhere --stdio", "languages": ["go"]}}}))
    env = {**os.environ, "AGENT_LSP_SETTINGS": str(settings), "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace), "--json"],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    check = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["debug"]
    assert f"mypy (python: {sys.executable})" in check["detail"], check
    assert "gone (go: dap-adapter-nowhere)" in check["detail"], check
    assert "debugAdapters.gone: 'dap-adapter-nowhere' is not on the PATH" in check["detail"], check
    assert not check["ok"]


async def test_the_sandbox_holds_a_named_adapter_and_its_program(model, workspace: Path):
    """With the sandbox on, the user's adapter runs inside it like debugpy's (Decision 87)."""
    outside = Path("/var/tmp") / f"agent-lsp-adapter-escape-{os.getpid()}-{id(workspace)}.txt"
    (workspace / "escape.py").write_text(f"open({str(outside)!r}, 'w').write('x')\n")
    model.add([tools_reply(call("debug_start", id="s", program="escape.py")), {"text": "ok"}])
    approver = ScriptedApprover()

    await run("debug", model, workspace, approver=approver, sandbox={"mode": "workspace-write"},
              debugAdapters={"mypy": MYPY})

    assert "debug adapter mypy:" in approver.requests[0].detail
    result = last_tool_results(model.requests[1])["s"]
    assert result.startswith("state: stopped (exception)"), result
    assert "read-only" in result.lower(), result
    assert not outside.exists()
    assert not _processes_in(workspace)
