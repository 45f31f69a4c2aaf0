"""What an approval shows must be what runs: control, zero-width and bidi characters escaped,
long space runs marked, so nothing can hide behind padding or an invisible character."""

from __future__ import annotations

import re
import unicodedata

# Characters that change how text looks without being seen: zero-width, joiners, marks,
# bidi embeddings/overrides/isolates (Trojan Source), soft hyphen, BOM.
_INVISIBLE = set("\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d"
                 "\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\u3164\ufeff\uffa0")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e", "\x00": "\\0"}
_SPACE_RUN = re.compile(r"[ \u00a0\u2000-\u200a\u202f\u205f\u3000]{4,}")
MAX_TITLE = 120


def _escape_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden(ch: str) -> bool:
    return ch in _INVISIBLE or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs")


def escape_invisible(text: str, keep_newlines: bool = True) -> str:
    """Every control/format/bidi/zero-width character as a visible escape (newlines kept when
    asked, for multi-line text such as a diff)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(ch if (keep_newlines and ch == "\n") or (ch == "\t" and keep_newlines) or not _hidden(ch)
                   else _escape_char(ch) for ch in text)


def show_command(command: str) -> str:
    """A command line exactly as it would run, on one line: escapes for anything invisible or
    line-breaking, and long space runs marked with their length."""
    shown = escape_invisible(command, keep_newlines=False)
    return _SPACE_RUN.sub(lambda m: f" ⟨{len(m.group())} spaces⟩ ", shown)


def fits_title(text: str, limit: int = MAX_TITLE) -> bool:
    """True when text can be shown whole in one menu line (code-action titles)."""
    return "\n" not in text and len(text) <= limit
