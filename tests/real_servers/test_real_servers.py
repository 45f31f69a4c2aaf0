"""Issue 32 against the real servers (opt-in: `./scripts/test-all --real-servers`, Decision 69):
llama-cpp-python's server with the SmolLM2-135M GGUF, and LiteLLM's proxy in front of it. The
tool-loop fix is proved by continuing a session whose history already holds a tool call (made
by the scripted model): the next request carries that assistant tool-call message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_servers import record
from tests.real_servers.conftest import LITELLM_KEY, LLAMA_VERSION, MODEL_FILE
from tests.unit.kit import call, tools_reply

pytestmark = [pytest.mark.real_server, pytest.mark.timeout(900)]


def agent_run(base_url: str, workspace: Path, task: str, *extra: str, key: str = "") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agent_lsp", "run", task, "--base-url", base_url, "--model", "smollm2",
            "--workspace", str(workspace), "--yes", "--json", *extra]
    env = {**os.environ, **({"OPENAI_API_KEY": key} if key else {})}
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=800, env=env)


@pytest.fixture
def session_with_a_tool_call(model, workspace, state_dir) -> str:
    """A session whose history holds a read_file call, its result and an answer; its id. The
    small model is slow (and its own calls are not what is tested): the scripted model made it."""
    (Path(state_dir).parent / "user-settings.json").write_text(json.dumps({"requestTimeout": 600}))
    model.add([tools_reply(call("read_file", path="calc.py")), {"text": "add() subtracts b from a."}])
    proc = agent_run(model.base_url, workspace, "What does add() in calc.py do?")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["sessionId"]


def assert_answered(proc: subprocess.CompletedProcess[str], base_url: str) -> dict:
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr  # done, or max_turns if it kept calling
    report = json.loads(proc.stdout)
    assert report["stopReason"] in ("done", "max_turns") and "error" not in report, report
    assert report["finalText"].strip() or report["toolCalls"], report
    assert "HTTP 500" not in proc.stderr
    return report


def test_llama_cpp_python_continues_a_session_that_holds_a_tool_call(llama_server, session_with_a_tool_call, workspace):
    """Before: HTTP 500 (`content: null` on the tool-call message), three times, then fatal."""
    proc = agent_run(llama_server, workspace, "Answer in one sentence: does add() add?",
                     "--session", session_with_a_tool_call, "--max-turns", "2")
    assert_answered(proc, llama_server)


def test_litellm_continues_a_session_that_holds_a_tool_call(litellm_proxy, session_with_a_tool_call, workspace):
    """Before: an empty HTTP 200 (the template broke on `content: null`): "Done", no answer, exit 0."""
    proc = agent_run(litellm_proxy, workspace, "Answer in one sentence: does add() add?",
                     "--session", session_with_a_tool_call, "--max-turns", "2", key=LITELLM_KEY)
    report = assert_answered(proc, litellm_proxy)
    assert report["usage"]["promptTokens"] > 0  # LiteLLM reports usage at the stream's end


def test_the_recordings_are_what_the_servers_answer(llama_server, llama_small, litellm_proxy):
    """The default suite replays recordings/ (test_replay.py): the servers still answer that way.
    With AGENT_LSP_RECORD=1 they are recorded again."""
    urls = {"llama": llama_server, "llama-small": llama_small, "litellm": litellm_proxy}
    names = {"llama": f"{LLAMA_VERSION} --n_ctx 8192, {MODEL_FILE}",
             "llama-small": f"{LLAMA_VERSION} --n_ctx 256, {MODEL_FILE}",
             "litellm": f"LiteLLM proxy 1.108.0 in front of {LLAMA_VERSION} --n_ctx 8192"}
    for name in record.REQUESTS:
        live = record.record(name, urls, names, LITELLM_KEY)
        if os.environ.get("AGENT_LSP_RECORD") == "1":
            record.write(name, live)
        kept = record.load(name)
        assert live["status"] == kept["status"], (name, live)
        if live["status"] != 200:
            assert "Input should be a valid string" in live["body"]  # the null content refused
        elif not content_of(kept["events"]):  # an empty answer stays empty, in the same shape
            assert content_of(live["events"]) == "" and len(live["events"]) == len(kept["events"]), (name, live)
        else:
            assert content_of(live["events"]).strip() and '"finish_reason": "stop"' in live["events"][-2], live


def content_of(events: list[str]) -> str:
    text = []
    for event in events:
        if event.startswith("data: {"):
            for choice in json.loads(event[6:])["choices"]:
                text.append(choice["delta"].get("content") or "")
    return "".join(text)
