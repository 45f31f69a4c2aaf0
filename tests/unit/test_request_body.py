"""The request body is encoded by us, each history message once (issue 25, many runs): the
bytes and headers on the wire must be exactly those the SDK sends for the same body."""

from __future__ import annotations

import httpx2
import openai
import pytest

from agent_lsp.agent.model.request_body import RequestEncoder

HISTORY = [
    {"role": "system", "content": "You are a coding agent. Ünïcödé ☃ \"quotes\" \\ back\nslash"},
    {"role": "user", "content": "read a.py 🎉 😀"},
    {"role": "assistant", "content": None, "reasoning_content": "",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.py\"}"},
                     "extra_content": {"google": {"thought_signature": "sig=="}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "1\tx = 1.5e-7\n" * 200, "name": "read_file"},
    {"role": "user", "content": [{"type": "text", "text": "list"}, {"n": [1, 2.5, True, None, -0.0, 10**20]}]},
]
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file ✓",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


async def _sent(**post: object) -> httpx2.Request:
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []})

    client = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))
    try:
        await client.post("/chat/completions", cast_to=object, options={"headers": {"Idempotency-Key": "k"}}, **post)
    finally:
        await client.close()
    return seen[0]


def body(messages: list, tools: list | None = None) -> dict:
    out = {"model": "m", "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    if tools:
        out["tools"] = tools
    return out


@pytest.mark.parametrize("with_tools", [True, False])
async def test_the_bytes_and_headers_are_those_of_the_sdk(with_tools):
    encoder = RequestEncoder()
    history: list = []
    for message in HISTORY:  # the history grows as a run's does: earlier messages come from the cache
        history.append(message)
        request = body(list(history), TOOLS if with_tools else None)
        ours = await _sent(content=encoder.body(request))
        theirs = await _sent(body=request)
        assert ours.content == theirs.content
        assert ours.headers.multi_items() == theirs.headers.multi_items()


def test_a_replaced_message_is_encoded_anew_and_the_cache_stays_bounded():
    encoder = RequestEncoder(limit=3000)
    history = [dict(m) for m in HISTORY]
    first = encoder.body(body(history))
    history[3] = {**history[3], "content": "(squeezed)"}  # a new object, as a squeeze makes
    second = encoder.body(body(history))
    assert b"(squeezed)" in second and b"(squeezed)" not in first
    for i in range(50):
        encoder.body(body([{"role": "user", "content": f"{i}" * 500}]))
    assert encoder._size <= 3000


def test_values_json_refuses_are_refused_as_the_sdk_does():
    with pytest.raises(ValueError):
        RequestEncoder().body(body([{"role": "user", "content": float("nan")}]))
    with pytest.raises(TypeError):
        RequestEncoder().body(body([{"role": "user", "content": object()}]))
