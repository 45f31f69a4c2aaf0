"""`agentLsp.run {images}` over real LSP (issue 34, CONTRACT "Conversation (turn 4)", Decisions
54, 75): an image reaches the model as a data URL in the prompt's user message; a bad one is
-32602 at the request and nothing is sent; a model refusing images ends the run `fatal` with its
words and the session's follow-up works."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcException

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
IMAGE = {"mimeType": "image/png", "data": PNG}


def user_contents(request: dict) -> list:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


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
    assert "-32602" in str(refused.value) or getattr(refused.value, "code", None) == -32602
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
