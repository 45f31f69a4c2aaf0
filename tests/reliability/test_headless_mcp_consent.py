"""Issue 21.10: `agent-lsp run` asks consent for a workspace-declared MCP server on a TTY (Decision
16) and, without one, does not start it and says why on stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli, run_on_a_tty
from tests.reliability.test_long_lived import TINY_SERVER

pytestmark = pytest.mark.timeout(90)

PROMPT = "[a]llow / allow al[w]ays for this workspace / [d]eny"


@pytest.fixture
def declared(workspace: Path, tmp_path: Path) -> Path:
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"tiny": {"command": sys.executable, "args": [str(script)]}}}))
    return script


def offered(model) -> set[str]:
    return {t["function"]["name"] for t in model.requests[-1].get("tools", [])}


def on_a_tty(argv: list[str], answer: bytes) -> tuple[int, str, str]:
    return run_on_a_tty(argv, answer, timeout=60)


@pytest.mark.parametrize(("answer", "started"), [(b"a\n", True), (b"d\n", False)], ids=["allow", "deny"])
def test_consent_is_asked_on_the_tty(model, workspace, declared, answer, started):
    model.add([{"text": "done"}])
    code, out, err = on_a_tty(agent_run(model, workspace, "go"), answer)
    assert code == 0, out + err
    assert err.count(PROMPT) == 1, err
    assert "The workspace declares the MCP server `tiny`" in err and str(declared) in err, "the exact command is shown"
    assert ("tiny__ping" in offered(model)) is started
    if not started:
        assert "MCP server `tiny` was not started: you denied it" in err
    assert report_of(out)["stopReason"] == "done"


def test_without_a_tty_the_server_is_not_started_and_stderr_says_why(model, workspace, declared):
    model.add([{"text": "done"}])
    proc = run_cli(agent_run(model, workspace, "go"))
    assert proc.returncode == 0, proc.stderr
    assert "tiny__ping" not in offered(model)
    assert "MCP server `tiny` not started: no one could be asked (run in a terminal to allow it)" in proc.stderr
    assert PROMPT not in proc.stderr


def test_allow_always_is_remembered_and_a_remembered_deny_is_named(model, workspace, declared):
    model.add([{"text": "done", "repeat": 3}])
    code, out, err = on_a_tty(agent_run(model, workspace, "go"), b"w\n")
    assert code == 0, out + err
    assert "tiny__ping" in offered(model)
    proc = run_cli(agent_run(model, workspace, "again"))  # no TTY now: the remembered answer stands
    assert proc.returncode == 0 and "tiny__ping" in offered(model), proc.stderr
    assert "not started" not in proc.stderr


def test_a_server_denied_by_the_setting_is_named(model, workspace, declared, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"mcp": {"workspaceServers": "deny"}}))
    model.add([{"text": "done"}])
    proc = run_cli(agent_run(model, workspace, "go", "--settings", str(settings)))
    assert proc.returncode == 0, proc.stderr
    assert "tiny__ping" not in offered(model)
    assert "MCP server `tiny` not started: denied by the setting mcp.workspaceServers" in proc.stderr
