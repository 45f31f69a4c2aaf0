"""Co-editing on disk (issue 35): `agent-lsp run` merges an edit with a change made to the file
after the tool read it (here by a PreToolUse hook, which runs between the read and the apply,
as a person or a formatter would), and refuses an overlapping one without writing anything."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(90)
CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"


def run_with_a_change_meanwhile(model, workspace: Path, tmp_path: Path, changed: str) -> tuple[dict, str]:
    """One edit_file call; the file becomes `changed` after the read, before the apply."""
    script = tmp_path / "someone_edits.py"
    script.write_text(f"from pathlib import Path\nPath({str(workspace / 'calc.py')!r}).write_text({changed!r})\n")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "", "hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]}}))
    model.add([tools_reply(call("edit_file", id="e1", path="calc.py", old_text="a - b", new_text="a + b")),
               {"text": "done"}])
    proc = run_cli(agent_run(model, workspace, "fix add", "--settings", str(settings)))
    assert proc.returncode == 0, proc.stderr
    return report_of(proc.stdout), last_tool_results(model.requests[1])["e1"]


def test_a_change_made_on_disk_after_the_read_is_merged_with_the_edit(model, workspace, tmp_path):
    changed = '"""Arithmetic."""\n\n' + CALC.replace("a * b", "a * b  # kept")
    report, told = run_with_a_change_meanwhile(model, workspace, tmp_path, changed)

    assert (workspace / "calc.py").read_text() == changed.replace("a - b", "a + b")  # both changes
    assert "the file had changed since it was read; your edit was merged" in told and "lines 4" in told, told
    assert report["editedFiles"] == [(workspace / "calc.py").resolve().as_uri()]


def test_an_overlapping_change_on_disk_is_a_conflict_and_nothing_is_written(model, workspace, tmp_path):
    changed = CALC.replace("a - b", "b - a  # theirs")
    report, told = run_with_a_change_meanwhile(model, workspace, tmp_path, changed)

    assert (workspace / "calc.py").read_text() == changed
    assert "conflict" in told and "b - a  # theirs" in told and "a + b" in told and "Read the file again" in told, told
    assert report["editedFiles"] == []
