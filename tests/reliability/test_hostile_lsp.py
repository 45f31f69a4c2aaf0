"""Issue 10.7, 10.8, 10.17 over the real LSP surface: the API key on every client-facing surface,
approvals that cannot hide what runs, a textDocument outside the workspace, and the first run
racing the workspace's settings."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.unit.kit import API_KEY

pytestmark = pytest.mark.timeout(60)


def command_call(command: str, call_id: str = "call_x") -> dict:
    return {"tool_calls": [{"id": call_id, "name": "run_command", "arguments": {"command": command}}]}


async def test_the_key_appears_on_no_surface(open_editor, model, workspace, state_dir):
    """10.7: approval prompts, the waiting status, progress, spill files and logs."""
    (workspace / "leak.sh").write_text(f"echo {API_KEY}\n" * 3000)
    model.add("leak", [command_call(f"sh leak.sh # {API_KEY}", "c1"), {"text": "done"}])
    editor = await open_editor(init={"toolOutputLimit": 500, "approval": {"default": "ask"}})
    editor.approval_answers = ["Allow"]
    started = await editor.run("leak it")
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done"
    assert editor.approval_requests and API_KEY not in editor.approval_requests[0].message
    assert API_KEY not in json.dumps(editor.stream)
    assert "[redacted]" in json.dumps(editor.stream)
    progress = json.dumps([str(p) for p in editor.progress(started["runId"])])
    assert API_KEY not in progress
    spills = [p for p in state_dir.rglob("*.txt") if "spill" in str(p)]
    assert spills and all(API_KEY not in p.read_text() for p in spills)
    # Checkpoint blobs are exact private copies of workspace files (a rewind restores them byte
    # for byte), and leak.sh itself holds the key; every other state file is clean.
    assert all(API_KEY not in p.read_text(errors="replace") for p in state_dir.rglob("*")
               if p.is_file() and "blobs" not in p.parts)
    assert API_KEY not in "".join(editor.stderr)


@pytest.mark.parametrize("command", [
    "git status\ntouch hidden",
    "git status" + " " * 200 + "; touch hidden",
    "git status \u202e; touch hidden",
    "git status\u200b; touch hidden",
    "echo " + "x" * 200,
])
async def test_an_approval_code_action_never_offers_allow_for_what_it_cannot_show(open_editor, model, workspace, command):
    """10.8 / Decision 12 (the Helix path)."""
    model.add("hide", [command_call(command), {"text": "ok"}])
    editor = await open_editor("helix")
    started = await editor.run("hide a command")
    await editor.wait_for(lambda: [e for e in editor.events(started["runId"], "approval") if e["state"] == "pending"], 15, "pending")
    uri = editor.open("calc.py")
    actions = await asyncio.wait_for(editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=types.Position(line=0, character=0),
                                                                                  end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[]))), 10)
    titles = [a.title for a in actions if a.title.startswith("Agent approval")]
    assert any("show the full command" in t for t in titles)
    allows = [t for t in titles if t.startswith("Agent approval: Allow")]
    for title in titles:
        assert "\n" not in title and "\u202e" not in title and "\u200b" not in title
    if allows:  # only when the whole command fits in the title
        assert all(len(t) <= 200 for t in allows)
        shown = allows[0].split(" — ", 1)[1]
        assert "touch" not in command or "touch hidden" in shown
    else:
        assert [t for t in titles if "Deny" in t], "Deny is always offered"
    pending = [e for e in editor.events(started["runId"], "approval") if e["state"] == "pending"][0]
    assert "\n" not in pending["detail"].splitlines()[0] and "\u202e" not in pending["detail"]
    await editor.execute("agentLsp.approve", {"runId": started["runId"], "callId": pending["callId"], "decision": "deny"})
    await editor.wait_stop(started["runId"])
    assert not (workspace / "hidden").exists()


async def test_a_text_document_outside_the_workspace_starts_no_run(open_editor, model, tmp_path):
    """10.17 / Decision 8: the file is never read into the prompt."""
    outside = tmp_path / "outside-secret.py"
    outside.write_text("OUTSIDE-SECRET = 1\n")
    editor = await open_editor()
    with pytest.raises(JsonRpcException) as failed:
        await editor.run("explain", textDocument={"uri": outside.as_uri()},
                         range={"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}})
    assert "outside the workspace" in str(failed.value)
    await asyncio.sleep(0.2)
    assert model.requests == [] and editor.stream == []


async def test_the_first_run_waits_for_the_workspace_settings(open_editor, model):
    """10.17 / Decision 8: a run that arrives before workspace/configuration is answered uses
    the workspace's settings, not the defaults."""
    model.add([{"text": "ok", "repeat": 2}])
    editor = await open_editor(configuration={"maxTurns": 1, "model": "workspace-model"})
    started = await editor.run("right away")
    await editor.wait_stop(started["runId"])
    assert model.requests[0]["model"] == "workspace-model"
