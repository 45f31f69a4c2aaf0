"""The requests whose answers the default suite replays, sent to real servers and recorded
byte for byte (status, body or SSE events) into recordings/*.json.

`AGENT_LSP_RECORD=1 ./scripts/test-all --real-servers tests/real_servers` records them again
(test_real_servers.py::test_the_recordings_are_what_the_servers_answer)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

RECORDINGS = Path(__file__).parent / "recordings"
PROMPT = "What does add() in calc.py do? Answer in one sentence."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def after_tool_call(content: str | None, prompt: str = PROMPT) -> list:
    """A history that already holds a tool call and its result; `content` of the assistant
    message that made the call (None is what agent-lsp sent before issue 32)."""
    return [
        {"role": "system", "content": "You are a coding agent. Answer briefly."},
        {"role": "user", "content": prompt},
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "def add(a, b):\n    return a - b\n"},
    ]


# name -> (which server, the request's messages, what the recording shows)
REQUESTS: dict[str, tuple[str, list, str]] = {
    "llama_cpp_null_content": (
        "llama",
        after_tool_call(None),
        "llama-cpp-python answers HTTP 500 to an assistant tool-call message with content null",
    ),
    "llama_cpp_after_tool_call": (
        "llama",
        after_tool_call(""),
        "the same history with content \"\": a normal streamed answer",
    ),
    "litellm_null_content": (
        "litellm",
        after_tool_call(None),
        "LiteLLM in front of llama-cpp-python: content null gives an empty HTTP 200 reply "
        "(a finish with no text and no calls)",
    ),
    "llama_cpp_context_overflow": (
        "llama-small",
        after_tool_call("", "Read this: " + "x = 1\n" * 400),
        "llama-cpp-python with a small n_ctx (256) past its context: an empty HTTP 200 stream",
    ),
}


def body_of(server: str, messages: list) -> dict[str, Any]:
    return {
        "model": "smollm2" if server == "litellm" else "smollm2-135m",
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": TOOLS,
        "temperature": 0,
        "seed": 7,
        "max_tokens": 200,
    }


def send(base_url: str, body: dict[str, Any], key: str = "") -> dict[str, Any]:
    """POST {base_url}/chat/completions; the answer as recorded: status and the body, or for an
    event stream its events (each `data: ...` with its blank line)."""
    url = urlparse(base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=300)
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    try:
        conn.request("POST", url.path.rstrip("/") + "/chat/completions", json.dumps(body), headers)
        response = conn.getresponse()
        data = response.read().decode("utf-8")
        kind = response.getheader("content-type", "")
    finally:
        conn.close()
    if response.status == 200 and "event-stream" in kind:
        events = [e.strip("\r\n") + "\n\n" for e in data.replace("\r\n", "\n").split("\n\n")]
        return {"status": 200, "events": [e for e in events if e.strip()]}
    return {"status": response.status, "body": data}


def record(name: str, base_urls: dict[str, str], server_names: dict[str, str], key: str) -> dict:
    """Send REQUESTS[name] to its server and return the recording (written by the caller)."""
    which, messages, what = REQUESTS[name]
    answer = send(base_urls[which], body_of(which, messages), key if which == "litellm" else "")
    return {"server": server_names[which], "what": what, "messages": messages, **answer}


def load(name: str) -> dict[str, Any]:
    return json.loads((RECORDINGS / f"{name}.json").read_text(encoding="utf-8"))


def as_reply(name: str) -> dict[str, Any]:
    """A recording as a scripted reply of agent_lsp.testing (replayed byte for byte)."""
    recording = load(name)
    if recording["status"] == 200:
        return {"raw": recording["events"]}
    return {"status": recording["status"], "body": json.loads(recording["body"])}


def write(name: str, recording: dict[str, Any]) -> None:
    text = json.dumps(recording, indent=1, ensure_ascii=False) + "\n"
    (RECORDINGS / f"{name}.json").write_text(text, encoding="utf-8")
