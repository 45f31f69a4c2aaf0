"""The agent's debugger headless, with the real debugpy on a small buggy program (issue 36): a
breakpoint's locals, a conditional breakpoint, step, eval, stop; no process survives the run;
approvals and rules; plan mode and sub-agents get no debug tools; the sandbox holds the program."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.agent.ports import Decision
from tests.unit.kit import (
    ScriptedApprover,
    alive,
    call,
    last_tool_results,
    run,
    tools_reply,
    transcript_records,
)

pytestmark = [pytest.mark.timeout(120)]

BUGGY = """\
import os
from pathlib import Path

Path("pid.txt").write_text(str(os.getpid()))


def average(values):
    total = 0
    for v in values:
        total += v
    count = len(values) - 1
    return total / count


def main():
    data = [3, 5, 10]
    print("starting")
    result = average(data)
    print("average", result)


main()
"""
LOOP_LINE = 10  # total += v
RETURN_LINE = 12  # return total / count
DEBUG_TOOLS = {"debug_start", "debug_step", "debug_eval", "debug_stop"}


@pytest.fixture
def buggy(workspace: Path) -> Path:
    (workspace / "buggy.py").write_text(BUGGY)
    return workspace


def _processes_in(folder: Path) -> list[int]:
    """Processes whose working directory is `folder` (the adapter, the launcher, the program)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(os.readlink(f"/proc/{name}/cwd")) == folder and alive(int(name)):
                    found.append(int(name))
            except OSError:
                continue
    return found


