"""Rewind through the real LSP surface (issue 12): checkpoints of every file a run changed (edit
tools and commands, in git and outside), one applyEdit back, drift as a conflict, force, the
rewind itself rewindable, after a restart, a dirty open buffer, a cancelled run, bad input."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.e2e.harness import start_editor

EDIT = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
CREATE = {"name": "write_file", "arguments": {"path": "notes/new.txt", "content": "created by the run\n"}}


def replies(*calls: dict, text: str = "done") -> list[dict]:
    return [*({"tool_calls": [c]} for c in calls), {"text": text}]


async def run_to_stop(editor, prompt: str, timeout: float = 20) -> dict:
    started = await editor.run(prompt)
    return await editor.wait_stop(started["runId"], timeout)


def git(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "init"], cwd=workspace, check=True)


ALLOW = {"approval": {"default": "allow"}}


async def test_rewind_restores_edited_and_created_files_and_can_be_undone(open_editor, model, workspace):
    original = (workspace / "calc.py").read_text()
    model.add("change", replies(EDIT, CREATE))
    editor = await open_editor(init=ALLOW)
    report = await run_to_stop(editor, "change things")
    assert report["rewindable"] is True
    assert (workspace / "notes/new.txt").exists() and "a + b" in (workspace / "calc.py").read_text()

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})

    assert sorted(Path(u).name for u in result["restored"]) == ["calc.py", "new.txt"]
    assert result["conflicts"] == [] and result["notRestorable"] == []
    assert (workspace / "calc.py").read_text() == original
    assert not (workspace / "notes/new.txt").exists(), "a file the run created is deleted (DeleteFile)"
    last = editor.edits[-1]
    assert last.label == "agent-lsp: rewind" and any(isinstance(c, types.DeleteFile) for c in last.edit.document_changes)

    undo = await editor.execute("agentLsp.rewind", {"runId": result["rewindId"]})
    assert len(undo["restored"]) == 2
    assert "a + b" in (workspace / "calc.py").read_text() and (workspace / "notes/new.txt").exists()


async def test_drift_is_a_conflict_unless_forced(open_editor, model, workspace):
    model.add("change", replies(EDIT))
    editor = await open_editor(init=ALLOW)
    report = await run_to_stop(editor, "change it")
    (workspace / "calc.py").write_text("the user rewrote it\n")

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert result["restored"] == [] and len(result["conflicts"]) == 1
    assert "changed since the run" in result["conflicts"][0]["reason"]
    assert (workspace / "calc.py").read_text() == "the user rewrote it\n", "never overwritten without force"

    forced = await editor.execute("agentLsp.rewind", {"runId": report["runId"], "force": True})
    assert len(forced["restored"]) == 1 and "a - b" in (workspace / "calc.py").read_text()


async def test_include_later_rewinds_later_runs_of_the_session_first(open_editor, model, workspace):
    # One conversation: the scripted model keys on the session's first message.
    model.add("first", [*replies(EDIT), *replies({"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a * b", "new_text": "b * a"}}),
                        {"text": "noted"}])
    editor = await open_editor(init=ALLOW)
    first = await run_to_stop(editor, "first change")
    second = await editor.run("second change", sessionId=first["sessionId"])
    await editor.wait_stop(second["runId"])

    conflict = await editor.execute("agentLsp.rewind", {"runId": first["runId"]})
    assert conflict["conflicts"], "the later run changed the file since the first one left it"
    result = await editor.execute("agentLsp.rewind", {"runId": first["runId"], "includeLater": True})
    assert result["conflicts"] == [] and "a - b" in (workspace / "calc.py").read_text() and "a * b" in (workspace / "calc.py").read_text()
    # The session's history dropped both runs and tells the model.
    follow = await editor.run("after the rewind", sessionId=first["sessionId"])
    await editor.wait_stop(follow["runId"])
    sent = model.requests[-1]["messages"]
    assert not any("first change" == m.get("content") for m in sent)
    assert any("rewound" in str(m.get("content")) for m in sent)


async def test_rewind_after_a_server_restart(model, workspace, state_dir):
    model.add("change", replies(EDIT, CREATE))
    first = await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url, **ALLOW})
    report = await run_to_stop(first, "change")
    await first.quit()

    second = await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    try:
        uri = second.open("README.md")
        actions = await asyncio.wait_for(second.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            context=types.CodeActionContext(diagnostics=[]))), 10)
        rewind = [a for a in actions if a.title == "Agent: rewind last run (2 files)"]
        assert rewind and list(rewind[0].command.arguments) == [{"runId": report["runId"]}]
        result = await second.execute("agentLsp.rewind", {"runId": report["runId"]})
        assert len(result["restored"]) == 2 and "a - b" in (workspace / "calc.py").read_text()
    finally:
        await second.quit()


@pytest.mark.parametrize("in_git", [True, False], ids=["git", "no-git"])
async def test_files_changed_by_a_command_are_restored(open_editor, model, workspace, in_git):
    (workspace / "data").mkdir()
    (workspace / "data/keep.txt").write_text("precious\n")
    (workspace / "data/edit.txt").write_text("v1\n")
    if in_git:
        git(workspace)
    command = "sh -c 'rm data/keep.txt; echo v2 > data/edit.txt; echo out > data/made.txt'"
    model.add("shell", replies({"name": "run_command", "arguments": {"command": command}}))
    editor = await open_editor(init=ALLOW)
    report = await run_to_stop(editor, "shell changes")
    assert report["rewindable"] and len(report["editedFiles"]) == 3

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})

    assert result["conflicts"] == [] and result["notRestorable"] == []
    assert (workspace / "data/keep.txt").read_text() == "precious\n", "a deleted file is recreated"
    assert (workspace / "data/edit.txt").read_text() == "v1\n"
    assert not (workspace / "data/made.txt").exists()
    assert not (workspace / ".git" / "agent-lsp").exists() and not any("agent-lsp" in p.name for p in workspace.rglob("*"))


async def test_ignored_and_big_files_outside_git_are_listed_not_silently_skipped(open_editor, model, workspace):
    (workspace / "big.bin").write_bytes(b"x" * 1_500_000)
    model.add("big", replies({"name": "run_command", "arguments": {"command": "sh -c 'echo y >> big.bin'"}}))
    editor = await open_editor(init=ALLOW)
    report = await run_to_stop(editor, "grow the big file")
    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert [Path(i["uri"]).name for i in result["notRestorable"]] == ["big.bin"]
    assert "1 MB" in result["notRestorable"][0]["reason"]


async def test_rewind_of_an_open_dirty_buffer(open_editor, model, workspace):
    model.add("change", replies(EDIT))
    editor = await open_editor(init=ALLOW)
    editor.open("calc.py")
    report = await run_to_stop(editor, "change it")
    assert "a + b" in editor.text("calc.py") and "a - b" in (workspace / "calc.py").read_text(), "in the buffer, not saved"
    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert len(result["restored"]) == 1
    assert "a - b" in editor.text("calc.py") and "a + b" not in editor.text("calc.py")
    change = editor.edits[-1].edit.document_changes[0]
    assert change.text_document.version is not None, "a versioned edit: a stale buffer refuses it"

    editor.type_into("calc.py", "the user typed this\n")
    again = await editor.execute("agentLsp.rewind", {"runId": result["rewindId"]})
    assert again["conflicts"] and editor.text("calc.py") == "the user typed this\n"


async def test_a_cancelled_run_rewinds_exactly_what_it_did(open_editor, model, workspace):
    model.add("half", [{"tool_calls": [EDIT]},
                       {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 30"}}]},
                       {"tool_calls": [CREATE]}, {"text": "never"}])
    editor = await open_editor(init=ALLOW)
    started = await editor.run("half of it")
    await editor.wait_for(lambda: [e for e in editor.events(started["runId"], "toolCall") if e["tool"] == "run_command"], 15, "the command")
    await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "cancelled" and report["rewindable"]
    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert [Path(u).name for u in result["restored"]] == ["calc.py"]
    assert "a - b" in (workspace / "calc.py").read_text() and not (workspace / "notes").exists()


async def test_bad_rewind_requests_are_clear_errors(open_editor, model, workspace, state_dir):
    editor = await open_editor(init=ALLOW)
    with pytest.raises(JsonRpcException, match="unknown runId"):
        await editor.execute("agentLsp.rewind", {"runId": "r-nope"})
    with pytest.raises(JsonRpcException, match="runId"):
        await editor.execute("agentLsp.rewind", {})

    model.add("slow", [{"tool_calls": [EDIT]}, {"text": "slow", "ttft": 30}])
    started = await editor.run("slow one")
    await editor.wait_for(lambda: editor.events(started["runId"], "toolResult"), 15, "the edit")
    with pytest.raises(JsonRpcException, match="still running|has not finished"):
        await editor.execute("agentLsp.rewind", {"runId": started["runId"]})
    await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
    report = await editor.wait_stop(started["runId"])

    before = (workspace / "calc.py").read_text()
    blobs = next(state_dir.rglob("blobs"))
    shutil.rmtree(blobs)
    blobs.write_text("not a folder")  # the checkpoint store is broken
    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert result["restored"] == [] and result["notRestorable"] and "checkpoint" in result["notRestorable"][0]["reason"]
    assert (workspace / "calc.py").read_text() == before, "the workspace is untouched"


async def test_a_rewinds_transcript_goes_where_the_runs_transcripts_go(open_editor, model, workspace, tmp_path):
    """Issue 21 item 18: the rewind's record follows `transcriptDir`, like the runs' transcripts."""
    transcripts = tmp_path / "my-transcripts"
    model.add("change", replies(EDIT))
    editor = await open_editor(init={**ALLOW, "transcriptDir": str(transcripts)})
    report = await run_to_stop(editor, "change things")
    assert Path(report["transcript"]).parent == transcripts

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert (transcripts / f"{result['rewindId']}.jsonl").is_file(), sorted(p.name for p in transcripts.iterdir())
