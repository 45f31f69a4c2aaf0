"""Node 1 (build context: system prompt + memory + history + tool schemas), node 2 (the
streamed call) and node 3/4 (the fork: no tool calls means done)."""

from __future__ import annotations

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from tests.unit.kit import call, run, tools_reply

pytestmark = pytest.mark.timeout(30)

MAIN_TOOLS = {"read_file", "list_files", "search", "edit_file", "write_file", "run_command",
              "delegate", "remember",
              "debug_start", "debug_step", "debug_eval", "debug_stop"}


async def test_memory_file_text_is_in_the_system_prompt(model, workspace):
    (workspace / "AGENTS.md").write_text("Always use tabs. The build command is `make zap`.\n")
    (workspace / ".agent-lsp").mkdir()
    (workspace / ".agent-lsp" / "memory.md").write_text("The user prefers short answers.\n")
    model.add([{"text": "ok"}])

    await run("hello", model, workspace)

    system = model.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert "Always use tabs. The build command is `make zap`." in system["content"]
    assert "The user prefers short answers." in system["content"]
    # The memory comes before the conversation; the user's message follows the system prompt.
    assert model.requests[0]["messages"][1] == {"role": "user", "content": "hello"}


async def test_a_claude_md_is_recalled_after_agents_md(model, workspace):
    """Decision 29: CLAUDE.md joins the default memory files, after AGENTS.md."""
    (workspace / "AGENTS.md").write_text("from agents md\n")
    (workspace / "CLAUDE.md").write_text("from claude md\n")
    model.add([{"text": "ok"}])
    await run("hello", model, workspace)
    system = model.requests[0]["messages"][0]["content"]
    assert system.index("from agents md") < system.index("from claude md")


async def test_memory_files_setting_names_the_files(model, workspace):
    (workspace / "AGENTS.md").write_text("from agents md\n")
    (workspace / "CONVENTIONS.txt").write_text("from conventions\n")
    model.add([{"text": "ok"}])

    await run("hello", model, workspace, memoryFiles=["CONVENTIONS.txt"])

    system = model.requests[0]["messages"][0]["content"]
    assert "from conventions" in system
    assert "from agents md" not in system


async def test_no_memory_file_no_memory_section(model, workspace):
    model.add([{"text": "ok"}])
    await run("hello", model, workspace)
    assert "Memory" not in model.requests[0]["messages"][0]["content"]


async def test_tool_schemas_are_sent(model, workspace):
    model.add([{"text": "ok"}])
    await run("hello", model, workspace)

    tools = model.requests[0]["tools"]
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    assert set(by_name) == MAIN_TOOLS
    assert all(t["type"] == "function" for t in tools)
    edit = by_name["edit_file"]["parameters"]
    assert edit["type"] == "object"
    assert set(edit["required"]) == {"path", "old_text", "new_text"}
    assert edit["properties"]["old_text"]["type"] == "string"
    assert by_name["read_file"]["parameters"]["required"] == ["path"]
    assert by_name["delegate"]["parameters"]["required"] == ["task"]
    # Streaming with usage, so the estimator can be calibrated.
    assert model.requests[0]["stream"] is True
    assert model.requests[0]["stream_options"] == {"include_usage": True}


async def test_history_grows_with_the_reply_and_results(model, workspace):
    model.add([tools_reply(call("read_file", id="c1", path="README.md"), text="Let me look."), {"text": "Read it."}])
    await run("what is in the readme?", model, workspace)

    second = model.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["content"] == "Let me look."
    assert second[2]["tool_calls"][0]["id"] == "c1"
    assert second[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert second[3] == {"role": "tool", "tool_call_id": "c1", "content": "1\t# sample"}


async def test_follow_up_in_a_session_sends_the_earlier_conversation(model, workspace):
    model.add([{"text": "first answer"}, {"text": "second answer"}])
    session = Session()
    await run("first question", model, workspace, session=session)
    report, _, _ = await run("second question", model, workspace, session=session)

    assert report.final_text == "second answer"
    roles = [(m["role"], m["content"]) for m in model.requests[1]["messages"][1:]]
    assert roles == [("user", "first question"), ("assistant", "first answer"), ("user", "second question")]


async def test_text_events_concatenate_to_the_model_text(model, workspace):
    text = "Here is a fairly long answer, streamed in many small pieces so that it arrives over time. ✓ done."
    model.add([{"text": text, "chunk_size": 5, "chunk_delay": 0.002}])

    report, events, _ = await run("explain", model, workspace)

    pieces = events.of("text")
    assert len(pieces) > 5, "the reply must be streamed, not delivered in one event"
    assert events.text() == text
    assert report.final_text == text
    # The text arrives before the stop event.
    kinds = [e.kind for e in events]
    assert kinds.index("text") < kinds.index("stop") and kinds[-1] == "stop"


async def test_text_before_tool_calls_is_streamed_too(model, workspace):
    model.add([tools_reply(call("list_files"), text="Listing files first."), {"text": " All done."}])
    _, events, _ = await run("list", model, workspace)
    assert events.text() == "Listing files first. All done."


async def test_no_tool_calls_means_done_with_final_text(model, workspace):
    model.add([{"text": "Nothing to do: the code is fine."}])

    report, events, _ = await run("check the code", model, workspace)

    assert report.stop_reason == StopReason.DONE
    assert report.final_text == "Nothing to do: the code is fine."
    assert report.turns == 1 and report.tool_calls == 0
    assert len(model.requests) == 1
    stop = events.of("stop")
    assert len(stop) == 1 and wire_fields(stop[0])["report"]["stopReason"] == "done"
    assert wire_fields(stop[0])["report"]["finalText"] == "Nothing to do: the code is fine."


async def test_tool_calls_go_back_to_the_model_not_to_the_user(model, workspace):
    model.add([tools_reply(call("read_file", path="calc.py")), tools_reply(call("search", pattern="def ")), {"text": "done"}])

    report, _, _ = await run("look around", model, workspace)

    assert report.stop_reason == StopReason.DONE
    assert report.turns == 3 and report.tool_calls == 2
    assert len(model.requests) == 3
    assert report.final_text == "done"