def _tool_names(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


async def test_breakpoint_locals_conditional_step_eval_and_stop(model, buggy):
    model.add([
        tools_reply(call("debug_start", id="start", program="buggy.py",
                         breakpoints=[{"path": "buggy.py", "line": RETURN_LINE}])),
        tools_reply(call("debug_eval", id="eval", expression="total * 2 + count")),
        tools_reply(call("debug_stop", id="stop")),
        tools_reply(call("debug_start", id="cond", program="buggy.py",
                         breakpoints=[{"path": "buggy.py", "line": LOOP_LINE, "condition": "v == 10"}])),
        tools_reply(call("debug_step", id="next", action="next")),
        tools_reply(call("debug_step", id="cont", action="continue")),
        {"text": "count is one short"},
    ])

    report, _, _ = await run("why is the average wrong?", model, buggy)

    assert report.stop_reason == "done", report
    start = last_tool_results(model.requests[1])["start"]
    assert start.splitlines()[:2] == ["state: stopped (breakpoint)", f"location: buggy.py:{RETURN_LINE}"]
    assert "frames:\nbuggy.py:12 average\nbuggy.py:18 main\n" in start
    # Values only the running program knows: the sum and the miscounted length.
    assert "total (int) = 18" in start and "count (int) = 2" in start
    assert "values (list) = [3, 5, 10]" in start
    assert start.endswith("output:\nstarting")
    assert last_tool_results(model.requests[2])["eval"] == "total * 2 + count (int) = 38"
    assert last_tool_results(model.requests[3])["stop"] == "state: exited (stopped by debug_stop)"
    cond = last_tool_results(model.requests[4])["cond"]
    assert f"location: buggy.py:{LOOP_LINE}" in cond
    assert "v (int) = 10" in cond and "total (int) = 8" in cond  # only the third pass stopped
    nxt = last_tool_results(model.requests[5])["next"]
    assert "state: stopped (step)" in nxt and "total (int) = 18" in nxt
    # continue: no breakpoint left on the way, the program runs to its end
    cont = last_tool_results(model.requests[6])["cont"]
    assert cont.startswith("state: exited (0)") and "average 9.0" in cont
    assert not _processes_in(buggy)


async def test_an_uncaught_exception_stops_and_the_run_end_ends_every_process(model, workspace):
    (workspace / "crash.py").write_text(
        "import os\nfrom pathlib import Path\nPath('pid.txt').write_text(str(os.getpid()))\n"
        "def f(items):\n    return items[len(items)]\nf([1, 2])\n"
    )
    model.add([tools_reply(call("debug_start", id="start", program="crash.py")), {"text": "found it"}])

    report, events, _ = await run("debug crash.py", model, workspace)

    start = last_tool_results(model.requests[1])["start"]
    assert start.startswith("state: stopped (exception)\nlocation: crash.py:5")
    assert "items (list) = [1, 2]" in start and "exception: IndexError: list index out of range" in start
    # The session was left open: the run's end ended it, the program and the adapter with it.
    pid = int((workspace / "pid.txt").read_text())
    assert report.stop_reason == "done" and not alive(pid)
    assert not _processes_in(workspace)
    # The stream and the transcript carry the debug call like any other tool's.
    assert [e.tool for e in events.of("toolCall")] == ["debug_start"]
    assert [e.ok for e in events.of("toolResult")] == [True]
    transcript = json.dumps(transcript_records(report))
    assert "debug_start" in transcript and "state: stopped (exception)" in transcript


async def test_debug_start_is_asked_and_a_debug_rule_allows_it(model, buggy):
    model.add([
        tools_reply(call("debug_start", id="a", program="buggy.py")),
        tools_reply(call("debug_start", id="b", program="buggy.py")),
        {"text": "done"},
    ])
    approver = ScriptedApprover(Decision.DENY)

    await run("debug", model, buggy, approver=approver, permissions={"allow": ["Debug(buggy.py)"]})

    # The rule allows buggy.py: nobody was asked, and both runs of it went through.
    assert approver.requests == []
    assert last_tool_results(model.requests[1])["a"].startswith("state: exited (0)")


async def test_debug_start_asks_without_a_rule_and_a_denial_runs_nothing(model, buggy):
    model.add([tools_reply(call("debug_start", id="a", program="buggy.py")), {"text": "ok"}])
    approver = ScriptedApprover(Decision.DENY)

    await run("debug", model, buggy, approver=approver)

    assert [r.tool for r in approver.requests] == ["debug_start"]
    assert "debug: $ python3 buggy.py" in approver.requests[0].detail
    assert "denied" in last_tool_results(model.requests[1])["a"].lower()
    assert not (buggy / "pid.txt").exists()


async def test_debug_eval_asks_unless_eval_without_asking(model, buggy):
    script = [
        tools_reply(call("debug_start", id="s", program="buggy.py", breakpoints=[{"path": "buggy.py", "line": 12}])),
        tools_reply(call("debug_eval", id="e", expression="count")),
        {"text": "ok"},
    ]
    model.add(script)
    asked = ScriptedApprover()
    await run("debug", model, buggy, approver=asked)
    assert [r.tool for r in asked.requests] == ["debug_start", "debug_eval"]

    model.add(script)
    trusted = ScriptedApprover()
    await run("debug", model, buggy, approver=trusted, debug={"evalWithoutAsking": True})
    assert [r.tool for r in trusted.requests] == ["debug_start"]
    assert last_tool_results(model.requests[-1])["e"] == "count (int) = 2"


async def test_a_command_must_be_python_and_its_rule_is_the_line(model, buggy):
    model.add([
        tools_reply(call("debug_start", id="bad", command="node app.js")),
        tools_reply(call("debug_start", id="ok", command="python3 buggy.py")),
        {"text": "ok"},
    ])
    approver = ScriptedApprover(default=Decision.DENY)

    await run("debug", model, buggy, approver=approver, permissions={"allow": ["Debug(python3 buggy.py)"]})

    assert "python[3] FILE" in last_tool_results(model.requests[1])["bad"]
    assert last_tool_results(model.requests[2])["ok"].startswith("state: exited (0)")
    assert approver.requests == []


async def test_plan_mode_and_sub_agents_get_no_debug_tools(model, buggy):
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import RunOptions, Session, run_task
    from tests.unit.kit import Events, make_settings

    model.add([{"text": "a plan"}])
    await run_task("plan it", session=Session(), settings=make_settings(model), workspace=DiskWorkspace([buggy]),
                   approver=ScriptedApprover(), emit=Events(), options=RunOptions(mode="plan"))
    assert not _tool_names(model.requests[-1]) & DEBUG_TOOLS
    assert "Debugger:" not in model.requests[-1]["messages"][0]["content"]

    model.add([tools_reply(call("delegate", task="look")), {"text": "looked"}, {"text": "done"}])
    await run("go", model, buggy)
    main, sub = model.requests[-3], model.requests[-2]
    assert DEBUG_TOOLS <= _tool_names(main)
    assert "instead of adding prints" in main["messages"][0]["content"]  # when it beats printing
    assert not _tool_names(sub) & DEBUG_TOOLS


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_the_sandbox_holds_the_debugged_program(model, workspace):
    outside = Path("/var/tmp") / f"agent-lsp-debug-escape-{os.getpid()}-{id(workspace)}.txt"
    (workspace / "escape.py").write_text(f"open({str(outside)!r}, 'w').write('x')\n")
    model.add([tools_reply(call("debug_start", id="s", program="escape.py")), {"text": "ok"}])

    await run("debug", model, workspace, sandbox={"mode": "workspace-write"})

    result = last_tool_results(model.requests[1])["s"]
    assert result.startswith("state: stopped (exception)"), result
    assert "Read-only file system" in result or "read-only" in result.lower()
    assert not outside.exists()
    assert not _processes_in(workspace)


def test_doctor_names_the_debug_sources(workspace, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "replay:none"}))
    env = {**os.environ, "AGENT_LSP_SETTINGS": str(settings), "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace), "--json"],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    check = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["debug"]
    assert check["ok"] and check["detail"].startswith(f"debugpy {importlib.metadata.version('debugpy')} ("), check


async def test_at_the_timeout_the_program_is_paused_where_it_is(model, workspace):
    (workspace / "spin.py").write_text("n = 0\nwhile True:\n    n += 1\n")
    model.add([
        tools_reply(call("debug_step", id="early", action="next")),
        tools_reply(call("debug_start", id="s", program="spin.py", timeout=1)),
        tools_reply(call("debug_eval", id="e", expression="__file__.endswith('spin.py')")),
        {"text": "it never ends"},
    ])

    await run("debug", model, workspace)

    assert "no debug session: start one with debug_start" in last_tool_results(model.requests[1])["early"]
    paused = last_tool_results(model.requests[2])["s"]
    assert paused.startswith("state: stopped (pause)\nlocation: spin.py:"), paused
    assert last_tool_results(model.requests[3])["e"] == "__file__.endswith('spin.py') (bool) = True"
    assert not _processes_in(workspace)


async def test_an_interpreter_that_cannot_start_is_a_clear_error(model, buggy):
    model.add([tools_reply(call("debug_start", id="s", program="buggy.py")), {"text": "ok"}])

    report, _, _ = await run("debug", model, buggy, debug={"python": "/nonexistent/python3"})

    result = last_tool_results(model.requests[1])["s"]
    assert "debug.python '/nonexistent/python3' is not an executable program" in result, result
    assert report.stop_reason == "done" and not (buggy / "pid.txt").exists()


def test_a_users_agent_never_gets_the_debugger(workspace, tmp_path, monkeypatch):
    from agent_lsp.agent.fs.prompt_files import discover
    from agent_lsp.agent.tools.delegate import narrow
    from agent_lsp.agent.tools.toolsets import main_tools
    from agent_lsp.settings import DebugSettings

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "d.md").write_text("---\nname: dbg\ndescription: d\ntools: Read, debug_start, debug_step\n---\nd\n")
    (agents / "r.md").write_text("---\nname: plain\ndescription: r\n---\nr\n")
    found = discover([workspace])
    tools = main_tools(agents=found.agents, debug=DebugSettings())

    assert DEBUG_TOOLS <= {t.name for t in tools}
    assert [t.name for t in narrow(found.agents["dbg"], tools)] == ["read_file"]
    assert not {t.name for t in narrow(found.agents["plain"], tools)} & DEBUG_TOOLS  # no `tools`: read-only ones


