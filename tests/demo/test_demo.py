"""`agent-lsp demo` as a newcomer runs it: offline, no API key, a real server subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

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
