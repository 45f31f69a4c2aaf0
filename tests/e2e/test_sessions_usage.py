"""Sessions, usage and control (issue 14) through the real server: a session resumed after a
restart, the sessions list, usage events with cost, models, plan mode and carrying it out, and
the bad inputs (unknown, foreign or corrupt sessions, a model the endpoint rejects, bad pricing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.e2e.harness import start_editor

SIDE_EFFECTS = {"edit_file", "write_file", "run_command", "remember"}
BACKGROUND = {"process_output", "stop_process"}  # once the main agent started one; never in plan mode


async def stop(editor, prompt: str, timeout: float = 20, **extra) -> dict:
    started = await editor.run(prompt, **extra)
    return await editor.wait_stop(started["runId"], timeout)


async def restart(editor, model, workspace, **init) -> object:
    await editor.quit()
    assert editor.process.returncode == 0, "the server did not exit cleanly on shutdown + exit"
    return await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url, **init})


async def close(editor) -> None:
    await editor.quit()


async def test_a_session_resumes_after_a_server_restart(model, workspace):
    model.add("GOAL-ONE", [{"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}}]},
                           {"text": "add subtracts"}, {"text": "second answer"}])
    first = await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    report = await stop(first, "GOAL-ONE: what is wrong with add?")
    second = await restart(first, model, workspace)
    try:
        resumed = await second.run("and how do I fix it?", sessionId=report["sessionId"])
        assert resumed["sessionId"] == report["sessionId"]
        await second.wait_stop(resumed["runId"])
        sent = model.requests[-1]["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert sent[1]["content"] == "GOAL-ONE: what is wrong with add?" and "def add" in sent[3]["content"]
        assert sent[-1]["content"] == "and how do I fix it?"
    finally:
        await close(second)


async def test_sessions_are_listed_newest_first_for_this_workspace(open_editor, model, workspace, tmp_path):
    long_prompt = "first session " + "x" * 100
    model.add("first session", [{"text": "one", "repeat": 2}])
    model.add("second session", [{"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "n"}}]}, {"text": "two"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    one = await stop(editor, long_prompt)
    await stop(editor, "again", sessionId=one["sessionId"])
    two = await stop(editor, "second session")
    other_ws = tmp_path / "elsewhere"
    other_ws.mkdir()
    model.add("other workspace", [{"text": "x"}])
    other = await start_editor(other_ws, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    try:
        await stop(other, "other workspace")
    finally:
        await close(other)

    items = await editor.execute("agentLsp.sessions", {})

    assert [i["sessionId"] for i in items] == [two["sessionId"], one["sessionId"]]
    newest, oldest = items
    assert oldest["title"] == long_prompt[:79] + "…" and oldest["runs"] == 2 and oldest["lastStop"] == "done"
    assert newest["editedFiles"] == [(workspace / "n.txt").resolve().as_uri()]
    for item in items:
        assert item["created"].endswith("Z") and "T" in item["updated"]
    with pytest.raises(JsonRpcException, match="another workspace|unknown sessionId"):
        await editor.run("hijack", sessionId=(await other_sessions(other_ws, model))[0])


async def other_sessions(root: Path, model) -> list[str]:
    editor = await start_editor(root, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    try:
        return [i["sessionId"] for i in await editor.execute("agentLsp.sessions", {})]
    finally:
        await close(editor)


async def test_usage_events_and_cost(open_editor, model, workspace):
    usage = {"prompt_tokens": 2000, "completion_tokens": 100, "cached_tokens": 1500}
    model.add("cost", [{"tool_calls": [{"name": "list_files", "arguments": {}}], "usage": usage}, {"text": "ok", "usage": usage}])
    editor = await open_editor(init={"pricing": {"m": {"inputPerMTok": 2.0, "outputPerMTok": 8.0, "cachedInputPerMTok": 0.5}},
                                     "contextWindow": 50000})
    started = await editor.run("cost please")
    report = await editor.wait_stop(started["runId"])

    events = editor.events(started["runId"], "usage")
    assert len(events) == 2
    one_call = ((2000 - 1500) * 2.0 + 1500 * 0.5 + 100 * 8.0) / 1e6
    assert events[0]["costUsd"] == pytest.approx(one_call) and events[-1]["costUsd"] == pytest.approx(2 * one_call)
    assert events[-1]["promptTokens"] == 4000 and events[-1]["cachedTokens"] == 3000 and events[-1]["completionTokens"] == 200
    assert events[-1]["contextTokens"] == 2000 and events[-1]["contextWindow"] == 50000
    assert events[-1]["text"] == "ctx 2k/50k · $0.005"
    assert report["usage"] == {"promptTokens": 4000, "completionTokens": 200, "cachedTokens": 3000, "costUsd": pytest.approx(2 * one_call)}
    assert report["contextTokens"] == 2000 and report["contextWindow"] == 50000
    reports = [p.message for p in editor.progress(started["runId"]) if isinstance(p, types.WorkDoneProgressReport)]
    assert any(m.endswith("· ctx 2k/50k · $0.003") for m in reports), reports


async def test_an_endpoints_own_cost_wins(open_editor, model):
    model.add("own cost", [{"text": "ok", "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.25}}])
    editor = await open_editor(init={"pricing": {"m": {"inputPerMTok": 1000, "outputPerMTok": 1000}}})
    report = await stop(editor, "own cost")
    assert report["usage"]["costUsd"] == 0.25


async def test_models_are_listed_from_the_endpoint(open_editor, model):
    editor = await open_editor()
    found = await editor.execute("agentLsp.models", {})
    assert found["current"] == "m" and "scripted" in found["models"] and "error" not in found


async def test_an_unreachable_endpoint_says_so(open_editor):
    editor = await open_editor(init={"baseUrl": "http://127.0.0.1:9/v1"})
    found = await editor.execute("agentLsp.models", {})
    assert found["models"] == [] and "127.0.0.1:9" in found["error"] and "connect" in found["error"]


async def test_a_run_can_pick_its_model_for_the_rest_of_its_session(open_editor, model):
    model.add("pick", [{"text": "a", "repeat": 3}])
    editor = await open_editor()
    first = await stop(editor, "pick a model", model="other-model")
    await stop(editor, "follow up", sessionId=first["sessionId"])
    await stop(editor, "pick: a new session")
    assert [r["model"] for r in model.requests] == ["other-model", "other-model", "m"]
    with pytest.raises(JsonRpcException, match="replay"):
        await editor.run("no", model="replay:/etc/passwd")
    with pytest.raises(JsonRpcException, match="mode"):
        await editor.run("no", mode="yolo")


async def test_plan_mode_offers_no_side_effects_then_carry_out_has_them(open_editor, model, workspace):
    model.add("PLAN", [{"text": "1. change add in calc.py\n2. run the tests"},
                       {"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
                       {"text": "done as planned"}])
    editor = await open_editor(init={"approval": {"default": "allow"}})
    plan = await stop(editor, "PLAN: fix add", mode="plan")
    tools = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert tools.isdisjoint(SIDE_EFFECTS | BACKGROUND) and {"read_file", "search", "list_files", "delegate"} <= tools
    assert "numbered plan" in model.requests[0]["messages"][0]["content"]
    assert plan["finalText"].startswith("1. change add")
    carried = await stop(editor, "Carry out the plan above.", sessionId=plan["sessionId"])
    carry_tools = {t["function"]["name"] for t in model.requests[1]["tools"]}
    # the process tools wait for a background process (none started here)
    assert SIDE_EFFECTS <= carry_tools and carry_tools.isdisjoint(BACKGROUND)
    assert carried["stopReason"] == "done" and "a + b" in (workspace / "calc.py").read_text()


async def test_bad_session_input(open_editor, model, workspace, state_dir):
    editor = await open_editor()
    with pytest.raises(JsonRpcException, match="unknown sessionId"):
        await editor.run("x", sessionId="s-doesnotexist")
    model.add("corrupt", [{"text": "ok"}])
    report = await stop(editor, "corrupt me")
    transcript = Path(report["transcript"])
    lines = transcript.read_text().splitlines()
    transcript.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    restarted = await restart(editor, model, workspace)
    try:
        with pytest.raises(JsonRpcException) as failed:
            await restarted.run("resume", sessionId=report["sessionId"])
        assert str(transcript) in str(failed.value) and "corrupt" in str(failed.value)
        assert transcript.exists(), "the corrupt transcript is kept"
    finally:
        await close(restarted)


async def test_a_transcript_cut_mid_line_resumes_without_it(model, workspace):
    model.add("cut line", [{"text": "first"}, {"text": "second"}])
    editor = await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    report = await stop(editor, "cut line")
    transcript = Path(report["transcript"])
    transcript.write_text(transcript.read_text() + '{"ts": 1, "runId": "x", "type": "histo')
    second = await restart(editor, model, workspace)
    try:
        resumed = await second.run("go on", sessionId=report["sessionId"])
        assert (await second.wait_stop(resumed["runId"]))["stopReason"] == "done"
    finally:
        await close(second)


async def test_a_model_the_endpoint_rejects_is_a_clear_stop(open_editor, model):
    model.add("reject", [{"status": 404, "message": "The model `nope` does not exist"}])
    editor = await open_editor()
    report = await stop(editor, "reject me", model="nope")
    assert report["stopReason"] == "fatal" and "404" in report["error"] and "does not exist" in report["error"]


async def test_pricing_with_wrong_types_is_shown_and_ignored(open_editor, model):
    model.add("price", [{"text": "ok"}])
    editor = await open_editor(init={"pricing": {"m": {"inputPerMTok": "cheap", "outputPerMTok": 1}}})
    report = await stop(editor, "price")
    assert report["stopReason"] == "done" and "costUsd" not in report["usage"]
    shown = [m.message for m in editor.client.messages]
    assert any("pricing.m.inputPerMTok" in m and "cheap" in m for m in shown), shown


def test_sessions_cli_and_unknown_session_exit_2(model, workspace):
    import subprocess
    import sys

    base = [sys.executable, "-m", "agent_lsp"]
    proc = subprocess.run([*base, "run", "x", "--session", "s-nope", "--base-url", model.base_url, "--model", "m",
                           "--workspace", str(workspace)], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "unknown sessionId" in proc.stderr
    model.add("cli session", [{"text": "one"}, {"text": "two"}])
    first = subprocess.run([*base, "run", "cli session", "--base-url", model.base_url, "--model", "m", "--workspace", str(workspace), "--json"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    session = json.loads(first.stdout)["sessionId"]
    again = subprocess.run([*base, "run", "more", "--session", session, "--base-url", model.base_url, "--model", "m",
                            "--workspace", str(workspace), "--json"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert json.loads(again.stdout)["sessionId"] == session
    assert [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"] == ["cli session", "more"]
    listed = subprocess.run([*base, "sessions", "--workspace", str(workspace), "--json"], capture_output=True, text=True, timeout=30)
    items = json.loads(listed.stdout)
    assert items[0]["sessionId"] == session and items[0]["runs"] == 2
