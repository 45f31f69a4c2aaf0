"""The server owns the wording (CONTRACT Decision 47): `agentLsp.run {question, textDocument,
range}` builds the selection prompt from the text the server holds (a fence no backtick run in
the selection can close; UTF-16 ranges), `carryOutPlan: true` sends the server's follow-up,
bad combinations are a clear InvalidParams; `agentLsp.health {}` answers the checks `doctor`
prints, starting nothing heavy."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

EDITORS = ["visual-studio-code", "neovim"]


def span(start_line: int, start_char: int, end_line: int, end_char: int) -> dict:
    return {"start": {"line": start_line, "character": start_char}, "end": {"line": end_line, "character": end_char}}


def user_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def quoted(prompt: str) -> str:
    """The body of the prompt's first fenced block, read as CommonMark does: the block ends at
    the first line that is a backtick run at least as long as the opening fence."""
    lines = prompt.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))
    fence = re.match(r"`+", lines[start]).group()
    end = next(i for i in range(start + 1, len(lines)) if re.fullmatch(f"`{{{len(fence)},}}\\s*", lines[i]))
    return "\n".join(lines[start + 1:end])


async def ask(editor, model, question: str, uri: str, rng: dict) -> str:
    model.add(question, [{"text": "an answer"}])
    started = await editor.execute("agentLsp.run", {"question": question, "textDocument": {"uri": uri}, "range": rng})
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done", report
    return user_messages(model.requests[-1])[0]


SELECTION_WITH_FENCE = 'doc = """\n```\nprint("not the end")\n```\n"""'


@pytest.mark.parametrize("caps", EDITORS)
async def test_a_question_about_a_selection_holding_a_fence_is_quoted_whole(open_editor, model, caps):
    editor = await open_editor(caps)
    text = f"x = 1\n{SELECTION_WITH_FENCE}\ny = 2\n"
    uri = editor.open("fenced.py", text)
    prompt = await ask(editor, model, "Why does this docstring hold code?", uri, span(1, 0, 5, 3))

    assert prompt.startswith("Why does this docstring hold code?\n\nSelected text in fenced.py (lines 2-6):\n"), prompt
    assert quoted(prompt) == SELECTION_WITH_FENCE, prompt  # the selection's ``` did not end the block
    assert prompt.rstrip().endswith("````"), prompt
    assert "y = 2" not in prompt and "x = 1" not in prompt


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim", "helix"])
async def test_a_question_range_after_an_emoji_selects_the_right_text(open_editor, model, caps):
    line = "x = '😀'; y = add(1, 2)"
    editor = await open_editor(caps)
    uri = editor.open("emoji.py", f"{line}\nz = 3\n")
    units = {"utf-16": 2, "utf-8": 4, "utf-32": 1}[editor.encoding]  # the emoji's length in the negotiated units
    start = line.index("y") - 1 + units
    prompt = await ask(editor, model, "What does add return here?", uri, span(0, start, 0, start + len("y = add(1, 2)")))
    assert quoted(prompt) == "y = add(1, 2)", prompt
    assert "(line 1)" in prompt


async def test_a_question_reads_the_buffer_not_the_disk_and_an_unopened_file_from_disk(open_editor, model, workspace):
    editor = await open_editor()
    uri = editor.open("calc.py")
    editor.type_into("calc.py", "def add(a, b):\n    return a + b  # typed, not saved\n")
    prompt = await ask(editor, model, "Is add right now?", uri, span(1, 0, 1, 36))
    assert quoted(prompt) == "    return a + b  # typed, not saved", prompt

    on_disk = editor.uri("test_calc.py")  # never opened: read from the file
    prompt = await ask(editor, model, "What does the test check?", on_disk, span(4, 0, 5, 0))
    assert quoted(prompt) == "    assert add(2, 3) == 5", prompt
    assert "Selected text in test_calc.py (line 5)" in prompt


async def test_the_ask_code_action_uses_the_same_wording_and_fence(open_editor, model):
    editor = await open_editor()
    uri = editor.open("fenced.py", f"{SELECTION_WITH_FENCE}\n")
    actions = await asyncio.wait_for(editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=4, character=3)),
        context=types.CodeActionContext(diagnostics=[]))), 10)
    explain = next(a for a in actions if a.title == "Agent: explain")
    prompt = explain.command.arguments[0]["prompt"]
    assert prompt.startswith("Explain what this code does, briefly and exactly.\n\nSelected text in fenced.py (lines 1-5):\n"), prompt
    assert quoted(prompt) == SELECTION_WITH_FENCE, prompt

    model.add("Explain what this code does", [{"text": "a docstring"}])
    started = await editor.execute("agentLsp.run", explain.command.arguments[0])
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    assert user_messages(model.requests[-1])[0] == prompt  # sent as built: the file is not named twice


SIDE_EFFECTS = {"edit_file", "write_file", "run_command"}


async def test_carry_out_plan_sends_the_servers_follow_up_with_every_tool(open_editor, model, workspace):
    model.add("PLAN", [{"text": "1. change add in calc.py"},
                       {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
                       {"text": "done as planned"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    plan = await editor.run("PLAN: fix add", mode="plan")
    plan_report = await editor.wait_stop(plan["runId"])
    assert not SIDE_EFFECTS & {t["function"]["name"] for t in model.requests[0]["tools"]}

    carried = await editor.execute("agentLsp.run", {"carryOutPlan": True, "sessionId": plan["sessionId"]})
    assert carried["sessionId"] == plan["sessionId"]
    report = await editor.wait_stop(carried["runId"])
    assert report["stopReason"] == "done", report
    follow_up = model.requests[1]
    assert user_messages(follow_up)[-1] == "Carry out the plan above."
    assert plan_report["finalText"] in json.dumps(follow_up["messages"])  # the plan is before the model
    assert SIDE_EFFECTS <= {t["function"]["name"] for t in follow_up["tools"]}
    assert "a + b" in (workspace / "calc.py").read_text()
    sessions = await editor.execute("agentLsp.sessions", {})
    assert sessions[0]["title"].startswith("PLAN: fix add")


BAD_RUNS = [
    ({"prompt": "fix it", "question": "why?", "textDocument": {"uri": "@calc"}, "range": span(0, 0, 1, 0)}, "`prompt` and `question`"),
    ({"prompt": "fix it", "carryOutPlan": True, "sessionId": "s-x"}, "`prompt` and `carryOutPlan`"),
    ({"question": "why?", "carryOutPlan": True, "sessionId": "s-x", "textDocument": {"uri": "@calc"}, "range": span(0, 0, 1, 0)},
     "`question` and `carryOutPlan`"),
    ({"question": "why?"}, "needs `textDocument` and `range`"),
    ({"question": "why?", "textDocument": {"uri": "@calc"}}, "needs `textDocument` and `range`"),
    ({"question": "why?", "range": span(0, 0, 1, 0)}, "needs `textDocument` and `range`"),
    ({"question": "  ", "textDocument": {"uri": "@calc"}, "range": span(0, 0, 1, 0)}, "question"),
    ({"question": 42, "textDocument": {"uri": "@calc"}, "range": span(0, 0, 1, 0)}, "question"),
    ({"question": "why?", "textDocument": {"uri": "@calc"}, "range": span(1, 4, 1, 4)}, "selects no text"),
    ({"question": "why?", "textDocument": {"uri": "untitled:never-opened"}, "range": span(0, 0, 1, 0)}, "could not be read"),
    ({"carryOutPlan": True}, "needs the plan's `sessionId`"),
    ({"carryOutPlan": True, "sessionId": "s-x", "mode": "plan"}, "cannot go with `mode: \"plan\"`"),
    ({"carryOutPlan": "yes", "sessionId": "s-x"}, "carryOutPlan"),
    ({"carryOutPlan": False}, "nothing to do"),
    ({}, "give `prompt`"),
]


@pytest.mark.parametrize("caps", EDITORS)
async def test_bad_combinations_are_invalid_params_saying_what_to_send(open_editor, model, caps):
    editor = await open_editor(caps)
    calc = editor.open("calc.py")
    for argument, named in BAD_RUNS:
        argument = json.loads(json.dumps(argument).replace('"@calc"', json.dumps(calc)))
        with pytest.raises(JsonRpcException) as error:
            await editor.execute("agentLsp.run", argument)
        assert error.value.code == -32602, (argument, error.value)
        assert named in str(error.value), (argument, str(error.value))
        assert "Traceback" not in str(error.value)
    assert model.requests == []  # nothing reached the model
    assert await editor.execute("agentLsp.cancel", {"runId": "r-nothing"}) is False  # still answering


def names(report: dict) -> list[str]:
    return [c["name"] for c in report["checks"]]


async def test_health_answers_the_checks_and_says_what_is_wrong(open_editor, model, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_LSP_SETTINGS", str(tmp_path / "absent-settings.json"))
    marker = tmp_path / "mcp-started"
    model.add_model("m")
    editor = await open_editor(init={"mcpServers": {"marker": {"command": "sh", "args": ["-c", f"touch {marker}; sleep 30"]}}})
    assert "agentLsp.health" in editor.server_capabilities.execute_command_provider.commands

    report = await editor.execute("agentLsp.health", {})
    by_name = {c["name"]: c for c in report["checks"]}
    assert names(report)[:6] == ["settings file", "API key", "endpoint", "model", "ripgrep", "sandbox"], report
    assert all(set(c) == {"name", "ok", "detail"} for c in report["checks"])
    assert "absent-settings.json: not found" in by_name["settings file"]["detail"]
    assert by_name["endpoint"]["ok"] and model.base_url in by_name["endpoint"]["detail"]
    assert by_name["model"] == {"name": "model", "ok": True, "detail": "m is served by the endpoint"}
    mcp = by_name["MCP marker (user)"]
    assert mcp["ok"] and "starts with the first run" in mcp["detail"], mcp
    assert report["ok"] is all(c["ok"] for c in report["checks"])
    assert model.requests == []  # no chat request: only GET /models
    await asyncio.sleep(0.5)
    assert not marker.exists(), "the health check started an MCP server"

    # the model the client picked is the one checked
    picked = await editor.execute("agentLsp.health", {"model": "not-served"})
    wrong = {c["name"]: c for c in picked["checks"]}["model"]
    assert picked["ok"] is False and not wrong["ok"] and "not-served is not among the endpoint's models" in wrong["detail"]
    with pytest.raises(JsonRpcException, match="replay"):
        await editor.execute("agentLsp.health", {"model": "replay:/etc/passwd"})


async def test_health_reports_an_unreachable_endpoint_quickly(open_editor, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("AGENT_LSP_SETTINGS", str(tmp_path / "none.json"))
    editor = await open_editor(init={"baseUrl": "http://127.0.0.1:9/v1"})
    began = time.monotonic()
    report = await editor.execute("agentLsp.health", {})
    assert time.monotonic() - began < 9  # inside Emacs's 10 s command timeout
    by_name = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is False
    assert not by_name["endpoint"]["ok"] and "127.0.0.1:9" in by_name["endpoint"]["detail"], by_name["endpoint"]
    assert "model" not in by_name  # cannot be checked without the list


async def test_doctor_prints_the_same_checks_the_server_answers(open_editor, model, workspace, tmp_path, monkeypatch):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "m", "baseUrl": model.base_url, "sandbox": {"mode": "off"}}))
    monkeypatch.setenv("AGENT_LSP_SETTINGS", str(settings))
    model.add_model("m")
    editor = await open_editor(init={"sandbox": {"mode": "off"}})
    served = await editor.execute("agentLsp.health", {})

    def doctor(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace), *extra],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"}, stdin=subprocess.DEVNULL)

    text, as_json = await asyncio.gather(asyncio.to_thread(doctor), asyncio.to_thread(doctor, "--json"))
    assert text.returncode == 0 == as_json.returncode, text.stdout + text.stderr
    printed = json.loads(as_json.stdout)
    assert names(printed) == names(served), (printed, served)
    assert printed["ok"] is served["ok"] is True
    for check in served["checks"]:
        assert f"{check['name']}: {check['detail']}" in text.stdout, (check, text.stdout)
