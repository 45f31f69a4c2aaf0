"""`agent-lsp demo` as a newcomer runs it: offline, no API key, a real server subprocess."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import pytest


@pytest.mark.timeout(90)
def test_demo_runs_offline_and_shows_the_fix(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "agent_lsp", "demo", "--yes"], capture_output=True, text=True,
                          timeout=80, env=env, stdin=subprocess.DEVNULL)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "approved automatically" in out  # approvals are shown, and said to be automatic
    assert "-    return sum(values) / (len(values) - 1)" in out  # the diff of the real edit
    assert "+    return sum(values) / len(values)" in out
    assert "stop:       done" in out
    assert "[progress] ended: done" in out  # progress from the server reached the client
    assert "\033[" not in out  # no colour codes when stdout is not a terminal


THINKING = 125  # seconds: longer than the two minutes after which the demo used to fail (issue 11.13)


@pytest.mark.timeout(THINKING + 150)
def test_demo_waits_for_a_person_thinking_over_an_approval(tmp_path):
    """In a terminal the demo asks; a person may take longer than two minutes to answer, and
    the run then goes on and ends `done` (it used to fail with TimeoutError())."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HOME"] = str(tmp_path)
    master, slave = os.openpty()  # stdin is a terminal: the demo asks instead of approving
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "demo"], stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)
    os.close(slave)
    out, prompts, answered = b"", 0, 0
    try:
        deadline = time.monotonic() + THINKING + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
            prompts = out.count(b"[a]llow / allow for [s]ession / [d]eny?")
            if prompts > answered:
                if answered == 0:
                    time.sleep(THINKING)  # the person reads the diff and thinks it over
                os.write(master, b"a\n")
                answered += 1
        proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = out.decode("utf-8", "replace")
    assert answered >= 1, text
    assert proc.returncode == 0, text
    assert "TimeoutError" not in text and "demo failed" not in text
    assert "+    return sum(values) / len(values)" in text
    assert "stop:       done" in text
