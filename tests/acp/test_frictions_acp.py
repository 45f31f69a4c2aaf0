"""Issue 32 over ACP: an unknown `/command` is told to the user (a thought: ACP has no status
line) and still reaches the model as text; files a command leaves in `__pycache__` are never
listed as edited."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.unit.kit import call, last_tool_results, tools_reply


def test_an_unknown_slash_command_is_told_and_sent_as_text(connect, model, workspace: Path):
    model.add([{"text": "ok"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "/frobnicate the parser")["stopReason"] == "end_turn"
    thoughts = [u["content"]["text"] for u in client.updates(session_id, "agent_thought_chunk")]
    assert any("/frobnicate is not a known command or skill: sent to the model as text" in t for t in thoughts), thoughts
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "/frobnicate the parser"}


@pytest.mark.parametrize("in_git", [False, True])
def test_bytecode_a_command_leaves_is_never_listed_as_edited(connect, model, workspace: Path, in_git):
    if in_git:
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    # imports calc: writes __pycache__/ (the tests' environment may say not to: overridden)
    script = "import sys; sys.dont_write_bytecode = False; import calc; open('out.txt', 'w').write('x')"
    model.add([tools_reply(call("run_command", "c1", command=f"{sys.executable} -c \"{script}\"")), {"text": "ran"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions(otherwise="allow")
    result = client.prompt(session_id, "run it")
    assert result["stopReason"] == "end_turn"
    report = result["_meta"]["agentLsp"]["report"]
    assert list((workspace / "__pycache__").glob("calc*.pyc")), (last_tool_results(model.requests[-1]), report)
    assert report["editedFiles"] == [(workspace / "out.txt").as_uri()], report["editedFiles"]
    assert "__pycache__" not in report["summary"] and "out.txt" in report["summary"]
