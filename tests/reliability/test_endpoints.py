"""Issue 21 "Real model servers" (CONTRACT "Model endpoints", Decisions 40 and 45): recorded
streams of real servers (tests/endpoints/) replayed byte for byte through the real openai SDK
and the real loop; each test asserts what the user sees or what the next request carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.state.sessions import SessionStore
from agent_lsp.testing.scripted_model import ScriptedModelServer
from tests.endpoints import (
    azure,
    deepseek,
    gemini,
    groq,
    js_gateway,
    litellm,
    ollama,
    openrouter,
    vllm,
    xai,
)
from tests.unit.kit import assert_valid_conversation, last_tool_results, run, transcript_records

pytestmark = pytest.mark.timeout(90)

CALC, TEST_CALC = "return a - b", "from calc import add"


def assistant_with_calls(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m.get("role") == "assistant" and m.get("tool_calls")]


@pytest.fixture
def strict_model():
    """A server that refuses (400) any message property outside the OpenAI schema and `name`
    on anything but system/user messages (Groq, xAI)."""
    with ScriptedModelServer(strict=True) as server:
        yield server


# -- 1. parallel tool calls, whatever the indexes ------------------------------------------
@pytest.mark.parametrize("recording", [ollama.PARALLEL_SAME_INDEX, ollama.PARALLEL_NO_INDEX, gemini.PARALLEL_NO_INDEX,
                                       gemini.PARALLEL_NO_INDEX_NO_ID, azure.PARALLEL_WITH_FILTERS],
                         ids=["ollama-0.20-index-0", "ollama-old-no-index", "gemini-no-index", "gemini-no-index-no-id",
                              "azure-prompt-filter-results"])
async def test_parallel_calls_each_run(model, workspace, recording):
    model.add([{"raw": recording}, {"text": "done"}])
    report, events, _ = await run("read both files", model, workspace)
    assert report.stop_reason == StopReason.DONE and report.final_text == "done"
    assert [wire_fields(e)["tool"] for e in events.of("toolCall")] == ["read_file", "read_file"]
    assert [wire_fields(e)["arguments"] for e in events.of("toolCall")] == [{"path": "calc.py"}, {"path": "test_calc.py"}]
    results = list(last_tool_results(model.requests[1]).values())
    assert len(results) == 2 and CALC in results[0] and TEST_CALC in results[1]
    assert_valid_conversation(model.requests[1]["messages"])


# -- 2. arguments as an object, empty, a repeated name --------------------------------------
@pytest.mark.parametrize("recording,tool,shown", [
    (litellm.ARGUMENTS_OBJECT, "read_file", CALC),
    (litellm.ARGUMENTS_EMPTY, "list_files", "calc.py"),
    (litellm.NAME_REPEATED, "read_file", CALC),
], ids=["object", "empty-string", "name-repeated"])
async def test_argument_shapes(model, workspace, recording, tool, shown):
    model.add([{"raw": recording}, {"text": "done"}])
    report, events, _ = await run("look", model, workspace)
    assert report.stop_reason == StopReason.DONE, report.error
    assert [wire_fields(e)["tool"] for e in events.of("toolCall")] == [tool]
    assert [wire_fields(e)["ok"] for e in events.of("toolResult")] == [True]
    (result,) = last_tool_results(model.requests[1]).values()
    assert shown in result
    sent = assistant_with_calls(model.requests[1])[0]["tool_calls"][0]["function"]
    assert sent["name"] == tool and isinstance(json.loads(sent["arguments"]), dict)  # a JSON string again


# -- 3. an error object inside the stream ---------------------------------------------------
@pytest.mark.parametrize("recording,words", [
    (openrouter.MID_STREAM_ERROR, "Provider disconnected unexpectedly"),
    (vllm.ERROR_WRAPPED, "maximum context length is 32768 tokens"),
    (vllm.ERROR_BARE, "guided decoding failed: grammar could not be compiled"),
], ids=["openrouter", "vllm-wrapped", "vllm-bare"])
async def test_an_error_in_the_stream_ends_the_run_with_the_servers_words(model, workspace, recording, words):
    model.add([{"raw": recording}])
    report, _, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.FATAL
    assert words in report.error and model.base_url in report.error
    assert "internal error" not in report.error
    assert len(model.requests) == 1, "an error the server stated is not sent again"


# -- 4. text valid whatever the chunking ------------------------------------------------------
@pytest.mark.parametrize("recording,split,text", [
    (js_gateway.TEXT_SPLIT_EMOJI, None, "Fixed \U0001f600 done."),
    (js_gateway.TEXT_LONE_HALF, None, "cut \ufffd"),
    (js_gateway.TEXT_UTF8, 5, "café \U0001f600 ok"),
], ids=["surrogate-pair-split", "lone-half", "utf8-bytes-split"])
async def test_text_split_inside_a_character_arrives_whole(model, workspace, recording, split, text):
    model.add([{"raw": recording, **({"raw_split": split} if split else {})}])
    report, events, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.DONE, report.error
    assert report.final_text == text and events.text() == text
    assert all(e.text.encode("utf-8") for e in events.of("text"))  # every delta shown is valid
    assert any(r["type"] == "stop" for r in transcript_records(report))  # the transcript took it


async def test_an_edit_with_an_emoji_split_across_deltas_is_applied(model, workspace):
    model.add([{"raw": js_gateway.WRITE_SPLIT_EMOJI}, {"text": "written"}])
    report, events, _ = await run("write it", model, workspace)
    assert report.stop_reason == StopReason.DONE, report.error
    assert (workspace / "smile.txt").read_text(encoding="utf-8") == "smile \U0001f600 and a lone \ufffd!\n"
    assert [wire_fields(e)["ok"] for e in events.of("toolResult")] == [True]
    assert any(r["type"] == "toolCall" for r in transcript_records(report))


# -- 5. reasoning: shown as thinking, sent back only where streamed, kept on resume ----------
async def test_deepseek_thinking_is_shown_sent_back_and_resumed(model, workspace, state_dir):
    model.add([{"raw": deepseek.THINK_THEN_CALL}, {"raw": deepseek.THINK_THEN_ANSWER}])
    report, events, session = await run("what does add do", model, workspace)
    assert report.stop_reason == StopReason.DONE, report.error
    thinking = "".join(e.text for e in events.of("thinking"))
    assert thinking == "The user asks about add(); I should read calc.py first.add() subtracts."
    assert report.final_text == "add() returns a - b." and "subtracts" not in events.text()
    (sent,) = assistant_with_calls(model.requests[1])
    assert sent["reasoning_content"] == "The user asks about add(); I should read calc.py first."
    assert CALC in next(iter(last_tool_results(model.requests[1]).values()))
    replies = [r["reply"] for r in transcript_records(report) if r["type"] == "reply"]
    assert replies[0]["reasoning"].startswith("The user asks") and replies[0]["reasoningContent"] is True

    store = SessionStore(state_dir, workspace)
    await store.save(session)
    resumed = await store.load(session.id)
    model.add([{"raw": deepseek.THINK_THEN_ANSWER}])
    report, _, _ = await run("and mul?", model, workspace, session=resumed)
    assert report.stop_reason == StopReason.DONE, report.error
    (again,) = assistant_with_calls(model.requests[2])
    assert again["reasoning_content"] == "The user asks about add(); I should read calc.py first."


@pytest.mark.parametrize("recording,thinking,text", [
    (openrouter.REASONING_AND_COST, "Short answer is enough.", "Hi."),
    (ollama.REASONING_FIELD, "The user wants a greeting; keep it short.", "Hello!"),
    (vllm.REASONING_CONTENT, "Plain greeting.", "Hello."),
], ids=["openrouter-reasoning", "ollama-reasoning", "vllm-reasoning_content"])
async def test_reasoning_deltas_are_a_thinking_stream_not_answer_text(model, workspace, recording, thinking, text):
    model.add([{"raw": recording}])
    report, events, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.DONE, report.error
    assert "".join(e.text for e in events.of("thinking")) == thinking
    assert report.final_text == text == events.text()


async def test_openrouter_cost_is_taken_from_the_stream(model, workspace):
    model.add([{"raw": openrouter.REASONING_AND_COST}])
    report, _, _ = await run("hi", model, workspace)
    assert report.usage.cost_usd == pytest.approx(0.00042)


# -- 6. Gemini: name on tool messages (Google hosts only), thought signatures returned ------
@pytest.mark.parametrize("base", ["http://generativelanguage.googleapis.com/v1beta/openai",
                                  "http://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/endpoints/openapi"],
                         ids=["gemini-api", "vertex-ai"])
async def test_gemini_gets_names_and_its_thought_signature_back_also_after_resume(model, workspace, state_dir, monkeypatch, base):
    # The scripted server acts as the HTTP proxy for Google's host name (the SDK honours HTTP_PROXY).
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{model.port}")
    model.add([{"raw": gemini.PARALLEL_NO_INDEX}, {"text": "done"}, {"text": "again"}])
    report, _, session = await run("read both files", model, workspace, baseUrl=base)
    assert report.stop_reason == StopReason.DONE, report.error
    request = model.requests[1]
    tools = [m for m in request["messages"] if m.get("role") == "tool"]
    assert [m.get("name") for m in tools] == ["read_file", "read_file"]
    calls = assistant_with_calls(request)[0]["tool_calls"]
    assert calls[0]["extra_content"] == {"google": {"thought_signature": gemini.SIGNATURE}}
    assert "extra_content" not in calls[1]

    store = SessionStore(state_dir, workspace)
    await store.save(session)
    resumed = await store.load(session.id)
    report, _, _ = await run("go on", model, workspace, session=resumed, baseUrl=base)
    assert report.stop_reason == StopReason.DONE, report.error
    calls = assistant_with_calls(model.requests[2])[0]["tool_calls"]
    assert calls[0]["extra_content"] == {"google": {"thought_signature": gemini.SIGNATURE}}
    assert [m.get("name") for m in model.requests[2]["messages"] if m.get("role") == "tool"] == ["read_file", "read_file"]


async def test_tool_messages_carry_no_name_off_google(model, workspace):
    model.add([{"raw": gemini.PARALLEL_NO_INDEX}, {"text": "done"}])
    report, _, _ = await run("read both files", model, workspace)
    assert report.stop_reason == StopReason.DONE
    assert all("name" not in m for m in model.requests[1]["messages"] if m.get("role") == "tool")


# -- strict servers: nothing they never sent comes back --------------------------------------
@pytest.mark.parametrize("recording", [groq.CALL, xai.CALL, ollama.PARALLEL_SAME_INDEX, azure.PARALLEL_WITH_FILTERS],
                         ids=["groq", "xai", "ollama", "azure"])
async def test_a_strict_server_gets_no_field_it_did_not_send(strict_model, workspace, recording):
    strict_model.add([{"raw": recording}, {"text": "done"}])
    report, _, _ = await run("read", strict_model, workspace)
    assert report.stop_reason == StopReason.DONE, report.error
    request = strict_model.requests[1]
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in request["messages"][1:])
    assert all(set(c) == {"id", "type", "function"} for m in assistant_with_calls(request) for c in m["tool_calls"])


async def test_the_strict_server_does_refuse_unknown_properties(strict_model, workspace):
    """The fake is strict for real: a reasoning_content it never streamed is refused (400) with its words."""
    strict_model.add([{"raw": deepseek.THINK_THEN_CALL}, {"text": "done"}])
    report, _, _ = await run("read", strict_model, workspace)
    assert report.stop_reason == StopReason.FATAL
    assert "property 'reasoning_content' is unsupported" in report.error and strict_model.base_url in report.error


# -- 7. error bodies of every shape ------------------------------------------------------------
@pytest.mark.parametrize("body,words", [
    ([{"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}}],
     "Request contains an invalid argument"),
    ({"error": "model 'qwen9' not found, try pulling it first"}, "model 'qwen9' not found, try pulling it first"),
    ({"message": "Invalid 'messages[2]': unknown field 'reasoning_content'", "type": "invalid_request"},
     "unknown field 'reasoning_content'"),
    ({"detail": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096"}, "must be <= 4096"),
    ("upstream connect error or disconnect/reset before headers", "upstream connect error or disconnect/reset before headers"),
    ("<html><head><title>400 Bad Request</title></head><body><h1>Request header too large</h1></body></html>",
     "Request header too large"),
    ({"error": {"code": 400, "message": "Provider returned error", "metadata": {"provider_name": "Groq",
      "raw": "{\"error\":{\"message\":\"'messages.2' : property 'name' is unsupported\"}}"}}},
     "property 'name' is unsupported"),
], ids=["array-gemini", "error-string-ollama", "message-only", "detail-tgi", "plain-text", "html", "openrouter-raw"])
async def test_error_bodies_of_any_shape_keep_the_servers_words(model, workspace, body, words):
    model.add([{"status": 400, "body": body}])
    report, _, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.FATAL
    assert words in report.error and model.base_url in report.error, report.error
    assert "Error code: 400" not in report.error


async def test_a_404_on_a_base_url_without_v1_says_to_add_it(model, workspace):
    base = f"http://127.0.0.1:{model.port}"
    report, _, _ = await run("hi", model, workspace, baseUrl=base)
    assert report.stop_reason == StopReason.FATAL
    assert f"{base}/v1" in report.error and "404" in report.error


async def test_a_404_with_v1_does_not_blame_the_path(model, workspace):
    model.add([{"status": 404, "body": {"error": {"message": "The model `m` does not exist", "code": "model_not_found"}}}])
    report, _, _ = await run("hi", model, workspace)
    assert "The model `m` does not exist" in report.error and "no /v1" not in report.error


# -- 8. streamUsage ----------------------------------------------------------------------------
async def test_stream_usage_false_stops_stream_options(workspace):
    with ScriptedModelServer(refuse_stream_options=True) as server:
        server.add([{"text": "one"}, {"text": "two"}])
        report, _, _ = await run("hi", server, workspace)
        assert report.stop_reason == StopReason.FATAL and "stream_options" in report.error  # the refusal, named
        report, _, _ = await run("hi", server, workspace, streamUsage=False)
        assert report.stop_reason == StopReason.DONE and report.final_text == "one"
        assert "stream_options" not in server.requests[-1]


async def test_stream_usage_is_on_by_default(model, workspace):
    model.add([{"text": "hi"}])
    await run("hi", model, workspace)
    assert model.requests[0]["stream_options"] == {"include_usage": True}


def test_the_setting_is_declared_for_vs_code():
    package = json.loads((Path(__file__).parents[2] / "editor-clients/vscode/package.json").read_text())
    settings = package["contributes"]["configuration"]
    props = settings["properties"] if isinstance(settings, dict) else {k: v for s in settings for k, v in s["properties"].items()}
    assert props["agentLsp.streamUsage"]["default"] is True


def test_stream_usage_is_a_normal_setting_a_workspace_may_set():
    from agent_lsp.settings import without_untrusted

    kept, dropped = without_untrusted({"streamUsage": False})
    assert kept == {"streamUsage": False} and not dropped
