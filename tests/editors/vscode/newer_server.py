"""The real agent-lsp server behind a pipe that plays a newer server: before the `stop` event of
a run whose report mentions MARK it sends a `steer` event and an event of a kind no client knows,
and it adds fields no client knows to that report (CONTRACT Decision 90). Everything else passes
through unchanged. Usage: newer_server.py MARK [server arguments...]"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import IO, Any


def read_frame(stream: IO[bytes]) -> bytes | None:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            return None
        if not line.strip():
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return stream.read(length)


def write_frame(out: IO[bytes], body: bytes) -> None:
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out.flush()


def stream_event(params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "agentLsp/stream", "params": params}).encode()


def main() -> int:
    mark, args = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen([sys.executable, "-m", "agent_lsp", *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    to_child = child.stdin

    def forward() -> None:
        while (body := read_frame(sys.stdin.buffer)) is not None:
            write_frame(to_child, body)
        to_child.close()

    threading.Thread(target=forward, daemon=True).start()
    out = sys.stdout.buffer
    while (body := read_frame(child.stdout)) is not None:
        msg = json.loads(body)
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if (msg.get("method") == "agentLsp/stream" and params.get("kind") == "stop"
                and mark in json.dumps(params.get("report"))):
            base = {"runId": params["runId"], "agentId": "main"}
            write_frame(out, stream_event({**base, "seq": params["seq"], "kind": "steer",
                                           "text": "use tabs"}))
            write_frame(out, stream_event({**base, "seq": params["seq"] + 1,
                                           "kind": "someFutureKind", "text": "gibberish",
                                           "futureField": {"a": 1}}))
            params["seq"] += 2
            params["report"].update(futureField={"nested": ["x"]}, futureCount=3)
            body = json.dumps(msg).encode()
        write_frame(out, body)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
