"""The debugger's DAP client (issue 36) against bad input from an adapter: a clear DapError,
never a hang: a bad header, a refused request, a reverse request, an adapter that goes away."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_lsp.agent.tools.debugger.dap import DapClient, DapError, frame, read_message


class Sink:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass

    def messages(self) -> list[dict]:
        out, rest = [], bytes(self.data)
        while rest:
            head, _, rest = rest.partition(b"\r\n\r\n")
            length = int(head.split(b":")[1])
            out.append(json.loads(rest[:length]))
            rest = rest[length:]
        return out


def reader_with(data: bytes, eof: bool = False) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


async def test_a_message_over_the_limit_or_without_length_is_refused():
    with pytest.raises(DapError, match="bad DAP header"):
        await read_message(reader_with(b"Content-Length: 999999999999\r\n\r\n{}"))
    with pytest.raises(DapError, match="bad DAP header"):
        await read_message(reader_with(b"X-Other: 1\r\n\r\n{}"))
    assert await read_message(reader_with(frame({"type": "event", "event": "x"}), eof=True)) == {
        "type": "event", "event": "x", }


async def test_a_refused_request_says_why_and_a_reverse_request_is_refused():
    reader, sink = asyncio.StreamReader(), Sink()
    client = DapClient(reader, sink)
    pending = client.send("launch", {"program": "x.py"})
    reader.feed_data(frame({"type": "request", "seq": 7, "command": "runInTerminal", "arguments": {}}))
    reader.feed_data(frame({"type": "response", "request_seq": 1, "command": "launch", "success": False,
                            "message": "cannot launch", "body": {"error": {"format": "x.py not found"}}}))
    with pytest.raises(DapError, match="launch: x.py not found"):
        await asyncio.wait_for(pending, 5)
    sent = sink.messages()
    assert sent[0]["command"] == "launch"
    assert sent[1] == {"type": "response", "request_seq": 7, "command": "runInTerminal", "success": False,
                       "message": "not supported by agent-lsp", "seq": 2}
    await client.close()


async def test_an_adapter_that_goes_away_fails_what_waits_and_says_so():
    reader = asyncio.StreamReader()
    client = DapClient(reader, Sink())
    pending = client.send("initialize")
    reader.feed_data(b"Content-Length: 5\r\n\r\nnot j")  # not JSON, then the end
    reader.feed_eof()
    with pytest.raises(DapError, match="went away"):
        await asyncio.wait_for(pending, 5)
    assert (await asyncio.wait_for(client.events.get(), 5)).event == "agentLsp/closed"
    with pytest.raises(DapError, match="went away"):
        client.send("threads")
    await client.close()
