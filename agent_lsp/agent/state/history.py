"""A session's runs as a conversation view shows them (CONTRACT `agentLsp.history`, Decisions 52
and 78): the stream events the user saw, coalesced and cut, kept in memory while the run's
process lives and written to the run's transcript, so a later process reads the same."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_lsp.agent.events import Event, StopEvent, TextDelta, ThinkingDelta, to_wire
from agent_lsp.agent.fs.safeio import NotReadable, read_regular_sync
from agent_lsp.agent.images import ImagePart
from agent_lsp.agent.ports import EventSink
from agent_lsp.agent.state.session import RunRecord, Session
from agent_lsp.agent.state.sessions import TRANSCRIPT_MAX_BYTES, iso, title_of
from agent_lsp.agent.state.transcript import Transcript

log = logging.getLogger(__name__)

HISTORY_CHARS = 2_000  # a result's text, a command's tail, an approval's diff
LEFT_OUT = frozenset({"usage", "status"})  # the stream kinds history does not keep
EVENT_RECORD = "event"  # the transcript record of one history event
IMAGES_RECORD = "images"  # the transcript record of the prompt's image placeholders


def cut(text: str, limit: int = HISTORY_CHARS) -> str:
    """At most `limit` characters, the last one "…" when something was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def history_event(wire: dict[str, Any]) -> dict[str, Any] | None:
    """One stream event (its `agentLsp/stream` params) as history keeps it: None for `usage` and
    `status`; a result's text and tail cut to 2,000 characters; an approval's diffs cut to
    2,000 (`diffTruncated` then set) and its `newText` left out."""
    kind = wire.get("kind")
    if kind in LEFT_OUT:
        return None
    out = dict(wire)
    if kind == "toolResult":
        for key in ("text", "tail"):
            if isinstance(out.get(key), str):
                out[key] = cut(out[key])
    elif kind == "approval":
        out.pop("newText", None)
        diff = out.get("diff")
        if isinstance(diff, str) and len(diff) > HISTORY_CHARS:
            out["diff"] = cut(diff)
            out["diffTruncated"] = True
        if isinstance(out.get("files"), list):
            out["files"] = [_cut_file(f) for f in out["files"]]
    return out


def _cut_file(item: Any) -> Any:
    if isinstance(item, dict) and isinstance(item.get("diff"), str):
        return {**item, "diff": cut(item["diff"])}
    return item


def stop_item(run_id: str, report: dict[str, Any], seq: int) -> dict[str, Any]:
    """The run's `stop` event, from its report: the one shape both the live event and the
    transcript's `stop` record give (the stop is sent after the transcript is closed)."""
    return {
        "report": report,
        "agentId": "main",
        "runId": run_id,
        "seq": seq,
        "kind": "stop",
        "text": str(report.get("summary", "")),
    }


def image_placeholders(images: Sequence[ImagePart]) -> list[dict[str, Any]]:
    """The prompt's images as history gives them: `{mimeType, bytes}`, never their data."""
    out = []
    for image in images:
        try:
            size = len(base64.b64decode(image.data))
        except (binascii.Error, ValueError):
            size = len(image.data) * 3 // 4
        out.append({"mimeType": image.mime_type, "bytes": size})
    return out


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    """As JSON gives it back (tuples as lists, any other value as its text): the live history
    then equals the one read from the transcript."""
    plain: dict[str, Any] = json.loads(json.dumps(item, ensure_ascii=False, default=str))
    return plain


