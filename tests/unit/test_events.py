"""The typed stream events: each kind's one wire form (CONTRACT agentLsp/stream, stream-json),
the redaction of every string they carry, and a decision for every kind in each front end."""

from __future__ import annotations

import io
import json
import logging
import typing
from pathlib import Path
from typing import Any

import pytest

from agent_lsp.acp.tools import CallIds
from agent_lsp.acp.updates import Outbox, RunEvents
from agent_lsp.agent.events import (
    EVENT_TYPES,
    ApprovalEvent,
    ApprovalState,
    CompactionEvent,
    Event,
    HookEvent,
    ProcessEvent,
    StatusEvent,
    SteerEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    redacted,
    to_wire,
    wire_fields,
)
from agent_lsp.agent.messages import Outcome, RunReport, StopCause, StopReason, Usage
from agent_lsp.terminal.stream import TerminalStream

REPORT = RunReport("r-1", "s-1", StopReason.DONE, StopCause.ANSWER, 2, "fixed", "Done: 2 turns.", ["file:///w/a.py"], 1, 0,
                   Usage(10, 5, 2, 0.0012345678), "/t/r-1.jsonl", context_tokens=12, context_window=128)

# Each kind's keys as CONTRACT's agentLsp/stream lists them, and (after the `|`) the keys the
# stream carries beyond that list today: a result's `outcome` and a command's `tail`, the
# `waiting` of the model's wait, an MCP server's `mcpServer`/`state` (the front end's own line).
CASES: list[tuple[Event, dict[str, Any]]] = [
    (TextDelta("he"), {}),
    (ThinkingDelta("hm", agent_id="main"), {}),
    (ToolCallEvent("read_file a.py", "c1", "read_file", {"path": "a.py"}, agent_id="main/1"),
     {"callId": "c1", "tool": "read_file", "arguments": {"path": "a.py"}}),
    (ToolCallEvent("bad", "c2", "read_file", "{not json"), {"callId": "c2", "tool": "read_file", "arguments": "{not json"}),
    (ToolResultEvent("read_file ok: 1 line", "c1", Outcome.OK),
     {"callId": "c1", "ok": True, "outcome": "ok", "truncated": False}),
    (ToolResultEvent("run_command error: exit 1", "c3", Outcome.ERROR, truncated=True, spill_path="/s/c3.txt", tail="a\nb"),
     {"callId": "c3", "ok": False, "outcome": "error", "truncated": True, "spillPath": "/s/c3.txt", "tail": "a\nb"}),
    (ToolResultEvent("run_command ok: x", "c4", Outcome.OK, tail=""),  # an empty tail is still sent, as before
     {"callId": "c4", "ok": True, "outcome": "ok", "truncated": False, "tail": ""}),
    (ApprovalEvent("$ ls", "c5", "run_command", "$ ls", ApprovalState.PENDING),
     {"callId": "c5", "tool": "run_command", "detail": "$ ls", "state": "pending"}),
    (ApprovalEvent("edit a.py", "c6", "edit_file", "edit a.py", ApprovalState.PENDING, uri="file:///w/a.py", diff="-a\n+b",
                   new_text="b"),
     {"callId": "c6", "tool": "edit_file", "detail": "edit a.py", "state": "pending", "uri": "file:///w/a.py", "diff": "-a\n+b",
      "newText": "b"}),
    (ApprovalEvent("edit a.py", "c7", "edit_file", "edit a.py", ApprovalState.PENDING, uri="file:///w/a.py", diff="-a",
                   new_text="", diff_truncated=True),
     {"callId": "c7", "tool": "edit_file", "detail": "edit a.py", "state": "pending", "uri": "file:///w/a.py", "diff": "-a",
      "newText": "", "diffTruncated": True}),
    (ApprovalEvent("rename `a` to `b` in 2 files", "c9", "rename_symbol", "rename …", ApprovalState.PENDING,
                   files=({"uri": "file:///w/a.py", "diff": "-a\n+b"}, {"uri": "file:///w/c.py", "diff": "-a()\n+b()"})),
     {"callId": "c9", "tool": "rename_symbol", "detail": "rename …", "state": "pending",
      "files": [{"uri": "file:///w/a.py", "diff": "-a\n+b"}, {"uri": "file:///w/c.py", "diff": "-a()\n+b()"}]}),
    (ApprovalEvent("$ rm x (by policy)", "c8", "run_command", "$ rm x", ApprovalState.DENIED),
     {"callId": "c8", "tool": "run_command", "detail": "$ rm x", "state": "denied"}),
    (StatusEvent("turn 1: $ ls", 1), {"turn": 1}),
    (StatusEvent("turn 2/50: asking the model", 2, waiting="model"), {"turn": 2, "waiting": "model"}),
    (StatusEvent("waiting for approval: $ ls", None), {"turn": None}),
    (StatusEvent("MCP server `x` failed", None, mcp_server="x", mcp_state="failed"),
     {"turn": None, "mcpServer": "x", "state": "failed"}),
    (CompactionEvent("compacted 9 messages", 4), {"turn": 4}),
    (SteerEvent("use python3", 2), {"turn": 2}),  # Conversation (turn 4): where a steer landed
    (UsageEvent("ctx 0k/0k · $0.001", Usage(10, 5, 2, 0.0012345678), 12, 128),
     {"promptTokens": 10, "completionTokens": 5, "cachedTokens": 2, "costUsd": 0.001235, "contextTokens": 12, "contextWindow": 128}),
    (UsageEvent("ctx 0k/0k", Usage(10, 5), 12, 128),
     {"promptTokens": 10, "completionTokens": 5, "cachedTokens": 0, "contextTokens": 12, "contextWindow": 128}),
    (UsageEvent("ctx 0k/0k · $0.001", Usage(10, 5, 2, 0.0012345678), 12, 128, budget_usd=0.5),  # Decision 36
     {"promptTokens": 10, "completionTokens": 5, "cachedTokens": 2, "costUsd": 0.001235, "contextTokens": 12, "contextWindow": 128,
      "budgetUsd": 0.5}),
    (HookEvent("PreToolUse hook `./guard.sh` blocked: no rm -rf", "PreToolUse", "./guard.sh", 2, True, message="no rm -rf"),
     {"event": "PreToolUse", "command": "./guard.sh", "exitCode": 2, "blocked": True, "message": "no rm -rf"}),
    (HookEvent("Stop hook `x` timed out after 1 s (killed)", "Stop", "x", None, False, agent_id="main/1"),
     {"event": "Stop", "command": "x", "exitCode": None, "blocked": False}),
    (ProcessEvent("background process p1 started: npm run dev", "p1", "npm run dev", "running"),
     {"processId": "p1", "command": "npm run dev", "state": "running"}),  # issue 35: no exit code yet
    (ProcessEvent("background process p2 exited with code 3: make", "p2", "make", "exited", exit_code=3),
     {"processId": "p2", "command": "make", "state": "exited", "exitCode": 3}),
    (StopEvent("Done: 2 turns.", REPORT), {"report": REPORT.to_dict()}),
]

