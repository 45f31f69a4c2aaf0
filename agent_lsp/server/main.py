"""`agent-lsp serve`: logging to stderr (stdout is the protocol), then the server on stdio/TCP."""

from __future__ import annotations

import logging
import sys


def serve(tcp: str | None = None, log_level: str = "INFO") -> int:
    logging.basicConfig(
        level=getattr(logging, str(log_level).upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s agent-lsp %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("pygls", "httpx", "httpx2", "openai", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)  # pygls logs every message body at INFO

    from agent_lsp.frontend import leave_after
    from agent_lsp.server.server import create_server

    server = create_server()
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
    # stdin closed (the editor died) or exit: runs were cancelled with the event loop; make
    # sure nothing (a reader thread) keeps the process alive past the deadline.
    leave_after(1.0, server.exit_code)
    return server.exit_code
