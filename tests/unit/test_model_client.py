"""Issue 11.17 and 11.2: the model client takes the SDK's fast path (post + AsyncStream), never
sends a request twice, and one deadline bounds a whole call."""

from __future__ import annotations

import time

import pytest

from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.model.client import ModelError, OpenAIModel
from tests.unit.kit import run

pytestmark = pytest.mark.timeout(60)


async def test_the_fast_path_is_the_one_taken(model):
    model.add([{"text": "hello there"}])
    client = OpenAIModel("m", model.base_url, "sk-test", timeout=10)
    try:
        reply = await client.complete([{"role": "user", "content": "hi"}], [], lambda _t: None, agent_id="main", turn=1)
    finally:
        await client.aclose()
    assert reply.text == "hello there" and reply.finish_reason == "stop"
    assert client.fast_path_calls == 1 and len(model.requests) == 1


async def test_a_failing_endpoint_is_never_sent_the_request_twice_per_attempt(model, workspace):
    model.add([{"status": 500, "message": "down", "retry_after": 0.01, "repeat": 10}])
    report, _, _ = await run("hi", model, workspace)
    assert report.stop_reason == StopReason.FATAL
    assert len(model.requests) == 3, "the SDK's own retries (2) and nothing more: no second path resending"


async def test_a_connection_error_names_the_endpoint_without_double_periods():
    client = OpenAIModel("m", "http://127.0.0.1:9/v1", "sk-test", timeout=5, max_retries=0)
    try:
        with pytest.raises(ModelError) as failed:
            await client.complete([{"role": "user", "content": "hi"}], [], lambda _t: None, agent_id="main", turn=1)
    finally:
        await client.aclose()
    message = str(failed.value)
    assert "http://127.0.0.1:9/v1" in message and ".." not in message


async def test_one_deadline_for_the_whole_call_retries_included(model, workspace):
    model.add([{"status": 503, "retry_after": 0.8, "repeat": 10}])
    started = time.monotonic()
    report, _, _ = await run("hi", model, workspace, requestTimeout=1.0)
    assert report.stop_reason == StopReason.FATAL and "requestTimeout" in report.error
    assert time.monotonic() - started < 3.5
