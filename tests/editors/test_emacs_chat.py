"""The Emacs chat (`agent-lsp-chat`, issue 34) in a real Emacs with Eglot against the real server
and the scripted model: the conversation buffer (a text-mode, its input at the end), C-c C-c
sending a follow-up in the same session, an approval answered inline by key (never asked in the
minibuffer), a steer while the run runs, and `agent-lsp-fork` on a past prompt."""

from __future__ import annotations

from test_emacs import model, run_emacs, workspace  # noqa: F401 (fixtures)

# Helpers of the scenarios: the chat buffer, typing and sending, pressing a key on a line.
PRELUDE = r"""
(defun c-buffer () (get-buffer "*agent-lsp chat*"))
(defun c-text () (t-buffer-text (c-buffer)))
(defun c-has (text) (lambda () (string-match-p (regexp-quote text) (c-text))))
(defun c-send (text)
  "Type TEXT at the end of the chat and press C-c C-c."
  (switch-to-buffer (c-buffer))
  (goto-char (point-max))
  (insert text)
  (execute-kbd-macro (kbd "C-c C-c")))
(defun c-press (key line)
  "Press KEY on the first line of the chat holding LINE."
  (switch-to-buffer (c-buffer))
  (goto-char (point-min))
  (search-forward line)
  (beginning-of-line)
  (execute-kbd-macro (kbd key)))
(defun c-stops () (length (t-events "stop")))
(defun c-commands (name)
  (seq-filter (lambda (p) (equal (plist-get p :command) name)) t-commands))
(set-buffer t-buffer)
(agent-lsp-chat)
"""


def commands(res, name: str) -> list[dict]:
    return [c for c in res.data["commands"] if c["command"] == name]


