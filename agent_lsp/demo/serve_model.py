"""`agent-lsp demo --serve-model`: the demo's recorded session served as an OpenAI-compatible
endpoint on 127.0.0.1, so `agent-lsp run` and the editors can be tried offline, with no key.

Every new prompt replays the recording from its first turn (list the files, read stats.py, run
the tests, fix `mean()`, run them again): it fits the sample workspace, whatever the prompt says."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from agent_lsp.demo import TASK

HERE = Path(__file__).parent
MODEL_NAME = "agent-lsp-demo"
SAMPLE_COPY = "/tmp/agent-lsp-sample"  # where the printed commands put the copy
EXIT_CANCELLED = 130


def recorded_replies(path: Path = HERE / "session.jsonl") -> list[dict[str, Any]]:
    """The main agent's replies of the recording, in turn order, as scripted-server replies."""
    turns: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if (
            record.get("type") == "reply"
            and record.get("agentId", "main") == "main"
            and record.get("purpose", "turn") == "turn"
        ):
            reply = record["reply"]
            calls = [
                {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                for c in reply.get("toolCalls", [])
            ]
            # Streamed in small pieces, a little apart: it looks like a model typing.
            turns[int(record["turn"])] = {
                "text": reply.get("text", ""),
                "tool_calls": calls,
                "chunk_size": 6,
                "chunk_delay": 0.01,
            }
    return [turns[turn] for turn in sorted(turns)]


def serve_model(port: int = 0, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Print the base URL on stdout (its own line, first), how to use it on stderr, and serve
    until Ctrl-C (exit 130, quietly) or SIGTERM (exit 0)."""
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    server = ScriptedModelServer("127.0.0.1", port)
    server.replay_each_prompt(recorded_replies())
    server.add_model(MODEL_NAME)
    try:
        server.start()
    except OSError as exc:
        print(f"agent-lsp demo: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", file=err)
        return 1
    stop = threading.Event()
    code = [0]

    def on_signal(signum: int, _frame: Any) -> None:
        code[0] = EXIT_CANCELLED if signum == signal.SIGINT else 0
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    url = server.base_url
    print(url, file=out, flush=True)
    print(usage(url), file=err, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return code[0]


def usage(url: str) -> str:
    return "\n".join(
        [
            f"agent-lsp demo: serving the demo's recorded model at {url} "
            f"(model {MODEL_NAME}; no API key needed).",
            "It replays the demo's session for any prompt: "
            "use it on a copy of the sample workspace, e.g.",
            # `DIR/.`: the folder's contents, so a second copy refreshes it instead of nesting
            f"  cp -R {shlex.quote(str(HERE / 'sample'))}/. {SAMPLE_COPY}",
            f'  agent-lsp run "{TASK}" --workspace {SAMPLE_COPY} '
            f"--base-url {url} --model {MODEL_NAME}",
            f"Editors: set the settings baseUrl to {url} and model to {MODEL_NAME}. "
            "Ctrl-C stops it.",
        ]
    )
