"""Issue 32 "Real model servers" through the real `agent-lsp run` (CONTRACT "Model endpoints",
Decisions 68 and 89): a refusal, Moonshot's usage, Mistral's message-order rule, malformed tool
arguments and the SDK's retries, each as the user and the next request see them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.endpoints import moonshot
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

REFUSAL = "I'm sorry, but I can't help with that request."


def agent_run(model, workspace: Path, task: str, *extra: str, base_url: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agent_lsp", "run", task, "--base-url", base_url or model.base_url,
            "--model", "m", "--workspace", str(workspace), "--yes", "--json", *extra]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          env=env)


def test_a_refusal_stops_fatal_with_its_text_and_is_not_stored(model, workspace):
    """Before: the `refusal` deltas were dropped: "Done", an empty answer, exit 0."""
    model.add([{"text": "hi"}, {"refusal": REFUSAL, "chunk_size": 7}, {"text": "fine"}])
    session = json.loads(agent_run(model, workspace, "hello").stdout)["sessionId"]
    proc = agent_run(model, workspace, "do the bad thing", "--session", session)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert (report["stopReason"], report["stopCause"], report["error"]) == ("fatal", "content_filter", REFUSAL)
    assert REFUSAL in report["summary"]
    assert len(model.requests) == 2  # a refusal is not asked again

    again = agent_run(model, workspace, "something else", "--session", session)
    assert again.returncode == 0, again.stdout + again.stderr
    sent = model.requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user", "user"]
    assert all(REFUSAL not in json.dumps(m) for m in sent)


def test_moonshot_usage_inside_the_choice_is_counted(model, workspace):
    """Before: 0 tokens reported (only a top-level `usage` was read)."""
    model.add([{"raw": moonshot.USAGE_IN_CHOICE}])
    proc = agent_run(model, workspace, "hello")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["finalText"] == "Hello, I am Kimi."
    assert (report["usage"]["promptTokens"], report["usage"]["completionTokens"]) == (19, 13)


def test_a_session_stopped_after_its_tools_continues_on_mistral(model, workspace):
    """Before: "Unexpected role 'user' after role 'tool'" on every later run of the session. The
    scripted server applies Mistral's rule to requests for api.mistral.ai (it is their proxy)."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy", "https_proxy")}
    env["HTTP_PROXY"] = f"http://127.0.0.1:{model.port}"
    mistral = "http://api.mistral.ai/v1"
    model.add([tools_reply(call("read_file", path="calc.py")), {"text": "It subtracts."}, {"text": "still here"}])
    first = agent_run(model, workspace, "what does add do?", "--max-turns", "1", base_url=mistral, env=env)
    report = json.loads(first.stdout)
    assert report["stopCause"] == "turns", first.stdout + first.stderr

    proc = agent_run(model, workspace, "go on", "--session", report["sessionId"], base_url=mistral, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["finalText"] == "It subtracts."
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles[-3:] == ["tool", "assistant", "user"]

    # on the wire only: another endpoint gets the session as it is stored
    elsewhere = agent_run(model, workspace, "and now?", "--session", report["sessionId"])
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles[1:] == ["user", "assistant", "tool", "user", "assistant", "user"]


def test_malformed_arguments_are_not_echoed_back_and_the_model_is_told(model, workspace):
    """Before: the malformed text went back in the history; vLLM and Ollama then refused every
    later request of the session."""
    model.add([tools_reply({"id": "call_bad", "name": "read_file", "arguments": '{"path": "calc.py"'}),
               {"text": "sorry, fixed"}])
    proc = agent_run(model, workspace, "read calc.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    messages = model.requests[1]["messages"]
    (assistant,) = [m for m in messages if m.get("tool_calls")]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    (result,) = [m for m in messages if m.get("role") == "tool"]
    assert result["tool_call_id"] == "call_bad" and "malformed, not valid JSON" in result["content"]


def test_each_retry_of_the_sdk_is_a_status_line_with_the_servers_reason(model, workspace):
    """Before: the SDK's retries were silent (eight 500s in 28 s without a word)."""
    model.add([{"status": 500, "message": "upstream overloaded", "retry_after": 0.01, "repeat": 2},
               {"text": "made it"}])
    proc = agent_run(model, workspace, "hello")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["finalText"] == "made it"
    lines = [line.strip() for line in proc.stderr.splitlines() if "retrying" in line]
    assert lines == [
        f"· the model endpoint {model.base_url} answered HTTP 500 (upstream overloaded); retrying (2/3)",
        f"· the model endpoint {model.base_url} answered HTTP 500 (upstream overloaded); retrying (3/3)",
    ]


def test_a_failure_the_sdk_does_not_retry_shows_no_retry_line(model, workspace):
    model.add([{"status": 400, "message": "bad request"}])
    proc = agent_run(model, workspace, "hello")
    assert proc.returncode == 1 and "retrying" not in proc.stderr


def test_a_session_stored_by_an_older_version_is_sent_as_servers_take_it(model, workspace):
    """A session whose transcript holds what earlier versions stored (`content: null` on a
    tool-call message, malformed arguments echoed as they came) continues: each request of it
    carries `""` and `{}` (llama-cpp-python answered 500 to the one, vLLM and Ollama refused the
    other)."""
    model.add([tools_reply({"id": "call_old", "name": "read_file", "arguments": {"path": "calc.py"}}),
               {"text": "It subtracts."}, {"text": "go on"}])
    first = json.loads(agent_run(model, workspace, "what does add do?").stdout)
    path = Path(first["transcript"])
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record in records:
        for message in record.get("messages") or ():
            if message.get("tool_calls"):  # as an older version wrote it
                message["content"] = None
                message["tool_calls"][0]["function"]["arguments"] = '{"path": "calc.py"'
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    proc = agent_run(model, workspace, "and mul?", "--session", first["sessionId"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sent,) = [m for m in model.requests[-1]["messages"] if m.get("tool_calls")]
    assert sent["content"] == "" and sent["tool_calls"][0]["function"]["arguments"] == "{}"
