"""`agent-lsp demo` on a terminal whose person thinks over the first approval for longer than
two minutes (the first landing's demo failed there with TimeoutError). The pause is only
waiting, so a test run starts this demo at its beginning, beside the other tests
(`start_beside`, from tests/conftest.py), and its test reads how it ended (`result`); run
alone, the test plays it itself (`play`)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

THINKING = 125  # seconds: longer than the two minutes after which the demo used to fail
FOLDER = "AGENT_LSP_THINKING_DEMO"  # the folder of the demo started beside the tests
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


def start_beside(path_in: Callable[[Path], str]) -> None:
    """Plays the demo in a thread of this (the controlling) pytest process; the workers find its
    folder in the environment they inherit. `path_in`: the PATH the tests get, made in a folder."""
    folder = Path(tempfile.mkdtemp(prefix="agent-lsp-thinking-demo-"))
    (folder / "home").mkdir()
    settings = folder / "user-settings.json"
    settings.write_text("{}\n")
    env = demo_env(folder / "home", path_in(folder))
    env.update(AGENT_LSP_STATE_DIR=str(folder / "state"), AGENT_LSP_SETTINGS=str(settings),
               CLAUDE_CONFIG_DIR=str(folder / "claude-config"))

    def run() -> None:
        try:
            found = play(env)
        except Exception as exc:  # noqa: BLE001 - the test reports it
            found = {"text": f"the demo could not be played: {exc!r}", "answered": 0, "returncode": None}
        (folder / "result.tmp").write_text(json.dumps(found))
        (folder / "result.tmp").rename(folder / "result.json")

    os.environ[FOLDER] = str(folder)
    _started["folder"] = folder
    thread = threading.Thread(target=run, name="thinking-demo", daemon=True)
    _started["thread"] = thread
    thread.start()


def stop_beside() -> None:
    """At the end of the test run: the demo (if still running) is ended, its folder removed."""
    proc = _started.get("proc")
    if isinstance(proc, subprocess.Popen) and proc.poll() is None:
        proc.kill()
    thread = _started.get("thread")
    if isinstance(thread, threading.Thread):
        thread.join(timeout=35)
    folder = _started.get("folder")
    if isinstance(folder, Path):
        shutil.rmtree(folder, ignore_errors=True)


def result() -> dict[str, object] | None:
    """How the demo started beside the tests ended (waiting for it), or None when none was."""
    folder = os.environ.get(FOLDER)
    if not folder:
        return None
    done = Path(folder) / "result.json"
    deadline = time.monotonic() + THINKING + 150
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return json.loads(done.read_text()) if done.exists() else {"text": "no result", "answered": 0}
