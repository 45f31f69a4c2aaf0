"""Decision 30 over LSP (the real server, pytest-lsp): a project command's `allowed-tools` ask
the user's consent as one message request naming the file and the entries; allowed, they apply
to that command's run (its command is not asked again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_rules_lsp import command_call

pytestmark = pytest.mark.timeout(60)


async def test_a_project_commands_allowed_tools_apply_after_consent(open_editor, model, workspace: Path):
    commands = workspace / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "mk.md").write_text("---\nallowed-tools: Bash(touch:*)\n---\nmk: make one\n")
    model.add("mk: make one", [command_call("touch one", "c1"), {"text": "done"}])
    editor = await open_editor()
    editor.approval_answers = ["Allow"]
    started = await editor.run("/mk")
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    [consent] = editor.approval_requests  # the command itself was not asked: allowed-tools allowed it
    assert "Bash(touch:*)" in consent.message and "mk.md" in consent.message
    assert [a.title for a in consent.actions] == ["Allow", "Allow always for this workspace", "Deny"]
    assert (workspace / "one").exists()
    status = [e["text"] for e in editor.events(started["runId"], "status")]
    assert any("allowed-tools pre-allowed for this run: Bash(touch:*)" in t for t in status), status
