"""Positions as the model sees them and as a language server counts them: a 1-based line and a
symbol's text on it, to an LSP position in the source's encoding (UTF-16 by default, so a
character outside the BMP before the symbol counts two), and an LSP position back to a 1-based
line and a column in characters. Lines are split as LSP splits them (\\n, \\r\\n or \\r)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent_lsp.agent.tools.errors import ToolError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 code units each
SHOWN_LINE_CHARS = 200  # a shown line is cut here (minified files)


def line_starts(text: str) -> list[int]:
    """The offset where each LSP line starts."""
    return [0, *(m.end() for m in _LINE_BREAK.finditer(text))]


def lsp_lines(text: str) -> list[str]:
    """The text's lines without their breaks, as LSP numbers them."""
    return _LINE_BREAK.split(text)


def units(text: str, encoding: str) -> int:
    """How many code units `text` is in `encoding` ("utf-16", "utf-8", "utf-32")."""
    if encoding == "utf-8":
        return len(text.encode("utf-8", errors="surrogatepass"))
    if encoding == "utf-32":
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def to_units(line: str, column: int, encoding: str) -> int:
    """A column in characters (0-based) -> the LSP `character` in `encoding`."""
    return units(line[:column], encoding)


def to_column(line: str, character: int, encoding: str) -> int:
    """An LSP `character` in `encoding` -> a column in characters (0-based), clamped to the
    line (a server may point past its end)."""
    if (
        encoding == "utf-32"
        or line.isascii()
        or (encoding == "utf-16" and not _ASTRAL.search(line))
    ):
        return max(0, min(character, len(line)))  # one unit per character on this line
    count = 0
    for index, char in enumerate(line):
        if count >= character:
            return index
        count += units(char, encoding)
    return len(line)


def _identifier_like(symbol: str) -> bool:
    return bool(re.fullmatch(r"\w+", symbol))


def find_symbol(line_text: str, symbol: str, occurrence: int = 1) -> int:
    """The column (0-based, in characters) of the `occurrence`-th whole `symbol` on the line.
    ToolError with the line's text when it is not there."""
    if not symbol:
        raise ToolError("symbol is empty; give the identifier's text as it appears on the line")
    pattern = re.escape(symbol)
    if _identifier_like(symbol):  # whole identifiers only: `area` is not in `surface_area`
        pattern = rf"(?<!\w){pattern}(?!\w)"
    found = [m.start() for m in re.finditer(pattern, line_text)]
    if len(found) >= occurrence:
        return found[occurrence - 1]
    shown = shorten(line_text)
    if not found:
        raise ToolError(
            f"`{symbol}` is not on that line as a whole identifier; the line is: {shown!r}"
        )
    raise ToolError(
        f"`{symbol}` occurs {len(found)} time(s) on that line, not {occurrence}; "
        f"the line is: {shown!r}"
    )


def shorten(line: str) -> str:
    text = line.strip()
    return text if len(text) <= SHOWN_LINE_CHARS else text[:SHOWN_LINE_CHARS] + "…"


@dataclass(frozen=True)
class Spot:
    """A place in a file for the model: a 1-based line and a 1-based column in characters."""

    line: int
    column: int


class TextIndex:
    """One file's text with its LSP lines, to convert positions both ways and to apply edits."""

    def __init__(self, text: str):
        self.text = text
        self.starts = line_starts(text)
        self.lines = lsp_lines(text)

    def line(self, number: int) -> str:
        """The 0-based line's text ("" past the end)."""
        return self.lines[number] if 0 <= number < len(self.lines) else ""

    def spot(self, position: dict[str, Any], encoding: str) -> Spot:
        line = max(0, int(position.get("line", 0)))
        column = to_column(self.line(line), int(position.get("character", 0)), encoding)
        return Spot(line + 1, column + 1)

    def offset(self, position: dict[str, Any], encoding: str) -> int:
        """An LSP position -> an offset into the text (clamped: a line past the end is the end,
        a character past the line's end is the line's end)."""
        line = int(position.get("line", 0))
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.text)
        return self.starts[line] + to_column(
            self.line(line), int(position.get("character", 0)), encoding
        )

    def position(self, line: int, column: int, encoding: str) -> dict[str, int]:
        """A 0-based line and 0-based column in characters -> an LSP position."""
        return {"line": line, "character": to_units(self.line(line), column, encoding)}


def symbol_position(
    index: TextIndex, line: int, symbol: str, occurrence: int, encoding: str
) -> dict[str, int]:
    """The model's 1-based `line` + `symbol` -> the LSP position of the symbol's start."""
    if line < 1 or line > len(index.lines):
        raise ToolError(f"line {line} is past the end of the file ({len(index.lines)} lines)")
    column = find_symbol(index.line(line - 1), symbol, occurrence)
    return index.position(line - 1, column, encoding)
