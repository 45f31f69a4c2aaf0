"""Issue 35 "Verified done" (Decisions 59, 83-85) through the real `agent-lsp run` against the
scripted model: the verify commands run as `verify-N` calls when the agent says it is done, a
failure goes back to the model for `maxRounds` rounds, a check the agent already ran after its
last edit is not run again, and the report's `verification` says what checked the edits (also
without a `verify` setting)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli, run_on_a_tty
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)
PY = sys.executable
CHECK = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\nprint('CHECK OK')\n"
FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
BREAK = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b + 1")
REPAIR = call("edit_file", path="calc.py", old_text="return a + b + 1", new_text="return a + b")


def settings(tmp_path: Path, verify: dict) -> str:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"verify": verify}))
    return str(path)


def user_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m.get("role") == "user" and isinstance(m["content"], str)]


def stream(model, workspace, task, *extra):
    proc = run_cli(agent_run(model, workspace, task, *extra, "--output-format", "stream-json", json_report=False))
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines and lines[-1]["type"] == "result", proc.stdout + proc.stderr
    return proc, lines, lines[-1]["report"]


@pytest.fixture
def checked(workspace):
    (workspace / "check.py").write_text(CHECK)
    return workspace


def test_verify_passing_runs_the_command_once_as_verify_1_and_reports_passed(model, checked, tmp_path):
    model.add([tools_reply(FIX), {"text": "Fixed add()."}])
    line = f"{PY} check.py"
    proc, lines, report = stream(model, checked, "fix add", "--settings", settings(tmp_path, {"commands": [line]}))

    assert proc.returncode == 0, proc.stderr
    calls = [e for e in lines if e["type"] == "toolCall"]
    assert [(c["callId"], c["tool"]) for c in calls][-1] == ("verify-1", "run_command")
    assert calls[-1]["arguments"] == {"command": line}
    assert len(model.requests) == 2, "a passing check sends nothing back to the model"
    verification = report["verification"]
    assert verification["status"] == "passed" and verification["unverifiedFiles"] == []
    assert verification["checks"] == [{"kind": "command", "command": line, "exitCode": 0, "afterLastEdit": True,
                                       "summary": f"{line} passed"}]
    assert report["stopReason"] == "done"


def test_verify_failing_then_fixed_feeds_the_failure_back_and_passes(model, checked, tmp_path):
    model.add([tools_reply(BREAK), {"text": "Done."}, tools_reply(REPAIR, text="The check failed; fixing. "),
               {"text": "Fixed for real."}])
    line = f"{PY} check.py"
    proc = run_cli(agent_run(model, checked, "fix add", "--settings", settings(tmp_path, {"commands": [line]})))

    assert proc.returncode == 0, proc.stderr
    report = report_of(proc.stdout)
    fed = user_messages(model.requests[2])[-1]
    assert fed.startswith("Verification failed after your last edit (round 1 of 2)"), fed
    assert f"{line} failed (exit 1)" in fed and "add(2, 3) gave 6" in fed, "the failing output, for the model"
    assert len(model.requests) == 4 and report["finalText"] == "Fixed for real."
    verification = report["verification"]
    assert verification["status"] == "passed"
    assert [(c["exitCode"], c["afterLastEdit"]) for c in verification["checks"]] == [(1, False), (0, True)]
    assert "def add(a, b):\n    return a + b\n" in (checked / "calc.py").read_text()


def test_verify_failing_after_max_rounds_ends_done_with_the_failure_reported(model, checked, tmp_path):
    model.add([tools_reply(BREAK), {"text": "Done."}, {"text": "Still done."}])
    line = f"{PY} check.py"
    proc = run_cli(agent_run(model, checked, "fix add", "--settings",
                             settings(tmp_path, {"commands": [line], "maxRounds": 1}), json_report=False))

    assert proc.returncode == 0, proc.stderr
    assert len(model.requests) == 3, "one round fed back (maxRounds 1), then the run ends"
    assert f"verification failed: {line} failed (exit 1)" in proc.stdout, proc.stdout
    assert "Done:" in proc.stdout


def test_no_verify_setting_still_lists_the_edited_files_no_check_covered(model, checked):
    model.add([tools_reply(FIX), tools_reply(call("run_command", command=f"{PY} check.py")), {"text": "Fixed."}])
    proc = run_cli(agent_run(model, checked, "fix add"))

    assert proc.returncode == 0, proc.stderr
    verification = report_of(proc.stdout)["verification"]
    assert verification == {"status": "none", "checks": [], "unverifiedFiles": ["calc.py"]}, (
        "check.py is no recognised runner: it covers nothing")


def test_a_recognised_check_already_run_after_the_last_edit_is_not_run_again(model, checked, tmp_path):
    line = f"{PY} -m unittest -q check"
    model.add([tools_reply(FIX), tools_reply(call("run_command", id="mine", command=line)), {"text": "Fixed."}])
    proc, lines, report = stream(model, checked, "fix add", "--settings", settings(tmp_path, {"commands": [line]}))

    assert proc.returncode == 0, proc.stderr
    assert [c["callId"] for c in lines if c["type"] == "toolCall" and c["callId"].startswith("verify")] == []
    verification = report["verification"]
    assert verification["status"] == "passed" and verification["unverifiedFiles"] == []
    assert [c["summary"] for c in verification["checks"]] == [f"{line} passed"]


def project_verify(workspace: Path, verify: dict, **other) -> None:
    (workspace / ".agent-lsp").mkdir(exist_ok=True)
    (workspace / ".agent-lsp" / "settings.json").write_text(json.dumps({"verify": verify, **other}))


def test_a_projects_verify_runs_only_with_consent_for_that_exact_object(model, checked, tmp_path):
    line = f"{PY} check.py"
    project_verify(checked, {"commands": [line]}, model="ignored-model", approval={"default": "allow"})
    model.add([tools_reply(FIX), {"text": "Fixed."}])
    proc = run_cli(agent_run(model, checked, "fix add"))  # no terminal: nobody to ask
    assert proc.returncode == 0, proc.stderr
    assert "project verify commands not used: no one could be asked" in proc.stderr and line in proc.stderr
    assert report_of(proc.stdout)["verification"]["status"] == "none", "not consented: not run"

    model.add([tools_reply(FIX), {"text": "Fixed."}])
    (checked / "calc.py").write_text((checked / "calc.py").read_text().replace("a + b", "a - b"))
    code, out, err = run_on_a_tty(agent_run(model, checked, "fix add again"), b"w\n")
    assert code == 0, out + err
    assert "Run these checks at the end of the agent's runs?" in err, err
    verification = report_of(out)["verification"]
    assert verification["status"] == "passed" and verification["checks"][0]["command"] == line
    assert model.requests[-1]["model"] == "m", "the project file is read for verify only"

    project_verify(checked, {"commands": [line, "touch pwned"]})  # another object: asked again
    model.add([tools_reply(FIX), {"text": "Fixed."}])
    (checked / "calc.py").write_text((checked / "calc.py").read_text().replace("a + b", "a - b"))
    proc = run_cli(agent_run(model, checked, "fix add, third"))
    assert "project verify commands not used" in proc.stderr and not (checked / "pwned").exists()


def test_the_users_own_verify_wins_over_the_projects(model, checked, tmp_path):
    project_verify(checked, {"commands": ["touch pwned"]})
    mine = f"{PY} check.py"
    model.add([tools_reply(FIX), {"text": "Fixed."}])
    proc = run_cli(agent_run(model, checked, "fix add", "--settings", settings(tmp_path, {"commands": [mine]})))
    assert proc.returncode == 0, proc.stderr
    assert "project verify" not in proc.stderr, "not even asked"
    assert [c["command"] for c in report_of(proc.stdout)["verification"]["checks"]] == [mine]
    assert not (checked / "pwned").exists()


def test_verify_runs_before_the_stop_hooks_which_wait_until_it_passed(model, checked, tmp_path):
    order = tmp_path / "order.txt"
    (checked / "check.py").write_text(f"open({str(order)!r}, 'a').write('verify\\n')\n" + CHECK)
    stop_hook = {"matcher": "", "hooks": [{"type": "command", "command": f"echo stop >> {order}"}]}
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"verify": {"commands": [f"{PY} check.py"]}, "hooks": {"Stop": [stop_hook]}}))
    model.add([tools_reply(BREAK), {"text": "Done."}, tools_reply(REPAIR), {"text": "Fixed."}])
    proc = run_cli(agent_run(model, checked, "fix add", "--settings", str(path)))

    assert proc.returncode == 0, proc.stderr
    assert order.read_text().split() == ["verify", "verify", "stop"], "no Stop hook while a failure goes back"
    assert report_of(proc.stdout)["verification"]["status"] == "passed"
