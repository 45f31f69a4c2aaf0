"""Issue 32 P14: a value that cannot be a session id (5,000 characters, a slash) is a usage error
(exit 2, one clear line) wherever the CLI takes one, never a traceback; nothing reaches the model."""

from __future__ import annotations

import json
import sys

import pytest

from tests.headless.test_run_cli import agent_run, run_cli
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(60)
LONG = "s" * 5000


@pytest.mark.parametrize("bad", [LONG, "../../etc/passwd", "s-\u202e1"])
def test_run_with_an_invalid_session_id_is_a_usage_error(model, workspace, bad):
    proc = run_cli(agent_run(model, workspace, "hi", "--session", bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "invalid session id" in proc.stderr, proc.stderr
    assert len(proc.stderr) < 400, "the id is cut in the message"
    assert "\u202e" not in proc.stderr
    assert model.requests == []


def test_sessions_delete_with_an_invalid_id_is_a_usage_error(model, workspace):
    model.add([tools_reply(call("list_files")), {"text": "ok"}])
    kept = run_cli(agent_run(model, workspace, "make a session"))
    assert kept.returncode == 0, kept.stderr
    proc = run_cli([sys.executable, "-m", "agent_lsp", "sessions", "--workspace", str(workspace),
                    "delete", LONG])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "invalid session id" in proc.stderr, proc.stderr
    listed = run_cli([sys.executable, "-m", "agent_lsp", "sessions", "--workspace", str(workspace), "--json"])
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1, "nothing was deleted"
