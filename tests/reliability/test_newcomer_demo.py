"""Issue 21 ("A newcomer's day"): `agent-lsp demo` as a person meets it in a terminal. A Ctrl-C
at the first approval ends it the way every other command ends: exit 130, one line, no
traceback, and the server subprocess it started is gone."""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

PROMPT = b"[a]llow / allow for [s]ession / al[w]ays allow / [d]eny (d REASON to say why)?"


def _own_terminal() -> None:
    """In the child: the pty on stdin becomes its controlling terminal, so a typed ^C is turned
    into SIGINT by the line discipline, as in a real terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _read(master: int, until: bytes | None, seconds: float, proc: subprocess.Popen[bytes]) -> bytes:
    out = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
            if until is not None and until in out:
                break
        elif proc.poll() is not None:
            break
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["sigint-to-the-foreground-group", "ctrl-c-typed"])
def test_ctrl_c_at_the_demos_first_approval_exits_130_with_one_line(tmp_path, how):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HOME"] = str(tmp_path)
    env["NO_COLOR"] = "1"
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "demo"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, start_new_session=True, preexec_fn=_own_terminal)
    os.close(slave)
    try:
        before = _read(master, PROMPT, 60, proc)
        assert PROMPT in before, before.decode(errors="replace")
        servers = [pid for pid in _children(proc.pid) if "agent_lsp" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert servers, "the demo's server subprocess was not found"
        if how == "ctrl-c-typed":
            os.write(master, b"\x03")
        else:
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
        after = _read(master, None, 30, proc)
        proc.wait(timeout=10)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = after.decode("utf-8", "replace")
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "Error" not in text, text
    lines = [line for line in text.replace("\r", "").splitlines() if line.strip() and line.strip() != "^C"]
    assert lines == ["agent-lsp demo: cancelled"], text
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in servers), "the server subprocess outlived the demo"


def _start_serve_model(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp", "demo", "--serve-model"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "demo --serve-model printed no URL"
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
    return proc, url


@pytest.mark.timeout(120)
def test_demo_serve_model_lets_agent_lsp_run_fix_the_sample_offline_then_ctrl_c_exits_130(tmp_path):
    """Decision 46: `agent-lsp demo --serve-model` prints a base URL that replays the demo's
    recording; `agent-lsp run` pointed at it, with no API key, does what the demo does on a copy
    of the sample (twice: each new prompt replays it from the start); Ctrl-C ends it, 130, quietly."""
    import agent_lsp.demo

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(HOME=str(tmp_path), NO_COLOR="1", AGENT_LSP_STATE_DIR=str(tmp_path / "state"))
    sample = Path(agent_lsp.demo.__file__).parent / "sample"
    proc, url = _start_serve_model(env)
    try:
        for attempt in ("first", "second"):
            workspace = tmp_path / attempt
            shutil.copytree(sample, workspace)
            done = subprocess.run([sys.executable, "-m", "agent_lsp", "run", "The unit tests fail. Find out why and fix it.",
                                   "--workspace", str(workspace), "--base-url", url, "--model", "agent-lsp-demo", "--yes"],
                                  capture_output=True, text=True, timeout=90, env=env, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "return sum(values) / len(values)" in (workspace / "stats.py").read_text()
            tests = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, text=True, timeout=60)
            assert tests.returncode == 0, tests.stderr
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
