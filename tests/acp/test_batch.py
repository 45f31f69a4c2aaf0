"""Issue 20 item 7 (Decision 45): frames no JSON-RPC message can be (a batch, an empty batch,
a scalar, a line that is not JSON, an object with an impossible id) each get one error answer
and the connection stays: the next request is answered. A plain subprocess with raw lines on
stdin, as a broken or hostile client would send them."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.timeout(60)

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}
GARBAGE = {
    "batch": (json.dumps([INITIALIZE, {**INITIALIZE, "id": 2}]), -32600),
    "empty-batch": ("[]", -32600),
    "number": ("42", -32600),
    "string": ('"initialize"', -32600),
    "null": ("null", -32600),
    "not-json": ("this is not json {", -32700),
    "cut-json": ('{"jsonrpc": "2.0", "id": 7, "method": "initia', -32700),
    "list-id": ('{"jsonrpc": "2.0", "id": [1], "method": "initialize", "params": {}}', -32600),
    "object-id": ('{"jsonrpc": "2.0", "id": {"a": 1}, "result": {}}', -32600),
    "number-method": ('{"jsonrpc": "2.0", "id": 5, "method": 12}', -32600),
}


class Agent:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "acp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.buffer = b""

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 20) -> dict:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no answer in {timeout} s (exit code {self.proc.poll()})")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"the agent closed stdout (exit code {self.proc.wait(5)}): "
                                     f"{self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else ''}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.mark.parametrize("name", list(GARBAGE))
def test_a_frame_that_is_no_message_gets_one_error_and_the_connection_stays(name):
    frame, code = GARBAGE[name]
    agent = Agent()
    try:
        agent.send(frame)
        error = agent.receive()
        # the id when it can be read (a valid id with a bad method), else null
        assert error["error"]["code"] == code and error["id"] == (5 if name == "number-method" else None), error
        assert error["jsonrpc"] == "2.0"
        agent.send(json.dumps(INITIALIZE))
        answer = agent.receive()
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1, answer
        # and again, after the next bad frame
        agent.send(frame)
        assert agent.receive()["error"]["code"] == code
        agent.send(json.dumps({**INITIALIZE, "id": 3}))
        assert agent.receive()["id"] == 3
        assert agent.proc.poll() is None
    finally:
        assert agent.close() == 0


def test_a_batch_gets_exactly_one_answer():
    """One -32600 for the whole array (nothing inside it runs): the next answer is the next
    request's."""
    agent = Agent()
    try:
        agent.send(json.dumps([INITIALIZE, {"jsonrpc": "2.0", "id": 9, "method": "session/new",
                                            "params": {"cwd": "/", "mcpServers": []}}]))
        agent.send(json.dumps({**INITIALIZE, "id": 4}))
        first, second = agent.receive(), agent.receive()
        assert first["error"]["code"] == -32600 and first["id"] is None
        assert second["id"] == 4 and "result" in second
    finally:
        assert agent.close() == 0
