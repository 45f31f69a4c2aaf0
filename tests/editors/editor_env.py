"""What the real-editor tests share: how a missing editor is handled, and the sample file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import forkserver

# A line with an accented letter and an emoji, so positions in every encoding are exercised.
SAMPLE_A = '''def greet(name):
    message = "héllo 😀 " + name
    return message


print(greet("world"))
'''

# The terminal screenshots' file, and the model's two replies: an edit adding a module
# docstring, then a summary (streamed slowly where the screenshot catches it mid-stream).
SCREENSHOT_SAMPLE = '''def greet(name):
    message = "Hello, " + name
    return message


def farewell(name):
    return "Goodbye, " + name


print(greet("world"))
'''


def screenshot_replies(*, slow_summary: bool = False) -> list[dict]:
    slow = {"chunk_size": 3, "chunk_delay": 0.1} if slow_summary else {}
    return [
        {"text": "I'll add a one-line module docstring at the top of `a.py`.",
         "tool_calls": [{"name": "edit_file", "arguments": {
             "path": "a.py", "old_text": "def greet(name):",
             "new_text": '"""Greetings and farewells."""\n\n\ndef greet(name):'}}],
         "usage": {"prompt_tokens": 31200, "completion_tokens": 60}},
        {"text": "Added a module docstring to `a.py`: a one-line summary, then two blank lines "
                 "before `greet`, as PEP 257 and PEP 8 suggest. Nothing else changed.",
         **slow, "usage": {"prompt_tokens": 31900, "completion_tokens": 40}},
    ]


def agent_lsp_command(*args: str) -> list[str]:
    """The editor's server command, `python -m agent_lsp ARGS`: forked from the tests'
    pre-imported parent when the running test may use it (tests/conftest.py, FORK_EDITOR_FILES),
    so call it inside the test."""
    return forkserver.rewrite([sys.executable, "-m", "agent_lsp", *args])


def require(found: object, what: str, install: str) -> None:
    """A missing editor fails the run in CI (a skip would hide it) and skips elsewhere."""
    if found:
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{what} not found: {install}")
    pytest.skip(f"{what} not found ({install})", allow_module_level=True)


class TmuxTerminal:
    """A program in a detached tmux session of its own (own socket, no user config): what a
    person sees in a terminal, for the screenshots."""

    def __init__(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str], cols: int, rows: int) -> None:
        self.name = name
        self.socket = f"agent-lsp-{name}-{os.getpid()}-{id(self)}"
        self.cols, self.rows = cols, rows
        self.env = env
        # options first, then the session, in one tmux invocation
        self._tmux("-f", "/dev/null", "start-server", ";",
                   "set-option", "-g", "default-terminal", "tmux-256color", ";",
                   "new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows),
                   "-c", str(cwd), "--", *argv)

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, check=True,
                              capture_output=True, text=True, timeout=15).stdout

    def screen(self, ansi: bool = False) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name, *(["-e"] if ansi else []))

    def wait_until(self, pred: Callable[[str], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.screen()):
                return True
            time.sleep(0.1)
        return False

    def wait_for(self, text: str, timeout: float) -> bool:
        return self.wait_until(lambda screen: text in screen, timeout)

    def send_keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], env=self.env,
                       capture_output=True, timeout=15)
