"""When a just-started server has read the workspace (issue 23). A server answers a
workspace-wide request (references, rename, workspace/symbol, call hierarchy) from what it has
read so far: a cold basedpyright answers references from its open files only until it has
enumerated the project, so a rename would change only some uses. Such requests first wait,
bounded, until the server's initial work is over:

- `$/progress` begin/end (we advertise `window.workDoneProgress`): every progress that begins
  before the server is first seen ready (rust-analyzer's indexing, gopls's loading) is waited
  for; later ones (a check after each edit) are not.
- The pyright family (basedpyright, pyright) reports no progress for this; it logs
  "Starting service instance" / "Loading configuration file" when it (re)reads a workspace and
  "Found N source files" / "No source files found." when its file list is complete.
- A server that says nothing (ty, jedi-language-server) is ready GRACE s after `initialized`.

Never a hang: the waits of one server share one budget of INDEX_WAIT s; after it the requests
are answered at once, and `settled()` says the answer may be incomplete."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

log = logging.getLogger(__name__)

INDEX_WAIT = 20.0  # at most, in all, for one server's initial work
GRACE = 0.5  # after `initialized`, for a first progress to begin
QUIET = 0.3  # after the last initial progress ended, for the next one to begin
POLL = 0.05

# the pyright family's log lines around its enumeration of the workspace's files
READING = re.compile(
    r"^(Starting service instance|Loading configuration file|No configuration file found)"
)
READ = re.compile(r"^(Found \d+ source files?|No source files found)")
PYRIGHT = "pyright"  # the pseudo progress token of that enumeration

WORKSPACE_WIDE = frozenset({
    "textDocument/references", "textDocument/rename", "textDocument/prepareRename",
    "workspace/symbol", "textDocument/prepareCallHierarchy", "callHierarchy/incomingCalls",
    "callHierarchy/outgoingCalls",
})  # fmt: skip


class Readiness:
    """What one server has said about its initial work; `settled()` waits for its end."""

    def __init__(self, name: str, clock: Any = time.monotonic):
        self.name = name
        self.clock = clock
        self.started: float | None = None  # when `initialized` was sent
        self.active: set[Any] = set()  # initial progress tokens begun and not ended
        self.changed = 0.0  # when the last initial progress ended
        self.ready = False  # seen ready once: later progress is not waited for
        self.deadline: float | None = None  # the shared budget, from the first wait
        self.waited = 0.0  # seconds spent waiting (for the logs and the tests)

    def initialized(self) -> None:
        self.started = self.clock()

    def progress(self, params: Any) -> None:
        """A `$/progress` notification (JSON)."""
        if self.ready or not isinstance(params, dict):
            return
        value = params.get("value")
        kind = value.get("kind") if isinstance(value, dict) else None
        token = params.get("token")
        if not isinstance(token, (str, int)):
            return
        if kind == "begin":
            self.active.add(token)
        elif kind == "end" and token in self.active:
            self.active.discard(token)
            self.changed = self.clock()

    def logged(self, params: Any) -> None:
        """A `window/logMessage` notification (JSON)."""
        message = params.get("message") if isinstance(params, dict) else None
        if self.ready or not isinstance(message, str):
            return
        if READING.match(message):
            self.active.add(PYRIGHT)
        elif READ.match(message) and PYRIGHT in self.active:
            self.active.discard(PYRIGHT)
            self.changed = self.clock()

    def settled_now(self) -> bool:
        if self.ready:
            return True
        now = self.clock()
        if self.started is None or now - self.started < GRACE:
            return False
        if self.active or now - self.changed < QUIET:
            return False
        self.ready = True
        return True

    async def settled(self) -> bool:
        """Wait (within the shared budget) until the initial work is over; False when the
        budget ran out first (the answer may then miss what the server has not read yet)."""
        if self.settled_now():
            return True
        now = self.clock()
        if self.deadline is None:
            self.deadline = now + INDEX_WAIT
        began, first = now, self.waited == 0.0
        while not self.settled_now():
            if self.clock() >= self.deadline:
                self.waited += self.clock() - began
                (log.warning if first else log.info)(
                    "language server `%s` is still reading the workspace after %g s "
                    "(%s); answering anyway, the answer may be incomplete",
                    self.name, INDEX_WAIT, ", ".join(sorted(map(str, self.active))) or "quiet",
                )  # fmt: skip
                return False
            await asyncio.sleep(POLL)
        self.waited += self.clock() - began
        log.info("language server `%s` ready after waiting %.2f s", self.name, self.waited)
        return True
