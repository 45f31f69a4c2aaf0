"""An edit's hunks (difflib's unified-diff hunks, 3 context lines) and the text an edit gets when
the user keeps only some of them (CONTRACT "Per-hunk review", Decisions 58 and 80)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONTEXT = 3  # the unified diff's context lines: the diff the user is shown
RENAME_WARNING = (
    "Warning: only part of the rename was applied, so the code may not compile "
    "(references to the old name remain); check before going on."
)


@dataclass(frozen=True)
class Hunk:
    """One hunk of one file's diff. `index` is global across the approval (file order, then hunk
    order, 0-based); `changes` are its non-equal opcodes, as (i1, i2, j1, j2) line ranges."""

    index: int
    header: str  # the `@@ -a,b +c,d @@` line
    old_start: int  # 1-based first line of the hunk in the old text
    old_count: int
    new_count: int
    text: str  # the hunk as the diff shows it, header included
    changes: tuple[tuple[int, int, int, int], ...]

    def wire(self) -> dict[str, object]:
        return {"index": self.index, "header": self.header}


def _range(start: int, stop: int) -> str:
    """difflib's own `-a,b` form: a one-line range has no count, an empty one starts before."""
    beginning = start + 1
    length = stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def _lines(text: str | None) -> list[str]:
    return (text or "").splitlines(keepends=True)


def _shown(prefix: str, lines: Iterable[str]) -> list[str]:
    return [
        prefix + (line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        for line in lines
    ]


def hunks_of(before: str | None, after: str, first_index: int = 0) -> list[Hunk]:
    """The hunks of the diff from `before` (None: a new file) to `after`, numbered from
    `first_index` (the count of the approval's earlier files' hunks)."""
    old, new = _lines(before), _lines(after)
    out: list[Hunk] = []
    matcher = difflib.SequenceMatcher(None, old, new)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        header = f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@"
        body = [header + "\n"]
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                body += _shown(" ", old[a1:a2])
                continue
            body += _shown("-", old[a1:a2]) + _shown("+", new[b1:b2])
        out.append(
            Hunk(
                first_index + len(out),
                header,
                i1 + 1,
                i2 - i1,
                j2 - j1,
                "".join(body),
                tuple((a1, a2, b1, b2) for tag, a1, a2, b1, b2 in group if tag != "equal"),
            )
        )
    return out


def file_hunks(files: Sequence[tuple[str, str | None, str]]) -> list[tuple[str, list[Hunk]]]:
    """Each file's (name, hunks) for an edit of several files, numbered across them all."""
    out: list[tuple[str, list[Hunk]]] = []
    count = 0
    for name, before, after in files:
        hunks = hunks_of(before, after, count)
        count += len(hunks)
        out.append((name, hunks))
    return out


def _changes(hunks: Sequence[Hunk]) -> list[tuple[int, int, int, int, int]]:
    """Every change of the hunks in text order, with its hunk's index (the hunks hold every
    change of the diff: no second diff is needed)."""
    return sorted((*change, hunk.index) for hunk in hunks for change in hunk.changes)


def with_hunks(before: str | None, after: str, hunks: Sequence[Hunk], chosen: set[int]) -> str:
    """The text `before` gets when only the hunks whose index is in `chosen` are applied
    (`hunks`: all the hunks of the diff from `before` to `after`)."""
    old, new = _lines(before), _lines(after)
    out: list[str] = []
    at = 0
    for i1, i2, j1, j2, index in _changes(hunks):
        out += old[at:i1]
        out += new[j1:j2] if index in chosen else old[i1:i2]
        at = i2
    out += old[at:]
    return "".join(out)


def lines_now(hunk: Hunk, hunks: Sequence[Hunk], chosen: set[int]) -> str:
    """Where a rejected hunk's lines are in the text as applied: its old lines, moved by the
    applied hunks above it."""
    shift = sum(
        h.new_count - h.old_count for h in hunks if h.index in chosen and h.index < hunk.index
    )
    start = hunk.old_start + shift
    return f"line {start}" if hunk.old_count <= 1 else f"lines {start}-{start + hunk.old_count - 1}"


def _numbers(values: Sequence[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def partial_note(
    files: Sequence[tuple[str, Sequence[Hunk]]], chosen: set[int], *, rename: bool = False
) -> str:
    """What the model reads after a partial apply: which hunks landed, which the user rejected
    (1-based, with their lines now and their text)."""
    every = [h for _, hunks in files for h in hunks]
    total = len(every)
    applied = [h.index + 1 for h in every if h.index in chosen]
    parts = [f"applied hunk{'s' if len(applied) > 1 else ''} {_numbers(applied)} of {total}"]
    shown: list[str] = []
    for name, hunks in files:
        for hunk in hunks:
            if hunk.index in chosen:
                continue
            where = lines_now(hunk, hunks, chosen)
            place = f"{name} {where}" if len(files) > 1 else where
            parts.append(f"the user rejected hunk {hunk.index + 1} of {total} ({place})")
            shown.append(f"rejected hunk {hunk.index + 1} ({name}):\n{hunk.text.rstrip()}")
    note = "; ".join(parts) + ". Those rejected lines were not changed.\n" + "\n".join(shown)
    return note + (f"\n{RENAME_WARNING}" if rename else "")


def landed_hunks(
    before: str | None, after: str, hunks: Sequence[Hunk], final: str
) -> set[int] | None:
    """Which hunks the text `final` holds (the editor applied the ticked ones of a preview);
    None when it is no choice of whole hunks (the user unticked a part of one, or typed)."""
    old, new, now = _lines(before), _lines(after), _lines(final)
    changes = _changes(hunks)
    landed: set[tuple[int, int, int, int]] = set()
    at = 0  # in `now`
    done = 0  # in `old`
    for k, (i1, i2, j1, j2, _) in enumerate(changes):
        if now[at : at + i1 - done] != old[done:i1]:  # the equal run before the change
            return None
        at += i1 - done
        # the change is in when its new lines are there and the next equal run follows (a
        # deletion's empty new lines always "match": the run decides)
        last = k + 1 == len(changes)
        rest = old[i2 : len(old) if last else changes[k + 1][0]]
        took = at + j2 - j1
        follows = now[took:] == rest if last else now[took : took + len(rest)] == rest
        if now[at:took] == new[j1:j2] and follows:
            landed.add((i1, i2, j1, j2))
            at = took
        elif now[at : at + i2 - i1] == old[i1:i2]:
            at += i2 - i1
        else:
            return None
        done = i2
    chosen = {h.index for h in hunks if set(h.changes) <= landed}
    return chosen if with_hunks(before, after, hunks, chosen) == final else None
