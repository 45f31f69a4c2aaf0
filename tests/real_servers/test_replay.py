"""Issue 32 "Real model servers", replayed (CONTRACT Decision 69): what llama-cpp-python and
LiteLLM's proxy answered, recorded by record.py, served byte for byte by the scripted server to
the real `agent-lsp run`. The server answers a request carrying an assistant `content: null` as
the real one did (llama-cpp-python: HTTP 500; LiteLLM: an empty reply)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer
from tests.real_servers.record import as_reply, load
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(120)

READ = tools_reply(call("read_file", path="calc.py"))


def recorded_text(name: str) -> str:
    text = []
    for event in load(name)["events"]:
        if event.startswith("data: {"):
            for choice in json.loads(event[6:])["choices"]:
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


def agent_run(model, workspace: Path, task: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agent_lsp", "run", task, "--base-url", model.base_url,
            "--model", "smollm2", "--workspace", str(workspace), "--yes", "--json", *extra]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)


@pytest.fixture
def llama_cpp():
    """Scripted, but refusing `content: null` with llama-cpp-python's recorded HTTP 500."""
    with ScriptedModelServer(null_content_answer=as_reply("llama_cpp_null_content")) as server:
        yield server


@pytest.fixture
def litellm():
    """Scripted, but answering `content: null` with LiteLLM's recorded empty reply."""
    with ScriptedModelServer(null_content_answer=as_reply("litellm_null_content")) as server:
        yield server


def test_the_tool_loop_works_against_llama_cpp_python(llama_cpp, workspace):
    """Before: the request after the first tool call carried `content: null`, llama-cpp-python
    answered 500 (three times, with the SDK's retries) and every tool-using run stopped fatal."""
    llama_cpp.add([READ, as_reply("llama_cpp_after_tool_call")])
    proc = agent_run(llama_cpp, workspace, "What does add() in calc.py do?")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["stopCause"] == "answer" and report["toolCalls"] == 1
    assert report["finalText"] == recorded_text("llama_cpp_after_tool_call") != ""
    sent = llama_cpp.requests[1]["messages"]
    assert [m["content"] for m in sent if m.get("tool_calls")] == [""]
    assert all(key != "<null content>" for key, *_ in [(e.key,) for e in llama_cpp.log])


def test_resuming_a_session_that_holds_a_tool_call_through_litellm_answers(litellm, workspace):
    """Before: the resumed history's tool-call message had `content: null`; LiteLLM answered an
    empty HTTP 200 and the run printed "Done" with no answer, exit 0."""
    litellm.add("first", [READ, {"text": "It subtracts."}])
    first = agent_run(litellm, workspace, "first: what does add() do?")
    assert first.returncode == 0, first.stdout + first.stderr
    session = json.loads(first.stdout)["sessionId"]

    litellm.add("first", [as_reply("llama_cpp_after_tool_call")])
    proc = agent_run(litellm, workspace, "Answer in one sentence.", "--session", session)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["finalText"] == recorded_text("llama_cpp_after_tool_call")
    assert len(litellm.requests) == 3 and "<null content>" not in [e.key for e in litellm.log]


def test_an_empty_reply_through_litellm_is_asked_again_then_a_fatal_stop_naming_the_endpoint(litellm, workspace):
    """Before: "Done", an empty answer, exit 0, and an assistant message with `content: null`
    stored (OpenAI then refused every later run of the session)."""
    litellm.add([{"text": "hi"}, {"raw": load("litellm_null_content")["events"], "repeat": 2}, {"text": "hi again"}])
    first = agent_run(litellm, workspace, "hello")
    session = json.loads(first.stdout)["sessionId"]
    proc = agent_run(litellm, workspace, "and now?", "--session", session)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert (report["stopReason"], report["stopCause"]) == ("fatal", "model")
    assert "empty reply" in report["error"] and litellm.base_url in report["error"]
    assert "context overflow" not in report["error"]  # a tiny request is nowhere near the window
    assert len(litellm.requests) == 3  # asked again once
    assert "asking again (1/1)" in proc.stderr and "Done" not in proc.stderr

    again = agent_run(litellm, workspace, "hello?", "--session", session)
    assert again.returncode == 0, again.stdout + again.stderr
    history = litellm.requests[-1]["messages"]  # nothing of the empty reply was stored
    assert [(m["role"], m["content"]) for m in history[1:]] == [
        ("user", "hello"), ("assistant", "hi"), ("user", "and now?"), ("user", "hello?")]


def test_llama_cpp_past_its_context_says_it_is_likely_a_context_overflow(model, workspace, state_dir):
    """llama.cpp past its n_ctx answers HTTP 200 with an empty stream. Before: "the model's
    stream ended without a finish reason", no endpoint, nothing about the context."""
    settings = Path(state_dir).parent / "user-settings.json"
    # the fixed part (system prompt, tool schemas: the debugger's too) fits; with big.py read it is near the window
    settings.write_text(json.dumps({"contextWindow": 2800}))
    (workspace / "big.py").write_text("x = 1\n" * 1100)
    model.add([tools_reply(call("read_file", path="big.py")),
               {"raw": load("llama_cpp_context_overflow")["events"], "repeat": 2}])
    proc = agent_run(model, workspace, "read big.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert "empty stream" in error and model.base_url in error
    assert "likely a context overflow" in error and "contextWindow 2800" in error
    assert len(model.requests) == 3