CONTRACT_KEYS = {  # required keys | optional keys, per kind (CONTRACT agentLsp/stream and Decision 13)
    "text": (set(), set()),
    "thinking": (set(), set()),
    "toolCall": ({"callId", "tool", "arguments"}, set()),
    "toolResult": ({"callId", "ok", "truncated"}, {"spillPath"}),
    "approval": ({"callId", "tool", "detail", "state"}, {"uri", "diff", "newText", "diffTruncated", "files"}),
    "status": ({"turn"}, set()),
    "compaction": (set(), set()),
    "usage": ({"promptTokens", "completionTokens", "cachedTokens", "contextTokens", "contextWindow"}, {"costUsd", "budgetUsd"}),
    "hook": ({"event", "command", "exitCode", "blocked"}, {"message"}),
    "steer": ({"turn"}, set()),
    "process": ({"processId", "command", "state"}, {"exitCode"}),
    "stop": ({"report"}, set()),
}
BEYOND_CONTRACT = {"toolResult": {"outcome", "tail"}, "status": {"waiting", "mcpServer", "state"}, "compaction": {"turn"}}


def test_the_union_and_the_list_of_kinds_agree():
    assert typing.get_args(Event) == EVENT_TYPES
    kinds = [cls.kind for cls in EVENT_TYPES]
    assert len(set(kinds)) == len(kinds) and set(kinds) == set(CONTRACT_KEYS)
    assert {type(event) for event, _ in CASES} == set(EVENT_TYPES), "every kind has a case here"


