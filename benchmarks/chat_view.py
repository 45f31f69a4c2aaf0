"""The VS Code chat view under a fast stream: 2,000 tokens/s for 60 s into the view
in a real VS Code (code-server); targets: the view's page busy < 50% of the time, no text
dropped.

The scripted model streams paragraphs of numbered words (`w1 w2 …`, ~4 characters a token) at
the rate asked; the chat scenario `chatBench` (tests/editors/vscode/scenarios-chat.mjs) runs a
10 ms timer in the webview's page and sums how late it fires (time the page's main thread was
taken by something else: the view's own message handling, Markdown DOM updates, layout), then
counts the words the view shows. Needs what `tests/editors/vscode/setup.sh` installs.

    python benchmarks/chat_view.py [--seconds 60] [--rate 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "editors"))

PROMPT = "Stream a very long answer into the chat"
CHARS_PER_TOKEN = 4
CHUNK_CHARS = 80


def answer(tokens: int) -> tuple[str, int]:
    """Paragraphs of numbered words, about `tokens` tokens (4 characters each) long; and the
    number of words."""
    paragraphs: list[str] = []
    words: list[str] = []
    size = n = 0
    while size < tokens * CHARS_PER_TOKEN:
        n += 1
        words.append(f"w{n}")
        size += len(words[-1]) + 1
        if n % 60 == 0:
            paragraphs.append(" ".join(words))
            words = []
            size += 1
    paragraphs.append(" ".join(words))
    return "\n\n".join(p for p in paragraphs if p) + "\n", n


def setup_env() -> dict[str, str]:
    proc = subprocess.run(["bash", str(REPO / "tests/editors/vscode/setup.sh")],
                          capture_output=True, text=True, timeout=1500, check=True)
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            found[name] = shlex.split(value)[0] if value else ""
    return found


def measure(seconds: float, rate: int) -> dict[str, Any]:
    from test_vscode import kill_marked

    from agent_lsp.testing.scripted_model import ScriptedModelServer

    tools = setup_env()
    text, words = answer(int(seconds * rate))
    chunks = max(1, len(text) // CHUNK_CHARS)
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer() as model:
        wrapper = Path(tmp) / "agent-lsp"
        wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(REPO))} exec "
                           f'{shlex.quote(sys.executable)} -m agent_lsp "$@"\n')
        wrapper.chmod(0o755)
        model.add(PROMPT, [{"text": text, "chunk_size": CHUNK_CHARS, "chunk_delay": seconds / chunks}])
        marker = f"agent-lsp-chat-bench-{os.getpid()}"
        env = {**os.environ, **tools, "AGENT_LSP_E2E_MARKER": marker, "AGENT_LSP_SERVER": str(wrapper),
               "AGENT_LSP_MODEL_URL": model.base_url, "AGENT_LSP_SCENARIOS": "chatBench",
               "AGENT_LSP_TASKS": json.dumps({"configuredModel": "scripted", "chatBench": PROMPT,
                                              "chatBenchSeconds": seconds})}
        try:
            proc = subprocess.run([tools["AGENT_LSP_NODE"], str(REPO / "tests/editors/vscode/run-test.mjs")],
                                  capture_output=True, text=True, timeout=600 + 4 * seconds, env=env, cwd=REPO)
        finally:
            kill_marked(marker)
    result = json.loads(proc.stdout)
    scenario = result["scenarios"].get("chatBench") or {"error": result.get("error")}
    if "error" in scenario:
        raise SystemExit(f"chatBench failed: {scenario['error']}\n{proc.stderr[-3000:]}")
    probe = scenario["probe"]
    return {
        "tokensPerSecond": rate,
        "seconds": seconds,
        "chars": len(text),
        "streamWallSeconds": scenario["wallMs"] / 1000,
        "busyFraction": probe["lateMs"] / probe["elapsedMs"],
        "wordsSent": words,
        "wordsShown": scenario["words"],
        "lastWordShown": scenario["lastWord"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=2000, help="tokens per second")
    args = parser.parse_args()
    figures = measure(args.seconds, args.rate)
    ok = figures["busyFraction"] < 0.5 and figures["wordsShown"] == figures["wordsSent"]
    figures["verdict"] = "met" if ok else "missed"
    print(json.dumps(figures, indent=2))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
