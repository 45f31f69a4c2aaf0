"""An MCP server over stdio written by hand (no SDK, whose serializer cannot write it): its tool
`weird` answers text holding a lone surrogate as JSON escapes it (`"\\ud800"`), and, with
`--bytes`, as the raw bytes a lax encoder writes for it (ED A0 80)."""

import json
import sys

RAW = "--bytes" in sys.argv


def send(message: dict) -> None:
    data = json.dumps(message).encode()  # ensure_ascii: a lone surrogate is the escape \ud800
    if RAW:
        data = data.replace(b"\\ud800", b"\xed\xa0\x80")
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


for raw in sys.stdin:
    request = json.loads(raw)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue  # a notification
    if method == "initialize":
        result = {"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "weird", "description": "answers odd text",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "before \ud800 after"}], "isError": False}
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": ident, "result": result})