def test_chat_buffer_sends_follow_ups_and_answers_an_approval_inline(tmp_path, workspace, model):
    model.add("Add a module docstring", [
        {"text": "I'll add a module docstring to a.py.", "tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "def greet(name):", "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Added the docstring."},
        {"text": "Bye from the same session."},
    ])
    res = run_emacs(tmp_path, workspace, model, PRELUDE + r"""
(with-current-buffer (c-buffer)
  (t-set :text-mode (and (derived-mode-p 'text-mode) t))
  (t-set :binding (format "%s" (key-binding (kbd "C-c C-c")))))
(c-send "Add a module docstring to a.py")
(t-set :input-after-send (with-current-buffer (c-buffer)
                           (buffer-substring-no-properties agent-lsp-chat--input (point-max))))
(t-wait 20 (c-has "[a]llow [s]ession al[w]ays [d]eny [D]iff") "the inline approval")
(t-set :at-approval (c-text))
(c-press "a" "approval: ")
(t-wait 20 (lambda () (= 1 (c-stops))) "the first stop")
(c-send "Now say bye")
(t-wait 20 (lambda () (= 2 (c-stops))) "the follow-up stop")
(t-wait 5 (c-has "Bye from the same session.") "the follow-up's text")
;; Decision 90: a newer server's kind in the chat's run: nothing shown, nothing broken
(agent-lsp--handle-stream
 t-server (list :runId (plist-get (car (last (t-events "stop"))) :runId) :seq 1000
                :kind "someFutureKind" :text "gibberish" :futureField '(:a 1)))
(switch-to-buffer (c-buffer))
(goto-char (point-max))
(insert "draft")
(t-set :chat (c-text))
(t-set :input-at-end (with-current-buffer (c-buffer)
                       (buffer-substring-no-properties agent-lsp-chat--input (point-max))))
(t-set :file (with-temp-buffer (insert-file-contents "a.py") (buffer-string)))
""")
    assert not res.errors, res.explain()
    v = res.values
    assert v["text-mode"] is True and v["binding"] == "agent-lsp-chat-send", v  # Decision 56
    assert v["input-after-send"] == ""
    at = v["at-approval"]
    assert "## Add a module docstring to a.py" in at and "I'll add a module docstring to a.py." in at, at
    assert "approval: edit_file" in at and "def greet(name):" in at, at
    # answered in the chat: never asked in the minibuffer
    assert res.data["prompts"] == [], res.data["prompts"]
    assert v["file"].startswith('"""Greetings."""'), v["file"]
    assert "→ allowed" in v["chat"], v["chat"]
    assert [e["state"] for e in res.events("approval")] == ["pending", "allowed"]
    # the follow-up: the same session, below the first run; the input is the end of the buffer
    runs = [c["arguments"][0] for c in commands(res, "agentLsp.run")]
    assert runs[1]["prompt"] == "Now say bye"
    stops = res.events("stop")
    assert runs[1]["sessionId"] == stops[0]["report"]["sessionId"] == stops[1]["report"]["sessionId"]
    chat = v["chat"]
    assert chat.index("Added the docstring.") < chat.index("## Now say bye") < chat.index("Bye from the same session.")
    assert chat.endswith("(C-c C-c sends) ───\ndraft") and v["input-at-end"] == "draft", chat[-200:]
    assert "gibberish" not in chat


def test_a_message_sent_while_the_run_runs_steers_it(tmp_path, workspace, model):
    model.add("Check the greeting", [
        {"text": "Running it.", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
        {"text": "Done, with python3 as you said."},
    ])
    res = run_emacs(tmp_path, workspace, model, PRELUDE + r"""
(c-send "Check the greeting")
(t-wait 20 (c-has "[Allow]") "the inline approval")
(c-send "use python3")
(t-wait 10 (lambda () (c-commands "agentLsp.steer")) "the steer")
(sleep-for 0.3)
(c-press "a" "[Allow]")
(t-wait 20 (lambda () (= 1 (c-stops))) "the stop")
(t-wait 5 (c-has "Done, with python3") "the answer")
(t-set :chat (c-text))
""")
    assert not res.errors, res.explain()
    [steer] = commands(res, "agentLsp.steer")
    assert steer["arguments"][0]["text"] == "use python3"
    assert len(commands(res, "agentLsp.run")) == 1  # the text went to the running run
    chat = res.values["chat"]
    assert chat.index("→ allowed") < chat.index("» use python3") < chat.index("Done, with python3"), chat
    assert model.requests[1]["messages"][-1]["content"] == "use python3"


def test_fork_on_a_past_prompt_puts_it_in_the_input(tmp_path, workspace, model):
    model.add("FIRST question", [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Edited answer."}])
    res = run_emacs(tmp_path, workspace, model, PRELUDE + r"""
(c-send "FIRST question")
(t-wait 20 (lambda () (= 1 (c-stops))) "the first stop")
(c-send "second question")
(t-wait 20 (lambda () (= 2 (c-stops))) "the second stop")
(t-wait 5 (c-has "Second answer.") "the second answer")
(t-set :session (buffer-local-value 'agent-lsp-chat--session (c-buffer)))
(switch-to-buffer (c-buffer))
(goto-char (point-min))
(search-forward "## second question")
(call-interactively #'agent-lsp-fork)
(t-wait 10 (c-has "First answer.") "the fork's history")
(t-wait 5 (lambda () (string-match-p "second question\\'" (c-text))) "the prompt in the input")
(t-set :after-fork (c-text))
(t-set :fork-session (buffer-local-value 'agent-lsp-chat--session (c-buffer)))
(switch-to-buffer (c-buffer))
(goto-char (point-max))
(insert ", edited")
(execute-kbd-macro (kbd "C-c C-c"))
(t-wait 20 (lambda () (= 3 (c-stops))) "the third stop")
""")
    assert not res.errors, res.explain()
    v = res.values
    [fork] = commands(res, "agentLsp.fork")
    stops = res.events("stop")
    assert fork["arguments"][0] == {"sessionId": v["session"], "runId": stops[1]["runId"]}
    after = v["after-fork"]
    head, _, typed = after.rpartition("(C-c C-c sends) ───\n")
    assert typed == "second question", after  # the old prompt, ready to be edited
    assert "## FIRST question" in head and "First answer." in head, head
    assert "second question" not in head and "Second answer." not in head, head
    assert stops[2]["report"]["sessionId"] == v["fork-session"] != v["session"]
    users = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert users[-1] == "second question, edited" and "second question" not in users, users


def test_a_resumed_session_shows_its_history_as_it_was_seen(tmp_path, workspace, model):
    model.add("FIRST question", [
        {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "First answer, after reading."},
        {"text": "Second answer."},
    ])
    live = run_emacs(tmp_path, workspace, model, PRELUDE + r"""
(c-send "FIRST question")
(t-wait 20 (lambda () (= 1 (c-stops))) "the first stop")
(c-send "second question")
(t-wait 20 (lambda () (= 2 (c-stops))) "the second stop")
(t-wait 5 (lambda () (string-match-p "Second answer\\.\n\n_done_" (c-text))) "its stop line")
(t-set :chat (c-text))
(t-set :session (buffer-local-value 'agent-lsp-chat--session (c-buffer)))
""")
    assert not live.errors, live.explain()
    session = live.values["session"]
    # a new Emacs and a new server: the session's history, rendered as it was shown live
    resumed = run_emacs(tmp_path, workspace, model, rf"""
(set-buffer t-buffer)
(agent-lsp-chat "{session}")
(t-wait 10 (lambda () (string-match-p "Second answer" (t-buffer-text (get-buffer "*agent-lsp chat*"))))
        "the history")
(sleep-for 0.2)
(t-set :chat (t-buffer-text (get-buffer "*agent-lsp chat*")))
""")
    assert not resumed.errors, resumed.explain()
    shown = resumed.values["chat"]
    assert shown.startswith("# FIRST question\n"), shown
    assert shown.split("\n", 1)[1] == live.values["chat"], (shown, live.values["chat"])
    assert resumed.events() == []  # nothing ran: it is the history


def test_stop_cancels_the_queued_prompts_newest_first_then_the_run(tmp_path, workspace, model):
    model.add("Count slowly", [{"text": "one two three", "ttft": 30}])
    res = run_emacs(tmp_path, workspace, model, PRELUDE + r"""
(c-send "Count slowly to three")
(t-wait 10 (lambda () (buffer-local-value 'agent-lsp-chat--current (c-buffer))) "the run")
(switch-to-buffer (c-buffer))
(goto-char (point-max)) (insert "then to four") (execute-kbd-macro (kbd "C-c C-q"))
(goto-char (point-max)) (insert "and to five") (execute-kbd-macro (kbd "C-c C-q"))
(t-wait 10 (lambda () (= 2 (length (buffer-local-value 'agent-lsp-chat--queued (c-buffer)))))
        "two queued prompts")
(t-set :queued (mapcar (lambda (q) (list (plist-get q :prompt) (plist-get q :runId)))
                       (buffer-local-value 'agent-lsp-chat--queued (c-buffer))))
(execute-kbd-macro (kbd "C-c C-k"))
(t-wait 20 (lambda () (= 3 (c-stops))) "three stops")
(t-wait 5 (c-has "_cancelled_") "the cancelled run")
(t-set :chat (c-text))
""")
    assert not res.errors, res.explain()
    ids = dict(res.values["queued"])
    first = [c["arguments"][0] for c in commands(res, "agentLsp.run")]
    assert [a.get("queue") for a in first[1:]] == [True, True], first
    running = next(e["runId"] for e in res.events() if e["runId"] not in ids.values())
    cancelled = [c["arguments"][0]["runId"] for c in commands(res, "agentLsp.cancel")]
    assert cancelled == [ids["and to five"], ids["then to four"], running], (cancelled, ids)
    assert [e["report"]["stopReason"] for e in res.events("stop")] == ["cancelled"] * 3
    chat = res.values["chat"]
    assert "queued: then to four (removed)" in chat and "queued: and to five (removed)" in chat, chat
    assert "## then to four" not in chat and "## and to five" not in chat


def test_in_a_terminal_typing_goes_on_while_an_approval_waits_in_the_chat(tmp_path, workspace, model):
    """As a user in `emacs -nw`: M-x agent-lsp-chat, a prompt sent with C-c C-c, then typing the
    next message while the approval arrives. The keys stay in the input (no minibuffer prompt
    takes them), the approval waits in the chat; `a` on it allows, and the run goes on."""
    import json
    import os
    import shutil

    import pytest
    from editor_env import agent_lsp_command
    from test_emacs import CLIENT_DIR, TERMINAL_INIT, TmuxEmacs

    if not shutil.which("tmux"):
        pytest.skip("tmux not installed")
    model.add("Check the greeting", [
        {"text": "Running it.", "ttft": 2,
         "tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
        {"text": "It printed hi."},
    ])
    init = tmp_path / "terminal.el"
    init.write_text(TERMINAL_INIT, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_LSP_", "OPENAI_", "XDG_", "EMACS", "TMUX"))}
    env.update({
        "HOME": str(home), "OPENAI_API_KEY": "test", "AGENT_LSP_STATE_DIR": str(tmp_path / "agent-state"),
        "EMACS_TEST_CLIENT": str(CLIENT_DIR), "EMACS_TEST_FILE": str(workspace / "a.py"),
        "EMACS_TEST_COMMAND": json.dumps(agent_lsp_command("serve", "--stdio")),
        "EMACS_TEST_SETTINGS": json.dumps({"model": "m", "baseUrl": model.base_url}),
    })
    term = TmuxEmacs(init, cwd=workspace, env=env, cols=124, rows=40)
    try:
        assert term.wait_for("[eglot:ws]", 30), term.screen()
        term.send_keys("M-x")
        term.send_keys("agent-lsp-chat", "Enter")
        assert term.wait_for("your message (C-c C-c sends)", 20), term.screen()
        term.send_keys("Check the greeting", "C-c", "C-c")
        assert term.wait_for("## Check the greeting", 20), term.screen()
        term.send_keys("hello ")  # the next message, typed while the run runs
        assert term.wait_for("[a]llow [s]ession al[w]ays [d]eny [D]iff", 40), term.screen()
        term.send_keys("world")
        assert term.wait_for("hello world", 10), term.screen()
        during = term.screen()
        requests_during = len(model.log)
        term.send_keys("C-r")
        term.send_keys("[Allow]", "Enter", "a")  # to the approval's button; `a` allows
        assert term.wait_for("It printed hi.", 40), term.screen()
        after = term.screen()
    finally:
        term.close()
    assert "RET = Allow" not in during and "Choose" not in during, during  # no minibuffer prompt
    assert "echo hi" in during and "→ " not in during, during  # what would run, still waiting
    assert requests_during == 1
    assert "→ allowed" in after and after.rstrip().count("hello world") == 1, after


def test_d_denies_with_a_reason_and_shift_d_shows_the_diff(tmp_path, workspace, model):
    model.add("Make the greeting louder", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "return message", "new_text": "return message.upper()"}}]},
        {"text": "Understood, leaving it."},
    ])
    res = run_emacs(tmp_path, workspace, model, PRELUDE + r"""
(setq t-reason-answer "keep it quiet")
(c-send "Make the greeting louder")
(t-wait 20 (c-has "[Allow]") "the inline approval")
(c-press "D" "approval: ")
(t-wait 5 (lambda () (get-buffer-window "*agent-lsp diff*" t)) "the diff window")
(t-set :diff (t-buffer-text (get-buffer "*agent-lsp diff*")))
(c-press "d" "approval: ")
(t-wait 20 (lambda () (= 1 (c-stops))) "the stop")
(t-set :chat (c-text))
""")
    assert not res.errors, res.explain()
    assert "+    return message.upper()" in res.values["diff"], res.values["diff"]
    assert "→ denied" in res.values["chat"], res.values["chat"]
    tool = [m for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    assert "the user's reason: keep it quiet" in tool[-1]["content"], tool
    assert ".upper()" not in (workspace / "a.py").read_text(encoding="utf-8")
    assert res.data["prompts"][-1]["prompt"].startswith("[agent-lsp] Why deny?"), res.data["prompts"]


def test_chat_opened_while_a_run_streams_shows_it_once(tmp_path, workspace, model):
    """agent-lsp-run, then agent-lsp-chat while the reply streams: the session's history, then
    live, with nothing written twice."""
    words = " ".join(f"w{i}" for i in range(300))
    model.add("Count slowly", [{"text": words, "chunk_size": 2, "chunk_delay": 0.01}])
    res = run_emacs(tmp_path, workspace, model, r"""
(set-buffer t-buffer)
(agent-lsp-run "Count slowly to three hundred")
(t-wait 10 (lambda () (t-events "text")) "the first text")
(agent-lsp-chat)
(t-wait 20 #'t-stop-event "the stop")
(sleep-for 0.5)
(t-set :chat (t-buffer-text (get-buffer "*agent-lsp chat*")))
""")
    assert not res.errors, res.explain()
    chat = res.values["chat"]
    assert chat.count("## Count slowly to three hundred") == 1, chat
    assert words in chat and chat.count("w299") == 1 and chat.count("_done_") == 1, chat
