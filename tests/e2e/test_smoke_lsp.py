from __future__ import annotations

import pytest

pytestmark = pytest.mark.parametrize("caps", ["visual-studio-code", "neovim"])


async def test_run_edits_open_buffer_with_approval(open_editor, model, workspace, caps):
    model.add("fix the add", [
        {"text": "Looking at calc.py.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
        {"text": "Fixed: add now returns a + b."},
    ])
    editor = await open_editor(caps)
    editor.open("calc.py")
    editor.approval_answers = ["Allow"]
    started = await editor.run("fix the add function")
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done", report
    assert "return a + b" in editor.text("calc.py")
    text = "".join(e["text"] for e in editor.events(started["runId"], "text"))
    assert text == "Looking at calc.py.Fixed: add now returns a + b."
    # Right after each request the server then awaits, it writes again (a status event), so
    # clients whose reader waits for the next message (eglot's jsonrpc) do not stall.
    statuses = [e["text"] for e in editor.events(started["runId"], "status")]
    assert any(t.startswith("waiting for approval: edit calc.py") for t in statuses), statuses
    assert "waiting for the editor to apply the edit to calc.py" in statuses, statuses
