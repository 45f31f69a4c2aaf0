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

    from agent_lsp.agent.exec.keyguard import sealed
    from agent_lsp.frontend import leave, leave_after
    from agent_lsp.server.server import create_server

    server = create_server()
    try:
        if tcp:
            host, _, port = tcp.rpartition(":")
            server.start_tcp(host or "127.0.0.1", int(port))
        else:
            server.start_io()
    except SystemExit:  # pygls ends the loop on `exit` by raising it: the code is ours
        pass
    # stdin closed (the editor died) or exit: runs were cancelled with the event loop. A process
    # of its own ends now (last rites, then os._exit): tearing the interpreter down while the
    # warm-up thread is still importing a native module can abort it (SIGABRT instead of the
    # exit code); the watchdog stays for anything that still holds it.
    leave_after(1.0, server.exit_code)
    if sealed():
        leave(server.exit_code)
    return server.exit_code
