"""A streamed chat completion put together from its chunks, in every shape real
OpenAI-compatible servers send (CONTRACT "Model endpoints"): tool calls under distinct indexes,
under one reused index or none (told apart by id), arguments as pieces or as an object,
reasoning deltas, error objects inside the stream, text split inside a surrogate pair."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_lsp.agent.messages import Reply, ReplyCut, ToolCall, Usage

TextSink = Callable[[str], None]
MAX_ARGUMENT_CHARS = 1_000_000  # one tool call's arguments (CONTRACT Decision 6)
MAX_REPLY_CHARS = 4_000_000  # one whole reply
# DeepSeek/vLLM/LiteLLM; OpenRouter/Ollama/newer vLLM
REASONING_FIELDS = ("reasoning_content", "reasoning")
_SURROGATE = re.compile("[\ud800-\udfff]")
# The fields the SDK's ChatCompletionChunk declares: every other key of a chunk is an extra
CHUNK_FIELDS = frozenset(
    {
        "id",
        "choices",
        "created",
        "model",
        "object",
        "moderation",
        "obfuscation",
        "service_tier",
        "system_fingerprint",
        "usage",
    }
)


class StreamError(Exception):
    """The server put an error object in the stream; the message is the server's own words."""


def valid_text(text: str) -> str:
    """`text` as valid Unicode: surrogate halves that arrived as separate `\\uXXXX` escapes (a
    JavaScript gateway splitting an emoji between two chunks) joined into their character, a
    lone half replaced by U+FFFD (it could not be written to the transcript or sent as UTF-8)."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class _Deltas:
    """One stream of text deltas to the user: a trailing high surrogate waits for its low half
    in the next delta, so every piece shown is valid text."""

    def __init__(self, sink: TextSink | None):
        self.sink = sink
        self.parts: list[str] = []
        self._held = ""

    def add(self, text: str) -> int:
        text = self._held + text
        self._held = ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._held = text[:-1], text[-1]
        text = valid_text(text)
        if text:
            self.parts.append(text)
            if self.sink is not None:
                self.sink(text)
        return len(text)

    def end(self) -> str:
        if self._held:  # a high half that never got its partner
            self._held = ""
            self.add("\ufffd")
        return "".join(self.parts)


@dataclass
class _Call:
    id: str = ""
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    size: int = 0
    extra_content: dict[str, Any] | None = None

    @property
    def has_name(self) -> bool:
        return bool(self.name)


class StreamAssembly:
    """Feed it every chunk of one stream, then take `reply()`. Fragments are joined once at the
    end (a 10 MB argument arriving in 10-byte deltas must not cost quadratic time)."""

    def __init__(self, on_text: TextSink, on_thinking: TextSink | None = None):
        self._text = _Deltas(on_text)
        self._reasoning = _Deltas(on_thinking)
        self._refusal = _Deltas(None)  # OpenAI's `refusal` deltas: the stop's text, not an answer
        self.reasoning_content = False  # the server streamed the `reasoning_content` field itself
        self.calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}  # the latest call seen under each index
        self._by_id: dict[str, _Call] = {}
        self.size = 0
        self.streamed = 0  # characters that reached the user (text, reasoning and call deltas)
        self.cut: ReplyCut | None = None
        self.finish: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None  # the chunks' `model`: who answered
        self.chunks = 0  # chunks read: none at all is an empty HTTP 200 stream
        self._top_usage = False  # a chunk's own `usage` came (it wins over one in a choice)

    # -- one chunk --------------------------------------------------------------------------
    def feed(self, chunk: Any, usage_of: Callable[[Any], Usage]) -> None:
        """One chunk as parsed JSON (plain dicts: no model object per chunk). Keys the SDK's
        chunk types do not declare are the server's extras (reasoning fields, error objects,
        Gemini's `extra_content`); values of an unexpected type fail as they did on the SDK's
        unvalidated objects (AttributeError, TypeError, KeyError: not a valid stream)."""
        if not isinstance(chunk, dict):
            raise AttributeError(f"'{type(chunk).__name__}' object has no attribute 'usage'")
        error = chunk.get("error")
        if chunk.get("object") == "error" or error:
            # vLLM's older in-stream shape `{"object": "error", "message": ...}`; the SDK
            # raises for a truthy `error` key itself (handled by the client).
            extra = {k: v for k, v in chunk.items() if k not in CHUNK_FIELDS}
            raise StreamError(describe_error(error or extra or "an error object"))
        self.chunks += 1
        if self.model is None and isinstance(model := chunk.get("model"), str) and model:
            self.model = model
        usage = chunk.get("usage")
        if usage or isinstance(usage, dict):  # `{}` was a (truthy) usage object too
            self.usage = usage_of(usage)
            self._top_usage = True
        choices = chunk.get("choices")
        if not choices:  # the usage chunk, Azure's prompt_filter_results
            return
        choice = _fields(choices[0], "delta")
        # Moonshot (Kimi) puts the usage inside the choice: read when no top-level usage came
        if not self._top_usage and isinstance(inner := choice.get("usage"), dict) and inner:
            self.usage = usage_of(inner)
        delta = choice.get("delta")
        if delta is not None:
            delta = _fields(delta, "content")
            self._reasoning_delta(delta)
            if content := delta.get("content"):
                self._add_text(content)
            if isinstance(refusal := delta.get("refusal"), str) and refusal:
                self.size += len(refusal)
                self._refusal.add(refusal)
                self._check_reply_cap()
            for part in delta.get("tool_calls") or ():
                self._add_call(part if isinstance(part, dict) else {})
        if finish := choice.get("finish_reason"):
            self.finish = finish

    def _add_text(self, text: str) -> None:
        self.size += len(text)
        self.streamed += self._text.add(text)
        self._check_reply_cap()

    def _reasoning_delta(self, delta: dict[str, Any]) -> None:
        for name in REASONING_FIELDS:
            value = delta.get(name)
            if isinstance(value, str) and name == "reasoning_content":
                # even empty: DeepSeek wants the field back on its tool turns
                self.reasoning_content = True
            if isinstance(value, str) and value:
                self.size += len(value)
                self.streamed += self._reasoning.add(value)
                self._check_reply_cap()
                # a server sending both fields (OpenRouter mirrors) sends the same text twice
                return

    def _add_call(self, part: dict[str, Any]) -> None:
        function = part.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        call = self._target(part.get("index"), part.get("id") or "", name)
        if name and "".join(call.name) != name:  # a delta repeating the whole name is not appended
            call.name.append(name)
        if isinstance(arguments, dict | list):  # LiteLLM proxies: already parsed, complete
            text = json.dumps(arguments, ensure_ascii=False)
            self.size += len(text) - call.size
            call.arguments, call.size = [text], len(text)
        elif isinstance(arguments, str) and arguments:
            call.arguments.append(arguments)
            call.size += len(arguments)
            self.size += len(arguments)
        # Gemini 3's thought signature: returned as received
        if isinstance(extra_content := part.get("extra_content"), dict):
            call.extra_content = {**(call.extra_content or {}), **extra_content}
        if call.size > MAX_ARGUMENT_CHARS:
            self.cut = ReplyCut.ARGUMENT_CAP
        self.streamed += 1
        self._check_reply_cap()

    def _target(self, index: Any, call_id: str, name: str | None) -> _Call:
        """Which call a tool-call delta belongs to: by `index` while indexes tell calls apart, by
        `id` when several calls share one index (Ollama 0.20 sends every call as index 0) or come
        with none (Gemini's OpenAI layer, old Ollama)."""
        current: _Call | None
        if isinstance(index, int):
            current = self._by_index.get(index)  # a new index is a new call, whatever its id
            if current is not None and call_id and current.id and current.id != call_id:
                current = None  # another call under the same index
        elif call_id:
            current = self._by_id.get(call_id)  # no index: the id tells calls apart
            if (
                current is None
                and self.calls
                and not self.calls[-1].id
                and not self.calls[-1].has_name
            ):
                current = self.calls[-1]  # fragments that came before their id
        else:
            current = self.calls[-1] if self.calls else None
            if (
                current is not None
                and name
                and current.has_name
                and ("".join(current.name) != name or current.arguments)
            ):
                current = None  # no index, no id: a whole new call after a whole call
        if current is None:
            current = _Call()
            self.calls.append(current)
        if call_id and not current.id:
            current.id = call_id
            self._by_id[call_id] = current
        if isinstance(index, int):
            self._by_index[index] = current
        return current

    def _check_reply_cap(self) -> None:
        if self.size > MAX_REPLY_CHARS:
            self.cut = ReplyCut.REPLY_CAP

    # -- the end ----------------------------------------------------------------------------
    def reply(self) -> Reply:
        text = self._text.end()
        reasoning = self._reasoning.end()
        refusal = self._refusal.end()
        calls = []
        for c in self.calls:
            joined = valid_text("".join(c.arguments))
            # "" means no arguments
            arguments = "" if self.cut else joined if joined.strip() else "{}"
            calls.append(
                ToolCall(
                    c.id or f"call_{uuid.uuid4().hex[:12]}",
                    valid_text("".join(c.name)),
                    arguments,
                    extra_content=c.extra_content,
                )
            )
        cut = self.cut or (ReplyCut.OUTPUT_LIMIT if self.finish == "length" else None)
        return Reply(
            text,
            calls,
            self.finish,
            self.usage,
            cut,
            reasoning=reasoning,
            reasoning_content=self.reasoning_content,
            model=self.model,
            refusal=refusal,
        )


def _fields(value: Any, name: str) -> dict[str, Any]:
    """A chunk's object (a choice, a delta) as a dict; anything else failed on the SDK's
    unvalidated objects when read, so it fails here the same way."""
    if not isinstance(value, dict):
        raise AttributeError(f"'{type(value).__name__}' object has no attribute '{name}'")
    return value


def describe_error(body: Any, limit: int = 600) -> str:
    """The server's own words from an error body of any shape: `{"error": {...}}`,
    `{"error": "text"}`, `{"message": ...}`, `{"detail": ...}`, an array of those (Gemini),
    plain text or HTML; OpenRouter's provider reason (`metadata.raw`) is kept."""
    text = _words(body, 0).strip()
    text = " ".join(text.split())
    return valid_text(text[:limit] + ("…" if len(text) > limit else ""))


def _words(body: Any, depth: int) -> str:
    if depth > 4:
        return ""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        stripped = body.strip()
        if stripped[:1] in "{[":
            try:
                return _words(json.loads(stripped), depth + 1)
            except ValueError:
                pass
        return re.sub(r"<[^>]+>", " ", stripped) if "<" in stripped else stripped
    if isinstance(body, list):
        return "; ".join(w for w in (_words(item, depth + 1) for item in body[:3]) if w)
    if isinstance(body, dict):
        for key in (
            "error",
            "message",
            "detail",
            "msg",
            "error_message",
            "reason",
            "title",
            "description",
        ):
            value = body.get(key)
            if value:
                words = _words(value, depth + 1)
                metadata = body.get("metadata")
                if isinstance(metadata, dict) and metadata.get("raw"):
                    who = f"{metadata['provider_name']}: " if metadata.get("provider_name") else ""
                    words += f" ({who}{_words(metadata['raw'], depth + 1)})"
                return words
        return json.dumps(body, ensure_ascii=False, default=str)
    return "" if body is None else str(body)
