"""The co-editing merge (agent_lsp.agent.fs.merge): base, current and the agent's result merged
by lines; every side's change kept, overlaps a conflict with both sides' lines, line endings and
a last line without a newline kept as they are."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_lsp.agent.fs.merge import conflict_note, merged_note, resolve

BASE = "".join(f"line {i}\n" for i in range(1, 11))


def test_disjoint_changes_merge_and_the_agents_lines_are_located_in_the_merged_text():
    current = "header\n" + BASE.replace("line 9\n", "line 9 (user)\n")
    agent = BASE.replace("line 4\n", "line 4a\nline 4b\n").replace("line 7\n", "")
    merged = resolve(BASE, current, agent)
    assert merged.text == "header\n" + agent.replace("line 9\n", "line 9 (user)\n")
    assert merged.lines == [(5, 6), (9, 8)]  # 4a-4b now at 5-6; line 7's deletion before line 9
    assert merged_note(merged) == ("the file had changed since it was read; your edit was merged with those "
                                   "changes (your changes are at lines 5-6; lines you deleted were just before line 9)")


def test_an_overlap_is_a_conflict_with_both_sides_lines_and_where_it_is_now():
    current = "new top\n" + BASE.replace("line 5\n", "line 5 (user)\n")
    agent = BASE.replace("line 5\n", "line 5 (agent)\n")
    conflict = resolve(BASE, current, agent)
    assert conflict.text is None and len(conflict.conflicts) == 1
    [hunk] = conflict.conflicts
    assert (hunk.current_line, hunk.agent, hunk.current) == (6, ["line 5 (agent)\n"], ["line 5 (user)\n"])
    note = conflict_note("a.py", conflict)
    assert note.startswith("conflict: a.py had changed since it was read") and "nothing was applied" in note
    assert "your lines:\n  line 5 (agent)\ncurrent lines:\n  line 5 (user)" in note


def test_creates_and_deletions_meanwhile():
    assert resolve(None, None, "x\n").text == "x\n"
    assert resolve(None, "", "x\n").text == "x\n"  # an empty file: nothing to lose
    appeared = resolve(None, "the user's\n", "x\n")
    assert appeared.conflict and "created since the agent looked" in conflict_note("n.md", appeared)
    assert resolve("a\n", None, "b\n").conflict


def test_crlf_and_a_last_line_without_newline_are_kept():
    base = "a\r\nb\r\nc\r\nd\r\ne"
    current = base.replace("a\r\n", "A\r\n")
    agent = base.replace("e", "E")
    assert resolve(base, current, agent).text == "A\r\nb\r\nc\r\nd\r\nE"


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "\n", "d"]), max_size=12).map("".join)


@given(base=lines, other=lines)
def test_one_side_unchanged_gives_the_other_side(base, other):
    assert resolve(base, base, other).text == other  # the user did nothing: the agent's text
    assert resolve(base, other, base).text == other  # the agent changed nothing: the user's text
