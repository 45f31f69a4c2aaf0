"""Decision 40 / CONTRACT agentLsp/stream: the model's reasoning reaches each front end as
thinking, never as answer text: `thinking` events over LSP (coalesced like text) and a dimmed
line in the terminal. (ACP's agent_thought_chunk: tests/acp/test_thinking.py.)"""

from __future__ import annotations

import io

import pytest

from agent_lsp.terminal.stream import TerminalStream
from tests.endpoints import deepseek
from tests.unit.kit import API_KEY, Events, run

pytestmark = pytest.mark.timeout(90)

THOUGHT = "The user asks about add(); I should read calc.py first."


@pytest.mark.parametrize("caps", ["visual-studio-code", "neovim"])
async def test_lsp_stream_carries_thinking_events(open_editor, model, caps):
    model.add("what does add do", [{"raw": deepseek.THINK_THEN_CALL}, {"raw": deepseek.THINK_THEN_ANSWER}])
    editor = await open_editor(caps)
    started = await editor.run("what does add do")
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done", report
    events = editor.events(started["runId"])
    assert "".join(e["text"] for e in events if e["kind"] == "thinking") == THOUGHT + "add() subtracts."
    assert all(e["agentId"] == "main" for e in events if e["kind"] == "thinking")
    assert "".join(e["text"] for e in events if e["kind"] == "text") == report["finalText"] == "add() returns a - b."
    kinds = [e["kind"] for e in events]
    assert kinds.index("thinking") < kinds.index("toolCall")  # in order with the rest


def _many_reasoning_deltas(n: int) -> list[str]:
    head = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"deepseek-v4-pro","choices":[{"index":0,'
    chunks = [f'data: {head}"delta":{{"reasoning_content":"w{i} "}},"finish_reason":null}}]}}\n\n' for i in range(n)]
    return [*chunks, f'data: {head}"delta":{{"content":"ok"}},"finish_reason":"stop"}}]}}\n\n', "data: [DONE]\n\n"]


async def test_lsp_thinking_deltas_are_coalesced_never_lost(open_editor, model):
    model.add("ponder", [{"raw": _many_reasoning_deltas(300)}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("ponder this")
    await editor.wait_stop(started["runId"])
    thinking = editor.events(started["runId"], "thinking")
    assert "".join(e["text"] for e in thinking) == "".join(f"w{i} " for i in range(300))
    assert len(thinking) < 30, "coalesced like text, not one notification per delta"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Both(Events):
    def __init__(self, terminal: TerminalStream):
        super().__init__()
        self.terminal = terminal

    def __call__(self, event):
        super().__call__(event)
        self.terminal(event)


async def test_terminal_shows_thinking_dimmed(model, workspace, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = _Tty()
    model.add([{"raw": deepseek.THINK_THEN_ANSWER}])
    report, _, _ = await run("hi", model, workspace, events=_Both(TerminalStream(out)))
    assert report.stop_reason == "done"
    shown = out.getvalue()
    assert "\033[2madd() subtracts.\033[0m" in shown  # dim
    assert "add() returns a - b." in shown and "\033[2madd() returns" not in shown


async def test_a_key_split_across_thinking_deltas_is_redacted(model, workspace):
    head = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    half = len(API_KEY) // 2
    raw = [f'data: {head}"delta":{{"reasoning_content":"the key is {API_KEY[:half]}"}},"finish_reason":null}}]}}\n\n',
           f'data: {head}"delta":{{"reasoning_content":"{API_KEY[half:]} hm"}},"finish_reason":null}}]}}\n\n',
           f'data: {head}"delta":{{"content":"ok"}},"finish_reason":"stop"}}]}}\n\n', "data: [DONE]\n\n"]
    model.add([{"raw": raw}])
    report, events, _ = await run("hi", model, workspace)
    thinking = [e.text for e in events.of("thinking")]
    assert "".join(thinking) == "the key is [redacted] hm"
    assert not any(API_KEY[:half] in t or API_KEY[half:] in t for t in thinking)
