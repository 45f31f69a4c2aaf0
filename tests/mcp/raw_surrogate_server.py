"""An MCP server written by hand (no SDK, whose serializer cannot write it): its tool `weird`
answers text holding a lone surrogate as JSON escapes it (`"\\ud800"`), and, with `--bytes`, as
the raw bytes a lax encoder writes for it (ED A0 80). Over stdio, or with `--http`, as a
streamable HTTP server answering JSON (it prints its URL on stdout)."""

import json
import sys

RAW = "--bytes" in sys.argv


def answer(request: dict) -> dict | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        result = {"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "weird", "description": "answers odd text",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "before \ud800 after"}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def encoded(message: dict) -> bytes:
    data = json.dumps(message).encode()  # ensure_ascii: a lone surrogate is the escape \ud800
    return data.replace(b"\\ud800", b"\xed\xa0\x80") if RAW else data


def serve_http() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["content-length"])))
            reply = answer(request)
            if reply is None:
                self.send_response(202)
                self.end_headers()
                return
            data = encoded(reply)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # no server-initiated stream
            self.send_response(405)
            self.end_headers()

        do_DELETE = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    server.serve_forever()


if "--http" in sys.argv:
    serve_http()
else:
    for raw in sys.stdin:
        reply = answer(json.loads(raw))
        if reply is not None:
            sys.stdout.buffer.write(encoded(reply) + b"\n")
            sys.stdout.buffer.flush()
