"""The Neovim chat (`:AgentChat`, issue 34) in a real Neovim 0.11 against the real server and
the scripted model: the chat window above the input, prompts and streamed text in the chat
buffer, an inline approval answered by key, follow-ups in the same session, a steer while the
run runs, :AgentQueue and :AgentStop (Decision 74), :AgentFork on a past prompt, a resumed
session's history, and (in a real terminal) no key the user types is taken by an approval."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_neovim import NVIM, SETUP, model, run, workspace  # noqa: F401 (fixtures)

sys.path.insert(0, str(Path(__file__).parent))
import nvim_harness  # noqa: E402

# Opens the chat (approvals left to its keys) and gives the scenario its windows and helpers.
CHAT = r"""
T.inline = true
local chat = require('agent_lsp.chat')
T.chat = chat
function T.chat_win()
  return vim.fn.win_findbuf(chat.state().chat)[1]
end
function T.input_win()
  return vim.fn.win_findbuf(chat.state().input)[1]
end
--- types `text` into the input window and sends it with `key` (<CR> in normal mode or <C-s>)
function T.send(text, key)
  vim.api.nvim_set_current_win(T.input_win())
  vim.api.nvim_buf_set_lines(chat.state().input, 0, -1, false, vim.split(text, '\n'))
  vim.api.nvim_feedkeys(vim.keycode(key or '<CR>'), 'mx', false)
end
function T.has(text)
  return function() return chat.text():find(text, 1, true) ~= nil end
end
function T.stops()
  local n = 0
  for _, ev in ipairs(T.events) do if ev.kind == 'stop' then n = n + 1 end end
  return n
end
--- presses `key` in the chat window, on the line holding `text` (or where the cursor is)
function T.press_in_chat(key, text)
  vim.api.nvim_set_current_win(T.chat_win())
  if text then
    for i, line in ipairs(T.lines(chat.state().chat)) do
      if line:find(text, 1, true) then vim.api.nvim_win_set_cursor(0, { i, 0 }) end
    end
  end
  vim.api.nvim_feedkeys(vim.keycode(key), 'mx', false)
end
function T.run_args()
  local out = {}
  for _, c in ipairs(T.data.commands) do
    if c.params.command == 'agentLsp.run' then table.insert(out, c.params.arguments[1]) end
  end
  return out
end
vim.cmd('AgentChat')
"""


def commands_named(res, name: str) -> list[dict]:
    return [c for c in res.data["data"]["commands"] if c["params"]["command"] == name]


def test_chat_opens_above_the_input_streams_and_an_approval_is_answered_by_key(tmp_path, workspace, model):
    model.add("Add a module docstring", [
        {"text": "I'll add a module docstring to a.py.",
         "tool_calls": [{"name": "edit_file", "arguments": {
             "path": "a.py", "old_text": "def greet(name):",
             "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}]},
        {"text": "Added the docstring."},
        {"text": "Bye from the same session."},
    ])
    res = run(tmp_path, workspace, model, CHAT + r"""
local chat_win, input_win = T.chat_win(), T.input_win()
T.data.layout = {
  chat_row = vim.api.nvim_win_get_position(chat_win)[1],
  input_row = vim.api.nvim_win_get_position(input_win)[1],
  same_tab = vim.api.nvim_win_get_tabpage(chat_win) == vim.api.nvim_win_get_tabpage(input_win),
  current_is_input = vim.api.nvim_get_current_win() == input_win,
  filetype = vim.bo[chat.state().chat].filetype,
}
T.send('Add a module docstring to a.py')
T.data.input_after_send = T.lines(chat.state().input)
T.wait(T.RUN_MS, T.has('[a]llow [s]ession al[w]ays [d]eny [D]iff'), 'the inline approval')
T.data.at_approval = chat.text()
T.data.windows_at_approval = #vim.api.nvim_tabpage_list_wins(0)
T.data.selects_at_approval = #T.data.selects
-- off the approval, the keys keep their meaning: `w` on the prompt moves a word
T.press_in_chat('w', '## Add a module docstring')
vim.wait(300)
T.data.after_w = { col = vim.api.nvim_win_get_cursor(0)[2], waiting = chat.text():find('→', 1, true) == nil }
T.press_in_chat('a', 'al[w]ays')
T.wait(T.RUN_MS, function() return T.stops() == 1 end, 'the first stop')
T.send('Now say bye', '<C-s>')
T.wait(T.RUN_MS, function() return T.stops() == 2 end, 'the follow-up stop')
T.wait(5000, T.has('Bye from the same session.'), 'the follow-up text')
-- Decision 90: a newer server's kind in the chat's run: nothing shown, nothing broken
require('agent_lsp.handlers').stream(nil, { runId = chat.state().shown_last, seq = 1000,
  kind = 'someFutureKind', text = 'gibberish', futureField = { a = 1 } }, { client_id = T.client.id })
