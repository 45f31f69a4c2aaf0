"""Issue 25, `agent-lsp run --output-format stream-json` and a prompt of `-` (CONTRACT "Headless
at scale", Decision 40): the real CLI as a subprocess against the scripted model. stdout holds
one JSON object per line in every outcome (done, fatal, max_turns, cancelled by SIGINT or
SIGTERM), each event as over LSP with `type` for `kind`, the last line the result; human lines
go to stderr; errors before the run id go to stderr only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, run_cli, run_on_a_tty
from tests.unit.kit import API_KEY, call, tools_reply

pytestmark = pytest.mark.timeout(90)

EDIT = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


def stream_run(model, workspace: Path, task: str, *extra: str, yes: bool = True) -> list[str]:
    return agent_run(model, workspace, task, "--output-format", "stream-json", *extra, yes=yes, json_report=False)


def lines_of(stdout: str) -> list[dict]:
    """Every stdout line is one JSON object; numbered from 0 without a gap; exactly one result,
    the last line; no `stop` line, no `kind` key (Decision 40)."""
    assert stdout.endswith("\n"), repr(stdout[-200:])
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert all(isinstance(line, dict) for line in lines)
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    assert [line["type"] for line in lines].count("result") == 1 and lines[-1]["type"] == "result"
    assert set(lines[-1]) == {"type", "seq", "report"}
    assert not any(line["type"] == "stop" or "kind" in line for line in lines)
    run_ids = {line["runId"] for line in lines[:-1]}
    assert run_ids <= {lines[-1]["report"]["runId"]}
    return lines


def test_a_run_streams_its_events_as_json_lines_and_ends_with_the_result(model, workspace):
    model.add([tools_reply(EDIT, text="Fixing add. "), {"text": "Fixed add()."}])

    proc = run_cli(stream_run(model, workspace, "fix add"))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = lines_of(proc.stdout)
    types = [line["type"] for line in lines]
    for kind in ("status", "text", "toolCall", "toolResult", "usage"):
        assert kind in types, types
    report = lines[-1]["report"]
    assert report["stopReason"] == "done" and report["finalText"] == "Fixed add()."
    assert "".join(line["text"] for line in lines if line["type"] == "text") == "Fixing add. Fixed add()."
    [edit] = [line for line in lines if line["type"] == "toolCall"]
    assert edit["tool"] == "edit_file" and edit["arguments"]["path"] == "calc.py" and edit["agentId"] == "main"
    assert "return a + b" in (workspace / "calc.py").read_text()
    # Human lines (the approval said, the waiting line, the text) are on stderr, never on stdout.
    assert "approved (--yes)" in proc.stderr and "Fixed add()." in proc.stderr
    assert f"asking the model (m at {model.base_url})" in proc.stderr and "(m at" not in proc.stdout
    assert API_KEY not in proc.stdout + proc.stderr


async def test_each_line_has_the_keys_of_the_lsp_stream(open_editor, model, workspace):
    """The same run over LSP and as stream-json: every kind's keys, in their order, are the
    same (with `type` for `kind`)."""
    script = [tools_reply(call("read_file", path="calc.py"), text="Reading. "), tools_reply(EDIT), {"text": "Fixed."}]
    model.add("over lsp", script)
    editor = await open_editor(init={"approval": {"default": "allow"}})
    started = await editor.run("over lsp")
    await editor.wait_stop(started["runId"], 20)
    over_lsp: dict[str, set[tuple[str, ...]]] = {}
    for event in editor.events(started["runId"]):
        over_lsp.setdefault(event["kind"], set()).add(tuple("type" if k == "kind" else k for k in event))

    model.add("as stream-json", script)
    proc = run_cli(stream_run(model, workspace, "as stream-json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = {}
    for line in lines_of(proc.stdout)[:-1]:
        seen.setdefault(line["type"], set()).add(tuple(line))
    common = set(seen) & set(over_lsp)
    assert {"status", "text", "toolCall", "toolResult", "usage"} <= common, (seen, over_lsp)
    for kind in common:
        assert seen[kind] <= over_lsp[kind], (kind, seen[kind], over_lsp[kind])
    # The result carries the report the LSP stream's stop event carries: the same keys.
    [stop] = editor.events(started["runId"], "stop")
    assert set(lines_of(proc.stdout)[-1]["report"]) == set(stop["report"])


def test_fatal_ends_with_the_result_line(model, workspace):
    model.add([{"status": 500, "message": "the model is down", "retry_after": 0.01, "repeat": 3}])
    proc = run_cli(stream_run(model, workspace, "anything"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = lines_of(proc.stdout)[-1]["report"]
    assert report["stopReason"] == "fatal" and "the model is down" in report["error"]


def test_max_turns_ends_with_the_result_line(model, workspace):
    model.add([tools_reply(call("list_files"), text="still looking", repeat=5)])
    proc = run_cli(stream_run(model, workspace, "loop", "--max-turns", "2"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = lines_of(proc.stdout)[-1]["report"]
    assert report["stopReason"] == "max_turns" and report["turns"] == 2


@pytest.mark.parametrize(("signum", "cause"), [(signal.SIGINT, "user"), (signal.SIGTERM, "signal")])
def test_a_signal_mid_run_ends_with_the_cancelled_result_line(model, workspace, signum, cause):
    model.add([tools_reply(EDIT), {"text": "never arrives", "ttft": 30}])
    proc = subprocess.Popen(stream_run(model, workspace, "fix add"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(model.log) < 2:  # the edit is done and the second model call is in flight
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not get to its second turn"
            time.sleep(0.02)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    lines = lines_of(out)
    report = lines[-1]["report"]
    assert report["stopReason"] == "cancelled" and report["stopCause"] == cause
    assert "toolResult" in [line["type"] for line in lines]


def test_the_prompt_is_read_from_stdin(model, workspace):
    model.add([{"text": "Read it."}])
    proc = subprocess.run(stream_run(model, workspace, "-"), input="the task\nfrom stdin, two lines\n",
                          capture_output=True, text=True, timeout=45)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines_of(proc.stdout)[-1]["report"]["finalText"] == "Read it."
    users = [m["content"] for m in model.requests[0]["messages"] if m["role"] == "user"]
    assert users == ["the task\nfrom stdin, two lines\n"]


def test_a_prompt_from_a_terminal_leaves_no_terminal_to_ask_on(model, workspace):
    """stdin is a TTY, but it gave the prompt (ended by Ctrl-D): approvals are not asked on it,
    side effects are denied as with no TTY, and the model is told so."""
    model.add([tools_reply(call("edit_file", id="e", path="calc.py", old_text="return a - b", new_text="return a + b")),
               {"text": "Not allowed."}])
    code, out, err = run_on_a_tty(stream_run(model, workspace, "-", yes=False), b"fix add\n\x04")
    assert code == 0, out + err
    assert "[a]llow" not in err and "no one could be asked" in err
    assert "return a - b" in (workspace / "calc.py").read_text()
    results = {m["tool_call_id"]: m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"}
    assert results["e"].startswith("denied:") and "no one could be asked" in results["e"]
    assert [m["content"] for m in model.requests[0]["messages"] if m["role"] == "user"] == ["fix add\n"]
    lines_of(out)


def test_an_empty_prompt_from_stdin_is_a_usage_error(model, workspace):
    proc = subprocess.run(stream_run(model, workspace, "-"), input="  \n", capture_output=True, text=True, timeout=45)
    assert proc.returncode == 2 and proc.stdout == "" and "empty" in proc.stderr
    assert model.requests == []


@pytest.mark.parametrize("extra", [["--json", "--output-format", "stream-json"], ["--json", "--output-format", "text"]])
def test_json_with_another_output_format_is_a_usage_error(model, workspace, extra):
    argv = agent_run(model, workspace, "anything", *extra, json_report=False)
    proc = run_cli(argv)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "--json" in proc.stderr
    assert model.requests == []


def test_json_and_output_format_json_agree(model, workspace):
    model.add([{"text": "Hello."}])
    proc = run_cli(agent_run(model, workspace, "hi", "--output-format", "json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["finalText"] == "Hello."


def test_an_error_before_the_run_goes_to_stderr_only(model, workspace):
    proc = run_cli(stream_run(model, workspace, "anything", "--session", "s-nosuchsession"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "s-nosuchsession" in proc.stderr
    assert model.requests == []


def test_on_a_terminal_stdout_still_holds_only_json_lines(model, workspace):
    """stdout a terminal: still JSON lines only (no colour, no waiting line)."""
    model.add([{"text": "Hello.", "ttft": 0.2}])
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(stream_run(model, workspace, "hi"), stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=subprocess.PIPE)
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
        proc.wait(timeout=30)
    finally:
        os.close(master)
    assert proc.returncode == 0
    lines_of(b"".join(chunks).decode().replace("\r\n", "\n"))
