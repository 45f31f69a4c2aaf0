"""Issue 21 ("a newcomer's day"), items 21-28: the real `agent-lsp` CLI as a subprocess against
the scripted model. What a person sees: a line while the model is asked, the run id and how to
rewind it, runs in `sessions`, rewind by a short id with honest conflict hints, the workspace
found from a subfolder, no session for a run that never reached the model, `sessions delete`,
and messages that say each thing once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

EDIT = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_lsp", *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, cwd=cwd, env=env)


def sessions_json(workspace: Path, cwd: Path | None = None) -> list[dict]:
    args = ["sessions", "--json"] if cwd is not None else ["sessions", "--json", "--workspace", str(workspace)]
    proc = cli(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def edit_run(model, workspace: Path, task: str = "fix add", *extra: str) -> dict:
    model.add(task, [tools_reply(EDIT), {"text": "Fixed."}])
    proc = run_cli(agent_run(model, workspace, task, *extra))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return report_of(proc.stdout)


# -- 21: a line while the model is asked -------------------------------------------------------

def test_a_line_says_the_model_is_being_asked_before_the_first_token(model, workspace):
    model.add([{"text": "Hello there.", "ttft": 0.5}])
    proc = run_cli(agent_run(model, workspace, "hi", json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    waiting = f"asking the model (m at {model.base_url})"
    assert waiting in proc.stdout
    assert proc.stdout.index(waiting) < proc.stdout.index("Hello there."), "said while waiting, before the text"


def test_with_json_the_waiting_line_is_on_stderr_and_stdout_is_only_the_report(model, workspace):
    model.add([{"text": "Hello there."}])
    proc = run_cli(agent_run(model, workspace, "hi"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"asking the model (m at {model.base_url})" in proc.stderr
    assert "asking the model" not in proc.stdout
    assert report_of(proc.stdout)["finalText"] == "Hello there."


def test_on_a_tty_the_waiting_line_is_erased_when_the_text_comes(model, workspace):
    model.add([{"text": "Hello there.", "ttft": 0.3}])
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(agent_run(model, workspace, "hi"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(master)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0
    waiting = shown.index("asking the model")
    assert "\r\x1b[K" in shown[waiting:shown.index("Hello there.")], "the waiting line is cleared before the text"
    assert report_of(out.decode())["finalText"] == "Hello there."


# -- 22: run ids: printed, listed, and a prefix rewinds ----------------------------------------

def test_the_run_id_and_how_to_rewind_it_are_printed_and_the_short_id_works(model, workspace):
    model.add([tools_reply(EDIT), {"text": "Fixed."}])
    proc = run_cli(agent_run(model, workspace, "fix add", json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("run r-"))
    run_id = line.split()[1]
    assert "session s-" in line and "rewind with `agent-lsp rewind r-" in line
    short = line.split("`agent-lsp rewind ")[1].rstrip("`")
    assert run_id.startswith(short) and len(short) >= 4 and len(short) < len(run_id)

    rewound = cli("rewind", short, "--workspace", str(workspace))
    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert "return a - b" in (workspace / "calc.py").read_text()


def test_sessions_list_their_runs_in_text_and_json(model, workspace):
    report = edit_run(model, workspace)
    [item] = sessions_json(workspace)
    assert item["runs"] == 1
    [run] = item["runList"]
    assert run["runId"] == report["runId"] and run["stopReason"] == "done"
    assert run["editedFiles"] == report["editedFiles"] and run["started"].endswith("Z")
    text = cli("sessions", "--workspace", str(workspace))
    assert report["runId"] in text.stdout and "1 run," in text.stdout


def _clone_manifest(workspace: Path, state_dir: Path, run_id: str, new_id: str) -> None:
    from agent_lsp.agent.state.sessions import workspace_state

    runs = workspace_state(state_dir, workspace) / "checkpoints" / "runs"
    data = json.loads((runs / f"{run_id}.json").read_text())
    data["runId"] = new_id
    (runs / f"{new_id}.json").write_text(json.dumps(data))


def test_an_ambiguous_prefix_exits_2_listing_the_matches(model, workspace, state_dir):
    report = edit_run(model, workspace)
    # A second run whose id starts like the first one's (ids are random: made so by hand).
    twin = report["runId"][:6] + "0000000000"
    _clone_manifest(workspace, state_dir, report["runId"], twin)
    proc = cli("rewind", report["runId"][:6], "--workspace", str(workspace))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert report["runId"] in proc.stderr and twin in proc.stderr
    assert "return a + b" in (workspace / "calc.py").read_text(), "nothing rewound"


def test_a_prefix_shorter_than_4_characters_is_not_taken(model, workspace):
    report = edit_run(model, workspace)
    proc = cli("rewind", report["runId"][:3], "--workspace", str(workspace))
    assert proc.returncode == 2 and "unknown runId" in proc.stderr
    assert "return a + b" in (workspace / "calc.py").read_text()


# -- 23: a rewind with only conflicts ----------------------------------------------------------

def test_a_rewind_with_only_conflicts_offers_no_undo_and_names_the_real_flag(model, workspace):
    report = edit_run(model, workspace)
    (workspace / "calc.py").write_text("the user rewrote it\n")
    proc = cli("rewind", report["runId"], "--workspace", str(workspace))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "undo it with" not in proc.stdout, "nothing was restored: there is nothing to undo"
    assert "use --force to overwrite it" in proc.stdout
    assert "pass force" not in proc.stdout and "--include-later" not in proc.stdout, "no later run touched it"
    assert (workspace / "calc.py").read_text() == "the user rewrote it\n"


def test_a_conflict_from_a_later_run_names_include_later(model, workspace):
    model.add("first", [tools_reply(EDIT), {"text": "one"},
                        tools_reply(call("edit_file", path="calc.py", old_text="a * b", new_text="b * a")), {"text": "two"}])
    first = report_of(run_cli(agent_run(model, workspace, "first")).stdout)
    second = run_cli(agent_run(model, workspace, "again", "--session", first["sessionId"]))
    assert second.returncode == 0, second.stdout + second.stderr
    proc = cli("rewind", first["runId"], "--workspace", str(workspace))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "use --force to overwrite it, or --include-later to rewind those runs too" in proc.stdout
    assert "undo it with" not in proc.stdout
    done = cli("rewind", first["runId"], "--include-later", "--workspace", str(workspace))
    assert done.returncode == 0 and "undo it with `agent-lsp rewind w-" in done.stdout


async def test_over_lsp_the_conflict_names_the_command_arguments(open_editor, model, workspace):
    model.add("change", [tools_reply(EDIT), {"text": "done"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    started = await editor.run("change it")
    report = await editor.wait_stop(started["runId"], 20)
    (workspace / "calc.py").write_text("the user rewrote it\n")
    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    [conflict] = result["conflicts"]
    assert "changed since the run left it" in conflict["reason"] and "`force: true`" in conflict["reason"]
    assert "--force" not in conflict["reason"] and "pass force" not in conflict["reason"]


# -- 25: the workspace, from a subfolder -------------------------------------------------------

def test_from_a_subfolder_sessions_and_rewind_find_the_workspace_with_state(model, workspace):
    report = edit_run(model, workspace)
    sub = workspace / "pkg" / "deep"
    sub.mkdir(parents=True)
    [item] = sessions_json(workspace, cwd=sub)
    assert item["runList"][0]["runId"] == report["runId"]
    proc = cli("rewind", report["runId"], cwd=sub)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "return a - b" in (workspace / "calc.py").read_text()


@pytest.mark.parametrize("marker", ["state", ".agent-lsp", ".git", "none"])
def test_run_from_a_subfolder_works_on_the_nearest_workspace(model, workspace, marker):
    if marker == "state":
        edit_run(model, workspace, "earlier run")
    elif marker == ".agent-lsp":
        (workspace / ".agent-lsp").mkdir()
    elif marker == ".git":
        subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    sub = workspace / "pkg"
    sub.mkdir()
    (sub / "calc.py").write_text("# the subfolder's own file\n")
    model.add("look", [tools_reply(call("read_file", id="r", path="calc.py")), {"text": "seen"}])
    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "run", "look", "--base-url", model.base_url, "--model", "m",
                           "--yes", "--json"], cwd=sub, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = [m["content"] for m in model.requests[-1]["messages"] if m.get("tool_call_id") == "r"][0]
    expected = "the subfolder's own file" if marker == "none" else "return a "
    assert expected in result, result


# -- 26: a run that never reached the model; sessions delete -----------------------------------

@pytest.mark.parametrize("fault", ["wrong-url", "no-key", "server-error"])
def test_a_run_that_never_reached_the_model_leaves_no_session_and_no_hint(model, workspace, fault):
    env = dict(os.environ)
    argv = agent_run(model, workspace, "anything", json_report=False)
    if fault == "wrong-url":
        argv = agent_run(model, workspace, "anything", json_report=False, base_url="http://127.0.0.1:9/v1")
    elif fault == "no-key":
        argv = [a for a in argv if a not in ("--base-url", model.base_url)]
        env.pop("OPENAI_API_KEY", None)
    else:
        model.add([{"status": 500, "message": "the model is down", "retry_after": 0.01, "repeat": 3}])
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--session" not in proc.stdout and "to continue" not in proc.stdout
    assert "no session kept" in proc.stdout
    assert sessions_json(workspace) == []


def test_a_run_that_reached_the_model_keeps_its_session(model, workspace):
    model.add([{"text": "half an answer that the stream cuts somewhere in its middle", "fault": "cut"}])
    proc = run_cli(agent_run(model, workspace, "anything"))
    report = report_of(proc.stdout)
    assert report["stopReason"] == "fatal"
    assert [i["sessionId"] for i in sessions_json(workspace)] == [report["sessionId"]]
    assert "--session" in report["summary"]


def test_sessions_delete_by_id_and_unknown_ids(model, workspace):
    first = edit_run(model, workspace, "first")
    second = edit_run(model, workspace, "second")
    unknown = cli("sessions", "delete", first["sessionId"], "s-nope", "--workspace", str(workspace))
    assert unknown.returncode == 2 and "s-nope" in unknown.stderr
    assert len(sessions_json(workspace)) == 2, "a typo deletes nothing"
    proc = cli("sessions", "--workspace", str(workspace), "delete", first["sessionId"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [i["sessionId"] for i in sessions_json(workspace)] == [second["sessionId"]]
    assert not Path(first["transcript"]).exists() and Path(second["transcript"]).exists()


@pytest.mark.parametrize("age, deleted", [("30d", True), ("12h", True), ("40d", False)])
def test_sessions_delete_older_than(model, workspace, state_dir, age, deleted):
    from agent_lsp.agent.state.sessions import workspace_state

    old = edit_run(model, workspace, "old")
    new = edit_run(model, workspace, "new")
    index = workspace_state(state_dir, workspace) / "sessions" / f"{old['sessionId']}.json"
    data = json.loads(index.read_text())
    data["updated"] = time.time() - 31 * 86400  # last used a month ago
    index.write_text(json.dumps(data))
    proc = cli("sessions", "delete", "--older-than", age, "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    left = {i["sessionId"] for i in sessions_json(workspace)}
    assert new["sessionId"] in left
    assert (old["sessionId"] not in left) == deleted


@pytest.mark.parametrize("bad, says", [(["--older-than", "30"], "is not an age"), (["--older-than", "3w"], "is not an age"),
                                       ([], "give session ids or --older-than")])
def test_sessions_delete_usage_errors_exit_2(workspace, bad, says):
    proc = cli("sessions", "delete", *bad, "--workspace", str(workspace))
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


# -- 28: each thing said once ------------------------------------------------------------------

def test_a_failed_command_says_error_once(model, workspace):
    model.add([tools_reply(call("run_command", id="c", command=f"{sys.executable} -c 'raise SystemExit(1)'")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "go", json_report=False))
    assert "✗ run_command error: exit code 1" in proc.stdout
    assert "error: error:" not in proc.stdout
    results = {m["tool_call_id"]: m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"}
    assert results["c"].startswith("error: exit code 1"), "the model is still told it failed"


def test_a_denied_call_says_denied_once(model, workspace):
    model.add([tools_reply(call("run_command", id="c", command="touch x")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "go", yes=False, json_report=False))
    assert "run_command denied: no one could be asked" in proc.stdout
    assert "denied: denied:" not in proc.stdout


def test_the_report_says_done_once(model, workspace):
    model.add([{"text": "hi"}])
    proc = run_cli(agent_run(model, workspace, "go", json_report=False))
    assert "✓ Done: 1 turn" in proc.stdout and "done: Done:" not in proc.stdout


async def test_an_approval_event_does_not_repeat_its_state(model, workspace):
    from tests.unit.kit import ScriptedApprover, run

    model.add([tools_reply(call("run_command", command="echo hi")), {"text": "ok"}])
    _report, events, _session = await run("go", model, workspace, approver=ScriptedApprover(), approval={"default": "ask"})
    approvals = events.of("approval")
    assert [wire_fields(e)["state"] for e in approvals] == ["pending", "allowed"]
    for event in approvals:  # clients show "[approval: pending] <text>"
        assert not event.text.startswith("approval"), event.text
        assert "echo hi" in event.text


def test_sigterm_is_reported_as_a_signal_not_as_the_user(model, workspace):
    model.add([tools_reply(EDIT), {"text": "never arrives", "ttft": 30}])
    proc = subprocess.Popen(agent_run(model, workspace, "fix add"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(model.log) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    summary = report_of(out)["summary"]
    assert summary.startswith("Stopped by SIGTERM") and "by the user" not in summary


def test_long_lines_are_cut_at_a_word_without_a_tty(model, workspace):
    words = " ".join(f"word{i:03d}" for i in range(60))
    model.add([tools_reply(call("run_command", command=f"echo {words}")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "go", json_report=False))
    line = next(x for x in proc.stdout.splitlines() if "▸ run_command echo" in x)
    assert line.endswith("…")
    shown = line.split("echo ", 1)[1].rstrip("…").split()
    assert all(len(w) == 7 and w.startswith("word") for w in shown), line


def test_with_json_the_streamed_text_ends_its_line(model, workspace):
    model.add([{"text": "The answer has no newline"}])
    proc = run_cli(agent_run(model, workspace, "go"))
    assert proc.returncode == 0
    assert proc.stderr.endswith("The answer has no newline\n"), repr(proc.stderr[-80:])


def test_acp_rewind_text_offers_an_undo_only_when_something_was_restored(tmp_path):
    from agent_lsp.acp.session import describe_rewind
    from agent_lsp.agent.state.rewind import CHANGED_SINCE, RewindResult

    path = tmp_path / "calc.py"
    only_conflicts = RewindResult("w-1", [], [(path, CHANGED_SINCE)], [], ["r-1"], {path})
    text = describe_rewind(only_conflicts.to_dict(force="`/rewind --force`", include_later="`/rewind --include-later`"), [tmp_path])
    assert "puts the files back" not in text and "Nothing was restored" in text
    assert "use `/rewind --force` to overwrite it, or `/rewind --include-later` to rewind those runs too" in text
    restored = RewindResult("w-2", [path], [], [], ["r-1"])
    assert "`/rewind w-2` puts the files back" in describe_rewind(restored.to_dict(), [tmp_path])
