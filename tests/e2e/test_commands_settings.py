"""Invalid command arguments, bad settings, the trust boundary and the API key."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

API_KEY = "sk-test-secret-key-1234567890"  # set by tests/conftest.py as OPENAI_API_KEY


async def execute_raw(editor, command: str, arguments):
    return await asyncio.wait_for(editor.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=arguments)), 10)


async def still_answers(editor) -> None:
    assert await editor.execute("agentLsp.cancel", {"runId": "r-nothing"}) is False


INVALID = [
    ("agentLsp.run", None, "exactly one object argument"),
    ("agentLsp.run", [], "exactly one object argument"),
    ("agentLsp.run", [{}], "prompt"),
    ("agentLsp.run", [{"prompt": ""}], "prompt"),
    ("agentLsp.run", [{"prompt": 42}], "prompt"),
    ("agentLsp.run", [{"prompt": "  \n "}], "prompt"),
    ("agentLsp.run", ["fix it"], "exactly one object argument"),
    ("agentLsp.run", [{"prompt": "a"}, {"prompt": "b"}], "exactly one object argument"),
    ("agentLsp.run", [{"prompt": "x", "textDocument": "file:///a.py"}], "textDocument"),
    ("agentLsp.run", [{"prompt": "x", "range": {"start": {"line": -1, "character": 0}}}], "range"),
    ("agentLsp.run", [{"prompt": "x", "sessionId": 7}], "sessionId"),
    ("agentLsp.cancel", [{}], "runId"),
    ("agentLsp.cancel", [{"runId": 3}], "runId"),
    ("agentLsp.approve", [{"runId": "r", "callId": "c", "decision": "yes please"}], "decision"),
    ("agentLsp.approve", [{"runId": "r"}], "callId"),
    ("agentLsp.nope", [{}], "agentLsp.nope"),
]


@pytest.mark.parametrize("caps", ["visual-studio-code"])  # no edit, no position: one path
async def test_invalid_arguments_give_a_clear_error_and_the_server_goes_on(open_editor, caps):
    editor = await open_editor(caps)
    for command, arguments, named in INVALID:
        with pytest.raises(JsonRpcException) as error:
            await execute_raw(editor, command, arguments)
        message = str(error.value)
        assert error.value.code == -32602, (command, arguments, error.value)  # InvalidParams
        assert named in message, (command, arguments, message)
        assert "Traceback" not in message
        await still_answers(editor)
    # well-formed but pointing at nothing: false, not an error
    assert await editor.execute("agentLsp.cancel", {"runId": "r-unknown"}) is False
    assert await editor.execute("agentLsp.approve", {"runId": "r-unknown", "callId": "c", "decision": "allow"}) is False
    advertised = set(editor.server_capabilities.execute_command_provider.commands)
    assert {"agentLsp.run", "agentLsp.sessions", "agentLsp.models", "agentLsp.cancel", "agentLsp.approve"} <= advertised


async def test_a_bad_setting_is_shown_by_name_and_the_default_is_used(open_editor, model):
    model.add("which model", [{"text": "default model"}])
    editor = await open_editor("visual-studio-code", init={"model": ["not", "a", "name"], "maxTurns": 0})
    await editor.wait_for(lambda: len(editor.client.messages) >= 2, 10, "window/showMessage")
    shown = " | ".join(m.message for m in editor.client.messages)
    assert "model" in shown and "maxTurns" in shown and "not" in shown, shown
    assert all(m.type == types.MessageType.Error for m in editor.client.messages)

    started = await editor.run("which model is used")
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done"
    assert model.requests[0]["model"] == "gpt-4.1-mini"  # the default, not the bad value
    status = next(e for e in editor.events(started["runId"], "status"))
    assert "/25" in status["text"]  # maxTurns fell back to its default
    # the same problems are in the editor's log (window/logMessage), as warnings
    logged = [m for m in editor.client.log_messages if "maxTurns" in m.message]
    assert logged and logged[0].type == types.MessageType.Warning


async def test_workspace_configuration_cannot_set_trusted_keys(open_editor, model):
    model.add("make marker", [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "touch should-not-exist"}}]},
        {"text": "asked and denied"},
    ])
    repo_settings = {  # what a cloned repo's settings could feed the server
        "model": "repo-model",  # allowed from workspace/configuration
        "baseUrl": "http://127.0.0.1:9/v1",
        "apiKeyEnv": "HOME",
        "approval": {"default": "allow", "allowCommands": ["touch"], "timeout": 0.01},
    }
    editor = await open_editor("visual-studio-code", configuration=repo_settings)
    await editor.wait_for(lambda: editor.configuration_requests, 10, "workspace/configuration")
    editor.approval_answers = ["Deny"]  # the first run waits for that answer to be merged (Decision 8)
    started = await editor.run("make marker")
    report = await editor.wait_stop(started["runId"])

    assert report["stopReason"] == "done" and report["denied"] == 1
    assert len(editor.approval_requests) == 1  # still asked: approval.* from the repo ignored
    assert model.requests and model.requests[0]["model"] == "repo-model"  # baseUrl ignored, model taken

    # re-read on didChangeConfiguration: still ignored
    editor.client.set_configuration({**repo_settings, "model": "repo-model-2"}, section="agentLsp")
    editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={}))
    model.add("again", [{"tool_calls": [{"name": "run_command", "arguments": {"command": "touch nope"}}]}, {"text": "ok"}])
    editor.approval_answers = ["Deny"]
    await editor.wait_for(lambda: len(editor.configuration_requests) >= 2, 10, "workspace/configuration again")
    for _ in range(250):  # merged: the settings the next run would use name the new model
        if (await editor.execute("agentLsp.models", {}))["current"] == "repo-model-2":
            break
        await asyncio.sleep(0.02)
    again = await editor.run("again")
    assert (await editor.wait_stop(again["runId"]))["denied"] == 1
    assert model.requests[-1]["model"] == "repo-model-2"


async def test_the_api_key_never_reaches_the_editor(open_editor, model):
    model.add("leak test", [
        {"text": "Let me look.", "tool_calls": [
            {"name": "run_command", "arguments": {"command": "printenv OPENAI_API_KEY"}},
            {"name": "read_file", "arguments": {"path": "missing.py"}},
        ]},
        # the model saw the key in the command's output and repeats it, split over deltas
        {"text": f"Your key is {API_KEY}, shall I use it?", "chunk_size": 5,
         "tool_calls": [{"name": "run_command", "arguments": {"command": f"echo {API_KEY}"}}]},
        {"status": 401, "message": "Incorrect API key provided"},
    ])
    # (an unknown key, so that the server logs at least one line to stderr)
    editor = await open_editor("visual-studio-code", init={"approval": {"default": "allow"}, "unknownKey": 1})
    started = await editor.run("leak test")
    report = await editor.wait_stop(started["runId"])
    await editor.wait_progress(started["runId"], types.WorkDoneProgressEnd, 5)
    assert report["stopReason"] == "fatal"  # the 401 stops the run

    seen = {
        "stream": json.dumps(editor.stream),
        "progress": repr(editor.client.progress_reports),
        "log": " ".join(m.message for m in editor.client.log_messages),
        "shown": " ".join(m.message for m in editor.client.messages),
    }
    await asyncio.wait_for(editor.client.shutdown_session(), 10)  # the server's stderr is complete
    seen["stderr"] = "".join(editor.stderr)
    assert "agent-lsp" in seen["stderr"]  # the server's own log lines were captured
    for where, text in seen.items():
        assert API_KEY not in text, f"the API key leaked into {where}"
        assert API_KEY[8:] not in text, f"part of the API key leaked into {where}"


async def test_the_user_settings_file_is_read_again_when_it_changes(open_editor, model, tmp_path, monkeypatch):
    """Issue 21 item 18: like ACP, the server reads the user's settings file again when it
    changed: a run started after the user edited it uses the edit."""
    path = tmp_path / "settings.json"
    path.write_text("{}")
    monkeypatch.setenv("AGENT_LSP_SETTINGS", str(path))
    for prompt in ("before the edit", "after the edit"):
        model.add(prompt, [{"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}, {"text": "read it"}])
    editor = await open_editor()
    first = await editor.wait_stop((await editor.run("before the edit"))["runId"])
    assert first["stopReason"] == "done"

    path.write_text(json.dumps({"maxTurns": 1}))
    second = await editor.wait_stop((await editor.run("after the edit"))["runId"])
    assert second["stopReason"] == "max_turns", second

    path.write_text('{"maxTurns": 1,}')  # broken: shown to the user, and none of it applies
    await editor.execute("agentLsp.models", {})
    await editor.wait_for(lambda: any("settings.json" in m.message for m in editor.client.messages), 10, "the file's problem")