T.data.chat = chat.text()
T.data.run_args = T.run_args()
T.data.file = T.read(os.getenv('NVIM_TEST_WORKSPACE') .. '/a.py')
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    layout = data["layout"]
    # Decision 56: the chat window sits above the input window, in the current tab
    assert layout["same_tab"] and layout["chat_row"] < layout["input_row"], layout
    assert layout["current_is_input"] and layout["filetype"] == "markdown", layout
    assert data["input_after_send"] == [""]
    # the prompt and the streamed text were in the chat while the approval waited, inline,
    # showing what would change; no window opened and no pick was asked for it
    at = data["at_approval"]
    assert "## Add a module docstring to a.py" in at, at
    assert "I'll add a module docstring to a.py." in at, at
    assert "> approval: `edit_file`" in at and "def greet(name):" in at, at
    assert data["selects_at_approval"] == 0 and data["windows_at_approval"] == 3, data
    assert data["after_w"] == {"col": 3, "waiting": True}, data["after_w"]
    # announced in one line (a longer message would wait for Enter and take the next key)
    [notice] = [n["msg"] for n in res.data["notifications"] if n["msg"].startswith("agent-lsp: approve")]
    assert notice.startswith("agent-lsp: approve edit_file a.py?") and "\n" not in notice, notice
    # `a` allowed it: the edit is in the file, the keys line says so
    assert data["file"].startswith('"""Greetings."""'), data["file"]
    assert "→ allowed" in data["chat"], data["chat"]
    assert [e["state"] for e in res.stream_events("approval")] == ["pending", "allowed"]
    # the follow-up ran in the same session, its prompt and answer below the first run's
    first, second = data["run_args"]
    stops = res.stream_events("stop")
    assert second["sessionId"] == stops[0]["report"]["sessionId"] == stops[1]["report"]["sessionId"]
    assert second["prompt"] == "Now say bye"
    chat = data["chat"]
    assert chat.index("Added the docstring.") < chat.index("## Now say bye") < chat.index("Bye from the same session.")
    assert len(model.requests) == 3
    assert "gibberish" not in chat and not chat.endswith("\n\n\n"), chat


