"""Decisions 30-31: a project hook (`.claude/settings.json` of the workspace) runs only once the
consent store says yes, and then, with `sandbox.mode` on, inside the sandbox (the run's
transcript readable, nothing outside the workspace writable), while the user's own hooks run
unconfined."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from agent_lsp.agent.exec import sandbox
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import RunOptions, Session, run_task
from tests.unit.kit import Events, ScriptedApprover, make_settings

pytestmark = pytest.mark.timeout(60)


def group(command: str) -> dict:
    return {"matcher": "", "hooks": [{"type": "command", "command": command}]}


async def run_with(model, workspace: Path, consent, **values):
    model.add([{"text": "hi"}])
    events = Events()
    report = await asyncio.wait_for(run_task(
        "hello", session=Session(), settings=make_settings(model, **values), workspace=DiskWorkspace([workspace]),
        approver=ScriptedApprover(), emit=events, options=RunOptions(hook_consent=consent)), 30)
    return report, [e for e in events.of("hook")]


async def test_project_hooks_need_consent(model, workspace: Path):
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"UserPromptSubmit": [group("touch project-ran")]}}))
    _, hooks = await run_with(model, workspace, None)
    assert hooks == [] and not (workspace / "project-ran").exists()
    _, hooks = await run_with(model, workspace, lambda spec: spec.command == "touch project-ran")
    assert [h.exit_code for h in hooks] == [0] and (workspace / "project-ran").exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_project_hooks_run_in_the_sandbox_and_user_hooks_do_not(model, workspace: Path, tmp_path: Path):
    sandbox.reset_probe()
    if await sandbox.probe() is not None:
        pytest.skip("the sandbox cannot run here")
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / ".claude").mkdir()
    project = f"head -c 1 \"$(jq -r .transcript_path)\" > read-transcript; touch {outside}/by-project"
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [group(project)]}}))
    report, hooks = await run_with(model, workspace, lambda spec: True, sandbox={"mode": "workspace-write"},
                                   hooks={"UserPromptSubmit": [group(f"touch {outside}/by-user")]})
    assert report.stop_reason == "done"
    assert (outside / "by-user").exists(), "the user's own hooks run unconfined"
    assert not (outside / "by-project").exists(), "a project hook cannot write outside the workspace"
    assert (workspace / "read-transcript").read_text() == "{", "the transcript is readable inside"
    assert sorted(h.exit_code for h in hooks) == [0, 1]


async def test_a_notification_hook_hears_of_a_waiting_approval(model, workspace: Path, tmp_path: Path):
    log = tmp_path / "notified.json"
    model.add([{"tool_calls": [{"name": "run_command", "arguments": {"command": "touch x"}}]}, {"text": "ok"}])
    events = Events()
    settings = make_settings(model, hooks={"Notification": [{"matcher": "permission_prompt", "hooks": [
        {"type": "command", "command": f"cat > {log}"}]}]})
    await asyncio.wait_for(run_task("go", session=Session(), settings=settings, workspace=DiskWorkspace([workspace]),
                                    approver=ScriptedApprover(), emit=events), 30)
    notified = json.loads(log.read_text())
    assert notified["hook_event_name"] == "Notification" and notified["notification_type"] == "permission_prompt"
    assert notified["message"] == "agent-lsp needs your permission to use run_command"


async def test_the_hooks_come_from_the_claude_files_read_for_the_runs_rules(model, workspace: Path, monkeypatch):
    """Claude Code's files are read once per run: the permission source's reading (rules and
    consent) is the one the hooks use, even if a file changes meanwhile."""
    from agent_lsp.agent.policy import hook_config
    from agent_lsp.agent.policy.claude_files import claude_files
    from agent_lsp.agent.ports import RunPermissions

    (workspace / ".claude").mkdir()
    settings_file = workspace / ".claude" / "settings.json"
    settings_file.write_text(json.dumps({"hooks": {"UserPromptSubmit": [group("touch from-the-reading")]}}))
    files = claude_files([workspace], None)
    settings_file.unlink()  # read again now, the file would declare no hook
    reads = []
    monkeypatch.setattr(hook_config, "claude_files", lambda *a: reads.append(a) or [])
    model.add([{"text": "hi"}])
    granted = RunPermissions(hook_consent=lambda spec: True, claude_files=files)
    report = await asyncio.wait_for(run_task(
        "hello", session=Session(), settings=make_settings(model), workspace=DiskWorkspace([workspace]),
        approver=ScriptedApprover(), emit=Events(), options=RunOptions(permissions=granted)), 30)
    assert report.stop_reason == "done"
    assert (workspace / "from-the-reading").exists() and reads == []
