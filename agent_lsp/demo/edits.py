"""Client-side helpers shared by the demo client, the test editors and the benchmarks:
applying LSP text edits the way an editor does (UTF-16 positions), and plain JSON values."""

from __future__ import annotations

from lsprotocol import types

from agent_lsp.server.rpc import plain

__all__ = ["apply_text_edits", "plain", "utf16_offset"]


def utf16_offset(text: str, lines: list[str], pos: types.Position) -> int:
    if pos.line >= len(lines):
        return len(text)
    start = sum(len(line) for line in lines[: pos.line])
    line = lines[pos.line]
    body = line.rstrip("\r\n")
    units = 0
    for index, char in enumerate(body):
        if units >= pos.character:
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(body)


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply edits (non-overlapping, positions against `text`) from the last to the first."""
    lines = text.splitlines(keepends=True)
    spans = [
        (
            utf16_offset(text, lines, e.range.start),
            utf16_offset(text, lines, e.range.end),
            e.new_text,
        )
        for e in edits
    ]
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text
