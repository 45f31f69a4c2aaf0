"""Issue 24 / Decisions 31-32: Claude Code hooks through the real `agent-lsp run` against the
scripted model: hook scripts written the way Claude Code's documentation shows them (stdin JSON,
exit 2 or JSON output) block and allow as they do there; payload field names; exit 2 per event;
a hanging hook killed at its timeout; hooks never see the key; a missing command is a visible,
non-blocking error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli, run_on_a_tty
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(90)
HOOKS = Path(__file__).with_name("hooks")
PY = sys.executable


def hook(command: str, matcher: str = "", timeout: float | None = None) -> dict:
    entry: dict = {"type": "command", "command": command}
    if timeout is not None:
        entry["timeout"] = timeout
    return {"matcher": matcher, "hooks": [entry]}


def settings(tmp_path: Path, hooks: dict, **extra) -> str:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": hooks, **extra}))
    return str(path)


def stream_run(model, workspace, task, settings_path, *extra, yes=True):
    proc = run_cli(agent_run(model, workspace, task, "--settings", settings_path, "--output-format", "stream-json",
                             *extra, yes=yes, json_report=False))
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc, lines, lines[-1]["report"] if lines and lines[-1].get("type") == "result" else None


def hook_events(lines):
    return [e for e in lines if e.get("type") == "hook"]


def test_a_pre_tool_use_hook_blocks_rm_rf_with_exit_2_and_the_model_reads_why(model, workspace, tmp_path):
    (workspace / "build").mkdir()
    model.add([tools_reply(call("run_command", id="c1", command="rm -rf build")), {"text": "ok, I will not"}])
    path = settings(tmp_path, {"PreToolUse": [hook(f"{PY} {HOOKS / 'block_rm.py'}", "Bash")]})
    proc, lines, report = stream_run(model, workspace, "clean up", path)

    assert proc.returncode == 0, proc.stderr
    assert (workspace / "build").is_dir(), "the blocked command never ran (even with --yes)"
    result = last_tool_results(model.requests[1])["c1"]
    assert result.startswith("denied: a PreToolUse hook denied it: Blocked by policy: recursive forced delete"), result
    [event] = hook_events(lines)
    assert event["event"] == "PreToolUse" and event["blocked"] is True and event["exitCode"] == 2
    assert event["command"] == f"{PY} {HOOKS / 'block_rm.py'}"  # the declared string
    assert event["message"].startswith("Blocked by policy") and event["agentId"] == "main"
    assert report["denied"] == 1
    records = [json.loads(line) for line in Path(report["transcript"]).read_text().splitlines()]
    assert [r["exitCode"] for r in records if r["type"] == "hook"] == [2]


def test_a_json_deny_and_a_non_matching_matcher(model, workspace, tmp_path):
    (workspace / "build").mkdir()
    model.add([tools_reply(call("run_command", id="c1", command="rm -rf build")), {"text": "fine"}])
    path = settings(tmp_path, {"PreToolUse": [hook(str(HOOKS / "deny_json.sh"), "Bash|run_command"),
                                              hook("touch never-ran.txt", "Edit|Write")]})
    proc, lines, _ = stream_run(model, workspace, "clean up", path)

    assert proc.returncode == 0, proc.stderr
    assert (workspace / "build").is_dir() and not (workspace / "never-ran.txt").exists()
    assert "rm -rf is denied by the deny_json hook" in last_tool_results(model.requests[1])["c1"]
    assert [(e["exitCode"], e["blocked"]) for e in hook_events(lines)] == [(0, True)]


def test_an_allowing_hook_skips_the_prompt_only(model, workspace, tmp_path):
    # No TTY and no --yes: side effects are denied, unless a hook allows them.
    model.add([tools_reply(call("run_command", id="c1", command="touch made.txt"),
                           call("run_command", id="c2", command="touch other.txt")),
               {"text": "done"}])
    path = settings(tmp_path, {"PreToolUse": [hook(str(HOOKS / "allow_touch.sh"), "Bash")]},
                    approval={"tools": {"run_command": "ask"}})
    proc, _, report = stream_run(model, workspace, "make files", path, yes=False)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "made.txt").exists() and (workspace / "other.txt").exists()

    # A deny of the user's policy still denies what a hook allows.
    model.add([tools_reply(call("run_command", id="c3", command="touch third.txt")), {"text": "done"}])
    path = settings(tmp_path, {"PreToolUse": [hook(str(HOOKS / "allow_touch.sh"), "Bash")]},
                    approval={"tools": {"run_command": "deny"}})
    proc, _, report = stream_run(model, workspace, "make files", path, yes=False)
    assert not (workspace / "third.txt").exists() and report["denied"] == 1


def test_a_recording_hook_sees_claude_code_field_names(model, workspace, tmp_path):
    log = tmp_path / "events.jsonl"
    record = f"{PY} {HOOKS / 'record.py'} {log}"
    model.add([
        tools_reply(call("edit_file", id="e1", path="calc.py", old_text="return a - b", new_text="return a + b"),
                    call("run_command", id="c1", command="echo hi", timeout=5)),
        tools_reply(call("list_files", id="l1")),
        {"text": "all done"},
    ])
    every = {event: [hook(record)] for event in ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop",
                                                  "SessionStart", "PreCompact", "Notification")}
    proc, lines, report = stream_run(model, workspace, "fix calc", settings(tmp_path, every))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    names = [e["hook_event_name"] for e in events]
    assert names[:2] == ["SessionStart", "UserPromptSubmit"] and names[-1] == "Stop", names
    for e in events:
        assert e["session_id"] == report["sessionId"] and e["transcript_path"] == report["transcript"]
        assert e["cwd"] == str(workspace) and e["_cwd"] == str(workspace)
        assert e["_env"] == {"CLAUDE_PROJECT_DIR": str(workspace), "AGENT_LSP_PROJECT_DIR": str(workspace)}
        assert e["_env_has_key"] is False and e["_env_key_var"] is False, "hooks never see the key"
    start, prompt, *tools, stop = events
    assert start["source"] == "startup" and prompt["prompt"] == "fix calc" and stop["stop_hook_active"] is False
    pre = {e["tool_use_id"]: e for e in tools if e["hook_event_name"] == "PreToolUse"}
    post = {e["tool_use_id"]: e for e in tools if e["hook_event_name"] == "PostToolUse"}
    assert pre["e1"]["tool_name"] == "Edit" and pre["e1"]["tool_input"] == {
        "file_path": str(workspace / "calc.py"), "old_string": "return a - b", "new_string": "return a + b"}
    assert pre["c1"]["tool_name"] == "Bash" and pre["c1"]["tool_input"] == {
        "command": "echo hi", "description": "", "timeout": 5000}
    assert pre["l1"]["tool_name"] == "Glob" and pre["l1"]["tool_input"] == {"pattern": "**/*", "path": str(workspace)}
    bash = post["c1"]["tool_response"]
    assert bash["success"] is True and bash["exit_code"] == 0 and bash["stdout"].strip() == "hi"
    assert set(bash) == {"success", "output", "stdout", "stderr", "exit_code", "interrupted"}
    assert post["e1"]["tool_response"]["filePath"] == str(workspace / "calc.py")
    assert post["e1"]["tool_response"]["success"] is True
    kinds = [e["event"] for e in hook_events(lines)]
    # A Notification hook runs beside the approval it announces, so it may finish after the
    # next hook began: the same runs, in the same order apart from that overlap.
    assert sorted(kinds) == sorted(names), "each hook run is one `hook` event"
    assert kinds[:2] == names[:2] and kinds[-1] == names[-1]


def test_exit_2_per_event(model, workspace, tmp_path):
    # UserPromptSubmit: the prompt is refused, the model never asked: fatal / hook.
    refuse = "echo 'no prompts about passwords' >&2; exit 2"
    path = settings(tmp_path, {"UserPromptSubmit": [hook(refuse)]})
    proc, lines, report = stream_run(model, workspace, "print the passwords", path)
    assert proc.returncode == 1 and report["stopReason"] == "fatal" and report["stopCause"] == "hook"
    assert "no prompts about passwords" in report["summary"] + (report.get("error") or "")
    assert model.requests == []

    # Stop: exit 2 makes the loop go on with stderr as the next user message; a turn counted.
    model.add([{"text": "finished"}, {"text": "tests pass"}])
    path = settings(tmp_path, {"Stop": [hook(str(HOOKS / "stop_once.sh"))]})
    proc, lines, report = stream_run(model, workspace, "do it", path)
    assert proc.returncode == 0 and report["turns"] == 2 and report["finalText"] == "tests pass"
    last = model.requests[1]["messages"][-1]
    assert last == {"role": "user", "content": "Before you stop: run the tests and say whether they pass."}
    assert [e["blocked"] for e in hook_events(lines)] == [True, False]

    # PostToolUse: the call ran; stderr is fed to the model with its result.
    model.add([tools_reply(call("run_command", id="c1", command="echo ran")), {"text": "ok"}])
    path = settings(tmp_path, {"PostToolUse": [hook("echo 'lint failed: fix it' >&2; exit 2", "Bash")]})
    proc, lines, report = stream_run(model, workspace, "run", path)
    result = last_tool_results(model.requests[-1])["c1"]
    assert "ran" in result and "PostToolUse hook: lint failed: fix it" in result

    # SessionStart: exit 2 blocks nothing (shown only).
    model.add([{"text": "hello"}])
    path = settings(tmp_path, {"SessionStart": [hook("echo nope >&2; exit 2", "startup")]})
    proc, lines, report = stream_run(model, workspace, "hi", path)
    assert report["stopReason"] == "done"
    assert [(e["blocked"], e["message"]) for e in hook_events(lines)] == [(False, "nope")]


def test_continue_false_stops_the_run_and_context_is_added(model, workspace, tmp_path):
    model.add([tools_reply(call("list_files", id="l1")), {"text": "never"}])
    stop = """echo '{"continue": false, "stopReason": "the build is frozen"}'"""
    context = """echo 'The repo uses tabs.'"""
    path = settings(tmp_path, {"PostToolUse": [hook(stop, "Glob")], "UserPromptSubmit": [hook(context)]})
    proc, _, report = stream_run(model, workspace, "look", path)
    assert proc.returncode == 1 and report["stopCause"] == "hook", proc.stderr
    assert "the build is frozen" in (report.get("error") or "") + report["summary"]
    assert len(model.requests) == 1
    assert {"role": "user", "content": "The repo uses tabs."} in model.requests[0]["messages"]


def test_updated_input_is_prepared_again(model, workspace, tmp_path):
    model.add([tools_reply(call("run_command", id="c1", command="touch wrong.txt")), {"text": "ok"}])
    rewrite = ("""echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", """
               """"updatedInput": {"command": "touch right.txt"}}}'""")
    path = settings(tmp_path, {"PreToolUse": [hook(rewrite, "Bash")]})
    proc, lines, _ = stream_run(model, workspace, "touch", path)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "right.txt").exists() and not (workspace / "wrong.txt").exists()
    calls = [e for e in lines if e.get("type") == "toolCall"]
    assert [c["arguments"]["command"] for c in calls] == ["touch wrong.txt", "touch right.txt"]


