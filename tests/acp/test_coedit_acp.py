"""Co-editing over ACP (issue 35): an edit written through the client's `fs/write_text_file` is
merged with a change made to the file after the tool read it (a PreToolUse hook changes it
between the read and the write), and an overlapping change is a conflict that writes nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.unit.kit import call, tools_reply

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"


def _run(connect, model, workspace: Path, tmp_path: Path, changed: str, prompt: str) -> tuple[list, str]:
    script = tmp_path / "someone_edits.py"
    script.write_text(f"from pathlib import Path\nPath({str(workspace / 'calc.py')!r}).write_text({changed!r})\n")
    hooks = {"PreToolUse": [{"matcher": "", "hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]}
    model.add(prompt, [tools_reply(call("edit_file", "e1", path="calc.py", old_text="a - b", new_text="a + b")),
                       {"text": "done"}])
    client = connect(model_settings(model, approval={"default": "allow"}, hooks=hooks))
    client.initialize()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, prompt)["stopReason"] == "end_turn"
    writes = [e for e in client.of("fs") if e["method"] == "fs/write_text_file"]
    told = model.requests_for(prompt)[1]["messages"][-1]["content"]
    client.close()
    return writes, told


def test_a_change_after_the_read_is_merged_into_the_write(connect, model, workspace: Path, tmp_path: Path):
    changed = '"""Arithmetic."""\n\n' + CALC
    writes, told = _run(connect, model, workspace, tmp_path, changed, "merge: fix add")

    assert [w["params"]["content"] for w in writes] == [changed.replace("a - b", "a + b")]
    assert (workspace / "calc.py").read_text() == changed.replace("a - b", "a + b")
    assert "your edit was merged with those changes" in told, told


def test_an_overlapping_change_is_a_conflict_and_nothing_is_written(connect, model, workspace: Path, tmp_path: Path):
    changed = CALC.replace("a - b", "b - a  # theirs")
    writes, told = _run(connect, model, workspace, tmp_path, changed, "conflict: fix add")

    assert writes == [] and (workspace / "calc.py").read_text() == changed
    assert "conflict" in told and "b - a  # theirs" in told, told