async def test_allow_for_session_remembers_the_program_not_every_debug_start(model, buggy):
    (buggy / "other.py").write_text("print('other')\n")
    model.add([
        tools_reply(call("debug_start", id="a", program="buggy.py")),
        tools_reply(call("debug_start", id="b", program="buggy.py")),
        tools_reply(call("debug_start", id="c", program="other.py")),
        {"text": "ok"},
    ])
    approver = ScriptedApprover(Decision.ALLOW_SESSION, Decision.DENY)

    await run("debug", model, buggy, approver=approver)

    # buggy.py asked once (then remembered); other.py asked again, and denied.
    assert [r.tool for r in approver.requests] == ["debug_start", "debug_start"]
    assert "other.py" in approver.requests[1].detail
    results = last_tool_results(model.requests[3])
    assert "denied" in results["c"].lower()
    assert last_tool_results(model.requests[2])["b"].startswith("state: exited (0)")


def test_agent_lsp_run_debugs_and_telemetry_has_the_debug_spans(model, buggy):
    from agent_lsp.testing.otlp import OtlpReceiver
    from tests.headless.test_telemetry import by_name, otel_env, run_agent

    model.add("MAIN", [
        tools_reply(call("debug_start", id="s", program="buggy.py", breakpoints=[{"path": "buggy.py", "line": RETURN_LINE}])),
        tools_reply(call("debug_stop", id="x")),
        {"text": "count is one short"},
    ])
    with OtlpReceiver() as receiver:
        proc = run_agent(model, buggy, otel_env(receiver))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert receiver.wait(lambda: by_name(receiver.spans(), "execute_tool debug_stop")), receiver.bodies
        spans = receiver.spans()

    start = by_name(spans, "execute_tool debug_start")
    assert len(start) == 1 and start[0].attributes["gen_ai.tool.name"] == "debug_start"
    assert "count (int) = 2" in last_tool_results(model.requests[1])["s"]
    assert "✓ debug_start ok" in proc.stderr  # the terminal shows the call like any other
    assert not _processes_in(buggy)


