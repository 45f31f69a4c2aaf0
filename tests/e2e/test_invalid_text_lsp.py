"""Issue 32 P9 over LSP: a model's tool arguments holding a lone surrogate (`"\\ud800"`, valid
JSON that no UTF-8 writer can encode) are a tool error the model reads, and the run ends with
its `stop` event; the stream survives the text."""

from __future__ import annotations

import pytest

from tests.e2e.harness import tool_messages

pytestmark = pytest.mark.parametrize("caps", ["visual-studio-code"])


async def test_lone_surrogates_in_tool_arguments_are_tool_errors(open_editor, model, workspace, caps):
    model.add("look around", [
        {"tool_calls": [
            {"name": "list_files", "id": "l1", "arguments": r'{"path": "\ud800"}'},
            {"name": "read_file", "id": "r1", "arguments": r'{"path": "calc\ud800.py"}'},
            {"name": "search", "id": "s1", "arguments": r'{"pattern": "x\ud800"}'},
        ]},
        {"text": "nothing there"},
    ])
    editor = await open_editor(caps)
    started = await editor.run("look around")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["finalText"] == "nothing there", report
    results = tool_messages(model.requests[1])
    for call_id in ("l1", "r1", "s1"):
        assert results[call_id].startswith("error: invalid characters in argument"), results[call_id]
    assert "internal error" not in str(results)
    shown = [e for e in editor.events(started["runId"], "toolResult")]
    assert [e["ok"] for e in shown] == [False, False, False]
