"""Progress begin/report/end per run, and the `agentLsp/stream` events: order, seq, text."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.e2e.harness import capabilities

# VS Code and Neovim differ only in what the server reads for edits (documentChanges) and in the
# position encoding; these runs neither edit nor send positions, so one set is the same path.
EDITORS = ["visual-studio-code"]


@pytest.mark.parametrize("caps", EDITORS)
async def test_progress_begin_reports_end_with_stop_reason(open_editor, model, caps):
    model.add("look at calc", [
        {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"text": "It subtracts."},
    ])
    editor = await open_editor(caps)
    started = await editor.run("look at calc please")
    await editor.wait_stop(started["runId"])
    end = await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd)

    progress = editor.progress(started["runId"])
    begin = progress[0]
    assert isinstance(begin, types.WorkDoneProgressBegin), progress
    assert begin.cancellable is True
    assert "look at calc" in begin.title
    assert progress[-1] is end and sum(isinstance(p, types.WorkDoneProgressEnd) for p in progress) == 1
    reports = [p.message for p in progress[1:-1]]
    assert all(isinstance(p, types.WorkDoneProgressReport) for p in progress[1:-1])
    assert any("turn 1" in m for m in reports), reports  # what happens now: the turn...
    assert any("read_file" in m for m in reports), reports  # ...the tool...
    assert any("calc.py" in m for m in reports), reports  # ...and the file
    assert end.message.startswith("done"), end.message
    assert "Done" in end.message and "tool call" in end.message  # the one-line summary


@pytest.mark.parametrize("caps", EDITORS)
async def test_stream_text_equals_model_text_and_seq_counts_from_zero(open_editor, model, caps):
    first = "Let me read the file first. "
    final = "The function `add` subtracts — it should add. Ünïcödé and 😀 survive too."
    model.add("explain calc", [
        {"text": first, "chunk_size": 3, "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"text": final, "chunk_size": 2},
    ])
    editor = await open_editor(caps)
    started = await editor.run("explain calc.py")
    report = await editor.wait_stop(started["runId"])

    events = editor.events(started["runId"])
    assert [e["seq"] for e in events] == list(range(len(events)))  # from 0, in order, none lost
    assert "".join(e["text"] for e in events if e["kind"] == "text") == first + final
    assert events[-1]["kind"] == "stop" and events[-1]["report"] == report
    assert report["finalText"] == final and report["stopReason"] == "done"
    call = next(e for e in events if e["kind"] == "toolCall")
    result = next(e for e in events if e["kind"] == "toolResult")
    assert call["tool"] == "read_file" and call["arguments"] == {"path": "calc.py"} and call["callId"]
    assert result["callId"] == call["callId"] and result["ok"] is True and result["truncated"] is False
    assert all(isinstance(e["text"], str) and e["runId"] == started["runId"] for e in events)
    assert any(e["kind"] == "status" and "turn" in e for e in events)


async def test_text_deltas_are_coalesced_to_about_30_events_per_second(open_editor, model):
    text = "".join(f"word{i} " for i in range(150))  # ~1000 one-character deltas over ~1.5 s
    model.add("stream fast", [{"text": text, "chunk_size": 1, "chunk_delay": 0.0015}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("stream fast please")
    await editor.wait_stop(started["runId"])

    events = editor.events(started["runId"])
    texts = [(t, e) for t, e in zip(editor.stream_times, editor.stream, strict=True)
             if e["runId"] == started["runId"] and e["kind"] == "text"]
    assert "".join(e["text"] for _, e in texts) == text  # coalesced, never lost
    times = [t for t, _ in texts]
    duration = times[-1] - times[0]
    assert duration > 0.5, f"the reply streamed too fast to measure ({duration:.2f}s)"
    assert len(times) <= 30 * duration + 3, f"{len(times)} text events in {duration:.2f}s"
    # arrival times bunch up when the test process is busy, so allow some slack per window
    busiest = max(sum(1 for u in times if t <= u < t + 1.0) for t in times)
    assert busiest <= 45, f"{busiest} text events within one second"
    assert len(times) >= 5  # coalesced, but still streamed live rather than all at the end
    assert [e["seq"] for e in events] == list(range(len(events)))


async def test_without_progress_support_status_lines_go_to_log_and_stream(open_editor, model):
    caps = capabilities("visual-studio-code")
    caps.window.work_done_progress = False
    model.add("no progress", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"text": "ok"},
    ])
    editor = await open_editor(caps)
    started = await editor.run("no progress here")
    await editor.wait_stop(started["runId"])
    await editor.wait_for(lambda: any(started["runId"] in m.message and "done" in m.message
                                      for m in editor.client.log_messages), 5, "the end line in window/logMessage")
    assert editor.progress(started["runId"]) == []
    logged = [m.message for m in editor.client.log_messages if started["runId"] in m.message]
    assert any("read_file" in m for m in logged), logged
    assert any(e["kind"] == "status" for e in editor.events(started["runId"]))
