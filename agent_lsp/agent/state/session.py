"""A conversation that follow-up runs continue: its history as typed entries (what each
message is, how each tool call ended), its runs' records (what each changed), its "allow for
session" grants."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.messages import Outcome, history_arguments
from agent_lsp.agent.model.tokens import TokenEstimator
from agent_lsp.agent.state.changes import RunChanges


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class SessionApprovals:
    """What "Allow for session" remembered: exact command lines (with their cwd), and tools.
    One session, in memory only (a resumed session asks again)."""

    commands: set[str] = field(default_factory=set)
    tools: set[str] = field(default_factory=set)

    def remember(self, tool: str, command: str | None) -> None:
        if command is not None:
            self.commands.add(command)
        else:
            self.tools.add(tool)


@dataclass
class Entry:
    """One message of the history and what it is. `message` is the wire dict sent to the
    model, never changed once appended."""

    message: dict[str, Any]
    kind: str  # prompt | assistant | tool | summary | note
    run_id: str = ""
    outcome: Outcome | None = None  # tool entries: how the call ended
    problems: tuple[str, ...] = ()  # summary entries: the open problems it carries

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "runId": self.run_id}
        if self.outcome is not None:
            out["outcome"] = str(self.outcome)
        if self.problems:
            out["problems"] = list(self.problems)
        return out

    def to_record(self) -> dict[str, Any]:
        return {"message": self.message, **self.meta()}

    @classmethod
    def from_record(cls, message: dict[str, Any], meta: dict[str, Any]) -> Entry:
        outcome = meta.get("outcome")
        return cls(
            stored_assistant(message),
            str(meta.get("kind", "note")),
            str(meta.get("runId", "")),
            Outcome(str(outcome)) if outcome in Outcome.__members__.values() else None,
            tuple(meta.get("problems") or ()),
        )


# The records that make a session worth keeping once they reached the model (Decision 46): a
# run, or a fork's base (the history it was given).
KEPT = ("run", "base")


@dataclass
class RunRecord:
    """What a session remembers of one of its runs (also persisted in its index)."""

    run_id: str
    transcript: str
    started: float
    prompt: str = ""
    stop: str | None = None  # the stop reason; None while running
    # What the run changed: the one record of it (the run's tools write into it as ctx.changes).
    # A rewind keeps it (the run did change those files) and sets `rewound` instead.
    changes: RunChanges = field(default_factory=RunChanges)
    rewound: bool = False
    kind: str = "run"  # run | rewind | base (a fork's history before its own runs, fork.py)
    # False: the run ended before the model ever answered (not persisted: saved runs reached it)
    reached: bool = True
    # A fork lists its parent's earlier runs: the session that ran this one (read-only here: the
    # run's transcript, checkpoint and rewind stay the parent's).
    forked_from: str | None = None
    # What agentLsp.history shows of it (a history.RunEvents, which imports this module): in
    # memory only, read from the transcript when this process did not run it.
    events: Any = field(default=None, compare=False, repr=False)

    @property
    def edited(self) -> list[str]:
        """The changed files as URIs: the report's editedFiles and the index's `edited`."""
        return self.changes.uris()

    def to_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "transcript": self.transcript,
            "started": self.started,
            "prompt": self.prompt,
            "stop": self.stop,
            "edited": self.edited,
            "rewound": self.rewound,
            "kind": self.kind,
            **({"forkedFrom": self.forked_from} if self.forked_from is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        return cls(
            str(data["runId"]),
            str(data["transcript"]),
            float(data.get("started", 0)),
            str(data.get("prompt", "")),
            data.get("stop"),
            RunChanges.from_uris(data.get("edited") or []),
            bool(data.get("rewound")),
            str(data.get("kind", "run")),
            forked_from=str(data["forkedFrom"]) if data.get("forkedFrom") else None,
        )


@dataclass
class Session:
    id: str = field(default_factory=lambda: new_id("s"))
    history: list[Entry] = field(default_factory=list)
    approvals: SessionApprovals = field(default_factory=SessionApprovals)
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    spill_files: set[Path] = field(default_factory=set)
    running: str | None = None  # the run id while a run is going
    model: str | None = None  # chosen by a run's `model` argument for the rest of the session
    # the requests' `reasoning_effort` for the rest of the session in this process (ACP's
    # thought_level); None: not sent
    reasoning_effort: str | None = None
    title: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    runs: list[RunRecord] = field(default_factory=list)
    # Whether the code-intel tools are offered, decided at the session's first run and kept in
    # its index (the tool list stays the same: prompt-cache stable, Decision 39).
    code_intel: bool | None = None
    # In memory only: SessionStart fired for this object (created or loaded in this process), and
    # what fires SessionEnd at exit for a session used here (the last run's hooks).
    hooks_started: bool = False
    end_hooks: Callable[[str], Awaitable[None]] | None = None

    def add_spill_file(self, path: Path) -> None:
        """A spill file of one of its runs: read_file may read it for the rest of the session."""
        self.spill_files.add(path)

    @property
    def edited(self) -> dict[Path, None]:
        """Every file its runs changed, in order: read from the runs' own records (a running
        one's too), never kept apart, so a rewind (which marks its runs `rewound`) takes their
        files off at once, and a session rebuilt from its index says the same as the live one."""
        return edited_by(self.runs)

    def messages(self) -> list[dict[str, Any]]:
        return [entry.message for entry in self.history]

    def run(self, run_id: str) -> RunRecord | None:
        return next((r for r in self.runs if r.run_id == run_id), None)


def edited_by(runs: list[RunRecord]) -> dict[Path, None]:
    """The files the session's runs changed that its history still holds: agent runs (a
    rewind's own restores are not changes the conversation made) not rewound since."""
    return dict.fromkeys(
        path
        for record in runs
        if record.kind == "run" and not record.rewound
        for path in record.changes
    )


def stored_assistant(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as this version stores it, whatever version wrote it: `content`
    a string (null made llama-cpp-python answer 500 and OpenAI refuse a reply without calls) and
    each call's arguments a JSON object's text (echoed malformed text made vLLM and Ollama
    refuse every later request)."""
    if message.get("role") != "assistant":
        return message
    calls = message.get("tool_calls")
    fixed_calls = calls
    if isinstance(calls, list):
        fixed_calls = [_stored_call(call) for call in calls]
    if message.get("content", "") is not None and fixed_calls == calls:
        return message
    content = message.get("content")
    return {
        **message,
        "content": "" if content is None else content,
        **({"tool_calls": fixed_calls} if calls is not None else {}),
    }


def _stored_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    arguments = history_arguments(function["arguments"])
    if arguments == function["arguments"]:
        return call
    return {**call, "function": {**function, "arguments": arguments}}


def apply_history_record(history: list[Entry], record: dict[str, Any]) -> None:
    """Replay one transcript record of the main agent onto a history being rebuilt."""
    kind = record.get("type")
    if kind == "request":
        metas = record.get("meta") or [{} for _ in record.get("messages", [])]
        history += [
            Entry.from_record(m, meta)
            for m, meta in zip(record.get("messages", []), metas, strict=False)
        ]
    elif kind == "history":
        if record.get("op") == "append":
            history += [Entry.from_record(e["message"], e) for e in record.get("entries", [])]
        elif record.get("op") == "truncate":
            del history[int(record.get("length", len(history))) :]
        elif record.get("op") == "replace":
            for item in record.get("items", []):
                history[int(item["index"])] = Entry.from_record(item["message"], item)
    elif kind == "compaction" and "start" in record:
        history[int(record["start"]) : int(record["end"])] = [
            Entry.from_record(e["message"], e) for e in record["entries"]
        ]
