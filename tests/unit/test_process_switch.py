"""CONTRACT Decision 71: the process-wide effects sit behind one switch the entry points turn on
(`keyguard.seal_process`, first thing in `cli.main`). The exit watchdog (`frontend.leave_after`,
which the server's `exit` handler starts) ends only a process an entry point owns: a server
served in a test's own process (tests/e2e/inprocess.py) must not take the test run down."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import time
from agent_lsp import frontend
from agent_lsp.agent.exec import keyguard
if {seal}:
    keyguard.seal_process()
frontend.leave_after(0.05, 7)
time.sleep(30 if {seal} else 1.0)  # sealed: the watchdog ends it long before
print("still here", flush=True)
"""


@pytest.mark.parametrize("seal", [True, False], ids=["entry-point", "in-process"])
def test_the_exit_watchdog_ends_only_a_sealed_process(seal):
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(seal=seal)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    if seal:
        assert proc.returncode == 7 and "still here" not in proc.stdout, proc.stdout + proc.stderr
    else:
        assert proc.returncode == 0 and "still here" in proc.stdout, proc.stdout + proc.stderr
