"""The scripted model server's command line (`python -m agent_lsp.testing.serve`):
serve a JSON script of replies on 127.0.0.1 until SIGTERM, SIGINT or the end of stdin."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from agent_lsp.testing.scripted_model import ScriptedModelServer


def serve(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agent_lsp.testing.serve",
        description="Serve a scripted OpenAI-compatible model.",
    )
    parser.add_argument(
        "--script",
        required=True,
        type=Path,
        help='JSON: {"<key>": [replies...]} or a bare list for the default key',
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--record", type=Path, help="append each request body as a JSONL line")
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text(encoding="utf-8"))
    srv = ScriptedModelServer(args.host, args.port, record=args.record)
    for key, replies in script.items() if isinstance(script, dict) else [("", script)]:
        srv.add(key, replies)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    if stat.S_ISFIFO(os.fstat(0).st_mode) or stat.S_ISSOCK(os.fstat(0).st_mode):

        def _watch_stdin() -> None:
            while os.read(0, 65536):
                pass
            done.set()

        threading.Thread(target=_watch_stdin, daemon=True).start()
    with srv:
        print(srv.base_url, flush=True)
        while not done.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(serve())
