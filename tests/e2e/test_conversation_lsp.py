"""`agentLsp.history` and `agentLsp.fork` through the real server (issue 34, Decisions 51, 52, 77,
78): a session's runs as the stream showed them, the same after a server restart; a fork whose
next run sends the model exactly the parent's messages before the forked run; the errors."""

from __future__ import annotations

import re

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.harness import start_editor

EDIT = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
READ = {"name": "read_file", "arguments": {"path": "calc.py"}}
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


async def stop(editor, prompt: str, **extra) -> dict:
    started = await editor.run(prompt, **extra)
    return await editor.wait_stop(started["runId"], 20)


async def restart(editor, model, workspace, **init):
    await editor.quit()
    return await start_editor(workspace, "visual-studio-code",
                              init_options={"model": "m", "baseUrl": model.base_url, **init})


def history_of(editor, session_id: str):
    return editor.execute("agentLsp.history", {"sessionId": session_id})


def invalid_params(failed: pytest.ExceptionInfo) -> bool:
    return "-32602" in str(failed.value) or getattr(failed.value, "code", None) == -32602


async def test_history_of_two_runs_is_the_stream_and_the_same_after_a_restart(model, workspace):
    model.add("HIST", [
        {"tool_calls": [{"id": "c-edit", **EDIT}]},
        {"text": "I fixed add so that it adds.", "chunk_size": 3},
        {"tool_calls": [{"id": "c-read", **READ}]},
        {"text": "It now reads a + b.", "chunk_size": 2},
    ])
    editor = await start_editor(workspace, "visual-studio-code", init_options={
        "model": "m", "baseUrl": model.base_url, "approval": {"default": "ask"}})
    editor.approval_answers = ["Allow"]
    first = await stop(editor, "HIST: fix add")
    second = await stop(editor, "and check it", sessionId=first["sessionId"])
    live = await history_of(editor, first["sessionId"])

    assert live["sessionId"] == first["sessionId"] and live["title"] == "HIST: fix add"
    assert [r["runId"] for r in live["runs"]] == [first["runId"], second["runId"]]
    assert [r["prompt"] for r in live["runs"]] == ["HIST: fix add", "and check it"]
    for run, report in zip(live["runs"], (first, second), strict=True):
        assert ISO.fullmatch(run["started"]) and run["stop"] == "done"
        assert run["report"] == report  # the stop's report as the stream sent it
        events = run["events"]
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert not {"usage", "status"} & {e["kind"] for e in events}
        assert events[-1]["kind"] == "stop" and events[-1]["report"] == report
        streamed = editor.events(report["runId"])
        # text coalesced: one event per turn holding all that turn's streamed text
        assert [e["text"] for e in events if e["kind"] == "text"] == [
            "".join(e["text"] for e in streamed if e["kind"] == "text")]
        # every other kept event as the stream sent it, but for seq (and newText)
        kept = [e for e in streamed if e["kind"] not in ("usage", "status", "text")]
        assert [e["kind"] for e in events if e["kind"] != "text"] == [e["kind"] for e in kept]
    kinds = [e["kind"] for e in live["runs"][0]["events"]]
    assert kinds == ["toolCall", "approval", "approval", "toolResult", "text", "stop"]
    pending = live["runs"][0]["events"][1]
    assert pending["state"] == "pending" and "a + b" in pending["diff"] and "newText" not in pending
    assert [e["kind"] for e in live["runs"][1]["events"]] == ["toolCall", "toolResult", "text", "stop"]
    assert "def add" in live["runs"][1]["events"][1]["text"]

    forked = await editor.execute("agentLsp.fork", {"sessionId": first["sessionId"], "runId": second["runId"]})
    fork_live = await history_of(editor, forked["sessionId"])
    assert fork_live["runs"] == [{**live["runs"][0], "forkedFrom": first["sessionId"]}]

    restarted = await restart(editor, model, workspace)
    try:
        assert await history_of(restarted, first["sessionId"]) == live
        assert await history_of(restarted, forked["sessionId"]) == fork_live
    finally:
        await restarted.quit()


async def test_a_fork_continues_from_before_the_run_and_the_parent_is_unchanged(open_editor, model, workspace):
    model.add("FORK", [{"text": "one"}, {"text": "two"}, {"text": "edited three"}, {"text": "parent four"}])
    editor = await open_editor()
    a = await stop(editor, "FORK: first question")
    b = await stop(editor, "second question", sessionId=a["sessionId"])
    parent_before = await history_of(editor, a["sessionId"])
    sent_for_b = model.requests[-1]["messages"]

    forked = await editor.execute("agentLsp.fork", {"sessionId": a["sessionId"], "runId": b["runId"]})
    assert forked["sessionId"] != a["sessionId"]
    listed = {s["sessionId"]: s for s in await editor.execute("agentLsp.sessions", {})}
    assert listed[forked["sessionId"]]["title"] == "FORK: first question (fork)"
    fork_history = await history_of(editor, forked["sessionId"])
    assert fork_history["title"] == "FORK: first question (fork)"
    assert [(r["runId"], r["forkedFrom"]) for r in fork_history["runs"]] == [(a["runId"], a["sessionId"])]
    assert fork_history["runs"][0]["events"] == parent_before["runs"][0]["events"]

    c = await stop(editor, "second question, edited", sessionId=forked["sessionId"])
    assert c["stopReason"] == "done" and c["finalText"] == "edited three"
    sent_for_c = model.requests[-1]["messages"]
    assert sent_for_c[:-1] == sent_for_b[:-1]  # exactly the parent's messages before run b
    assert sent_for_c[-1]["content"] == "second question, edited"

    # the parent is as it was: its history, and what its next run sends
    assert await history_of(editor, a["sessionId"]) == parent_before
    await stop(editor, "third", sessionId=a["sessionId"])
    assert [m["content"] for m in model.requests[-1]["messages"] if m["role"] != "system"] == [
        "FORK: first question", "one", "second question", "two", "third"]


