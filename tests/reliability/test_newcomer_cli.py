"""Issue 21 ("A newcomer's day"), items 27 and 30: the help texts and commands a person meets
first. `agent-lsp --help` says how to start (the demo) and what `run` needs (a key or a local
server); `agent-lsp acp --help` says what ACP is and how to set up Zed; `agent-lsp acp` typed
into a terminal prints a hint, never a traceback, and one Ctrl-C exits 130; `doctor` takes
`--base-url`/`--model` as `run` does; the benchmarks' help speaks the user's words."""

from __future__ import annotations

import fcntl
import os
import re
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_lsp", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=env)


def test_top_level_help_says_how_to_start_and_what_run_needs():
    out = _cli("--help").stdout
    assert "agent-lsp demo" in out and "no API key" in out
    assert "agent-lsp demo --serve-model" in out
    assert "OPENAI_API_KEY" in out and "--base-url" in out and "local" in out


def test_acp_help_says_what_acp_is_which_editors_and_how_to_configure_zed():
    out = _cli("acp", "--help").stdout
    assert "Agent Client Protocol" in out and "agentclientprotocol.com" in out
    for editor in ("Zed", "JetBrains", "agent-shell", "codecompanion"):
        assert editor in out, editor
    assert '"agent_servers"' in out and '"command": "agent-lsp"' in out and '"args": ["acp"]' in out


def _own_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_agent_lsp_acp_on_a_tty_prints_a_hint_takes_typing_and_one_ctrl_c_exits_130(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_LSP_STATE_DIR": str(tmp_path / "state")}
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "acp"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True, preexec_fn=_own_terminal)
    os.close(slave)
    out = b""

    def read(until: bytes, seconds: float) -> None:
        nonlocal out
        deadline = time.monotonic() + seconds
        while until not in out and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                out += chunk

    try:
        read(b"Ctrl-C exits", 30)
        hint = out.decode(errors="replace")
        assert "Agent Client Protocol" in hint and "started by an editor" in hint and "agent-lsp demo" in hint, hint
        os.write(master, b"hello, are you there?\n")  # a person typing into it
        read(b"not JSON", 10)
        os.write(master, b"\x03")
        proc.wait(timeout=10)
        read(b"\x00", 1)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = out.decode(errors="replace")
    assert proc.returncode == 130, text
    assert "Traceback" not in text, text


def test_doctor_takes_base_url_and_model_as_run_does(tmp_path, model):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT_LSP_MODEL")}
    env.update(HOME=str(tmp_path), NO_COLOR="1", AGENT_LSP_SETTINGS=str(tmp_path / "none.json"))
    model.add_model("my-local-model")
    done = _cli("doctor", "--workspace", str(tmp_path), "--base-url", model.base_url, "--model", "my-local-model", env=env)
    assert f"endpoint: {model.base_url} answered GET /models" in done.stdout, done.stdout + done.stderr
    assert "model: my-local-model is served by the endpoint" in done.stdout
    assert "API key: OPENAI_API_KEY is not set; fine for a local server" in done.stdout


BENCHMARKS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py") if "ArgumentParser" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("script", BENCHMARKS)
def test_benchmark_help_names_no_internal_issue_numbers(script):
    done = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=REPO, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert not re.search(r"\b(issues?|decisions?)\s+\d", done.stdout, re.IGNORECASE), done.stdout
