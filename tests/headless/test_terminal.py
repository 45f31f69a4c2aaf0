"""Issue 11.12 and 11.14: the CLI as a person meets it. A bare `agent-lsp` in a terminal says
what it is and one Ctrl-C ends it (130, no traceback); report wording."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from tests.unit.kit import run

pytestmark = pytest.mark.timeout(60)


def test_bare_agent_lsp_on_a_tty_prints_a_hint_and_one_ctrl_c_exits_130():
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agent_lsp"], stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        err = b""
        deadline = time.monotonic() + 20
        while b"Ctrl-C" not in err and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.2)
            if ready:
                err += os.read(proc.stderr.fileno(), 4096)
        assert b"Language Server Protocol" in err and b"agent-lsp run" in err and b"agent-lsp demo" in err
        assert b"agent-lsp chat" in err  # Decision 90
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        err += proc.stderr.read()
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert b"Traceback" not in err and b"Fatal Python error" not in err


async def test_wording_counts_and_stops(model, workspace):
    model.add([{"status": 400, "message": "Bad request."}])
    report, _, _ = await run("hi", model, workspace)
    assert "0 turns" in report.summary and "turn(s)" not in report.summary
    assert ".." not in report.summary and ".." not in (report.error or "")
    model.add([{"text": "one"}])
    done, _, _ = await run("hi again", model, workspace)
    assert done.summary.startswith("Done: 1 turn, 0 tool calls")
