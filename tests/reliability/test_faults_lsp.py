"""Model faults through the real LSP surface: every fault ends the run in a defined state,
the server still answers a new run afterwards, and the transcript records what happened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.kit import API_KEY

FAST = {"retry_after": 0.01}  # the SDK honours retry-after: keep its retries quick

# name -> (scripted replies, extra init options, expected stop, transcript types that must appear,
#          a fragment of the report's error (fatal) or final text (done))
FAULTS = {
    "429-then-ok": ([{"status": 429, **FAST}, {"text": "made it after 429"}], {}, "done", ["reply"], "made it after 429"),
    "500-beyond-retries": ([{"status": 500, "message": "upstream exploded", "repeat": 3, **FAST}], {}, "fatal",
                           ["modelError"], "upstream exploded"),
    "cut-before-text": ([{"text": "", "fault": "cut"}, {"text": "second try worked"}], {}, "done",
                        ["modelError", "reply"], "second try worked"),
    "cut-after-text": ([{"text": "a reply that is cut in the middle", "chunk_size": 4, "fault": "cut"},
                        {"text": "never sent"}], {}, "fatal", ["modelError"], "cut after"),
    "cut-always": ([{"text": "", "fault": "cut", "repeat": 5}], {}, "fatal", ["modelError"], "cut"),
    "length-twice": ([{"text": "a cut reply", "finish_reason": "length", "repeat": 2}], {}, "fatal", ["reply"],
                     "output limit"),
    "no-finish": ([{"text": "no finish", "fault": "no_finish", "repeat": 5}], {}, "fatal", ["modelError"],
                  "finish reason"),
    "hang": ([{"fault": "hang", "repeat": 5}], {"requestTimeout": 1}, "fatal", ["modelError"], "requestTimeout"),
    "trickle": ([{"text": "t" * 400, "chunk_size": 1, "chunk_delay": 0.05}], {"requestTimeout": 2}, "fatal",
                ["modelError"], "requestTimeout"),
    "malformed-tool-json": ([{"tool_calls": [{"id": "call_bad", "name": "read_file", "arguments": '{"path": "calc.py"'}]},
                             {"text": "understood the error"}], {}, "done", ["toolResult", "reply"], "understood the error"),
    "unknown-tool": ([{"tool_calls": [{"id": "call_bad", "name": "delete_everything", "arguments": {"path": "."}}]},
                      {"text": "no such tool, fine"}], {}, "done", ["toolResult", "reply"], "no such tool, fine"),
    # asked again once, then a fatal stop naming the endpoint (issue 32, Decision 68)
    "empty-reply": ([{"text": "", "repeat": 2}], {}, "fatal", ["modelError"], "empty reply"),
    # OpenAI's refusal deltas: fatal, the refusal's text as the error (Decision 68)
    "refusal": ([{"refusal": "I can't help with that."}], {}, "fatal", [], "I can't help with that."),
}


def records(report: dict) -> list[dict]:
    path = Path(report["transcript"])
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_model_fault_ends_in_a_defined_state(open_editor, model, fault):
    replies, init, expected_stop, kinds, fragment = FAULTS[fault]
    key = f"fault {fault}"
    model.add(key, replies)
    model.add("still alive check", [{"text": "still here"}])
    editor = await open_editor(init=init)

    started = await editor.run(f"{key}: please")
    report = await editor.wait_stop(started["runId"], timeout=30)

    # a defined stop state, with a readable error when fatal
    if expected_stop is None:
        assert report["stopReason"] in {"done", "fatal"}, report
    else:
        assert report["stopReason"] == expected_stop, report
    if report["stopReason"] == "fatal":
        error = report.get("error") or ""
        assert error and "Traceback" not in error and len(error) < 2000, report
        if fragment:
            assert fragment in error, report
    elif fragment:
        assert report["finalText"] == fragment, report
    for event in editor.events(started["runId"]):
        assert API_KEY not in json.dumps(event)

    # the tool faults: the model was told (an error result) and the run went on
    if fault in ("malformed-tool-json", "unknown-tool"):
        tool_results = [e for e in editor.events(started["runId"], "toolResult") if e["callId"] == "call_bad"]
        assert tool_results and tool_results[0]["ok"] is False
        second = model.requests_for(key)[1]
        answer = [m for m in second["messages"] if m.get("role") == "tool" and m["tool_call_id"] == "call_bad"]
        assert answer and answer[0]["content"].startswith("error:"), answer

    # the transcript records it, and ends with the stop
    lines = records(report)
    types_seen = [r["type"] for r in lines]
    assert types_seen[0] == "start" and types_seen[-1] == "stop", types_seen
    for kind in kinds:
        assert kind in types_seen, (kind, types_seen)
    assert lines[-1]["report"]["stopReason"] == report["stopReason"]
    if fault == "500-beyond-retries":  # each of the SDK's retries is a status event (issue 32)
        retries = [e["text"] for e in editor.events(started["runId"], "status") if "retrying" in e["text"]]
        assert [t.split("; ")[-1] for t in retries] == ["retrying (2/3)", "retrying (3/3)"], retries
        assert all("HTTP 500 (upstream exploded)" in t for t in retries), retries
    if fault == "refusal":
        assert (report["stopCause"], report["error"]) == ("content_filter", "I can't help with that.")
    if fault == "cut-always":
        assert types_seen.count("modelError") == 3, types_seen  # retried, then fatal
    assert API_KEY not in Path(report["transcript"]).read_text(encoding="utf-8")

    # the server still answers a new run
    again = await editor.run("still alive check")
    assert again["runId"] != started["runId"]
    after = await editor.wait_stop(again["runId"], timeout=15)
    assert after["stopReason"] == "done" and after["finalText"] == "still here", after
