"""Plan mode (ACP session modes and /plan), rewind (/rewind and `_agentLsp/rewind`), and what a
prompt may carry (embedded resources, links)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings
from tests.acp.driver import AcpError
from tests.unit.kit import call, tools_reply

PLAN = "Here is the plan:\n1. Read calc.py\n2. Change `a - b` to `a + b` in add\n3. Run pytest\n"


def offered_tools(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


@pytest.mark.parametrize("how", ["set_mode", "slash"])
def test_plan_mode(connect, model, workspace: Path, how: str):
    model.add("planning", [tools_reply(call("read_file", "c-read", path="calc.py")), {"text": PLAN}])
    client = connect(model_settings(model))
    client.initialize()
    created = client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    session_id = created["sessionId"]
    assert created["modes"]["currentModeId"] == "default"
    assert {m["id"] for m in created["modes"]["availableModes"]} == {"default", "plan"}
    if how == "set_mode":
        client.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
        mode = client.wait_for(lambda e: e["type"] == "update" and e["params"]["update"]["sessionUpdate"] == "current_mode_update")
        assert mode["params"]["update"]["currentModeId"] == "plan"
        prompt = "planning: fix add"
    else:
        prompt = "/plan planning: fix add"
    response = client.prompt(session_id, prompt)
    assert response["stopReason"] == "end_turn"
    tools = offered_tools(model.requests_for("planning")[0])
    assert "read_file" in tools and "edit_file" not in tools and "run_command" not in tools
    [plan] = client.updates(session_id, "plan")
    assert [e["content"] for e in plan["entries"]] == ["Read calc.py", "Change `a - b` to `a + b` in add", "Run pytest"]
    assert {e["status"] for e in plan["entries"]} == {"pending"}
    assert client.text(session_id).endswith(PLAN)
    assert model.requests_for("planning")[0]["messages"][-1]["content"] == "planning: fix add"
    with pytest.raises(AcpError):
        client.request("session/set_mode", {"sessionId": session_id, "modeId": "yolo"})
    client.close()


def test_rewind_by_slash_command_and_extension(connect, model, workspace: Path):
    model.add("edit-me", [
        tools_reply(call("edit_file", "e1", path="calc.py", old_text="return a - b", new_text="return a + b")),
        {"text": "done"},
    ])
    original = (workspace / "calc.py").read_text()
    client = connect(model_settings(model, approval={"default": "allow"}))
    client.initialize()
    session_id = client.new_session(workspace)
    report = client.prompt(session_id, "edit-me: fix add")["_meta"]["agentLsp"]["report"]
    assert report["rewindable"] and "a + b" in (workspace / "calc.py").read_text()

    assert client.prompt(session_id, "/rewind")["stopReason"] == "end_turn"
    assert (workspace / "calc.py").read_text() == original
    assert "Rewound" in client.text(session_id) and "calc.py" in client.text(session_id)
    writes = [e["params"] for e in client.of("fs") if e["method"] == "fs/write_text_file"]
    assert writes[-1] == {"sessionId": session_id, "path": str(workspace / "calc.py"), "content": original}

    rewind_id = client.text(session_id).split("Rewound (", 1)[1].split(";", 1)[0]
    result = client.request("_agentLsp/rewind", {"sessionId": session_id, "runId": rewind_id})
    assert result["restored"] == [(workspace / "calc.py").as_uri()] and "a + b" in (workspace / "calc.py").read_text()
    with pytest.raises(AcpError) as unknown:
        client.request("_agentLsp/rewind", {"runId": "r-unknown"})
    assert unknown.value.code == -32602
    with pytest.raises(AcpError):
        client.request("_agentLsp/rewind", {"runId": 5})
    client.close()


def test_prompt_with_embedded_context_and_links(connect, model, workspace: Path):
    model.add("context", [{"text": "seen"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    uri = (workspace / "calc.py").as_uri()
    blocks = [
        {"type": "text", "text": "context: explain"},
        {"type": "resource", "resource": {"uri": uri, "text": "def add(a, b):\n    return a - b\n", "mimeType": "text/x-python"}},
        {"type": "text", "text": "and"},
        {"type": "resource_link", "uri": (workspace / "README.md").as_uri(), "name": "README.md"},
    ]
    assert client.prompt(session_id, blocks)["stopReason"] == "end_turn"
    sent = model.requests_for("context")[0]["messages"][-1]["content"]
    assert sent.startswith("context: explain `calc.py` and `README.md`")
    assert "File: calc.py\n```\ndef add(a, b):\n    return a - b\n\n```" in sent
    assert "File: README.md" in sent
    client.close()


def test_a_workspace_opened_through_a_symlink_names_its_files_as_the_tools_do(connect, model, workspace: Path, tmp_path: Path):
    """Issue 21 item 18: one path mapping. The client's cwd and URIs go through a symlink; the
    prompt names the file as the tools would (`calc.py`), not by an absolute path outside."""
    link = tmp_path / "link-to-workspace"
    link.symlink_to(workspace, target_is_directory=True)
    model.add("through the link", [{"text": "seen"}])
    client = connect(model_settings(model), cwd=link)
    client.initialize()
    session_id = client.new_session(link)
    blocks = [{"type": "text", "text": "through the link: explain"},
              {"type": "resource_link", "uri": (link / "calc.py").as_uri(), "name": "calc.py"}]
    assert client.prompt(session_id, blocks)["stopReason"] == "end_turn"
    sent = model.requests_for("through the link")[0]["messages"][-1]["content"]
    assert sent.startswith("through the link: explain `calc.py`"), sent
    assert "File: calc.py (read it with read_file when needed)" in sent
    client.close()
