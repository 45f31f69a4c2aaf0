"""`agent-lsp chat` in a real pseudo-terminal (CONTRACT "Conversation (turn 4)", Decision 55): a
follow-up in the same session, Markdown rendered, an approval answered on the input line, an
unknown slash command that sends nothing, Ctrl-C that cancels the run and not the chat, Ctrl-D
that leaves, and no terminal at all."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(120)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\r")
WAIT = 45.0


class Terminal:
    """The chat on a pty of 100x30: what it wrote (escapes taken out), and typing into it. The
    terminal answers prompt_toolkit's cursor position requests as a real one does."""

    def __init__(self, argv: list[str], cwd: Path):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "NO_COLOR": "1", "COLUMNS": "100"}
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.raw = b""
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            if b"\x1b[6n" in chunk:  # where is the cursor? (a real terminal answers)
                os.write(self.master, b"\x1b[1;1R")
            with self.lock:
                self.raw += chunk

    @property
    def text(self) -> str:
        with self.lock:
            return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def expect(self, pattern: str, after: int = 0, timeout: float = WAIT) -> int:
        """Wait until `pattern` (a regex) shows after text position `after`; its end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text[after:])
            if found:
                return after + found.end()
            if self.proc.poll() is not None:
                time.sleep(0.2)
                found = re.search(pattern, self.text[after:])
                if found:
                    return after + found.end()
                break
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} never showed; the screen had:\n{self.text[after:]}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait(self, timeout: float = WAIT) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def chat(model, workspace):
    opened: list[Terminal] = []

    def start(*extra: str) -> Terminal:
        argv = [sys.executable, "-m", "agent_lsp", "chat", "--workspace", str(workspace),
                "--base-url", model.base_url, "--model", "m", *extra]
        terminal = Terminal(argv, workspace)
        opened.append(terminal)
        terminal.expect("Ctrl-D leaves")
        return terminal

    yield start
    for terminal in opened:
        terminal.close()


def test_a_follow_up_continues_the_session_and_markdown_is_rendered(chat, model):
    # the scripted model keys a conversation by its first prompt: both runs take this queue
    model.add("first question", [
        {"text": "The **answer**:\n\n- one item\n- two items\n\nDone."}, {"text": "Still here."},
    ])
    term = chat()
    term.type("first question\r")
    at = term.expect(r"• one item")  # rich's bullet: the Markdown was rendered, not echoed
    assert "**answer**" not in term.text[at - 200:at]
    at = term.expect(r"Done: 1 turn", at)
    term.type("and a follow-up\r")
    term.expect(r"Still here\.", at)
    follow_up = model.requests_for("first question")[1]["messages"]
    said = [m.get("content") for m in follow_up if m["role"] in ("user", "assistant")]
    assert any("first question" in str(c) for c in said) and any("two items" in str(c) for c in said)
    assert "and a follow-up" in str(said[-1])
    term.type("\x04")  # Ctrl-D at an empty prompt
    assert term.wait() == 0


def test_an_approval_is_answered_on_the_input_line(chat, model, workspace):
    model.add("make a file", [
        tools_reply(call("run_command", command=f"{sys.executable} -c \"open('made.txt','w').write('x')\"")),
        {"text": "Made it."},
    ])
    term = chat()
    term.type("make a file\r")
    at = term.expect(r"\[a\]llow")
    assert not (workspace / "made.txt").exists()
    term.type("a\r")
    term.expect(r"Made it\.", at)
    assert (workspace / "made.txt").read_text() == "x"
    term.type("\x04")
    assert term.wait() == 0


def test_an_unknown_slash_command_sends_nothing(chat, model):
    term = chat()
    term.type("/nosuchthing please\r")
    term.expect(r"/nosuchthing is not a known command")
    assert model.requests == []
    term.type("\x03")  # Ctrl-C at an empty prompt leaves
    assert term.wait() == 0


def test_ctrl_c_cancels_the_run_and_the_chat_goes_on(chat, model):
    model.add("slow one", [{"text": "too late", "ttft": 60}, {"text": "Back again."}])
    term = chat()
    term.type("slow one\r")
    at = term.expect(r"asking the model")
    deadline = time.monotonic() + WAIT
    while not model.log and time.monotonic() < deadline:  # the request is at the model
        time.sleep(0.05)
    term.type("\x03")
    at = term.expect(r"(?i)cancel", at)
    term.type("after that\r")
    term.expect(r"Back again\.", at)
    assert term.proc.poll() is None  # still chatting
    term.type("\x04")
    assert term.wait() == 0


def test_without_a_terminal_it_says_to_use_run(model, workspace):
    proc = subprocess.run(
        [sys.executable, "-m", "agent_lsp", "chat", "--workspace", str(workspace), "--base-url", model.base_url],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "agent-lsp run" in proc.stderr and "Traceback" not in proc.stderr


def test_run_loads_neither_prompt_toolkit_nor_rich():
    probe = (
        "import sys, agent_lsp.cli, agent_lsp.terminal.run; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('prompt_toolkit', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_line_typed_while_the_run_runs_steers_it(chat, model):
    model.add("look at calc", [
        tools_reply(call("read_file", path="calc.py"), ttft=8),  # the user types meanwhile
        {"text": "Steered."},
    ])
    term = chat()
    term.type("look at calc\r")
    term.expect(r"asking the model")
    deadline = time.monotonic() + WAIT
    while not model.log and time.monotonic() < deadline:
        time.sleep(0.05)
    term.type("and mind the sign\r")
    at = term.expect(r"» and mind the sign")  # where it landed: after the tool's result
    term.expect(r"Steered\.", at)
    second = model.requests_for("look at calc")[1]["messages"]
    assert second[-1]["role"] == "user" and "and mind the sign" in str(second[-1]["content"])
    assert second[-2]["role"] == "tool"  # never between a tool call and its result
    assert len(model.requests_for("look at calc")) == 2  # no model call added
    term.type("\x04")
    assert term.wait() == 0


def test_a_resumed_session_shows_its_past_as_it_was_shown(chat, model, state_dir):
    model.add("first question", [
        tools_reply(call("read_file", path="calc.py")),
        {"text": "Read it:\n\n- calc has add\n"},
        {"text": "Continued."},
    ])
    term = chat()
    term.type("first question\r")
    term.expect(r"Done: 2 turns")
    session_id = re.search(r"session (s-[0-9a-f]+)", term.text).group(1)
    term.type("\x04")
    assert term.wait() == 0

    again = chat("--session", session_id)
    shown = again.text
    past = shown.index("first question")
    assert re.search(r"▸ .*calc\.py", shown[past:]) and "• calc has add" in shown[past:]
    assert "Done: 2 turns" in shown[past:]
    again.type("and then\r")
    again.expect(r"Continued\.")
    again.type("\x04")
    assert again.wait() == 0
