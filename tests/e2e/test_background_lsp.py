"""Background processes over real LSP (issue 35, CONTRACT "Background processes", Decisions 60
and 86): `run_command {background: true}` answers with `p1` and the output so far, later output
comes through `process_output`, `stop_process` and `agentLsp.stopProcess` end one, the run's end
stops the rest, and the report and the stream list them."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.e2e.harness import tool_messages
from tests.unit.kit import call, tools_reply

PY = sys.executable
ALLOW = {"approval": {"default": "allow"}}
BACKGROUND = {"process_output", "stop_process"}

# A dev server: writes a file of the workspace (before any later command starts: only its own
# end can find that change), says "ready", then "later" once the file `go` appears (then writes
# `ack`), and runs on until stopped. Its pid goes to `<name>.pid`.
SERVER = """\
import os, sys, time
name = sys.argv[1]
open(name + ".pid", "w").write(str(os.getpid()))
open("made.txt", "w").write("made by the server\\n")
print("ready", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
print("later", flush=True)
open("ack", "w").close()
while True:
    time.sleep(1)
"""
# The model's own foreground step: it makes `go` and waits for the server's `ack`, so the
# server's "later" is written before the next call reads it.
GO = """\
import os, time
open("go", "w").close()
for _ in range(1000):  # 20 s at most
    if os.path.exists("ack"):
        break
    time.sleep(0.02)
"""
SLEEPER = """\
import os, sys, time
open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
print("zzz", flush=True)
while True:
    time.sleep(1)
"""


def scripts(root: Path) -> None:
    (root / "server.py").write_text(SERVER)
    (root / "go.py").write_text(GO)
    (root / "sleeper.py").write_text(SLEEPER)


def gone(root: Path, name: str) -> bool:
    pid = int((root / f"{name}.pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").exists() and " Z " in Path(f"/proc/{pid}/stat").read_text()


def background(command: str, id: str) -> dict:
    return call("run_command", id=id, command=command, background=True)


async def test_early_output_later_output_stop_and_the_runs_end(open_editor, model, workspace):
    scripts(workspace)
    server, sleeper = f"{PY} -u server.py srv", f"{PY} -u sleeper.py slp"
    model.add("serve it", [
        tools_reply(background(server, "c1")),
        tools_reply(call("run_command", id="c2", command=f"{PY} go.py")),
        tools_reply(call("process_output", id="c3", processId="p1")),
        tools_reply(background(sleeper, "c4")),
        tools_reply(call("stop_process", id="c5", processId="p1")),
        tools_reply(call("process_output", id="c6", processId="p9")),
        {"text": "served"},
    ])
    editor = await open_editor("visual-studio-code", init=ALLOW)
    started = await editor.run("serve it")
    report = await editor.wait_stop(started["runId"], 40)

    # the process tools are offered from the request after the first start on, not before
    offered = [{t["function"]["name"] for t in r["tools"]} & BACKGROUND for r in model.requests]
    assert offered == [set()] + [BACKGROUND] * 6, offered
    results = tool_messages(model.requests[-1])
    assert results["c1"].startswith("processId: p1 (running)"), results["c1"]
    assert "ready" in results["c1"]  # the output so far: the first read
    assert "later" in results["c3"] and "ready" not in results["c3"], results["c3"]
    assert results["c4"].startswith("processId: p2 (running)") and "zzz" in results["c4"]
    assert results["c5"].startswith("processId: p1 (stopped"), results["c5"]
    assert "no background process 'p9'" in results["c6"], results["c6"]
    # p1 was stopped by the model, p2 by the run's end: both are gone, both listed
    assert report["stopReason"] == "done"
    assert [(p["processId"], p["command"], p["state"]) for p in report["processes"]] == [
        ("p1", server, "stopped"), ("p2", sleeper, "stopped"),
    ]
    assert all(isinstance(p["exitCode"], int) for p in report["processes"])
    assert gone(workspace, "srv") and gone(workspace, "slp")
    # what the server changed is the run's (its checkpoint found it when it ended)
    assert (workspace / "made.txt").resolve().as_uri() in report["editedFiles"], report["editedFiles"]
    events = [(e["processId"], e["state"]) for e in editor.events(started["runId"], "process")]
    assert events == [("p1", "running"), ("p2", "running"), ("p1", "stopped"), ("p2", "stopped")]
    stop_event = editor.events(started["runId"], "process")[-1]
    assert stop_event["command"] == sleeper and "exitCode" in stop_event
    assert "exitCode" not in editor.events(started["runId"], "process")[0]
    # history (Decision 78): agentLsp.history keeps them, and so does the transcript
    history = await editor.execute("agentLsp.history", {"sessionId": report["sessionId"]})
    kept = [(e["processId"], e["state"]) for e in history["runs"][0]["events"] if e["kind"] == "process"]
    assert kept == events
    records = [json.loads(line) for line in Path(report["transcript"]).read_text().splitlines()]
    logged = [r["event"] for r in records if isinstance(r.get("event"), dict) and r["event"].get("kind") == "process"]
    assert [(e["processId"], e["state"]) for e in logged] == events


async def test_a_fifth_background_process_is_refused(open_editor, model, workspace):
    scripts(workspace)
    calls = [background(f"{PY} -u sleeper.py s{i}", f"c{i}") for i in range(1, 6)]
    model.add("five of them", [tools_reply(*calls), {"text": "enough"}])
    editor = await open_editor("visual-studio-code", init=ALLOW)
    started = await editor.run("five of them")
    report = await editor.wait_stop(started["runId"], 40)

    results = tool_messages(model.requests[-1])
    assert [results[f"c{i}"].split(" ", 2)[1] for i in range(1, 5)] == ["p1", "p2", "p3", "p4"]
    assert "at most 4 background processes per run" in results["c5"], results["c5"]
    assert not (workspace / "s5.pid").exists()  # the fifth never ran
    assert [p["state"] for p in report["processes"]] == ["stopped"] * 4
    assert all(gone(workspace, f"s{i}") for i in range(1, 5))


def held(release: asyncio.Event):
    async def answer(_params):
        await release.wait()
        return "Allow"

    return answer


async def test_agentlsp_stop_process_and_a_cancel_stop_them(open_editor, model, workspace):
    scripts(workspace)
    model.add("hold on", [
        tools_reply(background(f"{PY} -u sleeper.py a", "c1"), background(f"{PY} -u sleeper.py b", "c2")),
        tools_reply(call("write_file", id="c3", path="x.txt", content="x")),
        {"text": "never"},
    ])
    editor = await open_editor("visual-studio-code")
    release = asyncio.Event()
    editor.approval_answers = ["Allow", "Allow", held(release)]
    started = await editor.run("hold on please")
    run_id = started["runId"]
    await editor.wait_for(lambda: len(editor.approval_requests) == 3, 30, "the write's approval")

    # a background command is asked like any command, saying it stays running
    assert "(in the background: it runs on until stopped or the run ends)" in editor.approval_requests[0].message
    assert await editor.execute("agentLsp.stopProcess", {"runId": run_id, "processId": "p1"}) is True
    assert gone(workspace, "a") and not gone(workspace, "b")
    assert await editor.execute("agentLsp.stopProcess", {"runId": run_id, "processId": "p1"}) is False
    assert await editor.execute("agentLsp.stopProcess", {"runId": run_id, "processId": "p7"}) is False
    assert await editor.execute("agentLsp.stopProcess", {"runId": "r-none", "processId": "p1"}) is False
    assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is True
    report = await editor.wait_stop(run_id, 30)

    assert report["stopReason"] == "cancelled"
    assert [(p["processId"], p["state"]) for p in report["processes"]] == [("p1", "stopped"), ("p2", "stopped")]
    assert gone(workspace, "b")
    assert await editor.execute("agentLsp.stopProcess", {"runId": run_id, "processId": "p2"}) is False


async def test_the_turn_limit_stops_them_too(open_editor, model, workspace):
    scripts(workspace)
    model.add("one turn", [tools_reply(background(f"{PY} -u sleeper.py m", "c1")), {"text": "never asked"}])
    editor = await open_editor("visual-studio-code", init={**ALLOW, "maxTurns": 1})
    started = await editor.run("one turn only")
    report = await editor.wait_stop(started["runId"], 40)

    assert report["stopReason"] == "max_turns"
    assert [(p["processId"], p["state"]) for p in report["processes"]] == [("p1", "stopped")]
    assert gone(workspace, "m")


# Says "start", then "bye" and exits 3 once `stop-now` appears.
QUITTER = """\
import os, sys, time
open("q.pid", "w").write(str(os.getpid()))
print("start", flush=True)
while not os.path.exists("stop-now"):
    time.sleep(0.02)
print("bye", flush=True)
sys.exit(3)
"""
# The model's foreground step: makes `stop-now` and waits until the quitter is gone.
WAIT_GONE = """\
import os, time
open("stop-now", "w").close()
pid = int(open("q.pid").read())
for _ in range(1000):  # 20 s at most
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.02)
"""


async def test_a_process_that_ends_on_its_own_shows_its_exit_code(open_editor, model, workspace):
    (workspace / "quitter.py").write_text(QUITTER)
    (workspace / "wait_gone.py").write_text(WAIT_GONE)
    model.add("let it end", [
        tools_reply(background(f"{PY} -u quitter.py", "c1")),
        tools_reply(call("run_command", id="c2", command=f"{PY} wait_gone.py")),
        tools_reply(call("process_output", id="c3", processId="p1")),
        tools_reply(call("stop_process", id="c4", processId="p1")),
        {"text": "it ended"},
    ])
    editor = await open_editor("visual-studio-code", init=ALLOW)
    started = await editor.run("let it end")
    report = await editor.wait_stop(started["runId"], 40)

    results = tool_messages(model.requests[-1])
    assert results["c3"].startswith("processId: p1 (exited with code 3)") and "bye" in results["c3"], results["c3"]
    assert "it had already ended" in results["c4"], results["c4"]
    assert report["processes"] == [
        {"processId": "p1", "command": f"{PY} -u quitter.py", "state": "exited", "exitCode": 3}]
    ends = [e for e in editor.events(started["runId"], "process") if e["state"] != "running"]
    assert [(e["state"], e["exitCode"]) for e in ends] == [("exited", 3)]


async def test_a_flood_of_output_is_capped_head_and_tail_like_run_command(open_editor, model, workspace):
    (workspace / "flood.py").write_text(
        "import sys, time\nsys.stdout.write('FIRST\\n' + 'x' * 6_000_000 + '\\nLAST\\n')\nsys.stdout.flush()\n"
        "while True:\n    time.sleep(1)\n")
    model.add("flood", [tools_reply(background(f"{PY} -u flood.py", "c1")), {"text": "flooded"}])
    editor = await open_editor("visual-studio-code", init=ALLOW)
    started = await editor.run("flood it")
    await editor.wait_stop(started["runId"], 40)

    first = tool_messages(model.requests[-1])["c1"]
    assert first.startswith("processId: p1 (running)"), first[:300]
    assert "bytes in the middle were dropped (not saved anywhere)" in first.split("\n", 1)[0], first[:300]
