"""Issue 20.5: a rewind writes and deletes only inside the workspace, checked per path component
as an edit is: a folder (or the file) replaced by a link since the run, with or without force, a
manifest edited to name an outside path or a `..` path, and over LSP no applyEdit for an
outside URI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

RUN_LEFT = "written by the run\n"


def rewind_cli(workspace: Path, run_id: str, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "rewind", run_id, "--workspace", str(workspace), "--json", *extra],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=45)
    assert proc.returncode in (0, 4), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def a_run_that_writes(model, workspace: Path, path: str = "sub/f.txt") -> str:
    model.add([tools_reply(call("write_file", path=path, content=RUN_LEFT)), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "write it"))
    assert proc.returncode == 0, proc.stderr
    report = report_of(proc.stdout)
    assert report["rewindable"]
    return report["runId"]


def git_init(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)


def manifest_of(state: Path, run_id: str) -> Path:
    return next(state.rglob(f"checkpoints/runs/{run_id}.json"))


def not_restorable(result: dict) -> str:
    return " ".join(item["reason"] for item in result["notRestorable"])


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_a_folder_replaced_by_a_link_since_the_run_is_not_written_through(model, workspace, tmp_path, force):
    run_id = a_run_that_writes(model, workspace)
    outside = tmp_path / "outside"
    outside.mkdir()
    # Without force the outside file must look exactly as the run left it (no conflict to hide behind).
    (outside / "f.txt").write_text(RUN_LEFT if not force else "the user's own file\n")
    before = (outside / "f.txt").read_text()
    (workspace / "sub" / "f.txt").unlink()
    (workspace / "sub").rmdir()
    (workspace / "sub").symlink_to(outside)

    _, result = rewind_cli(workspace, run_id, *(["--force"] if force else []))

    assert (outside / "f.txt").read_text() == before, "the rewind deleted or wrote a file outside the workspace"
    assert result["restored"] == [] and "symbolic link" in not_restorable(result)


def test_the_file_itself_replaced_by_a_link_is_not_written_through(model, workspace, tmp_path):
    run_id = a_run_that_writes(model, workspace, "f.txt")
    outside = tmp_path / "outside.txt"
    outside.write_text(RUN_LEFT)
    (workspace / "f.txt").unlink()
    (workspace / "f.txt").symlink_to(outside)

    _, result = rewind_cli(workspace, run_id, "--force")

    assert outside.read_text() == RUN_LEFT and "symbolic link" in not_restorable(result)


@pytest.mark.parametrize("how", ["absolute", "dot-dot"])
@pytest.mark.parametrize("before", ["deleted", "written"])
def test_a_tampered_manifest_never_reaches_outside(model, workspace, state_dir, tmp_path, how, before):
    run_id = a_run_that_writes(model, workspace, "f.txt")
    victim = tmp_path / "victim.txt"
    victim.write_text(RUN_LEFT)  # as the run "left" it: no conflict
    manifest = manifest_of(state_dir, run_id)
    data = json.loads(manifest.read_text())
    record = data["files"][0]
    other = json.loads(manifest.read_text())["files"][0]
    record["path"] = str(victim) if how == "absolute" else f"{workspace}/../victim.txt"
    if before == "deleted":
        record["before"] = None  # "the run created it": a rewind would delete it
    else:
        record["before"] = other["after"]  # a blob that exists in the store
        victim.write_text("the victim's own text\n")
        record["after"] = None
    data["files"] = [record]
    manifest.write_text(json.dumps(data))

    _, result = rewind_cli(workspace, run_id, "--force")

    assert victim.exists(), "a rewind deleted a file outside the workspace"
    assert victim.read_text() in (RUN_LEFT, "the victim's own text\n") and result["restored"] == []
    assert "refused" in not_restorable(result)


def test_a_manifest_that_is_a_fifo_or_a_link_is_refused_quickly(model, workspace, state_dir, tmp_path):
    import os

    run_id = a_run_that_writes(model, workspace, "f.txt")
    manifest = manifest_of(state_dir, run_id)
    manifest.unlink()
    os.mkfifo(manifest)

    proc = subprocess.run([sys.executable, "-m", "agent_lsp", "rewind", run_id, "--workspace", str(workspace)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)

    assert proc.returncode == 2 and "not a regular file" in proc.stderr


async def test_over_lsp_no_apply_edit_names_an_outside_uri(open_editor, model, workspace, state_dir, tmp_path):
    model.add("write", [{"tool_calls": [{"name": "write_file", "arguments": {"path": "f.txt", "content": RUN_LEFT}}]},
                        {"text": "done"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    started = await editor.run("write it")
    report = await editor.wait_stop(started["runId"], 20)
    victim = tmp_path / "victim.txt"
    victim.write_text(RUN_LEFT)
    manifest = manifest_of(state_dir, report["runId"])
    data = json.loads(manifest.read_text())
    data["files"][0]["path"] = str(victim)
    manifest.write_text(json.dumps(data))
    edits_before = len(editor.edits)

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"], "force": True})

    assert result["restored"] == [] and "outside the workspace" in result["notRestorable"][0]["reason"]
    sent = json.dumps([repr(e) for e in editor.edits[edits_before:]])
    assert victim.as_uri() not in sent and victim.read_text() == RUN_LEFT


async def test_concurrent_runs_keep_their_own_changes_and_rewinds(open_editor, model, workspace):
    """Issue 21.15: run A's command is running while run B edits a file: B's edit is not one of
    A's changes, and rewinding A leaves B's work alone."""
    git_init(workspace)
    model.add("slow command", [{"tool_calls": [{"name": "run_command", "arguments": {"command": "sh -c 'sleep 1.5; echo a > a.txt'"}}]},
                               {"text": "done"}])
    model.add("quick edit", [{"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
                             {"text": "done"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    first = await editor.run("slow command")
    await asyncio.sleep(0.5)  # A's command is running
    second = await editor.run("quick edit")
    report_b = await editor.wait_stop(second["runId"], 20)
    report_a = await editor.wait_stop(first["runId"], 20)
    assert "a + b" in (workspace / "calc.py").read_text()

    assert [Path(u).name for u in report_a["editedFiles"]] == ["a.txt"], "B's edit counted as A's change"
    assert [Path(u).name for u in report_b["editedFiles"]] == ["calc.py"]
    result = await editor.execute("agentLsp.rewind", {"runId": report_a["runId"]})
    assert [Path(u).name for u in result["restored"]] == ["a.txt"]
    assert "a + b" in (workspace / "calc.py").read_text(), "rewinding A reverted B's work"
