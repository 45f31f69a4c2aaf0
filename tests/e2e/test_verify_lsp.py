"""Issue 35 "Verified done" over LSP (the real server under a scripted editor): the verify
command asks like any run_command (callId `verify-1`), the editor's diagnostics of the edited
files are a check (errors only), a failure goes back to the model, and the progress ends with
what verified the run (`done · verified: …`, `done · not verified: calc.py`)."""

from __future__ import annotations

import asyncio
import sys

import attrs
import pytest
from lsprotocol import types

from tests.e2e.harness import capabilities

pytestmark = pytest.mark.timeout(60)
PY = sys.executable
CHECK = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\n"
FIX = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}


def diagnostics_caps():
    return attrs.evolve(capabilities("visual-studio-code"), experimental={"agentLsp": {"diagnostics": True}})


def error(line: int, message: str, severity: int = 1) -> dict:
    return {"range": {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 9}},
            "severity": severity, "message": message, "source": "pyright"}


async def test_verify_asks_like_any_command_and_the_progress_ends_verified(open_editor, model, workspace):
    (workspace / "check.py").write_text(CHECK)
    line = f"{PY} check.py"
    model.add("fix the add", [{"tool_calls": [FIX]}, {"text": "Fixed add()."}])
    editor = await open_editor(diagnostics_caps(), init={"verify": {"commands": [line], "diagnostics": True}})
    uri = editor.uri("calc.py")
    editor.diagnostics[uri] = [error(4, "just a warning", 2)]  # not an error: passes
    editor.approval_answers = ["Allow", "Allow"]  # the edit, then verify-1
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"], timeout=30)
    end = await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd)

    assert len(editor.approval_requests) == 2 and line in editor.approval_requests[1].message
    calls = editor.events(started["runId"], "toolCall")
    assert [c["callId"] for c in calls][-1] == "verify-1"
    verification = report["verification"]
    assert verification["status"] == "passed" and verification["unverifiedFiles"] == []
    assert [c["kind"] for c in verification["checks"]] == ["command", "diagnostics"]
    assert end.message.startswith(f"done · verified: {line} passed; diagnostics of calc.py: no errors: Done:"), end.message
    assert len(model.requests) == 2
    [stop] = editor.events(started["runId"], "stop")  # what a client showing the stop's text shows
    assert stop["text"] == f"{report['summary']} Verified: {line} passed; diagnostics of calc.py: no errors."


async def test_an_error_the_editor_shows_goes_back_to_the_model_then_the_run_ends_failed(open_editor, model, workspace):
    model.add("fix the add", [{"tool_calls": [FIX]}, {"text": "Done."}, {"text": "Still done."}])
    editor = await open_editor(diagnostics_caps(),
                               init={"approval": {"default": "allow"}, "verify": {"diagnostics": True, "maxRounds": 1}})
    editor.diagnostics[editor.uri("calc.py")] = [error(1, "Operator \"+\" not supported for \"None\"")]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"], timeout=30)
    end = await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd)

    fed = model.requests[2]["messages"][-1]
    assert fed["role"] == "user" and fed["content"].startswith("Verification failed after your last edit (round 1 of 1)")
    assert "calc.py:2:5: error: Operator \"+\" not supported" in fed["content"]
    assert len(model.requests) == 3 and report["stopReason"] == "done"
    assert report["verification"]["status"] == "failed"
    assert end.message.startswith("done · verification failed: diagnostics of calc.py: 1 error"), end.message


async def test_without_verify_the_progress_says_what_no_check_covered(open_editor, model, workspace):
    model.add("fix the add", [{"tool_calls": [FIX]}, {"text": "Fixed."}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])
    end = await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd)

    assert report["verification"] == {"status": "none", "checks": [], "unverifiedFiles": ["calc.py"]}
    assert end.message.startswith("done · not verified: calc.py: Done:"), end.message


async def test_a_steer_during_verify_rides_on_the_model_call_it_forces(open_editor, model, workspace):
    """Decision 76: a steer sent while the verify command waits for its approval is heard by one
    more model call; the check already passed, so it is not run again."""
    (workspace / "check.py").write_text(CHECK)
    line = f"{PY} check.py"
    model.add("fix the add", [{"tool_calls": [FIX]}, {"text": "Fixed add()."}, {"text": "Heard: no docstring."}])
    editor = await open_editor(init={"verify": {"commands": [line]}})
    release = asyncio.Event()

    async def held(_params):
        await release.wait()
        return "Allow"

    editor.approval_answers = ["Allow", held]
    started = await editor.run("fix the add function")
    run_id = started["runId"]
    await editor.wait_for(lambda: len(editor.approval_requests) == 2, 20, "verify-1's approval")
    assert await editor.execute("agentLsp.steer", {"runId": run_id, "text": "skip the docstring"}) is True
    release.set()
    report = await editor.wait_stop(run_id, timeout=30)

    assert len(model.requests) == 3 and model.requests[2]["messages"][-1] == {"role": "user", "content": "skip the docstring"}
    assert report["finalText"] == "Heard: no docstring." and report["verification"]["status"] == "passed"
    assert [c["callId"] for c in editor.events(run_id, "toolCall")].count("verify-1") == 1


async def test_a_projects_verify_is_asked_about_in_the_editor_first(open_editor, model, workspace):
    """Decision 83 over LSP: the consent is a message request naming the object; Deny: not run."""
    import json

    (workspace / "check.py").write_text(CHECK)
    line = f"{PY} check.py"
    (workspace / ".agent-lsp").mkdir()
    (workspace / ".agent-lsp" / "settings.json").write_text(json.dumps({"verify": {"commands": [line]}}))
    model.add("fix the add", [{"tool_calls": [FIX]}, {"text": "Fixed add()."}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    editor.approval_answers = ["Deny"]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"], timeout=30)

    [asked] = editor.approval_requests
    assert "Run these checks at the end of the agent's runs?" in asked.message and line in asked.message
    assert report["verification"]["status"] == "none" and "verify-1" not in [
        c["callId"] for c in editor.events(started["runId"], "toolCall")]

    model.add("fix the add", [{"tool_calls": [
        {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "return a + b", "new_text": "return b + a"}}]},
        {"text": "Again."}])
    started = await editor.run("fix the add function again")
    report = await editor.wait_stop(started["runId"], timeout=30)
    assert len(editor.approval_requests) == 1, "a Deny is remembered for that object"
    assert report["verification"]["status"] == "none"


async def test_the_agents_own_diagnostics_call_after_its_last_edit_is_not_asked_again(open_editor, model, workspace):
    model.add("fix the add", [{"tool_calls": [FIX]},
                              {"tool_calls": [{"name": "diagnostics", "arguments": {"path": "calc.py"}}]},
                              {"text": "Fixed, no errors."}])
    editor = await open_editor(diagnostics_caps(), init={"approval": {"default": "allow"}, "verify": {"diagnostics": True}})
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"], timeout=30)

    checks = report["verification"]["checks"]
    assert [(c["kind"], c["summary"]) for c in checks] == [("diagnostics", "diagnostics of calc.py: no errors")]
    assert report["verification"]["status"] == "passed" and len(model.requests) == 3
