"""Test kit for the agent core: a scripted approver, an event collector, and run helpers.

Everything here is a real class (no mocks): the model is the scripted OpenAI-compatible
server over real HTTP, the workspace is a DiskWorkspace on a temp dir.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_lsp.agent.events import Event
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import Session, run_task
from agent_lsp.agent.messages import RunReport
from agent_lsp.agent.ports import ApprovalRequest, Decision
from agent_lsp.settings import Settings

API_KEY = "sk-test-secret-key-1234567890"  # what tests/conftest.py puts in OPENAI_API_KEY


class ScriptedApprover:
    """Answers approval requests from a queue of decisions, then with `default`."""

    def __init__(self, *decisions: Decision, default: Decision = Decision.ALLOW):
        self.decisions = list(decisions)
        self.default = default
        self.requests: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return self.decisions.pop(0) if self.decisions else self.default


class Events(list):
    """An EventSink that keeps every event."""

    def __call__(self, event: Event) -> None:
        self.append(event)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self if e.kind == kind]

    def text(self) -> str:
        return "".join(e.text for e in self.of("text"))


def make_settings(model, **values: Any) -> Settings:
    """Settings for a run against the scripted server; `values` use the camelCase wire names."""
    data = {"model": "m", "baseUrl": model.base_url, "requestTimeout": 10, **values}
    return Settings.model_validate(data)


async def run(prompt: str, model, workspace: Path | DiskWorkspace, *, approver: ScriptedApprover | None = None,
              session: Session | None = None, events: Events | None = None, run_id: str | None = None,
              env: dict[str, str] | None = None, settings: Settings | None = None,
              **values: Any) -> tuple[RunReport, Events, Session]:
    """One run_task with the test defaults; returns (report, events, session)."""
    ws = workspace if isinstance(workspace, DiskWorkspace) else DiskWorkspace([workspace])
    events = Events() if events is None else events
    session = Session() if session is None else session
    report = await asyncio.wait_for(
        run_task(prompt, session=session, settings=settings or make_settings(model, **values), workspace=ws,
                 approver=approver or ScriptedApprover(), emit=events, run_id=run_id, env=env),
        timeout=30,
    )
    return report, events, session


def call(name: str, id: str | None = None, **arguments: Any) -> dict[str, Any]:
    """One scripted tool call."""
    out: dict[str, Any] = {"name": name, "arguments": arguments}
    if id is not None:
        out["id"] = id
    return out


def tools_reply(*calls: dict[str, Any], text: str = "", **extra: Any) -> dict[str, Any]:
    return {"text": text, "tool_calls": list(calls), **extra}


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m.get("role") == "tool"]


def last_tool_results(request: dict[str, Any]) -> dict[str, str]:
    """tool_call_id -> content of the tool messages after the last assistant message."""
    messages = request["messages"]
    last = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    return {m["tool_call_id"]: m["content"] for m in messages[last + 1 :] if m.get("role") == "tool"}


def assert_valid_conversation(messages: list[dict[str, Any]]) -> None:
    """What the OpenAI API demands: each tool message answers a call of the assistant message
    right before its run of tool messages, and every such call is answered."""
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            assert message["tool_call_id"] in pending, f"message {index}: tool result without its call: {message}"
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, f"message {index} ({role}) comes before the results of calls {pending}"
        if role == "assistant":
            pending = {c["id"] for c in message.get("tool_calls") or []}
    assert not pending, f"calls without results at the end: {pending}"


def assert_history_closed(history: Iterable[dict[str, Any]]) -> None:
    assert_valid_conversation(list(history))


def transcript_records(report: RunReport) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(report.transcript).read_text(encoding="utf-8").splitlines() if line.strip()]


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
