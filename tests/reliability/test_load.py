"""20 concurrent runs through one server: all complete, no cross-talk, bounded memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

RUNS = 20
RSS_GROWTH_MB = 40


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def script(i: int) -> list[dict]:
    return [
        {"text": f"Editing f{i}.py.", "ttft": 0.05, "chunk_delay": 0.005, "chunk_size": 4,
         "tool_calls": [{"id": f"edit_{i}", "name": "edit_file",
                         "arguments": {"path": f"f{i}.py", "old_text": f"value = {i}", "new_text": f"value = {i * 100} # run {i}"}}]},
        {"text": f"Run {i} edited f{i}.py.", "chunk_delay": 0.005, "chunk_size": 4},
    ]


@pytest.mark.timeout(90)
async def test_twenty_concurrent_runs(open_editor, model, workspace):
    for i in range(RUNS):
        (workspace / f"f{i}.py").write_text(f"# file {i}\nvalue = {i}\n")
        model.add(f"load task {i:02d} ", script(i))
    model.add("warm up", [{"text": "warm", "tool_calls": [{"name": "read_file", "arguments": {"path": "f0.py"}}]},
                          {"text": "warmed up"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    pid = editor.process.pid

    warm = await editor.run("warm up please")
    assert (await editor.wait_stop(warm["runId"]))["stopReason"] == "done"
    baseline = rss_mb(pid)

    started = await asyncio.gather(*(editor.run(f"load task {i:02d} go") for i in range(RUNS)))
    run_ids = [s["runId"] for s in started]
    assert len(set(run_ids)) == RUNS and len({s["sessionId"] for s in started}) == RUNS
    reports = await asyncio.gather(*(editor.wait_stop(r, timeout=60) for r in run_ids))

    for i, (run_id, report) in enumerate(zip(run_ids, reports, strict=True)):
        assert report["stopReason"] == "done", (i, report)
        assert report["runId"] == run_id
        assert report["finalText"] == f"Run {i} edited f{i}.py.", (i, report["finalText"])
        assert report["editedFiles"] == [(workspace / f"f{i}.py").resolve().as_uri()], (i, report)
        events = editor.events(run_id)
        assert [e["seq"] for e in events] == list(range(len(events))), f"run {i}: seq has gaps or repeats"
        text = "".join(e["text"] for e in events if e["kind"] == "text")
        assert text == f"Editing f{i}.py.Run {i} edited f{i}.py.", (i, text)
        assert [e["callId"] for e in events if e["kind"] == "toolCall"] == [f"edit_{i}"]
        assert (workspace / f"f{i}.py").read_text() == f"# file {i}\nvalue = {i * 100} # run {i}\n"
    # every stream event belongs to one of the runs, and each file got exactly one edit
    known = set(run_ids) | {warm["runId"]}
    assert {e["runId"] for e in editor.stream} <= known
    touched = [uri for params in editor.edits
               for uri in ([c.text_document.uri for c in params.edit.document_changes or [] if hasattr(c, "text_document")]
                           + list((params.edit.changes or {}).keys()))]
    assert sorted(touched) == sorted((workspace / f"f{i}.py").resolve().as_uri() for i in range(RUNS))

    after = rss_mb(pid)
    print(f"\nserver RSS: {baseline:.1f} MB after warm-up, {after:.1f} MB after {RUNS} concurrent runs")
    assert after < baseline + RSS_GROWTH_MB, (baseline, after)
    assert await editor.execute("agentLsp.cancel", {"runId": run_ids[0]}) is False
