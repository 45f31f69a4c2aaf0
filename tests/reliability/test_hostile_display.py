"""Issue 20 item 14 (Decision 45): invisible characters are escaped by property on every
approval surface: categories Cc, Cf, Zl, Zp, the Default_Ignorable_Code_Point set, U+2800 and
the Hangul fillers (and every blank other than U+0020); runs of 3+ spaces are marked."""

from __future__ import annotations

import os
import subprocess
import sys
import unicodedata

import pytest
import regex

from agent_lsp.acp.tools import tool_title
from agent_lsp.agent.display import (
    DEFAULT_IGNORABLE,
    escape_invisible,
    for_terminal,
    is_hidden,
    show_command,
)
from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.ports import Decision
from tests.headless.test_run_cli import agent_run
from tests.unit.kit import ScriptedApprover, call, run, tools_reply

pytestmark = pytest.mark.timeout(120)

# The variants the issue names, each a character that shows as nothing (or as a plain space).
VARIANTS = {
    "braille-blank": "\u2800",
    "variation-selector-16": "\ufe0f",
    "variation-selector-1": "\ufe00",
    "variation-selector-17": "\U000e0100",
    "variation-selector-256": "\U000e01ef",
    "tag-latin-a": "\U000e0041",
    "cancel-tag": "\U000e007f",
    "language-tag": "\U000e0001",
    "hangul-filler": "\u3164",
    "halfwidth-hangul-filler": "\uffa0",
    "hangul-choseong-filler": "\u115f",
    "hangul-jungseong-filler": "\u1160",
    "combining-grapheme-joiner": "\u034f",
    "mongolian-fvs4": "\u180f",
    "shorthand-format": "\U0001bca0",
    "musical-begin-beam": "\U0001d173",
    "arabic-number-sign (Cf, not ignorable)": "\u0600",
    "interlinear-annotation (Cf, not ignorable)": "\ufff9",
    "no-break-space (Zs)": "\u00a0",
    "ogham-space (Zs)": "\u1680",
    "ideographic-space (Zs)": "\u3000",
    "medium-math-space (Zs)": "\u205f",
    "line-separator (Zl)": "\u2028",
    "paragraph-separator (Zp)": "\u2029",
    "zero-width-space": "\u200b",
    "rtl-override": "\u202e",
    "invisible-times": "\u2062",
    "reserved-2065": "\u2065",
    "bom": "\ufeff",
}
# Every member the issue lists by name, as (first, last) ranges.
KNOWN = [(0x00AD, 0x00AD), (0x034F, 0x034F), (0x115F, 0x115F), (0x1160, 0x1160), (0x17B4, 0x17B5),
         (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
         (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
         (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF)]


def escape_of(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@pytest.mark.parametrize(("first", "last"), DEFAULT_IGNORABLE, ids=lambda v: f"{v:04X}")
def test_every_code_point_of_each_default_ignorable_range_is_escaped(first, last):
    for code in range(first, last + 1):
        ch = chr(code)
        shown = escape_invisible(f"a{ch}b")
        assert shown == f"a{escape_of(ch)}b", hex(code)
        assert show_command(f"ls {ch}x") == f"ls {escape_of(ch)}x", hex(code)


def test_the_table_holds_every_member_the_standard_names():
    table = {c for first, last in DEFAULT_IGNORABLE for c in range(first, last + 1)}
    for first, last in KNOWN:
        assert set(range(first, last + 1)) <= table, f"{first:04X}..{last:04X}"
    assert len(table) == 4174  # the size of Default_Ignorable_Code_Point since Unicode 14


def test_the_table_is_exactly_default_ignorable_code_point_per_an_independent_unicode_database():
    """The `regex` package carries its own Unicode tables (\\p{Default_Ignorable_Code_Point}):
    the hand-written ranges must be that set, no more, no less."""
    prop = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    expected = {c for c in range(sys.maxunicode + 1) if prop.match(chr(c))}
    table = {c for first, last in DEFAULT_IGNORABLE for c in range(first, last + 1)}
    assert table == expected, sorted(table ^ expected)[:20]


def test_every_cc_cf_zl_zp_and_non_ascii_blank_is_escaped():
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or (unicodedata.category(ch) == "Zs" and ch != " "):
            assert is_hidden(ch), hex(code)
            if ch not in "\n\t":
                assert ch not in escape_invisible(ch), hex(code)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_named_variant_is_escaped_by_the_display_functions(name):
    ch = VARIANTS[name]
    command = f"rm -rf /tmp/x{ch} /home"
    assert ch not in show_command(command) and escape_of(ch) in show_command(command)
    assert ch not in escape_invisible(command) and escape_of(ch) in escape_invisible(command)
    assert ch not in tool_title("run_command", {"command": command})  # the ACP permission's title


@pytest.mark.parametrize(("spaces", "marked"), [(2, False), (3, True), (4, True), (40, True)])
def test_runs_of_three_or_more_spaces_are_marked(spaces, marked):
    shown = show_command("git status" + " " * spaces + "; touch x")
    assert (f"⟨{spaces} spaces⟩" in shown) is marked
    assert "   " not in shown


def test_prose_for_a_terminal_keeps_text_and_escapes_only_controls():
    text = "naïve café — 日本語 \u202e\u200b ok\n\tindent\x1b[2A\x9b\x07"
    assert for_terminal(text) == "naïve café — 日本語 \u202e\u200b ok\n\tindent\\e[2A\\x9b\\x07"


@pytest.mark.parametrize("name", list(VARIANTS))
async def test_each_variant_is_escaped_in_the_approval_request_and_the_approval_event(model, workspace, name):
    """End to end through the loop: what the approver is asked and the `approval` stream
    event (what every editor shows) carry the escape, never the character."""
    ch = VARIANTS[name]
    command = f"echo safe{ch}; touch pwned"
    model.add([tools_reply(call("run_command", id="c", command=command)), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)
    _, events, _ = await run("go", model, workspace, approver=approver)
    (request,) = approver.requests
    assert ch not in request.detail and escape_of(ch) in request.detail
    pending = [e for e in events.of("approval") if wire_fields(e)["state"] == "pending"]
    assert pending and all(ch not in wire_fields(e)["detail"] and ch not in e.text for e in pending)
    assert escape_of(ch) in wire_fields(pending[0])["detail"]
    assert not (workspace / "pwned").exists()


def test_every_variant_is_escaped_in_the_terminal_approval_prompt(model, workspace):
    """`agent-lsp run` asking a person on a TTY: one call per variant, each denied; the prompt
    shows each escape and none of the characters."""
    names = list(VARIANTS)
    model.add([tools_reply(*(call("run_command", id=f"c{i}", command=f"echo v{i}{VARIANTS[n]}x") for i, n in enumerate(names))),
               {"text": "ok"}])
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(agent_run(model, workspace, "go", yes=False), stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(slave)
        os.write(master, b"d\n" * len(names))
        out, err = proc.communicate(timeout=90)
    finally:
        os.close(master)
    assert proc.returncode == 0, out + err
    for i, name in enumerate(names):
        ch = VARIANTS[name]
        assert f"echo v{i}{escape_of(ch)}x" in err, name
        assert f"v{i}{ch}" not in err, name