def test_a_hanging_hook_is_killed_at_its_timeout_and_leaves_nothing(model, workspace, tmp_path):
    pidfile = tmp_path / "bg.pid"
    hang = f"sleep 300 & echo $! > {pidfile}; wait"
    model.add([tools_reply(call("run_command", id="c1", command="echo after")), {"text": "ok"}])
    path = settings(tmp_path, {"PreToolUse": [hook(hang, "Bash", timeout=1)]})
    started = time.monotonic()
    proc, lines, report = stream_run(model, workspace, "go", path)
    assert time.monotonic() - started < 30
    assert proc.returncode == 0 and report["toolCalls"] == 1, proc.stderr
    [event] = hook_events(lines)
    assert event["exitCode"] is None and event["blocked"] is False and "timed out after 1 s" in event["message"]
    assert "after" in last_tool_results(model.requests[1])["c1"], "a timeout is a non-blocking error"
    assert gone(int(pidfile.read_text()))


def test_a_missing_hook_command_is_a_visible_non_blocking_error(model, workspace, tmp_path):
    model.add([tools_reply(call("run_command", id="c1", command="touch ran.txt")), {"text": "ok"}])
    path = settings(tmp_path, {"PreToolUse": [hook("no-such-hook-command-xyz", "*")]})
    proc, lines, _ = stream_run(model, workspace, "go", path)
    assert proc.returncode == 0 and (workspace / "ran.txt").exists()
    [event] = hook_events(lines)
    assert event["exitCode"] == 127 and event["blocked"] is False and "not found" in event["message"]
    assert "PreToolUse hook `no-such-hook-command-xyz` failed (exit 127)" in proc.stderr


