"""`agent-lsp demo` as a newcomer runs it: offline, no API key, a real server subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import beside
from tests.demo import thinking


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


@pytest.mark.timeout(thinking.THINKING + 150)
def test_demo_waits_for_a_person_thinking_over_an_approval(tmp_path):
    """In a terminal the demo asks; a person may take longer than two minutes to answer, and
    the run then goes on and ends `done` (it used to fail with TimeoutError()). In a whole run
    the demo was started with the run and thinks beside the other tests (tests/conftest.py)."""
    found = (beside.result("thinking-demo", thinking.THINKING + 140)
             or thinking.play(thinking.demo_env(tmp_path)))
    text = str(found["text"])
    assert int(found["answered"]) >= 1, text  # type: ignore[call-overload]
    assert found["returncode"] == 0, text
    assert "TimeoutError" not in text and "demo failed" not in text
    assert "+    return sum(values) / len(values)" in text
    assert "stop:       done" in text


def demo_on_a_tty(tmp_path, answers: list[bytes], timeout: float = 90) -> tuple[int, str]:
    """`agent-lsp demo` with a terminal to ask on: each approval prompt gets the next answer."""
    found = thinking.on_a_tty(thinking.demo_env(tmp_path), b"[d]eny",
                              lambda i: answers[i] if i < len(answers) else b"a\n", timeout)
    return found["returncode"], str(found["text"])  # type: ignore[return-value]


@pytest.mark.timeout(150)
def test_the_demos_prompt_offers_always_and_a_reason_after_deny(tmp_path):
    """Issue 32: the demo asks as `run` does: al[w]ays (saving the rule shown) and `d REASON`,
    whose reason reaches the model."""
    code, text = demo_on_a_tty(tmp_path, [b"d not today, read the code first\n", b"w\n"])
    assert code == 0, text
    assert "[a]llow / allow for [s]ession / al[w]ays allow / [d]eny (d REASON to say why)?" in text, text
    assert "the user's reason: not today, read the code first" in text, text
    settings = json.loads(Path(os.environ["AGENT_LSP_SETTINGS"]).read_text())
    assert settings["permissions"]["allow"] == ["Edit(./stats.py)"], settings  # `w` on the edit
    assert "stop:       done" in text
