"""Decision 24 through the real front ends: `agent-lsp run --json` and the LSP server report a
typed `stopCause` (in the report, the stop event and the transcript's stop record), and who
cancelled is told by it: Ctrl-C and agentLsp.cancel are the user, SIGTERM/SIGHUP a signal, the
editor shutting the server down (or going away) a shutdown. Exit codes follow stopReason."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types

from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

EDIT = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


def agent_run(model, workspace: Path, task: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "agent_lsp", "run", task, "--base-url", model.base_url, "--model", "m",
            "--workspace", str(workspace), "--yes", "--json", *extra]


def stop_record(report: dict) -> dict:
    last = json.loads(Path(report["transcript"]).read_text().strip().splitlines()[-1])
    assert last["type"] == "stop"
    return last["report"]


# -- the terminal ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "reason", "cause", "code"), [
    ("answer", "done", "answer", 0),
    ("turns", "max_turns", "turns", 3),
    ("content_filter", "fatal", "content_filter", 1),
    ("output_limit", "fatal", "output_limit", 1),
])
def test_the_json_report_carries_the_cause_and_the_exit_code_follows_the_reason(model, workspace, case, reason, cause, code):
    script = {
        "answer": [{"text": "done"}],
        "turns": [tools_reply(call("read_file", path="calc.py"))] * 2,
        "content_filter": [{"text": "", "finish_reason": "content_filter"}],
        "output_limit": [{"text": "a", "finish_reason": "length"}, {"text": "b", "finish_reason": "length"}],
    }[case]
    model.add(script)
    proc = subprocess.run(agent_run(model, workspace, "go", "--max-turns", "1") if case == "turns" else agent_run(model, workspace, "go"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert (report["stopReason"], report["stopCause"]) == (reason, cause)
    assert stop_record(report)["stopCause"] == cause


@pytest.mark.parametrize(("sig", "cause", "summary"), [
    (signal.SIGINT, "user", "Cancelled by the user"),
    (signal.SIGTERM, "signal", "Stopped by SIGTERM"),
    (signal.SIGHUP, "signal", "Stopped by SIGHUP"),
])
def test_who_cancelled_the_terminal_run_is_its_cause(model, workspace, sig, cause, summary):
    model.add([tools_reply(EDIT), {"text": "never arrives", "ttft": 30}])
    proc = subprocess.Popen(agent_run(model, workspace, "fix add"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(model.log) < 2:  # the edit is made, the second model call is held
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    report = json.loads(out)
    assert (report["stopReason"], report["stopCause"]) == ("cancelled", cause)
    assert report["summary"].startswith(summary), report["summary"]
    assert stop_record(report)["stopCause"] == cause


# -- the LSP server -------------------------------------------------------------------------------
async def slow_run(open_editor, model):
    model.add("slow one", [{"text": "never sent", "ttft": 30}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("slow one please")
    await editor.wait_for(lambda: model.log, 10, "the model request")  # held in the model call
    return editor, started["runId"]


async def test_the_lsp_stop_event_carries_the_cause(open_editor, model):
    model.add("quick", [{"text": "fine"}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("quick one")
    report = await editor.wait_stop(started["runId"])
    assert (report["stopReason"], report["stopCause"]) == ("done", "answer")
    assert stop_record(report)["stopCause"] == "answer"


@pytest.mark.parametrize("how", ["command", "progress"])
async def test_an_lsp_cancel_is_the_user(open_editor, model, how):
    editor, run_id = await slow_run(open_editor, model)
    if how == "command":
        assert await editor.execute("agentLsp.cancel", {"runId": run_id}) is True
    else:
        await editor.wait_progress(run_id, types.WorkDoneProgressBegin, 10)
        editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=run_id))
    report = await editor.wait_stop(run_id, 10)
    assert (report["stopReason"], report["stopCause"]) == ("cancelled", "user")
    assert report["summary"].startswith("Cancelled by the user")


async def test_an_lsp_shutdown_mid_run_is_a_shutdown(open_editor, model):
    editor, run_id = await slow_run(open_editor, model)
    await editor.shutdown(10)
    report = await editor.wait_stop(run_id, 5)
    assert (report["stopReason"], report["stopCause"]) == ("cancelled", "shutdown")
    assert "by the user" not in report["summary"]
    assert stop_record(report)["stopCause"] == "shutdown"


@pytest.mark.parametrize("ending", ["exit-without-shutdown", "editor-died"])
async def test_the_server_going_away_mid_run_is_a_shutdown(open_editor, model, state_dir, ending):
    editor, run_id = await slow_run(open_editor, model)
    if ending == "exit-without-shutdown":
        editor.client.exit(None)
    else:
        editor.close_stdin()
    await editor.wait_exit(10)
    # No client is left to hear the stop event: the transcript's stop record says it.
    transcript = state_dir / "runs" / f"{run_id}.jsonl"
    report = stop_record({"transcript": str(transcript)})
    assert (report["stopReason"], report["stopCause"]) == ("cancelled", "shutdown")