class RunEvents:
    """One run's history events: a tee on its event sink (after redaction). Adjacent deltas of
    one kind and agent become one `text` or `thinking` event; every event is written to the
    transcript as it is kept. `seal()` (before the transcript's `stop` record) flushes the
    coalesced text; after it only the stop is kept, which the transcript holds as `stop`."""

    def __init__(
        self,
        run_id: str,
        transcript: Transcript | None = None,
        images: Sequence[ImagePart] = (),
    ) -> None:
        self.run_id = run_id
        self.events: list[dict[str, Any]] = []
        self.images = image_placeholders(images)
        self._transcript = transcript
        # the text or thinking being coalesced: its first delta's wire form, and every delta's
        # text (joined once: a long answer streams in thousands of deltas)
        self._pending: dict[str, Any] | None = None
        self._parts: list[str] = []
        self._sealed = False
        if self.images and transcript is not None:
            transcript.put("main", 0, IMAGES_RECORD, images=self.images)

    @classmethod
    def read(cls, run_id: str, events: list[dict[str, Any]], images: list[Any]) -> RunEvents:
        """A finished run's history as a transcript gave it."""
        loaded = cls(run_id)
        loaded.events, loaded.images, loaded._sealed = events, images, True
        return loaded

    def tee(self, emit: EventSink) -> EventSink:
        def sink(event: Event) -> None:
            self.add(event)
            emit(event)

        return sink

    def add(self, event: Event) -> None:
        if isinstance(event, StopEvent):
            self.seal()
            self.events.append(
                _plain(stop_item(self.run_id, event.report.to_dict(), len(self.events)))
            )
            return
        if self._sealed or event.kind in LEFT_OUT:  # a usage line does not end a turn's text
            return
        if isinstance(event, TextDelta | ThinkingDelta):
            pending = self._pending
            if pending and (pending["kind"], pending["agentId"]) == (event.kind, event.agent_id):
                self._parts.append(event.text)
                return
            self._flush()
            self._pending, self._parts = to_wire(event, self.run_id, 0), [event.text]
            return
        self._flush()
        self._keep(to_wire(event, self.run_id, 0))

    def seal(self) -> None:
        """The run's stop is being written: the coalesced text goes out now, nothing after."""
        if not self._sealed:
            self._flush()
            self._sealed = True
            self._transcript = None  # nothing more is written: the run's records are let go

    def snapshot(self) -> list[dict[str, Any]]:
        """The events so far (a running run's text still coalescing included)."""
        if self._pending is None:
            return list(self.events)
        text = "".join(self._parts)
        return [*self.events, _plain({**self._pending, "text": text, "seq": len(self.events)})]

    def _flush(self) -> None:
        pending, self._pending = self._pending, None
        text = "".join(self._parts)
        self._parts = []
        if pending is not None and text:
            self._keep({**pending, "text": text})

    def _keep(self, wire: dict[str, Any]) -> None:
        item = history_event(wire)
        if item is None:
            return
        item = _plain({**item, "seq": len(self.events)})
        self.events.append(item)
        if self._transcript is not None:
            self._transcript.put(str(item.get("agentId", "main")), 0, EVENT_RECORD, event=item)


def read_run_events(run_id: str, transcript: Path) -> RunEvents:
    """A run's history from its transcript: its `event` records, then its `stop`. A missing or
    unreadable transcript gives no events (logged); a damaged line is skipped."""
    events: list[dict[str, Any]] = []
    images: list[Any] = []
    try:
        text = read_regular_sync(transcript, TRANSCRIPT_MAX_BYTES).decode("utf-8", "replace")
    except (OSError, NotReadable) as exc:
        log.warning("history: the transcript %s cannot be read (%s)", transcript, exc)
        return RunEvents.read(run_id, events, images)
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a cut last line (the process died mid-write), or damage
        if not isinstance(record, dict):
            continue
        kind = record.get("type")
        if kind == EVENT_RECORD and isinstance(record.get("event"), dict):
            events.append(record["event"])
        elif kind == IMAGES_RECORD and isinstance(record.get("images"), list):
            images = record["images"]
        elif kind == "stop" and record.get("agentId", "main") == "main":
            if isinstance(record.get("report"), dict):
                events.append(stop_item(run_id, record["report"], len(events)))
    return RunEvents.read(run_id, events, images)


async def run_events(record: RunRecord) -> RunEvents:
    """The run's history: from memory when this process ran (or read) it, else from its
    transcript (then kept on the record)."""
    if record.events is None:
        record.events = await asyncio.to_thread(
            read_run_events, record.run_id, Path(record.transcript)
        )
    events: RunEvents = record.events
    return events


async def session_history(session: Session) -> dict[str, Any]:
    """CONTRACT `agentLsp.history`: the session's runs oldest first (rewound ones left out)."""
    runs = []
    for record in list(session.runs):
        if record.kind != "run" or record.rewound:
            continue
        shown = await run_events(record)
        events = shown.snapshot()
        stop = events[-1] if events and events[-1].get("kind") == "stop" else None
        item: dict[str, Any] = {
            "runId": record.run_id,
            "prompt": record.prompt,
            "started": iso(record.started),
            "stop": record.stop,
            "report": stop.get("report") if stop is not None else None,
            "events": events,
        }
        if shown.images:
            item["images"] = shown.images
        if record.forked_from is not None:
            item["forkedFrom"] = record.forked_from
        runs.append(item)
    return {"sessionId": session.id, "title": title_of(session.title), "runs": runs}
