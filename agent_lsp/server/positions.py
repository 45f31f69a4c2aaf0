"""Text in LSP terms: its lines as LSP counts them, positions in the negotiated encoding, and
the minimal TextEdit between two texts."""

from __future__ import annotations

import re

from lsprotocol import types
from pygls.lsp.server import LanguageServer

_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lsp_lines(text: str) -> list[str]:
    """Lines as LSP counts them: only \\n, \\r\\n and \\r end a line (str.splitlines also
    splits on form feeds and U+2028, which editors do not)."""
    return _LSP_LINE.findall(text) or [""]


def offset_position(ls: LanguageServer, lines: list[str], offset: int) -> types.Position:
    """The LSP position of a character offset, in the negotiated encoding."""
    consumed = 0
    for index, segment in enumerate(lines):
        if offset < consumed + len(segment) or (
            index == len(lines) - 1 and not segment.endswith(("\n", "\r"))
        ):
            return ls.workspace.position_codec.position_to_client_units(
                lines, types.Position(line=index, character=offset - consumed)
            )
        consumed += len(segment)
    return types.Position(line=len(lines), character=0)  # just after a final line break


def _end_position(ls: LanguageServer, text: str) -> types.Position:
    lines = lsp_lines(text)
    return offset_position(ls, lines, len(text))


def changed_span(before: str, after: str) -> tuple[int, int, int]:
    """Where `after` differs from `before`: the start, and the end in each (character offsets),
    never splitting a \\r\\n pair (editors treat it as one line break)."""
    start = 0
    limit = min(len(before), len(after))
    while start < limit and before[start] == after[start]:
        start += 1
    end_b, end_a = len(before), len(after)
    while end_b > start and end_a > start and before[end_b - 1] == after[end_a - 1]:
        end_b -= 1
        end_a -= 1
    if 0 < start < len(before) and before[start - 1] == "\r" and before[start] == "\n":
        start -= 1
    if 0 < end_b < len(before) and before[end_b - 1] == "\r" and before[end_b] == "\n":
        end_b += 1
        end_a += 1
    return start, end_b, end_a


def minimal_edit(ls: LanguageServer, before: str, after: str) -> types.TextEdit:
    """One TextEdit covering only what changed, with positions in the negotiated encoding."""
    start, end_b, end_a = changed_span(before, after)
    lines = lsp_lines(before)
    return types.TextEdit(
        range=types.Range(
            start=offset_position(ls, lines, start), end=offset_position(ls, lines, end_b)
        ),
        new_text=after[start:end_a],
    )


def start_insert(text: str) -> types.TextEdit:
    """An edit that inserts `text` at the start of a document (a new or an empty one)."""
    return types.TextEdit(
        range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)
        ),
        new_text=text,
    )


def whole_edit(ls: LanguageServer, current: str, text: str) -> types.TextEdit:
    """An edit that replaces the whole of `current` with `text`."""
    return types.TextEdit(
        range=types.Range(
            start=types.Position(line=0, character=0), end=_end_position(ls, current)
        ),
        new_text=text,
    )