def test_claude_code_user_file_hooks_run_and_project_hooks_wait_for_consent(model, workspace, tmp_path):
    log = tmp_path / "events.jsonl"
    config = Path(os.environ["CLAUDE_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [hook(f"{PY} {HOOKS / 'record.py'} {log}")]}, "model": "ignored"}))
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [hook("touch project-hook-ran.txt")]}}))
    model.add([{"text": "hi"}])
    proc = run_cli(agent_run(model, workspace, "hello"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(log.read_text())["prompt"] == "hello"
    assert not (workspace / "project-hook-ran.txt").exists(), "project hooks need consent"

    # disableAllHooks in the user's file turns every hook off.
    (config / "settings.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [hook(f"{PY} {HOOKS / 'record.py'} {log}")]}, "disableAllHooks": True}))
    model.add([{"text": "hi"}])
    proc = run_cli(agent_run(model, workspace, "again"))
    assert proc.returncode == 0 and len(log.read_text().splitlines()) == 1


def test_session_start_and_end_startup_then_resume(model, workspace, tmp_path):
    log = tmp_path / "events.jsonl"
    record = f"{PY} {HOOKS / 'record.py'} {log}"
    path = settings(tmp_path, {"SessionStart": [hook(record, "startup|resume")], "SessionEnd": [hook(record)]})
    model.add([{"text": "one"}, {"text": "two"}])
    proc = run_cli(agent_run(model, workspace, "first", "--settings", path))
    assert proc.returncode == 0, proc.stderr
    session = report_of(proc.stdout)["sessionId"]
    proc = run_cli(agent_run(model, workspace, "second", "--settings", path, "--session", session))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["hook_event_name"], e.get("source") or e.get("reason")) for e in events] == [
        ("SessionStart", "startup"), ("SessionEnd", "other"), ("SessionStart", "resume"), ("SessionEnd", "other")]
    assert {e["session_id"] for e in events} == {session}


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_a_job_a_hook_leaves_behind_ends_with_it(model, workspace, tmp_path):
    pidfile = tmp_path / "bg.pid"
    model.add([tools_reply(call("run_command", id="c1", command="echo after")), {"text": "ok"}])
    path = settings(tmp_path, {"PreToolUse": [hook(f"sleep 300 & echo $! > {pidfile}; exit 0", "Bash")]})
    started = time.monotonic()
    proc, lines, _ = stream_run(model, workspace, "go", path)
    assert proc.returncode == 0 and time.monotonic() - started < 30, "the job's open stdout is not waited for"
    assert [e["exitCode"] for e in hook_events(lines)] == [0]
    assert gone(int(pidfile.read_text()))


def test_a_hook_is_killed_when_the_run_is_cancelled(model, workspace, tmp_path):
    pidfile = tmp_path / "hook.pid"
    model.add([tools_reply(call("run_command", id="c1", command="echo never"))])
    path = settings(tmp_path, {"PreToolUse": [hook(f"echo $$ > {pidfile}; sleep 300", "Bash")]})
    run = subprocess.Popen(agent_run(model, workspace, "go", "--settings", path), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 130, err
    assert report_of(out)["stopCause"] == "user"
    deadline = time.monotonic() + 5
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid), "the hook died with the run"


def test_a_hooks_ask_is_above_yes(model, workspace, tmp_path):
    ask = ("""echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", """
           """"permissionDecisionReason": "deploys need a person"}}'""")
    model.add([tools_reply(call("run_command", id="c1", command="touch deployed")), {"text": "ok"}])
    path = settings(tmp_path, {"PreToolUse": [hook(ask, "Bash")]})
    proc, _, report = stream_run(model, workspace, "deploy", path)  # --yes, and no TTY to ask on
    assert proc.returncode == 0 and report["denied"] == 1 and not (workspace / "deployed").exists()
    assert "a PreToolUse hook asks: deploys need a person" in last_tool_results(model.requests[1])["c1"]


def test_the_consent_for_project_hooks_names_hooks_and_offers_always(model, workspace):
    """Issue 32: the hooks' consent says hooks (not "allow rules"), without a terminal and on
    one, where "al[w]ays" is spelled so and remembers the answer for the workspace."""
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [hook("touch project-hook-ran.txt")]}}))
    model.add([{"text": "hi"}])
    proc = run_cli(agent_run(model, workspace, "hello", yes=False))
    assert proc.returncode == 0, proc.stderr
    assert "project hooks not used: no one could be asked" in proc.stderr, proc.stderr
    assert "allow rules" not in proc.stderr and "touch project-hook-ran.txt" in proc.stderr
    assert not (workspace / "project-hook-ran.txt").exists()

    model.add([{"text": "hi"}])
    code, out, err = run_on_a_tty(agent_run(model, workspace, "asked", yes=False), b"w\n")
    assert code == 0, out + err
    assert "Run these hooks?" in err and "[a]llow / allow al[w]ays for this workspace / [d]eny?" in err, err
    assert "allow rules" not in err
    assert (workspace / "project-hook-ran.txt").exists()
    (workspace / "project-hook-ran.txt").unlink()

    model.add([{"text": "hi"}])
    proc = run_cli(agent_run(model, workspace, "remembered", yes=False))  # no terminal: not asked again
    assert proc.returncode == 0 and "not used" not in proc.stderr, proc.stderr
    assert (workspace / "project-hook-ran.txt").exists()
