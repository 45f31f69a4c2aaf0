"""Verified done's bookkeeping (agent_lsp/agent/loop/verify.py, Decisions 59 and 84): which lines
are checks, when an edit moves the last edit, and the one line every front end shows."""

from __future__ import annotations

from pathlib import Path

from agent_lsp.agent.loop.verify import Verification, verification_line
from agent_lsp.agent.messages import Outcome, ToolCall, ToolResult
from agent_lsp.agent.tools.base import CommandExit, CommandPlan, Prepared, ToolContext
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.settings_schema import VerifySettings


async def _noop() -> str:
    return ""


def tracker(tmp_path: Path, **verify) -> Verification:
    paths = PathGuard([tmp_path], [tmp_path.name])
    return Verification(VerifySettings.model_validate(verify), ToolContext(workspace=None, paths=paths), paths)  # type: ignore[arg-type]


def ran(v: Verification, line: str, code: int | None) -> None:
    plan = CommandPlan(line, ended=CommandExit(code, code is None))
    outcome = Outcome.OK if code == 0 else Outcome.ERROR
    v.observe(ToolCall("c", "run_command", "{}"), Prepared("", _noop, command=plan), ToolResult("c", outcome, "out"))


def edited(v: Verification, path: Path) -> None:
    v.changes.add(path)
    v.observe(ToolCall("e", "edit_file", "{}"), Prepared("", _noop), ToolResult("e", Outcome.OK, "applied"))


def test_recognised_runners_by_argv_and_program_name(tmp_path):
    v = tracker(tmp_path, commands=["./check.sh --all"])
    assert v.is_check("pytest -q tests") and v.is_check(".venv/bin/pytest") and v.is_check("python -m pytest")
    assert v.is_check("ruff check .") and v.is_check("npm  test") and v.is_check("./check.sh --all")
    assert not v.is_check("ruff format .") and not v.is_check("pytestx") and not v.is_check("npm install")
    assert not v.is_check("echo 'unclosed")


def test_status_follows_the_last_run_of_each_check_after_the_last_edit(tmp_path):
    v = tracker(tmp_path)
    a = tmp_path / "a.py"
    assert v.report() == {"status": "none", "checks": [], "unverifiedFiles": []}
    edited(v, a)
    ran(v, "pytest -q", 1)
    assert v.report()["status"] == "failed"
    ran(v, "pytest  -q", 0)  # the same argv: its last run counts
    assert v.report()["status"] == "passed" and v.report()["unverifiedFiles"] == []
    edited(v, a)  # a later edit: the checks before it no longer count
    report = v.report()
    assert report["status"] == "none" and report["unverifiedFiles"] == ["a.py"]
    assert [c["afterLastEdit"] for c in report["checks"]] == [False, False]
    assert verification_line(report) == "not verified: a.py"


def test_a_checks_own_changes_do_not_move_the_last_edit_but_a_plain_commands_do(tmp_path):
    v = tracker(tmp_path)
    edited(v, tmp_path / "a.py")
    v.changes.add(tmp_path / "a.py")  # `ruff check --fix` rewrote it
    ran(v, "ruff check --fix", 0)
    assert v.report()["status"] == "passed"
    v.changes.add(tmp_path / "b.py")  # a generator script wrote b.py
    ran(v, "python gen.py", 0)
    assert v.report() == {"status": "none", "checks": v.report()["checks"], "unverifiedFiles": ["a.py", "b.py"]}


def test_the_line_front_ends_show(tmp_path):
    v = tracker(tmp_path)
    edited(v, tmp_path / "a.py")
    ran(v, "pytest -q", 0)
    assert verification_line(v.report()) == "verified: pytest -q passed"
    ran(v, "mypy", 2)
    assert verification_line(v.report()) == "verification failed: mypy failed (exit 2)"
    ran(v, "mypy", None)
    assert verification_line(v.report()) == "verification failed: mypy timed out"
    assert verification_line(None) == ""
