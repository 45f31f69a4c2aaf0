"""Issue 34, the VS Code chat view in a real VS Code (code-server): Markdown streamed into the
webview, a follow-up in the same session, an approval answered in the view, a steer while a
run runs, and Stop (CONTRACT "Conversation (turn 4)", Decisions 56, 74, 79)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import beside

sys.path.insert(0, str(Path(__file__).parent))
import test_vscode as vs  # noqa: E402

pytestmark = vs.pytestmark

TASKS: dict[str, str] = {
    "configuredModel": "scripted",
    "chatFirst": "Show me a bold word and a snippet",
    "chatBold": "really bold",
    "chatSecond": "And now say goodbye",
    "chatSecondAnswer": "Goodbye from the same session.",
    "chatEdit": "Fix add in calc.py from the chat",
    "chatSlow": "Count slowly to forty in the chat",
    "chatSlowStart": "one two",
    "chatSteerText": "stop at ten please",
    "chatSteered": "Stopped at ten, as you said.",
    "chatHang": "Think forever in the chat",
    "chatQueueSlow": "Count slowly to forty, then take the queue",
    "chatQueued1": "first queued: say queued",
    "chatQueued2": "second queued: never sent",
    "chatQueuedAnswer": "Queued one answered.",
    "chatForked": "And now say hello instead",
    "chatForkedAnswer": "Hello from the fork.",
    "chatHidden": "Change mul in calc.py while the chat is hidden",
    "chatHiddenReason": "leave mul alone, asked in the chat",
    "chatAttach": "What do these attachments hold?",
    "chatStopQueued": "Think forever, with a queue behind",
    "chatKinds": "Answer as a newer server would in the chat",
    "chatKindsFinal": "Chat kinds checked.",
    "chatHunks": "Tidy chathunks.txt from the chat",
    "chatHunksBefore": "".join(f"line {i}\n" for i in range(1, 61)),
}
FIRST_ANSWER = (
    f"Here is a **{TASKS['chatBold']}** word.\n\n```python\nprint('snippet')\n```\n\n"
    "<script>alert(1)</script> and a [link](command:workbench.action.quit); "
    "[the docs](https://example.com/docs)\n"
)


def script(model: Any) -> None:
    k = TASKS
    model.add(k["chatFirst"], [
        {"text": FIRST_ANSWER, "chunk_size": 8, "chunk_delay": 0.02},
        {"text": k["chatSecondAnswer"]},
        # chatEdit continues the same session (its first prompt is still chatFirst)
        {"text": "Fixing `add`.", "tool_calls": [vs.edit("calc.py", "return a - b", "return a + b")]},
        {"text": "Fixed add."},
        {"text": k["chatForkedAnswer"]},  # the fork (chatForkAndResume)
    ])
    slow = " ".join(["one", "two"] + ["and"] * 80)
    model.add(k["chatSlow"], [
        {"text": slow, "chunk_size": 4, "chunk_delay": 0.15},  # ~8 s of streaming
        {"text": k["chatSteered"]},
    ])
    model.add(k["chatQueueSlow"], [
        {"text": slow, "chunk_size": 4, "chunk_delay": 0.15},
        {"text": k["chatQueuedAnswer"]},
    ])
    model.add(k["chatHidden"], [
        {"text": "Changing.", "tool_calls": [vs.edit("calc.py", "return a * b", "return a ** b")]},
        {"text": "Left mul alone."},
    ])
    model.add(k["chatAttach"], [{"text": "A function, a title and a dot."}])
    model.add(k["chatStopQueued"], [{"text": "too late", "ttft": 60}])
    model.add(k["chatKinds"], [{"text": k["chatKindsFinal"]}])
    hunks_after = (k["chatHunksBefore"].replace("line 5\n", "LINE FIVE\n")
                   .replace("line 40\n", "forty\nforty-one\n").replace("line 55\n", ""))
    model.add(k["chatHunks"], [
        {"text": "Tidying.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "chathunks.txt", "content": hunks_after}}]},
        {"text": "Tidied."},
    ])
    model.add(k["chatHang"], [{"text": "too late", "ttft": 60}, {"text": "too late", "ttft": 60}])


def play(tmp: Path, vsix: Path) -> dict[str, Any]:
    """The chat scenarios in one window (tests/beside.py may play this beside the tests)."""
    wrapper = tmp / "agent-lsp"
    # this checkout's server, behind the pipe that plays a newer server for one run
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(vs.REPO))} exec '
                       f'{shlex.quote(sys.executable)} {shlex.quote(str(vs.HERE / "newer_server.py"))} '
                       f'{shlex.quote(TASKS["chatKindsFinal"])} "$@"\n')
    wrapper.chmod(0o755)
    env = {"AGENT_LSP_SERVER": str(wrapper),
           "AGENT_LSP_SCENARIOS": "chatMarkdownAndFollowUp,chatApproval,chatHunks,chatSteer,chatStop,chatQueue,chatForkAndResume,chatHiddenApproval,chatAttach,chatStopQueued,chatRewind,chatUnknownKinds",
           "AGENT_LSP_TASKS": json.dumps(TASKS)}
    return vs.play_driver(tmp, vsix, script, env, list(TASKS.values()), 1200, {"chat.png": "chat.png"})


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The session played beside the tests from the run's start (tests/beside.py), or here."""
    found = (beside.result("vscode-chat", 1200)
             or play(tmp_path_factory.mktemp("vscode-chat"), vs.vsix_folder(tmp_path_factory)))
    session = vs.Session.of(found)
    return {"result": session.result, "requests": session.requests,
            "leftovers": session.result["leftovers"], "stderr": session.stderr}