async def test_a_fork_of_the_first_run_is_empty_and_kept(open_editor, model, workspace):
    model.add("EMPTYFORK", [{"text": "one"}])
    model.add("fresh start", [{"text": "fresh"}])
    editor = await open_editor()
    a = await stop(editor, "EMPTYFORK " + "x" * 90)
    forked = await editor.execute("agentLsp.fork", {"sessionId": a["sessionId"], "runId": a["runId"]})
    listed = {s["sessionId"]: s for s in await editor.execute("agentLsp.sessions", {})}
    title = listed[forked["sessionId"]]["title"]
    assert len(title) <= 80 and title.startswith("EMPTYFORK x")  # cut after " (fork)" was added
    assert (await history_of(editor, forked["sessionId"]))["runs"] == []
    c = await stop(editor, "fresh start", sessionId=forked["sessionId"])
    assert c["stopReason"] == "done"
    assert [m["role"] for m in model.requests[-1]["messages"]] == ["system", "user"]


async def test_fork_and_history_errors_are_invalid_params(open_editor, model, workspace):
    model.add("ERRS", [{"text": "one"}])
    model.add("OTHER", [{"text": "other"}])
    editor = await open_editor()
    a = await stop(editor, "ERRS")
    other = await stop(editor, "OTHER")
    bad = [
        ("agentLsp.fork", {"sessionId": "s-doesnotexist", "runId": a["runId"]}, "unknown sessionId"),
        ("agentLsp.fork", {"sessionId": a["sessionId"], "runId": other["runId"]}, "is not a run of"),
        ("agentLsp.fork", {"sessionId": a["sessionId"], "runId": "r-nothing"}, "is not a run of"),
        ("agentLsp.fork", {"sessionId": a["sessionId"]}, "runId"),
        ("agentLsp.fork", {"sessionId": "../etc", "runId": a["runId"]}, "invalid session id"),
        ("agentLsp.history", {"sessionId": "s-doesnotexist"}, "unknown sessionId"),
        ("agentLsp.history", {}, "sessionId"),
    ]
    for command, argument, says in bad:
        with pytest.raises(JsonRpcException) as failed:
            await editor.execute(command, argument)
        assert invalid_params(failed) and says in str(failed.value), (command, argument, failed.value)
    # nothing was made by the refusals
    assert {s["sessionId"] for s in await editor.execute("agentLsp.sessions", {})} == {
        a["sessionId"], other["sessionId"]}


async def test_a_rewound_run_is_not_in_the_history(open_editor, model, workspace):
    model.add("REWOUND", [{"text": "kept"}, {"tool_calls": [EDIT]}, {"text": "edited"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    a = await stop(editor, "REWOUND: keep me")
    b = await stop(editor, "undo me", sessionId=a["sessionId"])
    # a: the text only; b: the edit (so it is rewindable)
    assert not a["editedFiles"] and b["rewindable"] is True
    await editor.execute("agentLsp.rewind", {"runId": b["runId"]})
    history = await history_of(editor, a["sessionId"])
    assert [r["runId"] for r in history["runs"]] == [a["runId"]]


async def test_a_running_session_has_its_history_so_far_and_can_be_forked(open_editor, model, workspace):
    model.add("RUNNING", [{"text": "first answer"}, {"tool_calls": [{"id": "c-cmd", "name": "run_command",
                                                                      "arguments": {"command": "echo hi"}}]},
                          {"text": "never reached"}])
    editor = await open_editor()
    a = await stop(editor, "RUNNING: one")
    editor.approval_answers = ["ignore"]  # the second run waits for its approval
    b = await editor.run("two", sessionId=a["sessionId"])
    await editor.wait_for(lambda: [e for e in editor.events(b["runId"], "approval") if e["state"] == "pending"],
                          what="the pending approval")
    running = (await history_of(editor, a["sessionId"]))["runs"][1]
    assert running["runId"] == b["runId"] and running["stop"] is None and running["report"] is None
    assert [e["kind"] for e in running["events"]] == ["toolCall", "approval"]

    forked = await editor.execute("agentLsp.fork", {"sessionId": a["sessionId"], "runId": b["runId"]})
    assert [r["runId"] for r in (await history_of(editor, forked["sessionId"]))["runs"]] == [a["runId"]]
    assert await editor.execute("agentLsp.cancel", {"runId": b["runId"]}) is True
    assert (await editor.wait_stop(b["runId"]))["stopReason"] == "cancelled"
    assert (await history_of(editor, a["sessionId"]))["runs"][1]["stop"] == "cancelled"


async def test_an_empty_fork_whose_first_run_fails_is_kept(open_editor, model, workspace):
    """A session none of whose runs reached the model is not kept (Decision 46), but a fork has
    history of its own (its base record): a failing first run does not delete it."""
    model.add("KEEPFORK", [{"text": "one"}])
    model.add("fails here", [{"status": 400, "message": "Bad request."}])
    editor = await open_editor()
    a = await stop(editor, "KEEPFORK")
    forked = await editor.execute("agentLsp.fork", {"sessionId": a["sessionId"], "runId": a["runId"]})
    failed = await stop(editor, "fails here", sessionId=forked["sessionId"])
    assert failed["stopReason"] == "fatal"
    listed = {s["sessionId"] for s in await editor.execute("agentLsp.sessions", {})}
    assert forked["sessionId"] in listed
