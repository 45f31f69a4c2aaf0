"""Code actions: ask / explain / fix on a selection, the quick fix on a diagnostic; each runs
`agentLsp.run` with the uri, the range and the selected text (or the diagnostic) in the prompt."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

EDITORS = ["visual-studio-code", "neovim"]


def span(start_line: int, start_char: int, end_line: int, end_char: int) -> types.Range:
    return types.Range(start=types.Position(line=start_line, character=start_char),
                       end=types.Position(line=end_line, character=end_char))


async def code_actions(editor, uri: str, rng: types.Range, diagnostics=()) -> list[types.CodeAction]:
    return list(await asyncio.wait_for(editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng,
        context=types.CodeActionContext(diagnostics=list(diagnostics)))), 10) or [])


async def execute(editor, command: types.Command):
    return await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command.command, arguments=list(command.arguments or []))), 10)


def first_user_message(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


@pytest.mark.parametrize("caps", EDITORS)
async def test_selection_offers_ask_explain_fix_with_the_selected_text(open_editor, model, caps):
    editor = await open_editor(caps)
    uri = editor.open("calc.py")
    selection = span(0, 0, 1, 16)  # "def add(a, b):\n    return a - b"
    actions = await code_actions(editor, uri, selection)

    titles = [a.title for a in actions]
    assert titles == ["Ask agent about selection", "Agent: explain", "Agent: fix"], titles
    for index, action in enumerate(actions):
        assert action.command.command == "agentLsp.run"
        [argument] = action.command.arguments
        assert "def add(a, b):\n    return a - b" in argument["prompt"]
        assert argument["textDocument"] == {"uri": uri}
        assert argument["range"] == {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 16}}
        assert argument.get("ask", False) is (index == 0)  # only "Ask" makes our clients ask first

    assert await code_actions(editor, uri, span(1, 4, 1, 4)) == []  # an empty range: nothing to offer

    model.add("Explain what this code does", [{"text": "It adds. Well, it should."}])
    started = await execute(editor, actions[1].command)
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done"
    prompt = first_user_message(model.requests[-1])
    assert "return a - b" in prompt and "calc.py" in prompt


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim", "helix"])
async def test_selection_inside_a_line_after_an_emoji(open_editor, caps):
    line = "x = '😀'; y = add(1, 2)"
    editor = await open_editor(caps)
    uri = editor.open("emoji.py", f"{line}\n")
    units = {"utf-16": 2, "utf-8": 4, "utf-32": 1}[editor.encoding]  # how long the emoji is
    start = line.index("y") - 1 + units
    actions = await code_actions(editor, uri, span(0, start, 0, start + len("y = add(1, 2)")))
    assert actions, "no code actions for the selection"
    prompt = actions[0].command.arguments[0]["prompt"]
    assert "(line 1):\n```python\ny = add(1, 2)\n```" in prompt, prompt


@pytest.mark.parametrize("caps", EDITORS)
async def test_quick_fix_on_a_diagnostic_carries_its_message(open_editor, model, caps):
    editor = await open_editor(caps)
    uri = editor.open("test_calc.py")
    problem = types.Diagnostic(range=span(4, 11, 4, 20), message="assert add(2, 3) == 5 failed: got -1",
                               severity=types.DiagnosticSeverity.Error, source="pytest")
    actions = await code_actions(editor, uri, span(4, 11, 4, 11), [problem])

    [fix] = [a for a in actions if a.kind == types.CodeActionKind.QuickFix]
    assert fix.title == "Agent: fix this problem"
    assert fix.diagnostics and fix.diagnostics[0].message == problem.message
    [argument] = fix.command.arguments
    assert fix.command.command == "agentLsp.run"
    assert problem.message in argument["prompt"]
    assert argument["textDocument"] == {"uri": uri}
    assert argument["range"] == {"start": {"line": 4, "character": 11}, "end": {"line": 4, "character": 20}}

    model.add("Fix this problem", [{"text": "The bug is in calc.add."}])
    started = await execute(editor, fix.command)
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done"
    prompt = first_user_message(model.requests[-1])
    assert problem.message in prompt and "test_calc.py" in prompt


async def test_selection_in_an_untitled_buffer(open_editor, model):
    editor = await open_editor("visual-studio-code")
    uri = "untitled:Untitled-1"
    editor.buffers[uri] = (1, "print(1 +)\n")
    editor.client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text="print(1 +)\n")))
    actions = await code_actions(editor, uri, span(0, 0, 0, 10))
    explain = next(a for a in actions if a.title == "Agent: explain")
    model.add("Explain what this code does", [{"text": "A syntax error."}])
    started = await execute(editor, explain.command)
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    prompt = first_user_message(model.requests[-1])
    assert "print(1 +)" in prompt and uri in prompt and "None" not in prompt, prompt