def test_a_prompt_sent_while_the_run_runs_steers_it(tmp_path, workspace, model):
    model.add("Check the greeting", [
        {"text": "Running it.", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
        {"text": "Done, with python3 as you said."},
    ])
    res = run(tmp_path, workspace, model, CHAT + r"""
T.send('Check the greeting')
T.wait(T.RUN_MS, T.has('[a]llow'), 'the inline approval')
T.send('use python3', '<C-s>')  -- the run waits for the approval: this steers it
T.wait(5000, function() return #vim.tbl_filter(function(c) return c.params.command == 'agentLsp.steer' end, T.data.commands) > 0 end, 'the steer')
vim.wait(300)
T.press_in_chat('a')
T.wait(T.RUN_MS, function() return T.stops() == 1 end, 'the stop')
T.wait(5000, T.has('Done, with python3'), 'the answer')
T.data.chat = chat.text()
T.data.runs = #T.run_args()
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    [steer] = commands_named(res, "agentLsp.steer")
    assert steer["params"]["arguments"][0]["text"] == "use python3"
    assert data["runs"] == 1  # no second run: the text went to the running one
    chat = data["chat"]
    assert "» use python3" in chat, chat  # where it landed: after the command's result
    assert chat.index("→ allowed") < chat.index("» use python3") < chat.index("Done, with python3")
    assert model.requests[1]["messages"][-1]["content"] == "use python3"


def test_d_denies_with_a_reason_and_shift_d_shows_the_diff(tmp_path, workspace, model):
    model.add("Make the greeting louder", [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "a.py", "old_text": "return message", "new_text": "return message.upper()"}}]},
        {"text": "Understood, leaving it."},
    ])
    res = run(tmp_path, workspace, model, CHAT + r"""
vim.ui.input = function(opts, on_confirm)
  T.data.input_prompt = opts.prompt
  on_confirm('keep it quiet')
end
T.send('Make the greeting louder')
T.wait(T.RUN_MS, T.has('[a]llow'), 'the inline approval')
T.press_in_chat('D', 'al[w]ays')
T.wait(5000, function() return #T.diff_windows() == 1 end, 'the diff window')
T.data.diffs = T.diff_windows()
T.press_in_chat('d', 'al[w]ays')
T.wait(T.RUN_MS, function() return T.stops() == 1 end, 'the stop')
T.data.diffs_after = T.diff_windows()
T.data.chat = chat.text()
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    [diff] = data["diffs"]
    assert "+    return message.upper()" in diff["lines"], diff
    assert data["diffs_after"] == []  # closed with the answer
    assert data["input_prompt"].startswith("Reason for the agent"), data
    assert "→ denied" in data["chat"], data["chat"]
    tool = [m for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    assert "the user's reason: keep it quiet" in tool[-1]["content"], tool
    assert (workspace / "a.py").read_text(encoding="utf-8").count(".upper()") == 0


def test_queue_and_stop_cancel_the_queued_prompts_first(tmp_path, workspace, model):
    model.add("Count slowly", [{"text": "one two three", "ttft": 30}])
    res = run(tmp_path, workspace, model, CHAT + r"""
T.send('Count slowly to three')
T.wait(10000, function() return chat.state().current ~= nil end, 'the run')
T.wait(10000, function()
  for _, p in ipairs(T.progress) do if p.kind == 'begin' then return true end end
end, 'the progress begin')
vim.cmd('AgentQueue then count to four')
vim.cmd('AgentQueue and to five')
T.wait(10000, function() return #chat.state().queued == 2 end, 'two queued prompts')
T.data.queued_text = chat.text()
T.press_in_chat('x', 'and to five')  -- the remove key on a queued prompt
T.wait(10000, T.has('~~queued: and to five~~ removed'), 'the removed line')
vim.cmd('AgentQueue and to six')
T.wait(10000, function() return #chat.state().queued == 3 end, 'the third queued prompt')
vim.cmd('AgentStop')
T.wait(T.RUN_MS, function() return T.stops() == 4 end, 'four stops')
T.wait(5000, T.has('_cancelled_'), 'the cancelled run')
T.data.chat = chat.text()
T.data.queued = chat.state().queued
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    ids = {q["prompt"]: q["run_id"] for q in data["queued"]}
    assert "[x] remove" in data["queued_text"], data["queued_text"]
    queue_args = [c["params"]["arguments"][0] for c in commands_named(res, "agentLsp.run")][1:]
    assert [a.get("queue") for a in queue_args] == [True, True, True], queue_args
    cancels = commands_named(res, "agentLsp.cancel")
    # `x` removed one; :AgentStop then cancelled the queued ones newest first, then the run
    assert [c["params"]["arguments"][0]["runId"] for c in cancels] == [
        ids["and to five"], ids["and to six"], ids["then count to four"]], cancels
    progress_cancel = [n for n in data["notified"] if n["method"] == "window/workDoneProgress/cancel"]
    assert progress_cancel and cancels[-1]["t"] <= progress_cancel[0]["t"], data["notified"]
    assert [s["report"]["stopReason"] for s in res.stream_events("stop")] == ["cancelled"] * 4
    chat = data["chat"]
    for prompt in ("then count to four", "and to five", "and to six"):
        assert f"~~queued: {prompt}~~ removed" in chat, chat
        assert f"## {prompt}" not in chat  # never started
    assert len(model.log) <= 1  # no queued run reached the model


def test_fork_a_past_prompt_then_a_resumed_session_shows_its_history(tmp_path, workspace, model):
    model.add("FIRST question", [
        {"text": "First answer.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "First answer, after reading."},
        {"text": "Second answer."},
        {"text": "Edited answer."},
    ])
    live = run(tmp_path, workspace, model, CHAT + r"""
T.send('FIRST question')
T.wait(T.RUN_MS, function() return T.stops() == 1 end, 'the first stop')
T.send('second question')
T.wait(T.RUN_MS, function() return T.stops() == 2 end, 'the second stop')
T.wait(5000, T.has('_done_\n\n## second question') , 'the second run')
T.wait(5000, function() return chat.text():match('Second answer%.\n\n_done_') ~= nil end, 'its stop line')
T.data.before_fork = chat.text()
T.data.folds = {}
vim.api.nvim_set_current_win(T.chat_win())
for i, line in ipairs(T.lines(chat.state().chat)) do
  T.data.folds[i] = { line = line, closed = vim.fn.foldclosed(i) ~= -1 }
end
local session = chat.state().session
T.data.session = session
T.press_in_chat('<Ignore>', '## second question')
vim.cmd('AgentFork')
T.wait(10000, function() return chat.state().session ~= session and T.lines(chat.state().input)[1] ~= '' end, 'the fork')
T.wait(10000, T.has('First answer, after reading.'), 'the fork history')
T.data.input = T.lines(chat.state().input)
T.data.after_fork = chat.text()
T.data.fork_session = chat.state().session
T.send('second question, edited')
T.wait(T.RUN_MS, function() return T.stops() == 3 end, 'the third stop')
""")
    assert not live.errors, live.explain()
    data = live.data["data"]
    # the tool call and its result are folded (closed); prompts and answers are not
    folds = {f["line"]: f["closed"] for f in data["folds"]}
    assert any(line.startswith("- `read_file`") and closed for line, closed in folds.items()), folds
    assert folds["## second question"] is False and folds["Second answer."] is False, folds
    [fork] = commands_named(live, "agentLsp.fork")
    runs = [e["runId"] for e in live.stream_events("stop")]
    assert fork["params"]["arguments"][0] == {"sessionId": data["session"], "runId": runs[1]}
    assert data["input"] == ["second question"]  # the prompt, ready to be edited
    after = data["after_fork"]
    assert "## FIRST question" in after and "First answer, after reading." in after, after
    assert "second question" not in after and "Second answer." not in after, after
    edited = model.requests[-1]["messages"]
    users = [m["content"] for m in edited if m["role"] == "user"]
    assert users[-1] == "second question, edited" and not any(u == "second question" for u in users), users
    assert live.stream_events("stop")[-1]["report"]["sessionId"] == data["fork_session"] != data["session"]

    # a new Neovim and a new server: :AgentChat {sessionId} renders the session as it was seen
    resumed = run(tmp_path, workspace, model, f"""
vim.cmd('AgentChat {data["session"]}')
T.chat = require('agent_lsp.chat')
T.wait(10000, function() return T.chat.text():find('Second answer.', 1, true) ~= nil end, 'the history')
vim.wait(200)
T.data.chat = T.chat.text()
""")
    assert not resumed.errors, resumed.explain()
    shown = resumed.data["data"]["chat"]
    assert shown.startswith("# FIRST question"), shown
    # the same lines as live, below the session's title
    assert shown.split("\n", 1)[1].strip() == data["before_fork"].strip(), (shown, data["before_fork"])


DUMP = r"""
function _G.chat_dump(path)
  local chat = require('agent_lsp.chat')
  local st = chat.state()
  local out = {
    input = vim.api.nvim_buf_get_lines(st.input, 0, -1, false),
    chat = chat.text(),
    buffer = vim.api.nvim_buf_get_name(0),
    windows = #vim.api.nvim_tabpage_list_wins(0),
  }
  local f = assert(io.open(path, 'w'))
  f:write(vim.json.encode(out))
  f:close()
end
"""


def test_typing_in_the_input_while_an_approval_arrives_loses_no_key(tmp_path, workspace, model):
    """Issue 34, as a user met it: a `:qa!` typed while the approval popped up became a denial
    plus text in the buffer. In a real terminal: the user types into the chat's input while the
    approval arrives; every key stays in the input, the approval still waits, and `a` in the
    chat window answers it."""
    import shutil

    from test_neovim import TERMINAL_SCRIPT

    if not shutil.which("tmux"):
        import pytest

        pytest.skip("tmux not installed")
    model.add("Check the greeting", [
        {"text": "Running it.", "ttft": 2,
         "tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
        {"text": "It printed hi."},
    ])
    script = tmp_path / "terminal.lua"
    script.write_text(TERMINAL_SCRIPT + DUMP, encoding="utf-8")
    env = nvim_harness.editor_env(tmp_path, {"model": "m", "baseUrl": model.base_url})
    term = nvim_harness.TmuxNvim(NVIM, tmp_path, script, cwd=workspace, env=env, cols=124, rows=34)
    dump = tmp_path / "dump.json"
    try:
        assert term.wait_for("a.py", 15), term.screen()
        term.send_keys(":AgentChat", "Enter")
        assert term.wait_for("or <C-s> sends", 30), term.screen()
        term.send_keys("i", "Check the greeting", "Escape", "Enter")
        assert term.wait_for("## Check the greeting", 30), term.screen()
        term.send_keys("i", "hello ")  # the next thought, typed while the run runs
        assert term.wait_for("[a]llow [s]ession al[w]ays [d]eny [D]iff", 40), term.screen()
        term.send_keys("world :qa!")
        assert term.wait_for("hello world :qa!", 10), term.screen()
        screen = term.screen(ansi=True)  # what the user sees: the approval waits, typing goes on
        term.send_keys("Escape", f":lua chat_dump('{dump}')", "Enter")
        assert term.wait_until(lambda _: dump.exists(), 10), term.screen()
        during = json.loads(dump.read_text())
        requests_during = len(model.log)
        dump.unlink()
        term.send_keys("C-w", "k", "a")  # to the chat window above; `a` allows
        assert term.wait_for("It printed hi.", 40), term.screen()
        term.send_keys(f":lua chat_dump('{dump}')", "Enter")
        assert term.wait_until(lambda _: dump.exists(), 10), term.screen()
        after = json.loads(dump.read_text())
    finally:
        term.close()
    # every typed key is in the input; the approval still waited; no window came or went
    assert during["input"] == ["hello world :qa!"], during
    assert during["buffer"] == "agent-lsp://chat-input" and during["windows"] == 3, during
    assert "[a]llow [s]ession al[w]ays [d]eny [D]iff" in during["chat"] and "→ " not in during["chat"]
    assert "echo hi" in during["chat"], during["chat"]  # what would run
    assert requests_during == 1
    # `a` allowed it: the command ran, the run went on
    assert "→ allowed" in after["chat"] and "It printed hi." in after["chat"], after["chat"]
    assert after["input"] == ["hello world :qa!"]
    shot(screen, tmp_path, "screenshot-chat.png")


def shot(ansi: str, tmp_path: Path, name: str) -> None:
    """The screen as a PNG (needs Pillow); AGENT_LSP_UPDATE_SCREENSHOT=1 copies it to the
    plugin's folder for its README."""
    import importlib.util
    import os
    import shutil

    if importlib.util.find_spec("PIL") is None:
        return
    nvim_harness.render_png(ansi, tmp_path / name, cols=124, rows=34)
    assert (tmp_path / name).stat().st_size > 10_000
    if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
        shutil.copy(tmp_path / name, nvim_harness.PLUGIN_DIR / name)


def test_chat_opened_while_a_run_streams_shows_it_once(tmp_path, workspace, model):
    """:AgentRun, then :AgentChat while the reply streams: the chat renders the session's history
    and goes on live, without writing what the history already holds a second time."""
    words = " ".join(f"w{i}" for i in range(300))
    model.add("Count slowly", [{"text": words, "chunk_size": 2, "chunk_delay": 0.01}])
    res = run(tmp_path, workspace, model, r"""
T.inline = true
vim.cmd('AgentRun Count slowly to forty')
T.wait(10000, function()
  for _, ev in ipairs(T.events) do if ev.kind == 'text' then return true end end
end, 'the first text')
vim.cmd('AgentChat')
T.wait(T.RUN_MS, function() return T.stop_event() ~= nil end, 'the stop')
vim.wait(500)
T.data.chat = require('agent_lsp.chat').text()
""")
    assert not res.errors, res.explain()
    chat = res.data["data"]["chat"]
    words = " ".join(f"w{i}" for i in range(300))
    assert chat.count("## Count slowly to forty") == 1, chat
    assert chat.count("w299") == 1 and chat.count("w0 ") == 1, chat
    assert words in chat and chat.count("_done_") == 1, chat


def test_a_run_of_the_session_started_elsewhere_shows_in_the_chat_from_its_start(tmp_path, workspace, model):
    words = " ".join(f"v{i}" for i in range(100))
    model.add("Hello chat", [{"text": "Hi."}, {"text": words, "chunk_size": 3}])
    res = run(tmp_path, workspace, model, CHAT + r"""
T.send('Hello chat')
T.wait(T.RUN_MS, function() return T.stops() == 1 end, 'the first stop')
vim.cmd('wincmd p')
vim.cmd('AgentRun Count for me')  -- the workspace's session: the chat's
T.wait(T.RUN_MS, function() return T.stops() == 2 end, 'the second stop')
vim.wait(300)
T.data.chat = chat.text()
""")
    assert not res.errors, res.explain()
    chat = res.data["data"]["chat"]
    words = " ".join(f"v{i}" for i in range(100))
    assert chat.count("## Count for me") == 1 and chat.count(words) == 1, chat
    assert chat.index("Hi.") < chat.index("## Count for me") < chat.index(words), chat
