"""Issue 32, "tried as a new user would": the real `agent-lsp` CLI as a subprocess against the
scripted model. Session ids take a unique prefix like run ids; a second rewind of a run says it
was already rewound; an unknown `/command` is reported; the output-schema repair turn is shown
and its answers are not glued; a listing piped into `head` ends quietly; a Ctrl-C cancel does
not give a fatal error's advice; the sample's printed `cp` can be run twice."""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agent_lsp.demo
from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.reliability.test_cli_newcomer import EDIT, cli, edit_run, sessions_json
from tests.unit.kit import tools_reply

pytestmark = pytest.mark.timeout(90)


def _twin_session(workspace: Path, state_dir: Path, session_id: str) -> str:
    """A second session whose id starts like `session_id` (ids are random: made so by hand)."""
    from agent_lsp.agent.state.sessions import workspace_state

    folder = workspace_state(state_dir, workspace) / "sessions"
    twin = session_id[:6] + "0" * (len(session_id) - 6)
    data = json.loads((folder / f"{session_id}.json").read_text())
    data["sessionId"] = twin
    (folder / f"{twin}.json").write_text(json.dumps(data))
    return twin


# -- --session and `sessions delete` take a unique prefix, like `rewind` -----------------------

def test_run_continues_the_session_a_unique_prefix_names(model, workspace):
    model.add("first", [tools_reply(EDIT), {"text": "one"}, {"text": "Continued."}])  # keyed by the first prompt
    first = report_of(run_cli(agent_run(model, workspace, "first")).stdout)
    proc = run_cli(agent_run(model, workspace, "second", "--session", first["sessionId"][:6]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report_of(proc.stdout)["sessionId"] == first["sessionId"]
    assert any(m["role"] == "user" and m["content"] == "first" for m in model.requests[-1]["messages"]), \
        "the model saw the session's history"


def test_sessions_delete_takes_a_unique_prefix(model, workspace):
    first = edit_run(model, workspace, "first")
    second = edit_run(model, workspace, "second")
    proc = cli("sessions", "delete", first["sessionId"][:7], "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"deleted {first['sessionId']}" in proc.stdout
    assert [i["sessionId"] for i in sessions_json(workspace)] == [second["sessionId"]]


def test_an_ambiguous_session_prefix_exits_2_listing_the_candidates(model, workspace, state_dir):
    first = edit_run(model, workspace, "first")
    twin = _twin_session(workspace, state_dir, first["sessionId"])
    prefix = first["sessionId"][:6]
    for args in (["sessions", "delete", prefix, "--workspace", str(workspace)],
                 ["run", "again", "--session", prefix, "--base-url", model.base_url, "--model", "m",
                  "--workspace", str(workspace), "--yes"]):
        proc = cli(*args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert first["sessionId"] in proc.stderr and twin in proc.stderr and "give more of the id" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert {i["sessionId"] for i in sessions_json(workspace)} == {first["sessionId"], twin}, "nothing deleted"
    assert len(model.requests) == 2, "no run started"


# -- a second rewind of the same run ----------------------------------------------------------

def test_a_second_rewind_of_the_same_run_says_already_rewound(model, workspace):
    report = edit_run(model, workspace)
    first = cli("rewind", report["runId"], "--workspace", str(workspace), "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    rewind_id = json.loads(first.stdout)["rewindId"]
    mine = (workspace / "calc.py").read_text() + "# mine\n"
    (workspace / "calc.py").write_text(mine)
    for args in ([], ["--force"]):
        again = cli("rewind", report["runId"], "--workspace", str(workspace), *args)
        assert again.returncode == 2, again.stdout + again.stderr
        assert f"run {report['runId']} was already rewound (by {rewind_id})" in again.stderr
        assert "conflict" not in again.stdout + again.stderr and "Traceback" not in again.stderr
    assert (workspace / "calc.py").read_text() == mine, "nothing touched, even with --force"


def test_a_run_whose_rewind_was_undone_can_be_rewound_again(model, workspace):
    report = edit_run(model, workspace)
    rewind_id = json.loads(cli("rewind", report["runId"], "--workspace", str(workspace), "--json").stdout)["rewindId"]
    undo = cli("rewind", rewind_id, "--workspace", str(workspace))
    assert undo.returncode == 0 and "return a + b" in (workspace / "calc.py").read_text(), undo.stdout + undo.stderr
    again = cli("rewind", report["runId"], "--workspace", str(workspace))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "return a - b" in (workspace / "calc.py").read_text()
    twice = cli("rewind", rewind_id, "--workspace", str(workspace))
    assert twice.returncode == 2 and f"rewind {rewind_id} was already rewound" in twice.stderr, twice.stderr


# -- an unknown /command is reported, and still reaches the model as text (Decision 34) ---------

def test_an_unknown_slash_command_is_reported_and_sent_as_text(model, workspace):
    model.add([{"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "/frobnicate the parser", json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "/frobnicate is not a known command or skill: sent to the model as text" in proc.stdout
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "/frobnicate the parser"}


@pytest.mark.parametrize("prompt", ["/tmp is full, clean it", "why is 2/3 not 0?"])
def test_a_path_or_plain_text_is_not_called_an_unknown_command(model, workspace, prompt):
    model.add([{"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, prompt, json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not a known command" not in proc.stdout


# -- the output-schema repair turn is shown, and its answers are not glued ---------------------

FIRST, REPAIRED = 'Here: {"answer": "five"}', '```json\n{"answer": 5}\n```'
REPAIR_LINE = "the answer does not fit the output schema ($.answer: 'five' is not of type 'integer')"


def _schema(tmp_path: Path) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}))
    return str(path)


def test_the_repair_turn_is_announced_between_the_two_answers_in_text(model, workspace, tmp_path):
    model.add([{"text": FIRST}, {"text": REPAIRED}])
    proc = run_cli(agent_run(model, workspace, "what is 2+3", "--output-schema", _schema(tmp_path), json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert FIRST + "\n" in out and REPAIR_LINE in out, out
    assert out.index(FIRST) < out.index(REPAIR_LINE) < out.index(REPAIRED), out
    assert '"five"}```' not in out, "the two answers are not glued"


def test_the_repair_turn_is_a_status_line_in_stream_json_and_the_result_is_the_repair(model, workspace, tmp_path):
    model.add([{"text": FIRST}, {"text": REPAIRED}])
    proc = run_cli(agent_run(model, workspace, "what is 2+3", "--output-format", "stream-json", "--output-schema",
                             _schema(tmp_path), json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    kinds = [(x["type"], x.get("text", "")) for x in lines]
    repair = next(i for i, (t, text) in enumerate(kinds) if t == "status" and REPAIR_LINE in text)
    before = "".join(text for t, text in kinds[:repair] if t == "text")
    after = "".join(text for t, text in kinds[repair:] if t == "text")
    assert before == FIRST and after == REPAIRED, kinds
    report = lines[-1]["report"]
    assert report["finalText"] == REPAIRED and report["structuredOutput"] == {"answer": 5}
    assert REPAIR_LINE in proc.stderr, "the human stream on stderr says it too"


# -- a listing piped into a reader that leaves (`| head -1`) ends quietly -----------------------

@pytest.mark.parametrize("args", [["sessions"], ["sessions", "--json"], ["worktrees"], ["worktrees", "--json"],
                                  ["--help"], ["--version"], ["sessions", "--help"]])
def test_a_listing_whose_reader_is_gone_ends_without_a_traceback(model, workspace, args):
    edit_run(model, workspace)
    read, write = os.pipe()
    os.close(read)  # the reader left before the first line (what `| head -1` does after its line)
    try:
        proc = subprocess.run([sys.executable, "-m", "agent_lsp", *args, *(["--workspace", str(workspace)]
                               if "--help" not in args and "--version" not in args else [])],
                              stdin=subprocess.DEVNULL, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr and "Exception ignored" not in proc.stderr, \
        proc.stderr
    assert proc.stderr == "", proc.stderr
    # as if ended by SIGPIPE (argparse itself drops a help text it cannot write: exit 0)
    assert proc.returncode == (0 if args[-1] in ("--help", "--version") else 141), proc.returncode


def test_sessions_piped_into_head_prints_the_first_line_and_ends_quietly(model, workspace):
    for task in ("one", "two", "three"):
        edit_run(model, workspace, task)
    proc = subprocess.run(f"{sys.executable} -m agent_lsp sessions --workspace {workspace} | head -1", shell=True,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("s-") and proc.stdout.count("\n") == 1, proc.stdout
    assert proc.stderr == "", proc.stderr


# -- the sample's printed `cp` can be run twice ------------------------------------------------

def test_the_printed_sample_copy_can_be_run_twice_without_nesting(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "demo", "--serve-model"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        said = b""
        while b"agent-lsp run" not in said:  # the usage, printed once the model is served
            ready, _, _ = select.select([proc.stderr], [], [], 30)
            chunk = os.read(proc.stderr.fileno(), 65536) if ready else b""
            assert chunk, said
            said += chunk
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=15)
    lines = said.decode().splitlines()
    copy = next(line for line in lines if line.startswith("  cp ")).strip()
    assert copy.endswith(" /tmp/agent-lsp-sample"), copy
    copy = copy.removesuffix("/tmp/agent-lsp-sample") + shlex.quote(str(tmp_path / "my sample"))
    for _ in range(2):  # as a person does, after the first try
        done = subprocess.run(["bash", "-c", copy], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "my sample").iterdir() if p.name != "__pycache__") == \
        sorted(p.name for p in (Path(agent_lsp.demo.__file__).parent / "sample").iterdir() if p.name != "__pycache__")


# -- a Ctrl-C cancel is no fatal error ---------------------------------------------------------

def _interrupted(model, workspace: Path, task: str, *extra: str) -> dict:
    """The run's report after a Ctrl-C (SIGINT) while the model is still being asked."""
    asked = len(model.log)
    proc = subprocess.Popen(agent_run(model, workspace, task, *extra), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while len(model.log) <= asked:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    return report_of(out)


def test_a_cancel_before_the_model_answered_says_so_not_to_fix_a_problem(model, workspace):
    model.add([{"text": "never arrives", "ttft": 30}])
    summary = _interrupted(model, workspace, "fix add")["summary"]
    assert summary.startswith("Cancelled by the user"), summary
    assert "once the problem is fixed" not in summary and "never answered" not in summary, summary
    assert "nothing was done; run it again to do it" in summary, summary


def test_a_cancel_in_a_kept_session_says_how_to_continue_it(model, workspace):
    model.add("first", [tools_reply(EDIT), {"text": "one"}, {"text": "never arrives", "ttft": 30}])
    first = report_of(run_cli(agent_run(model, workspace, "first")).stdout)
    report = _interrupted(model, workspace, "again", "--session", first["sessionId"])
    summary = report["summary"]
    assert summary.startswith("Cancelled by the user") and "once the problem is fixed" not in summary, summary
    assert f"agent-lsp run --session {first['sessionId']}" in summary, summary
