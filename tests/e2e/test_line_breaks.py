"""Issue 11.8: an edit after a form feed or a U+2028 lands where it should (LSP counts only
\\n, \\r\\n and \\r as line breaks; str.splitlines also splits on those)."""

from __future__ import annotations

import pytest

ODD = "def a():\n    return 1\n\x0c\ndef b():  # page break above\n    x = 'sep\u2028arated'\n    return a - b\n"


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim"])
async def test_edits_after_form_feeds_and_line_separators(open_editor, model, workspace, caps):
    (workspace / "odd.py").write_text(ODD)
    model.add("odd", [{"tool_calls": [{"id": "e", "name": "edit_file",
                                       "arguments": {"path": "odd.py", "old_text": "return a - b", "new_text": "return a + b"}}]},
                      {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "odd.py"}}]},
                      {"text": "done"}])
    editor = await open_editor(caps, init={"approval": {"default": "allow"}})
    editor.open("odd.py")
    started = await editor.run("odd file")
    await editor.wait_stop(started["runId"])
    assert editor.text("odd.py") == ODD.replace("return a - b", "return a + b")
    listing = [m["content"] for m in model.requests[-1]["messages"] if m.get("tool_call_id") == "r"][0]
    assert "6\t    return a + b" in listing, "line numbers count \\n only"
