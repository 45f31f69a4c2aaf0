"""The test side of tests/acp/client.mjs: a real ACP client (the official TypeScript SDK's, in
node) driving `agent-lsp acp` as a subprocess, scripted from Python with a timeout on every wait."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import forkserver

CLIENT = Path(__file__).with_name("client.mjs")
AGENT_ARGV = [sys.executable, "-m", "agent_lsp", "acp"]
WAIT = 30.0


class AcpError(Exception):
    def __init__(self, error: dict[str, Any]):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class AcpClient:
    def __init__(self, sdk: Path, cwd: Path, work: Path, settings: dict[str, Any] | None = None,
                 env: dict[str, str] | None = None):
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.settings_file = work / f"settings-{id(self)}.json"
        self.settings_file.write_text(json.dumps(settings or {}))
        self.wire = work / f"wire-{id(self)}.log"
        self.stderr_path = work / f"stderr-{id(self)}.log"
        full_env = {**os.environ, "ACP_SDK": str(sdk), "ACP_AGENT": json.dumps(forkserver.rewrite(AGENT_ARGV)), "ACP_CWD": str(cwd),
                    "ACP_WIRE": str(self.wire), "AGENT_LSP_SETTINGS": str(self.settings_file), **(env or {})}
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(["node", str(CLIENT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=full_env, cwd=str(cwd))
        self.closed = False
        self.events: list[dict[str, Any]] = []
        self.times: list[float] = []
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(lambda e: e["type"] == "ready", what="the client to connect")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"type": "garbage", "line": line.decode(errors="replace")}
            with self._cond:
                self.events.append(event)
                self.times.append(time.monotonic())
                self._cond.notify_all()
        with self._cond:
            self.events.append({"type": "eof"})
            self.times.append(time.monotonic())
            self._cond.notify_all()

    def _send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    # -- waiting -------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT, what: str = "an event",
                 start: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events[start:]:
                    if predicate(event):
                        return event
                    if event["type"] in ("eof", "fatal"):
                        raise AssertionError(f"waiting for {what}: the client ended ({event}); agent stderr:\n{self.stderr()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout} s; events: {self.events[-10:]}\nagent stderr:\n{self.stderr()}")
                self._cond.wait(left)

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-6000:]

    # -- requests --------------------------------------------------------------------------
    def send(self, method: str, params: Any) -> int:
        request_id = next(self._ids)
        self._send({"op": "request", "id": request_id, "method": method, "params": params})
        return request_id

    def response(self, request_id: int, timeout: float = WAIT) -> Any:
        event = self.wait_for(lambda e: e["type"] in ("response", "error") and e.get("id") == request_id, timeout,
                              f"the answer to request {request_id}")
        if event["type"] == "error":
            raise AcpError(event["error"])
        return event["result"]

    def request(self, method: str, params: Any, timeout: float = WAIT) -> Any:
        return self.response(self.send(method, params), timeout)

    def notify(self, method: str, params: Any) -> None:
        self._send({"op": "notify", "method": method, "params": params})

    def permissions(self, *answers: str, otherwise: str = "allow") -> None:
        self._send({"op": "permissions", "answers": list(answers), "otherwise": otherwise})

    def answer(self, key: int, response: dict[str, Any]) -> None:
        self._send({"op": "answer", "key": key, "response": response})

    # -- the usual steps ---------------------------------------------------------------------
    def initialize(self, fs: bool = True) -> dict[str, Any]:
        return self.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": "agent-lsp-tests", "version": "1"},
                                           "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": False}})

    def new_session(self, cwd: Path, mcp_servers: list[Any] | None = None) -> str:
        return self.request("session/new", {"cwd": str(cwd), "mcpServers": mcp_servers or []})["sessionId"]

    def prompt(self, session_id: str, text: str | list[dict[str, Any]], timeout: float = WAIT) -> dict[str, Any]:
        blocks = [{"type": "text", "text": text}] if isinstance(text, str) else text
        return self.request("session/prompt", {"sessionId": session_id, "prompt": blocks}, timeout)

    # -- what happened -----------------------------------------------------------------------
    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e["type"] == kind]

    def updates(self, session_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        out = []
        for event in self.of("update"):
            params = event["params"]
            if session_id is not None and params["sessionId"] != session_id:
                continue
            if kind is not None and params["update"]["sessionUpdate"] != kind:
                continue
            out.append(params["update"])
        return out

    def text(self, session_id: str) -> str:
        return "".join(u["content"]["text"] for u in self.updates(session_id, "agent_message_chunk"))

    def schema_problems(self) -> list[str]:
        """What the TypeScript SDK's schema validation changed: a session/update it dropped or
        salvaged (a field it did not accept), or an error it logged."""
        got = [e["params"] for e in self.of("update")]
        # The client writes the wire log as it reads: its last lines may land a moment after
        # the exit event the test saw.
        for _ in range(50):
            sent = []
            for line in self.wire.read_text().splitlines():
                try:
                    message = json.loads(line)
                except ValueError:  # a line still being written
                    continue
                if isinstance(message, dict) and message.get("method") == "session/update":
                    sent.append(message["params"])
            if len(sent) >= len(got):
                break
            time.sleep(0.1)
        problems = [f"sent {a}\nparsed {b}" for a, b in zip(sent, got, strict=False) if a != b]
        if len(sent) != len(got):
            problems.append(f"{len(sent)} session/update sent, {len(got)} accepted")
        if "Error handling" in self.stderr():
            problems.append(self.stderr())
        return problems

    def close(self, timeout: float = 20) -> dict[str, Any]:
        start = len(self.events)
        self._send({"op": "close"})
        event = self.wait_for(lambda e: e["type"] == "exit", timeout, "the agent to exit", start=start)
        self.proc.wait(timeout)
        self._stderr.close()
        self.closed = True
        return event

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if not self._stderr.closed:
            self._stderr.close()