def scenario(chat: dict[str, Any], name: str) -> dict[str, Any]:
    result = chat["result"]
    found = result["scenarios"].get(name)
    assert found is not None, f"{name} did not run: {result.get('error')}\n{chat['stderr'][-3000:]}"
    assert "error" not in found, f"{name}: {found['error']}\nlog: {result.get('serverLog', '')[-3000:]}"
    return found


def user_texts(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


def test_chat_renders_streamed_markdown_and_follows_up_in_the_same_session(chat):
    s = scenario(chat, "chatMarkdownAndFollowUp")
    assert s["placeholder"].startswith("Ask"), s["placeholder"]
    assert "print('snippet')" in s["codeText"] and s["copyButtons"] >= 1
    # html: false: the model's <script> is text, not markup; the command: link is not a link
    assert s["rawHtmlShown"] == 0
    assert "<script>alert(1)</script>" in s["log"], s["log"]
    # a web link is opened by the extension only after a confirmation (Cancelled here)
    assert "open https://example.com/docs?" in s["linkDialog"], s["linkDialog"]
    assert s["prompts"] == [TASKS["chatFirst"], TASKS["chatSecond"]]
    assert re.fullmatch(r"ctx \d+k/128k", s["meter"]), s["meter"]  # the context meter (usage events)
    first, follow_up = chat["requests"][TASKS["chatFirst"]][:2]
    # the follow-up ran in the same session: the model saw the first prompt and its answer
    assert user_texts(follow_up)[-1] == TASKS["chatSecond"]
    assert TASKS["chatFirst"] in user_texts(follow_up)[0]
    assert TASKS["chatBold"] in json.dumps(follow_up["messages"])
    assert len(user_texts(first)) == 1
    assert TASKS["chatFirst"] in s["sessionsPick"] and "current" in s["sessionsPick"], s["sessionsPick"]


def test_chat_answers_an_approval_with_its_own_allow_button(chat):
    s = scenario(chat, "chatApproval")
    assert [b.strip() for b in s["buttons"]][:4] == ["Allow", "Allow for session", "Always allow", "Deny"], s
    assert "Show diff" in [b.strip() for b in s["buttons"]]
    assert "edit_file" in s["approvalText"] or "calc.py" in s["approvalText"], s["approvalText"]
    assert s["toastsWhileVisible"] == 0  # Decision 79: asked in the view, no notification
    assert "return a + b" in s["fileOnDisk"]
    assert any("edit_file" in e and "ok" in e for e in s["toolEntries"]), s["toolEntries"]
    edit_requests = chat["requests"][TASKS["chatFirst"]][2:4]
    assert len(edit_requests) == 2 and user_texts(edit_requests[0])[-1] == TASKS["chatEdit"]


def test_chat_rejects_one_hunk_of_three_inline_then_allow_applies_the_others(chat):
    """Issue 35: the approval card shows the edit's three hunks (headers, coloured lines, text
    only); hunk 2 rejected with its keyboard-reachable toggle; hunk 3 rejected in the diff editor
    shows in the card and is kept again there; Allow: hunks 1 and 3 land and the model's next
    request says hunk 2 was rejected."""
    s = scenario(chat, "chatHunks")
    assert len(s["headers"]) == 3 and all(h.startswith("@@ -") for h in s["headers"]), s["headers"]
    assert s["added"] == ["+LINE FIVE", "+forty", "+forty-one"], s["added"]
    assert s["removed"] == ["-line 5", "-line 40", "-line 55"], s["removed"]
    assert s["addedBackground"] not in ("", "rgba(0, 0, 0, 0)"), s["addedBackground"]
    assert s["toggles"] == ["Reject", "Reject", "Reject"], s["toggles"]
    assert s["focusStays"] is True  # Enter on the toggle leaves the focus on it
    assert s["reasonKept"] == "a draft reason"  # the redrawn card keeps what was typed
    assert s["states"] == ["kept", "rejected", "kept"], s["states"]
    assert "2 of 3" in s["summary"], s["summary"]
    # one choice in two places: hunk 3 rejected in the diff editor shows in the card
    assert s["statesAfterDiff"] == ["kept", "rejected", "rejected"], s["statesAfterDiff"]
    after = s["fileAfter"]
    assert "LINE FIVE" in after and "line 40\n" in after and "forty" not in after
    assert "line 55\n" not in after
    assert s["settledStates"] == ["kept", "rejected", "kept"] and s["settledToggles"] == 0, s
    result = vs.tool_results(chat["requests"][TASKS["chatHunks"]][1])
    assert "the user rejected hunk 2 of 3" in result, result


def test_chat_steers_a_running_run(chat):
    s = scenario(chat, "chatSteer")
    assert s["stopEnabled"] is True
    assert f"» {TASKS['chatSteerText']}" in s["log"]
    second = chat["requests"][TASKS["chatSlow"]][1]
    assert user_texts(second)[-1] == TASKS["chatSteerText"], user_texts(second)


def test_chat_stop_says_cancelled(chat):
    s = scenario(chat, "chatStop")
    assert s["log"].count("■ cancelled") == 2, s["log"]
    assert s["editorFocused"] is True  # Escape when idle: back to the editor


def test_chat_queues_shows_removes_and_runs_the_queued_prompt_next(chat):
    """Decision 74: queued prompts are shown each with Remove; a removed one never reaches the
    model; the other runs after the running run, in the same session."""
    s = scenario(chat, "chatQueue")
    assert [t.split("Remove")[0].strip() for t in s["queuedTexts"]] == [
        f"queued: {TASKS['chatQueued1']}", f"queued: {TASKS['chatQueued2']}"], s["queuedTexts"]
    assert s["prompts"] == [TASKS["chatQueueSlow"], TASKS["chatQueued1"]] and s["queueAfter"] == 0
    requests = chat["requests"][TASKS["chatQueueSlow"]]
    assert len(requests) == 2 and user_texts(requests[1])[-1] == TASKS["chatQueued1"]
    assert TASKS["chatQueued2"] not in json.dumps([r["messages"] for r in requests])


def test_chat_resumes_a_session_from_its_history_and_forks_an_earlier_prompt(chat):
    s = scenario(chat, "chatForkAndResume")
    assert s["resumedPrompts"] == [TASKS["chatFirst"], TASKS["chatSecond"], TASKS["chatEdit"]]
    assert "■ done" in s["resumedLog"] and "edit_file" in s["resumedLog"]
    # the fork holds the history before the edited prompt's run; the old session stays
    assert s["forkPrompts"] == [TASKS["chatFirst"]], s["forkPrompts"]
    assert s["afterPrompts"] == [TASKS["chatFirst"], TASKS["chatForked"]]
    forked = chat["requests"][TASKS["chatFirst"]][4]
    assert user_texts(forked)[-1] == TASKS["chatForked"]
    assert TASKS["chatSecond"] not in json.dumps(forked["messages"])
    assert TASKS["chatBold"] in json.dumps(forked["messages"])


def test_chat_hidden_approval_notifies_with_open_chat_then_is_answered_in_the_view(chat):
    """Decision 79: the view hidden, the notification offers "Open chat"; there, Deny with a
    typed reason answers the server's request (the model is told the reason), all from the
    keyboard."""
    s = scenario(chat, "chatHiddenApproval")
    buttons = [b.strip() for b in s["toastButtons"]]
    assert buttons[:4] == ["Allow", "Allow for session", "Always allow", "Deny"] and "Open chat" in buttons
    assert s["toastsAfter"] == 0
    assert s["focusedButton"] == "Deny"  # answered with the keyboard only
    second = chat["requests"][TASKS["chatHidden"]][1]
    assert f"the user's reason: {TASKS['chatHiddenReason']}" in vs.tool_results(second)


def test_chat_attaches_a_selection_a_file_and_a_pasted_image(chat):
    s = scenario(chat, "chatAttach")
    chips = " ".join(s["chips"])
    assert "calc.py:1-" in chips and "README.md" in chips and "image: dot.png" in chips, s["chips"]
    assert s["chipsAfter"] == 0  # sent with that message, gone from the next
    request = chat["requests"][TASKS["chatAttach"]][0]
    user = [m for m in request["messages"] if m["role"] == "user"][-1]
    dumped = json.dumps(user)
    assert "calc.py:1-" in dumped and "def add(a, b):" in dumped, dumped[:2000]
    assert "README.md" in dumped and "# sample" in dumped, dumped[:2000]
    assert "data:image/png;base64,iVBORw0KGgo" in dumped, dumped[:2000]
    assert TASKS["chatAttach"] in dumped


def test_chat_stop_removes_the_queued_prompts_then_cancels_the_run(chat):
    s = scenario(chat, "chatStopQueued")
    assert s["prompts"] == [TASKS["chatStopQueued"]]  # the queued ones never entered the session
    requests = chat["requests"][TASKS["chatStopQueued"]]
    assert len(requests) == 1 and "queued A" not in json.dumps(requests)


def test_chat_rewind_to_here_puts_the_files_back_and_drops_the_run(chat):
    s = scenario(chat, "chatRewind")
    assert "return a - b" in s["fileOnDisk"] and "return a + b" not in s["fileOnDisk"]
    assert s["prompts"] == [TASKS["chatFirst"], TASKS["chatSecond"]], s["prompts"]


def test_chat_ignores_unknown_stream_kinds_and_report_fields(chat):
    """Decision 90: a newer server's kind and report fields draw nothing; its steer reads as
    the user's words; the run ends as usual."""
    s = scenario(chat, "chatUnknownKinds")
    assert "» use tabs" in s["log"] and TASKS["chatKindsFinal"] in s["log"] and "■ done" in s["log"], s["log"]
    assert "gibberish" not in s["log"] and "someFutureKind" not in s["log"] and "futureField" not in s["log"]


def test_chat_leaves_no_processes(chat):
    assert chat["leftovers"] == [] and chat["result"]["orphans"] == []
