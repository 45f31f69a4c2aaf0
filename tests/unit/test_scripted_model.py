"""The scripted OpenAI-compatible server, exercised through the real ``openai`` SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer


@pytest.fixture
def srv() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer()
    with server:
        yield server


def aclient(srv: ScriptedModelServer, **kw) -> openai.AsyncOpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5)
    return openai.AsyncOpenAI(base_url=srv.base_url, api_key="test", **kw)


def user(text: str) -> list[dict]:
    return [{"role": "system", "content": "You are a test."}, {"role": "user", "content": text}]


async def stream_chunks(client: openai.AsyncOpenAI, text: str = "hi", **kw) -> list:
    stream = await client.chat.completions.create(
        model="test-model", messages=user(text), stream=True, **kw)
    return [chunk async for chunk in stream]


async def test_text_is_streamed_in_several_chunks(srv: ScriptedModelServer) -> None:
    text = "The quick brown fox jumps over the lazy dog, twice."
    srv.add([{"text": text, "chunk_size": 8}])
    async with aclient(srv) as client:
        chunks = await stream_chunks(client)
    deltas = [c.choices[0].delta for c in chunks]
    assert deltas[0].role == "assistant"
    pieces = [d.content for d in deltas if d.content]
    assert len(pieces) == 7 and "".join(pieces) == text
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert {c.model for c in chunks} == {"test-model"} and len({c.id for c in chunks}) == 1


async def test_tool_call_deltas_carry_id_and_name_only_first(srv: ScriptedModelServer) -> None:
    args0 = {"path": "src/app.py", "start": 1, "end": 40}
    srv.add([{"text": "Reading.", "tool_calls": [
        {"name": "read_file", "arguments": args0},
        {"name": "grep", "arguments": {"pattern": "def main"}, "id": "call_custom"},
    ]}])
    async with aclient(srv) as client:
        chunks = await stream_chunks(client)
    calls: dict[int, list] = {}
    for chunk in chunks:
        for tc in chunk.choices[0].delta.tool_calls or ():
            calls.setdefault(tc.index, []).append(tc)
    assert sorted(calls) == [0, 1]
    for deltas in calls.values():
        first, rest = deltas[0], deltas[1:]
        assert first.id and first.type == "function" and first.function.name
        assert len(rest) >= 2, "arguments should be split across several chunks"
        assert all(d.id is None and d.type is None and d.function.name is None for d in rest)
    assert calls[0][0].id.startswith("call_") and calls[1][0].id == "call_custom"
    assert [calls[i][0].function.name for i in (0, 1)] == ["read_file", "grep"]
    assert json.loads("".join(d.function.arguments or "" for d in calls[0])) == args0
    assert json.loads("".join(d.function.arguments or "" for d in calls[1])) == {"pattern": "def main"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_raw_string_arguments_are_sent_verbatim_and_ids_unique(srv) -> None:
    srv.add([{"tool_calls": [{"name": "f", "arguments": "{not json"}], "repeat": 2}])
    async with aclient(srv) as client:
        ids, args = [], []
        for _ in range(2):
            chunks = await stream_chunks(client)
            tcs = [tc for c in chunks for tc in c.choices[0].delta.tool_calls or ()]
            ids.append(tcs[0].id)
            args.append("".join(tc.function.arguments or "" for tc in tcs))
    assert args == ["{not json", "{not json"]
    assert ids[0] != ids[1]


async def test_usage_chunk_only_with_include_usage(srv: ScriptedModelServer) -> None:
    srv.add([{"text": "x" * 40}, {"text": "abc", "usage": {"prompt_tokens": 7}}, {"text": "y"}])
    async with aclient(srv) as client:
        chunks = await stream_chunks(client, "hello", stream_options={"include_usage": True})
        override = await stream_chunks(client, stream_options={"include_usage": True})
        plain = await stream_chunks(client)
    last = chunks[-1]
    assert last.choices == [] and chunks[-2].choices[0].finish_reason == "stop"
    prompt = (len("You are a test.") + len("hello")) // 4
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (prompt, 10)
    assert last.usage.total_tokens == prompt + 10
    assert (override[-1].usage.prompt_tokens, override[-1].usage.completion_tokens) == (7, 0)
    assert all(c.choices and c.usage is None for c in plain)


async def test_non_streaming_completion(srv: ScriptedModelServer) -> None:
    srv.add([{"text": "done", "tool_calls": [{"name": "write", "arguments": {"a": 1}}]}])
    async with aclient(srv) as client:
        resp = await client.chat.completions.create(model="m", messages=user("go"))
    assert resp.object == "chat.completion"
    choice = resp.choices[0]
    assert choice.message.content == "done" and choice.finish_reason == "tool_calls"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"a": 1}
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


async def test_429_with_retry_after_is_retried(srv: ScriptedModelServer) -> None:
    srv.add([{"fault": "status", "status": 429, "retry_after": 0.05}, {"text": "ok"}])
    async with aclient(srv, max_retries=2) as client:
        chunks = await stream_chunks(client)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"
    log = srv.log
    assert len(srv.requests) == 2 and [e.status for e in log] == [429, 200]
    # without the header the SDK would back off >= 0.375 s
    assert 0.04 <= log[1].t_start - log[0].t_end < 0.3, "the SDK should wait retry-after"
    assert srv.remaining() == 0


async def test_500_beyond_max_retries_raises(srv: ScriptedModelServer) -> None:
    srv.add([{"status": 500, "retry_after": 0.01, "repeat": 10, "message": "boom"}])
    async with aclient(srv, max_retries=2) as client:
        with pytest.raises(openai.InternalServerError) as info:
            await stream_chunks(client)
    assert info.value.status_code == 500 and "boom" in info.value.message
    assert len(srv.requests) == 3 and srv.remaining() == 7


async def test_cut_raises_api_connection_error(srv: ScriptedModelServer) -> None:
    srv.add([{"fault": "cut", "text": "a" * 160, "chunk_size": 16}, {"text": "after"}])
    received = []
    async with aclient(srv, max_retries=2) as client:
        stream = await client.chat.completions.create(
            model="m", messages=user("x"), stream=True)
        with pytest.raises(openai.APIConnectionError) as info:
            async for chunk in stream:
                received.append(chunk.choices[0].delta.content or "")
        assert isinstance(info.value.__cause__, httpx2.RemoteProtocolError)
        assert 0 < len("".join(received)) < 160
        # the pool recovers: the next request on the same client works
        assert "".join(c.choices[0].delta.content or "" for c in await stream_chunks(client)) == "after"
    assert len(srv.requests) == 2, "a mid-stream cut is not retried"


async def test_no_finish_ends_without_finish_reason(srv: ScriptedModelServer) -> None:
    srv.add([{"fault": "no_finish", "text": "partial answer", "chunk_size": 4}])
    async with aclient(srv) as client:
        chunks = await stream_chunks(client, stream_options={"include_usage": True})
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "partial answer"
    assert all(c.choices and c.choices[0].finish_reason is None for c in chunks)


async def test_hang_triggers_sdk_timeout(srv: ScriptedModelServer) -> None:
    srv.add([{"fault": "hang"}])
    t0 = time.monotonic()
    async with aclient(srv, timeout=0.5) as client:
        with pytest.raises(openai.APITimeoutError):
            await stream_chunks(client)
    assert 0.45 < time.monotonic() - t0 < 3
    await asyncio.sleep(0.05)
    (entry,) = srv.log
    assert entry.status is None and entry.t_end is not None, "disconnect ends the hang"


async def test_garbage_stream_is_not_json(srv: ScriptedModelServer) -> None:
    srv.add([{"fault": "garbage"}])
    async with aclient(srv) as client:
        with pytest.raises(json.JSONDecodeError):
            await stream_chunks(client)


async def test_routing_two_concurrent_conversations(srv: ScriptedModelServer) -> None:
    for name in ("alpha", "beta"):
        srv.add(f"task {name}", [
            {"text": f"{name} one", "ttft": 0.1, "chunk_size": 2, "chunk_delay": 0.01},
            {"text": f"{name} two"},
        ])
    srv.add("task alpha, sub-step", [{"text": "longest key wins"}])
    srv.add([{"text": "default"}])

    async def converse(task: str) -> list[str]:
        out = []
        async with aclient(srv) as client:
            for _ in range(2):
                chunks = await stream_chunks(client, f"Please do task {task} now")
                out.append("".join(c.choices[0].delta.content or "" for c in chunks))
        return out

    alpha, beta = await asyncio.gather(converse("alpha"), converse("beta"))
    assert alpha == ["alpha one", "alpha two"] and beta == ["beta one", "beta two"]
    async with aclient(srv) as client:
        sub = await stream_chunks(client, "task alpha, sub-step: grep")
        other = await stream_chunks(client, "unrelated")
    assert "".join(c.choices[0].delta.content or "" for c in sub) == "longest key wins"
    assert "".join(c.choices[0].delta.content or "" for c in other) == "default"
    assert len(srv.requests_for("task beta")) == 2 and len(srv.requests) == 6
    assert all("task beta" in r["messages"][1]["content"] for r in srv.requests_for("task beta"))
    first = {e.key: e for e in reversed(srv.log)}
    a, b = first["task alpha"], first["task beta"]
    assert a.t_start < b.t_end and b.t_start < a.t_end, "the two first turns overlapped"


async def test_exhausted_script_is_a_bad_request(srv: ScriptedModelServer) -> None:
    srv.add("main task", [{"text": "only one"}])
    async with aclient(srv, max_retries=3) as client:
        await stream_chunks(client, "the main task")
        with pytest.raises(openai.BadRequestError) as info:
            await stream_chunks(client, "the main task")
    assert "script exhausted for key 'main task'" in info.value.message
    assert len(srv.requests_for("main task")) == 2, "not retried"


def test_sync_client_keep_alive_models_and_404(srv: ScriptedModelServer) -> None:
    srv.add([{"text": f"reply {i}"} for i in range(3)])
    with openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0) as client:
        for i in range(3):
            stream = client.chat.completions.create(model="gpt-x", messages=user("q"), stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream) == f"reply {i}"
        assert {m.id for m in client.models.list()} == {"scripted", "gpt-x"}
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(srv.base_url + "/nope", timeout=5)
    assert info.value.code == 404
    assert set(json.loads(info.value.read())["error"]) >= {"message", "type", "code"}


def test_status_fault_headers_and_error_shape(srv: ScriptedModelServer) -> None:
    srv.add([{"status": 503, "retry_after": 1.5, "message": "overloaded"}])
    req = urllib.request.Request(srv.base_url + "/chat/completions", method="POST",
                                 data=json.dumps({"messages": user("x")}).encode())
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=5)
    err = info.value
    assert err.code == 503
    assert (err.headers["retry-after"], err.headers["retry-after-ms"]) == ("1.5", "1500")
    assert json.loads(err.read())["error"] == {
        "message": "overloaded", "type": "server_error", "param": None, "code": None}


def test_invalid_reply_is_rejected_clearly() -> None:
    srv = ScriptedModelServer()
    with pytest.raises(ValueError, match=r"(?s)invalid reply #1 for key 'k'.*chunk_delay"):
        srv.add("k", [{"text": "ok"}, {"chunk_delay": -1}])
    with pytest.raises(ValueError, match="needs a \"status\""):
        srv.add([{"fault": "status"}])
    with pytest.raises(ValueError, match="txt"):
        srv.add([{"txt": "typo"}])


def test_stop_closes_hanging_connection_promptly() -> None:
    srv = ScriptedModelServer()
    srv.add([{"fault": "hang"}])
    srv.start()
    errors: list[BaseException] = []

    def call() -> None:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=30)
        try:
            client.chat.completions.create(model="m", messages=user("x"))
        except openai.APIError as err:
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 5
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    srv.stop()
    thread.join(5)
    assert time.monotonic() - t0 < 1 and not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)


def test_cli_prints_url_serves_and_records(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"cli task": [{"text": "from the cli"}]}))
    record = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_lsp.testing.serve",
         "--script", str(script), "--port", "0", "--record", str(record)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=5) as client:
            resp = client.chat.completions.create(model="m", messages=user("the cli task"))
        assert resp.choices[0].message.content == "from the cli"
        (line,) = record.read_text().splitlines()
        assert json.loads(line)["messages"][1]["content"] == "the cli task"
        proc.stdin.close()  # stdin EOF stops the server
        assert proc.wait(timeout=5) == 0
        assert proc.stdout.read() == "", "exactly one line on stdout"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
