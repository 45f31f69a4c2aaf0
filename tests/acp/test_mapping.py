"""The pure parts of the ACP mapping (no client needed): tool kinds, titles and locations, prompt
blocks, slash commands, plan entries, and the stop reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lsp.acp import sdk

sdk.load()

from acp import RequestError  # noqa: E402
from acp.schema import ResourceContentBlock, TextContentBlock  # noqa: E402

from agent_lsp.acp.content import plan_entries, prompt_text, slash_command  # noqa: E402
from agent_lsp.acp.session import stop_response  # noqa: E402
from agent_lsp.acp.tools import CallIds, tool_kind, tool_locations, tool_title  # noqa: E402
from agent_lsp.agent.messages import RunReport, StopCause, StopReason, Usage  # noqa: E402


@pytest.mark.parametrize(("tool", "kind"), [
    ("read_file", "read"), ("list_files", "read"), ("diagnostics", "read"), ("search", "search"),
    ("edit_file", "edit"), ("write_file", "edit"), ("remember", "edit"), ("run_command", "execute"),
    ("delegate", "think"), ("github__create_issue", "other"), ("web__fetch", "fetch"), ("web__fetch_url", "fetch"),
    ("unknown", "other"), ("debug_start", "execute"), ("debug_step", "execute"), ("debug_eval", "execute"),
])
def test_tool_kinds(tool, kind):
    assert tool_kind(tool) == kind


def test_titles_escape_what_cannot_be_seen():
    assert tool_title("run_command", {"command": "echo hi\u202e; rm -rf x"}) == "Run `echo hi\\u202e; rm -rf x`"
    assert tool_title("run_command", {"command": "ls" + " " * 10 + "x"}) == "Run `ls ⟨10 spaces⟩ x`"
    assert tool_title("read_file", {"path": "a\u200bb.py"}, "main/2") == "[main/2] Read a\\u200bb.py"
    assert len(tool_title("delegate", {"task": "x" * 500})) == 120


def test_locations_are_absolute_and_lines_zero_based(tmp_path: Path):
    other = tmp_path / "lib"
    roots = [tmp_path / "ws", other]
    assert tool_locations("read_file", {"path": "a.py", "offset": 10}, roots) == [{"path": str(tmp_path / "ws" / "a.py"), "line": 9}]
    assert tool_locations("edit_file", {"path": "lib/b.py"}, roots) == [{"path": str(other / "b.py")}]
    assert tool_locations("search", {"pattern": "x"}, roots) == [{"path": str(tmp_path / "ws")}]
    assert tool_locations("run_command", {"command": "ls"}, roots) == []


def test_call_ids_stay_unique_in_a_session():
    ids = CallIds()
    assert ids.start("call_1", "r-1") == "call_1"
    ids.new_run()
    assert ids.start("call_1", "r-2") == "call_1@r-2" and ids.of("call_1") == "call_1@r-2"


def test_prompt_blocks(tmp_path: Path):
    blocks = [TextContentBlock(type="text", text="look at"),
              ResourceContentBlock(type="resource_link", uri=(tmp_path / "src" / "a.py").as_uri(), name="a.py")]
    text = prompt_text(blocks, [tmp_path])
    assert text == "look at `src/a.py`\n\nFile: src/a.py (read it with read_file when needed)"


def test_slash_commands_and_plans():
    assert slash_command("/plan fix it") is not None and slash_command("/plan fix it").argument == "fix it"
    assert slash_command("/rewind") is not None
    assert slash_command("/unknown x") is None and slash_command("plan") is None
    entries = plan_entries("Intro\n1. Read a\n   details\n2) Edit b\n- not a step\n")
    assert [e.content for e in entries] == ["Read a", "Edit b"]
    assert [e.content for e in plan_entries("- one\n* two")] == ["one", "two"]


def report(cause: StopCause, error: str | None = None) -> RunReport:
    return RunReport("r-1", "s-1", cause.reason, cause, 1, "", "summary", [], 0, 0, Usage(), "t.jsonl", error)


@pytest.mark.parametrize(("cause", "acp"), [
    (StopCause.ANSWER, "end_turn"), (StopCause.TURNS, "max_turn_requests"), (StopCause.SPIRAL, "max_turn_requests"),
    (StopCause.BUDGET, "max_turn_requests"), (StopCause.USER, "cancelled"), (StopCause.SIGNAL, "cancelled"),
    (StopCause.SHUTDOWN, "cancelled"), (StopCause.OUTPUT_LIMIT, "max_tokens"), (StopCause.CONTENT_FILTER, "refusal"),
])
def test_stop_reasons_come_from_the_cause(cause, acp):
    # Decision 24: the error's words play no part (these say nothing of limits or filters).
    assert stop_response(report(cause, "zzz" if cause.reason == StopReason.FATAL else None)).stop_reason == acp


@pytest.mark.parametrize("cause", [StopCause.MODEL, StopCause.ARGUMENT_CAP, StopCause.SCHEMA, StopCause.HOOK, StopCause.INTERNAL])
def test_other_fatal_stops_are_errors_whatever_their_text_says(cause):
    for text in ("the model's reply was cut at its output limit (twice in a row)", "the content filter stopped it"):
        with pytest.raises(RequestError) as fatal:
            stop_response(report(cause, text))
        assert str(fatal.value) == "summary" and fatal.value.data["report"]["stopCause"] == str(cause)
    with pytest.raises(RequestError) as fatal:
        stop_response(report(StopCause.MODEL, "model request failed: boom"))
    assert str(fatal.value) == "summary" and fatal.value.data["report"]["error"] == "model request failed: boom"