@pytest.mark.parametrize(("event", "fields"), CASES, ids=[f"{e.kind}-{i}" for i, (e, _) in enumerate(CASES)])
def test_each_kind_goes_out_with_exactly_its_keys(event: Event, fields: dict[str, Any]):
    wire = to_wire(event, "r-1", 7)
    # Key order too: the payload is byte-for-byte what the stream sent before the events were typed.
    assert json.dumps(wire) == json.dumps({**fields, "agentId": event.agent_id, "runId": "r-1", "seq": 7, "kind": event.kind,
                                           "text": event.text})
    required, optional = CONTRACT_KEYS[event.kind]
    keys = set(wire_fields(event))
    assert required <= keys <= required | optional | BEYOND_CONTRACT.get(event.kind, set())


def test_stream_json_names_the_kind_type():
    event = StatusEvent("turn 1: $ ls", 1, agent_id="main/2")
    line = to_wire(event, "r-2", 0, tag="type")
    assert line == {"turn": 1, "agentId": "main/2", "runId": "r-2", "seq": 0, "type": "status", "text": "turn 1: $ ls"}


def test_redaction_reaches_every_string_and_keeps_the_types():
    def redact(text: str) -> str:
        return text.replace("sk-SECRET", "[redacted]")

    events: list[Event] = [
        ToolCallEvent("cat sk-SECRET", "c1", "run_command", {"command": ["echo", "sk-SECRET"]}),
        ToolResultEvent("ok sk-SECRET", "c1", Outcome.OK, tail="sk-SECRET"),
        ApprovalEvent("x", "c1", "edit_file", "sk-SECRET", ApprovalState.PENDING, uri="u", diff="-sk-SECRET", new_text="sk-SECRET"),
        StopEvent("sk-SECRET", RunReport("r", "s", StopReason.FATAL, StopCause.MODEL, 0, "sk-SECRET", "s", ["sk-SECRET"], 0, 0,
                                         Usage(), "t", error="sk-SECRET")),
    ]
    for event in events:
        clean = redacted(event, redact)
        assert type(clean) is type(event)
        assert "sk-SECRET" not in json.dumps(to_wire(clean, "r", 0)), clean
    clean_stop = redacted(events[-1], redact)
    assert isinstance(clean_stop, StopEvent) and clean_stop.report.stop_cause is StopCause.MODEL
    clean_approval = redacted(events[2], redact)
    assert isinstance(clean_approval, ApprovalEvent) and clean_approval.state is ApprovalState.PENDING


class UpdateSink:
    """The ACP client end of an Outbox: keeps every session/update."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any) -> None:
        self.updates.append(update)


async def test_every_kind_has_an_acp_decision(caplog):
    """A kind that ACP's mapping does not decide (map or deliberately drop) fails here: the
    mapping's match ends in assert_never, which the sink would only log."""
    client = UpdateSink()
    outbox = Outbox(client, "sess")
    events = RunEvents(outbox, [Path("/w")], CallIds(), "r-1")
    with caplog.at_level(logging.ERROR, logger="agent_lsp"):
        for event, _ in CASES:
            events(event)
        await outbox.drain()
    assert not [r for r in caplog.records if "could not map" in r.getMessage()]
    updates = {type(u).__name__ for u in client.updates}
    assert {"AgentMessageChunk", "AgentThoughtChunk", "ToolCallStart", "ToolCallProgress", "UsageUpdate"} <= updates


def test_every_kind_has_a_terminal_decision():
    out = io.StringIO()
    stream = TerminalStream(out)
    for event, _ in CASES:
        stream(event)
    shown = out.getvalue()
    assert "he" in shown and "read_file a.py" in shown and "[main/1]" in shown and "compacted 9 messages" in shown
    assert "│ a" in shown and "truncated" in shown
    assert "⚑ PreToolUse hook `./guard.sh` blocked: no rm -rf" in shown