async def test_stop_on_entry_stops_at_the_first_line(model, buggy):
    model.add([tools_reply(call("debug_start", id="s", program="buggy.py", stopOnEntry=True)), {"text": "ok"}])

    await run("debug", model, buggy)

    result = last_tool_results(model.requests[1])["s"]
    assert result.startswith("state: stopped (entry)\nlocation: buggy.py:1\n"), result
    assert not (buggy / "pid.txt").exists()  # nothing of the program ran yet


def test_sigint_while_the_debugged_program_runs_ends_it_with_the_run(model, workspace):
    import signal
    import time

    from tests.headless.test_run_cli import agent_run, report_of

    (workspace / "spin.py").write_text(
        "import os\nfrom pathlib import Path\nPath('pid.txt').write_text(str(os.getpid()))\nwhile True:\n    pass\n"
    )
    model.add([tools_reply(call("debug_start", id="s", program="spin.py", timeout=600)), {"text": "never"}])
    proc = subprocess.Popen(agent_run(model, workspace, "debug spin"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (workspace / "pid.txt").exists() or not (workspace / "pid.txt").read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the program did not start under the debugger"
            time.sleep(0.05)
        pid = int((workspace / "pid.txt").read_text())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert report_of(out)["stopReason"] == "cancelled"
    assert not alive(pid)
    assert not _processes_in(workspace.resolve())


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_approval_sandboxed_allow_covers_a_sandboxed_debug_start_only(model, buggy):
    script = [tools_reply(call("debug_start", id="s", program="buggy.py")), {"text": "ok"}]
    model.add(script)
    boxed = ScriptedApprover(Decision.DENY)
    await run("debug", model, buggy, approver=boxed, sandbox={"mode": "workspace-write"},
              approval={"sandboxed": "allow"})
    assert boxed.requests == []
    assert last_tool_results(model.requests[-1])["s"].startswith("state: exited (0)")

    model.add(script)
    unboxed = ScriptedApprover(Decision.DENY)
    await run("debug", model, buggy, approver=unboxed, approval={"sandboxed": "allow"})
    assert [r.tool for r in unboxed.requests] == ["debug_start"]


async def test_a_bare_debug_deny_takes_the_tool_and_the_advice_away(model, buggy):
    model.add([{"text": "ok"}])

    await run("hello", model, buggy, permissions={"deny": ["Debug"]})

    request = model.requests[-1]
    assert "debug_start" not in _tool_names(request)
    assert "instead of adding prints" not in request["messages"][0]["content"]
