"""Issue 25, `agent-lsp run --output-schema FILE` (CONTRACT "Headless at scale", Decision 41):
the real CLI against the scripted model. The model is told the schema; the JSON is the whole
answer, else its last ```json block, else its last balanced {…}/[…]; an invalid answer gets one
more turn with the errors (within maxTurns); still invalid, the run stops fatal/schema; the
report carries structuredOutput and finalText stays the raw text; a schema that cannot be used
exits 2 before the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.reliability.test_cli_stream_json import lines_of, stream_run

pytestmark = pytest.mark.timeout(90)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "files": {"type": "array", "items": {"type": "string"}}},
    "required": ["answer"],
    "additionalProperties": False,
}


def schema_file(tmp_path: Path, schema: object = SCHEMA, text: str | None = None) -> str:
    path = tmp_path / "schema.json"
    path.write_text(text if text is not None else json.dumps(schema))
    return str(path)


def user_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


@pytest.mark.parametrize(("answer", "value"), [
    ('{"answer": 5}', {"answer": 5}),
    ('It is five.\n```json\n{"answer": 4}\n```\nThen the real one:\n```json\n{"answer": 5, "files": ["a.py"]}\n```',
     {"answer": 5, "files": ["a.py"]}),
    ('The answer is {"answer": 5} as computed.', {"answer": 5}),
])
def test_an_answer_that_validates_is_the_structured_output(model, workspace, tmp_path, answer, value):
    model.add([{"text": answer}])
    proc = run_cli(agent_run(model, workspace, "what is 2+3", "--output-schema", schema_file(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["structuredOutput"] == value and report["finalText"] == answer
    assert report["stopReason"] == "done" and report["turns"] == 1
    # The model was told to end with JSON that fits the schema, and shown it.
    system = model.requests[0]["messages"][0]["content"]
    assert "JSON Schema" in system and json.dumps(SCHEMA) in system


def test_an_invalid_answer_gets_one_repair_turn_with_the_errors(model, workspace, tmp_path):
    model.add([{"text": 'Here: {"answer": "five"}'}, {"text": '```json\n{"answer": 5}\n```'}])
    proc = run_cli(stream_run(model, workspace, "what is 2+3", "--output-schema", schema_file(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = lines_of(proc.stdout)[-1]["report"]
    assert report["structuredOutput"] == {"answer": 5} and report["turns"] == 2
    assert report["finalText"] == '```json\n{"answer": 5}\n```'
    assert len(model.requests) == 2
    repair = user_messages(model.requests[1])[-1]
    assert "does not validate" in repair and "$.answer" in repair and "'five' is not of type 'integer'" in repair
    # The first answer stays in the history the repair turn sees.
    assert any(m["role"] == "assistant" and m.get("content") == 'Here: {"answer": "five"}'
               for m in model.requests[1]["messages"])


def test_an_answer_still_invalid_after_the_repair_stops_fatal(model, workspace, tmp_path):
    model.add([{"text": "no JSON at all"}, {"text": '{"answer": 5, "extra": true}'}, {"text": "never asked"}])
    proc = run_cli(agent_run(model, workspace, "what is 2+3", "--output-schema", schema_file(tmp_path)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "fatal" and report["stopCause"] == "schema"
    assert "does not validate" in report["error"] and "extra" in report["error"]
    assert "structuredOutput" not in report and report["finalText"] == '{"answer": 5, "extra": true}'
    assert len(model.requests) == 2
    assert "no JSON value" in user_messages(model.requests[1])[-1]


def test_the_repair_turn_counts_against_max_turns(model, workspace, tmp_path):
    model.add([{"text": "five"}, {"text": '{"answer": 5}'}])
    proc = run_cli(agent_run(model, workspace, "what is 2+3", "--output-schema", schema_file(tmp_path),
                             "--max-turns", "1"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "max_turns" and "structuredOutput" not in report
    assert len(model.requests) == 1


def test_a_schema_of_another_draft_is_checked_by_that_draft(model, workspace, tmp_path):
    # Draft 4's exclusiveMaximum is a boolean (2020-12 would refuse it as a schema).
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "maximum": 5,
              "exclusiveMaximum": True}
    model.add([{"text": "5"}, {"text": "4"}])
    proc = run_cli(agent_run(model, workspace, "a number", "--output-schema", schema_file(tmp_path, schema)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report_of(proc.stdout)["structuredOutput"] == 4 and len(model.requests) == 2


@pytest.mark.parametrize(("text", "says"), [
    (None, "cannot read"),
    ("{not json", "is not JSON"),
    (json.dumps({"type": 12}), "not a valid JSON Schema"),
    (json.dumps([1, 2]), "not a JSON Schema"),
    (json.dumps({"$schema": "https://example.com/my-draft", "type": "object"}), "unknown $schema"),
    (json.dumps({"$ref": "https://example.com/remote.json"}), "never fetched"),
    (json.dumps({"properties": {"a": {"$ref": "other.json#/x"}}}), "never fetched"),
])
def test_a_schema_that_cannot_be_used_exits_2_before_the_run(model, workspace, tmp_path, text, says):
    path = str(tmp_path / "missing.json") if text is None else schema_file(tmp_path, text=text)
    for output in (["--json"], ["--output-format", "stream-json"]):
        proc = run_cli(agent_run(model, workspace, "anything", "--output-schema", path, *output, json_report=False))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == "" and says in proc.stderr and "--output-schema" in proc.stderr
    assert model.requests == []


def test_local_refs_and_embedded_ids_are_resolved_without_fetching(model, workspace, tmp_path):
    schema = {"$id": "https://example.com/root.json", "$defs": {"n": {"$id": "n.json", "type": "integer"}},
              "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "n.json"}}}
    model.add([{"text": '{"a": 1, "b": 2}'}])
    proc = run_cli(agent_run(model, workspace, "numbers", "--output-schema", schema_file(tmp_path, schema)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report_of(proc.stdout)["structuredOutput"] == {"a": 1, "b": 2}
