"""`approval.tools: {x: deny}` is the rule `x` in `deny` (CONTRACT Decision 26): through
`agent-lsp run`, the tool is not on the list the model sees, and a call to it anyway (a model may
still name a tool it saw earlier) is denied."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)


def results(model, index: int = -1) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.requests[index]["messages"] if m["role"] == "tool"}


def test_an_approval_tools_deny_takes_the_tool_off_the_list_and_still_denies_a_call(model, workspace):
    Path(os.environ["AGENT_LSP_SETTINGS"]).write_text(json.dumps({"approval": {"tools": {"search": "deny"}}}))
    model.add([tools_reply(call("search", id="s", pattern="add")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "look"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "search" not in offered and {"read_file", "list_files"} <= offered
    assert results(model)["s"].startswith("denied: the policy denies it")
    assert report_of(proc.stdout)["denied"] == 1


def test_a_bare_deny_rule_and_an_approval_tools_deny_remove_the_same_way(model, workspace):
    Path(os.environ["AGENT_LSP_SETTINGS"]).write_text(json.dumps({"permissions": {"deny": ["search"]}}))
    model.add([{"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "look"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "search" not in {t["function"]["name"] for t in model.requests[0]["tools"]}
