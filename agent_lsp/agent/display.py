"""What an approval shows must be what runs: invisible characters escaped by their Unicode
property, long space runs marked, so nothing can hide behind padding or an invisible character
(CONTRACT Decisions 12 and 45). Also what a terminal may be given: text without control
characters, so no escape sequence the model or a file wrote ever reaches the terminal."""

from __future__ import annotations

import re
import unicodedata

# Default_Ignorable_Code_Point, as Unicode's DerivedCoreProperties.txt lists it (Unicode 14.0
# through 16.0: the set last grew in 14.0, with U+180F). The derivation there is
#   Other_Default_Ignorable_Code_Point + Cf + Variation_Selector
#   - White_Space - FFF9..FFFB (interlinear annotation) - 13430..1343F (Egyptian format
#   controls) - Prepended_Concatenation_Mark,
# and Python's unicodedata has none of those properties, so the resulting ranges are written
# out here (tests/reliability/test_hostile_display.py checks each of them). Besides the
# zero-width and bidi controls it holds the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0),
# which look like nothing, the variation selectors, the tag characters (U+E0000-E007F, used
# to smuggle hidden text) and the reserved blocks meant to stay invisible when assigned later.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ, AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # bidi embeddings and overrides
    # WORD JOINER .. NOMINAL DIGIT SHAPES (bidi isolates, invisible operators; 2065 reserved)
    (0x2060, 0x206F),
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1..16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT controls
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM .. END PHRASE
    # tags (E0001, E0020-E007F), VARIATION SELECTOR-17..256 (E0100-E01EF), reserved
    (0xE0000, 0xE0FFF),
)
_IGNORABLE = frozenset(code for first, last in DEFAULT_IGNORABLE for code in range(first, last + 1))
# Blank yet not a space to the shell or a reader: the braille blank renders as an empty cell.
_BLANK = frozenset({0x2800})
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e", "\x00": "\\0"}
SPACE_RUN = 3  # this many spaces in a row are shown as a count (Decision 45)
_SPACE_RUN = re.compile(f" {{{SPACE_RUN},}}")
MAX_TITLE = 120


def _escape_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def is_hidden(ch: str) -> bool:
    """A character that does not show as itself: a control, format, line/paragraph separator,
    private-use or surrogate character, a Default_Ignorable_Code_Point, the braille blank, or a
    space other than U+0020 (a no-break or ideographic space looks like a space but is not one
    to the shell)."""
    code = ord(ch)
    if code in _IGNORABLE or code in _BLANK:
        return True
    category = unicodedata.category(ch)
    return category in _HIDDEN_CATEGORIES or (category == "Zs" and ch != " ")


def escape_invisible(text: str, keep_newlines: bool = True) -> str:
    """Every invisible character as a visible escape (newlines and tabs kept when asked, for
    multi-line text such as a diff)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        ch if (keep_newlines and ch in "\n\t") or not is_hidden(ch) else _escape_char(ch)
        for ch in text
    )


def show_command(command: str) -> str:
    """A command line exactly as it would run, on one line: escapes for anything invisible or
    line-breaking, and runs of 3 or more spaces marked with their length."""
    shown = escape_invisible(command, keep_newlines=False)
    return _SPACE_RUN.sub(lambda m: f" ⟨{len(m.group())} spaces⟩ ", shown)


def for_terminal(text: str) -> str:
    """Text for a terminal (model prose, command output, file names, session titles): control
    characters escaped, newlines and tabs kept. ESC and the C1 controls (U+0080-U+009F) start
    every terminal escape sequence (CSI, OSC such as the OSC 52 clipboard write, DCS), so with
    them escaped what follows is plain text (Decision 45: prose escapes only these)."""
    if text.isprintable():
        return text
    return "".join(
        _escape_char(ch) if unicodedata.category(ch) == "Cc" and ch not in "\n\t" else ch
        for ch in text
    )


def fits_title(text: str, limit: int = MAX_TITLE) -> bool:
    """True when text can be shown whole in one menu line (code-action titles)."""
    return "\n" not in text and len(text) <= limit


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary with "…" when it is longer (a word
    cut in half reads as a typo, and a log or a pipe has no terminal width to fill)."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:  # a long unbroken token (a path, a hash) is cut where it must be
        head = head[:space]
    return head.rstrip() + "…"
