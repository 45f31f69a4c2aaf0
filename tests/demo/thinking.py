"""`agent-lsp demo` on a terminal whose person thinks over the first approval for longer than
two minutes (the first landing's demo failed there with TimeoutError). The pause is only
waiting, so a test run starts this demo at its beginning, beside the other tests
(`play_beside`, a job of tests/beside.py), and its test reads how it ended; run alone, the test
plays it itself (`play`)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

THINKING = 125  # seconds: longer than the two minutes after which the demo used to fail
_started: dict[str, object] = {}


def demo_env(home: Path, path: str | None = None) -> dict[str, str]:
    """The demo's environment: no key, no endpoint, its own home."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HOME"] = str(home)
    if path is not None:
        env["PATH"] = path
    return env


def play(env: dict[str, str]) -> dict[str, object]:
    """The demo on a pty whose person answers the first approval after THINKING seconds, any
    later one at once."""

    def answer(index: int) -> bytes:
        if index == 0:
            time.sleep(THINKING)  # the person reads the diff and thinks it over
        return b"a\n"

    return on_a_tty(env, b"[d]eny (d REASON to say why)?", answer, THINKING + 120)


def on_a_tty(env: dict[str, str], prompt: bytes, answer: Callable[[int], bytes],
             timeout: float) -> dict[str, object]:
    """`agent-lsp demo` with a terminal to ask on: each `prompt` seen gets `answer(its index)`.
    Returns what a person saw (`text`), how many prompts were answered, the exit code."""
    master, slave = os.openpty()  # stdin is a terminal: the demo asks instead of approving
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "demo"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    _started["proc"] = proc
    os.close(slave)
    out, answered = b"", 0
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
                if not chunk:
                    break
                out += chunk
            if out.count(prompt) > answered:
                os.write(master, answer(answered))
                answered += 1
        proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {"text": out.decode("utf-8", "replace"), "answered": answered, "returncode": proc.returncode}


def play_beside(folder: Path, path: str) -> dict[str, object]:
    """The demo as a job played beside the tests (tests/beside.py): its own home, state and
    user settings in `folder`; `path`: the PATH the tests get."""
    (folder / "home").mkdir()
    settings = folder / "user-settings.json"
    settings.write_text("{}\n")
    env = demo_env(folder / "home", path)
    env.update(AGENT_LSP_STATE_DIR=str(folder / "state"), AGENT_LSP_SETTINGS=str(settings),
               CLAUDE_CONFIG_DIR=str(folder / "claude-config"))
    return play(env)


def cancel() -> None:
    """At the end of the test run: the demo, if it still runs, is ended."""
    proc = _started.get("proc")
    if isinstance(proc, subprocess.Popen) and proc.poll() is None:
        proc.kill()
