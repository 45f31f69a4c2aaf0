"""`agentLsp.run {context, images}` over real LSP (issue 34, CONTRACT "Conversation (turn 4)",
Decisions 53, 54, 75): attached files reach the model as the editor's buffers show them, fenced
and headed by their path (and lines), before the prompt in its message; an unreadable or outside
one ends the run `fatal` naming it before any model call and the session goes on; an image
reaches the model as a data URL in the prompt's user message; a bad one is -32602 at the request
and nothing is sent; a model refusing images ends the run `fatal` with its words and the
session's follow-up works."""

from __future__ import annotations

import json

import pytest
from pygls.exceptions import JsonRpcException

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
IMAGE = {"mimeType": "image/png", "data": PNG}


UNSAVED = "def add(a, b):\n    return a + b  # fixed, not saved\n"


def user_contents(request: dict) -> list:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def invalid_params(failed: pytest.ExceptionInfo) -> bool:
    return "-32602" in str(failed.value) or getattr(failed.value, "code", None) == -32602


async def test_an_unsaved_buffer_reaches_the_model_as_context_before_the_prompt(open_editor, model):
    model.add("ctx", [{"text": "seen"}])
    editor = await open_editor()
    uri = editor.open("calc.py")
    editor.type_into("calc.py", UNSAVED)  # the buffer differs from the disk
    started = await editor.run("ctx: is add right?", context=[{"uri": uri}])
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    [content] = user_contents(model.requests_for("ctx")[0])
    assert content == f"calc.py\n```\n{UNSAVED.rstrip()}\n```\n\nctx: is add right?"


async def test_a_range_gives_only_its_lines_headed_path_start_end(open_editor, model, workspace):
    model.add("sel", [{"text": "seen"}])
    editor = await open_editor()
    selection = {"start": {"line": 4, "character": 0}, "end": {"line": 5, "character": 16}}
    started = await editor.run("sel: explain", context=[
        {"uri": editor.uri("calc.py"), "range": selection},  # not open: the disk's text
        {"uri": editor.uri("README.md")},
    ])
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    [content] = user_contents(model.requests_for("sel")[0])
    assert content == ("calc.py:5-6\n```\ndef mul(a, b):\n    return a * b\n```\n\n"
                       "README.md\n```\n# sample\n```\n\nsel: explain")


@pytest.mark.parametrize("bad", [
    [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}}],
    ["calc.py"],
    [{"uri": "file:///x.py", "range": {"start": {"line": 3, "character": 0},
                                       "end": {"line": 1, "character": 0}}}],
    [{"uri": "https://example.com/x.py"}],
    {"uri": "file:///x.py"},
])
async def test_a_context_of_the_wrong_shape_is_refused_at_the_request(open_editor, model, bad):
    editor = await open_editor()
    with pytest.raises(JsonRpcException) as refused:
        await editor.run("ctx: anything", context=bad)
    assert invalid_params(refused)
    assert model.requests == [] and editor.stream == []


@pytest.mark.parametrize("where", ["missing", "outside", "denied"])
async def test_an_unreadable_context_file_ends_fatal_naming_it_and_the_session_goes_on(
        open_editor, model, workspace, where):
    """Missing, outside the workspace, or hidden by a `Read(…)` deny rule (read_file's rules)."""
    model.add("after", [{"text": "fine"}])
    outside = workspace.parent / "secret.txt"
    outside.write_text("a secret\n")
    (workspace / ".env").write_text("TOKEN=a secret\n")
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"permissions": {"deny": ["Read(./.env)"]}}))
    uri, named = {
        "missing": ((workspace / "missing.py").as_uri(), "missing.py"),
        "outside": (outside.as_uri(), str(outside)),
        "denied": ((workspace / ".env").as_uri(), ".env"),
    }[where]
    editor = await open_editor()
    first = await editor.run("ctx: look at this", context=[{"uri": editor.uri("calc.py")}, {"uri": uri}])
    report = await editor.wait_stop(first["runId"])
    assert report["stopReason"] == "fatal"
    assert named in report["error"]
    assert model.requests == []  # before any model call
    follow = await editor.run("after: go on", sessionId=first["sessionId"])
    assert (await editor.wait_stop(follow["runId"]))["finalText"] == "fine"
    # the refused prompt (and its files) are not the conversation's
    assert user_contents(model.requests_for("after")[0]) == ["after: go on"]
    assert "a secret" not in str(model.requests)


async def test_an_image_reaches_the_model_as_a_data_url(open_editor, model):
    model.add("look", [{"text": "a red dot"}])
    editor = await open_editor()
    started = await editor.run("look: what is this?", images=[IMAGE])
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done" and report["finalText"] == "a red dot"
    [content] = user_contents(model.requests_for("look")[0])
    assert content[0] == {"type": "text", "text": "look: what is this?"}
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


@pytest.mark.parametrize("bad", [
    {"mimeType": "image/tiff", "data": PNG},
    {"mimeType": "image/png", "data": "not base64!"},
    {"mimeType": "image/png", "data": "A" * (7 * 1024 * 1024)},
    {"mimeType": "image/png"},
    "a picture",
])
async def test_a_bad_image_is_refused_at_the_request_and_nothing_is_sent(open_editor, model, bad):
    model.add("look", [{"text": "never"}])
    editor = await open_editor()
    with pytest.raises(JsonRpcException) as refused:
        await editor.run("look: and this?", images=[IMAGE, bad])
    assert invalid_params(refused)
    assert "image 2" in str(refused.value)
    assert model.requests == [] and editor.stream == []


async def test_a_model_refusing_images_ends_fatal_and_the_follow_up_works(open_editor, model):
    model.add("vision", [{"status": 400, "message": "this model does not support image input"},
                         {"text": "text works"}])
    editor = await open_editor()
    started = await editor.run("vision: see this", images=[IMAGE])
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "fatal" and report["stopCause"] == "model"
    assert "does not support image input" in str(report)
    follow = await editor.run("vision: then read calc.py", sessionId=started["sessionId"])
    assert (await editor.wait_stop(follow["runId"]))["finalText"] == "text works"
    assert user_contents(model.requests_for("vision")[-1]) == ["vision: then read calc.py"]


async def test_a_queued_runs_context_is_read_when_it_starts(open_editor, model):
    # one conversation key: the session's first user message
    model.add("slow one", [{"text": "never sent", "ttft": 30}, {"text": "seen"}])
    editor = await open_editor()
    uri = editor.open("calc.py")
    first = await editor.run("slow one please")
    await editor.wait_for(lambda: model.log, 10, "the model request")
    queued = await editor.run("queued: check it", sessionId=first["sessionId"], queue=True,
                              context=[{"uri": uri}])
    assert queued["queued"] is True
    editor.type_into("calc.py", UNSAVED)  # typed while the first run runs
    await editor.execute("agentLsp.cancel", {"runId": first["runId"]})
    assert (await editor.wait_stop(queued["runId"]))["stopReason"] == "done"
    assert user_contents(model.requests_for("slow one")[-1])[-1] == (
        f"calc.py\n```\n{UNSAVED.rstrip()}\n```\n\nqueued: check it")
