"""Co-editing: an edit computed on the text the tool read, merged at apply time with what the user
changed since (a three-way line merge, `merge3` with patiencediff's matcher: Decision 82)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_lsp.agent.ports import EditOutcome

CONTEXT_LINES_SHOWN = 40  # per side of one conflicting hunk in the model's result
# An edit to an editor buffer with the user's unsaved changes: our clients leave it unsaved
# (Decision 81), and the result says so
NOT_SAVED = (
    "not saved: you were editing it (the user's buffer had unsaved changes: the edit is in "
    "the editor, not yet on disk, until the user saves)"
)


@dataclass(frozen=True)
class ConflictHunk:
    """Where the agent's edit and the user's changes overlap: `current_line` is the 1-based line
    where the hunk starts in the current text."""

    current_line: int
    agent: list[str]
    current: list[str]


@dataclass(frozen=True)
class Resolution:
    """What to apply: `text` (None: nothing, a conflict). `merged`: the current text differed
    from the one the edit was computed on and was merged; `lines`: the agent's changes in the
    merged text as 1-based (first, last) lines (last < first: lines deleted before `first`)."""

    text: str | None
    merged: bool = False
    lines: list[tuple[int, int]] = field(default_factory=list)
    conflicts: list[ConflictHunk] = field(default_factory=list)
    why: str = ""  # a conflict's cause when it has no hunks (a file that appeared or vanished)
    onto: str | None = None  # a merge: the current text it was merged onto (the user's changes)

    @property
    def conflict(self) -> bool:
        return self.text is None


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split at "\\n" only (a form feed or U+2028 inside a line is no
    line break in the editor's numbering)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _matcher() -> Any:
    from patiencediff import PatienceSequenceMatcher

    return PatienceSequenceMatcher


def merge3_lines(base: str, current: str, agent: str) -> Resolution:
    """The three-way merge of `base` (what the edit was computed on), `current` (the text now)
    and `agent` (the edit's result)."""
    from merge3 import Merge3

    base_lines, current_lines, agent_lines = (
        split_lines(base),
        split_lines(current),
        split_lines(agent),
    )
    # merged as line numbers (equal lines, equal numbers): hashing ints, not text, halves the time
    ids: dict[str, int] = {}
    m3 = Merge3(
        [ids.setdefault(line, len(ids)) for line in base_lines],
        [ids.setdefault(line, len(ids)) for line in current_lines],
        [ids.setdefault(line, len(ids)) for line in agent_lines],
        sequence_matcher=_matcher(),
    )
    out: list[str] = []
    lines: list[tuple[int, int]] = []
    conflicts: list[ConflictHunk] = []
    for found in m3.merge_regions():
        region: tuple[Any, ...] = tuple(found)
        kind = region[0]
        if kind == "conflict":
            _, _zs, _ze, a_start, a_end, b_start, b_end = region
            conflicts.append(
                ConflictHunk(a_start + 1, agent_lines[b_start:b_end], current_lines[a_start:a_end])
            )
            continue
        start, end = region[1], region[2]
        if kind == "b":  # the agent's change alone
            lines.append((len(out) + 1, len(out) + end - start))
            out.extend(agent_lines[start:end])
        elif kind == "unchanged":
            out.extend(base_lines[start:end])
        else:  # the user's change alone, or both the same
            out.extend(current_lines[start:end])
    if conflicts:
        return Resolution(None, True, conflicts=conflicts)
    return Resolution("".join(out), True, lines)


def resolve(base: str | None, current: str | None, agent: str) -> Resolution:
    """What an edit computed on `base` (None: a create) becomes on `current` (None: no file)."""
    if base == current or (base is None and current == ""):  # an empty file: nothing to lose
        return Resolution(agent)
    if base is None:
        return Resolution(None, True, why="the file was created since the agent looked")
    if current is None:
        return Resolution(None, True, why="the file was deleted since the agent read it")
    return replace(merge3_lines(base, current, agent), onto=current)


def merged_note(resolution: Resolution) -> str:
    """The result's line for a clean merge (Decision 57)."""
    spans = [
        f"{first}" if first == last else f"{first}-{last}"
        for first, last in resolution.lines
        if last >= first
    ]
    deleted = [str(first) for first, last in resolution.lines if last < first]
    where = [f"your changes are at lines {', '.join(spans)}"] if spans else []
    if deleted:
        where.append(f"lines you deleted were just before line {', '.join(deleted)}")
    return "the file had changed since it was read; your edit was merged with those changes" + (
        f" ({'; '.join(where)})" if where else ""
    )


def conflict_note(name: str, resolution: Resolution) -> str:
    """The result's text for a conflict (Decision 57): the agent's and the current lines."""
    if not resolution.conflicts:
        return f"conflict: {name}: {resolution.why}; nothing was applied"
    parts = [
        f"conflict: {name} had changed since it was read, and your edit overlaps those changes; "
        "nothing was applied"
    ]
    for number, hunk in enumerate(resolution.conflicts, 1):
        parts.append(
            f"hunk {number} at line {hunk.current_line} of the current text:\n"
            f"your lines:\n{_shown(hunk.agent)}\ncurrent lines:\n{_shown(hunk.current)}"
        )
    return "\n".join(parts)


def _shown(lines: list[str]) -> str:
    if not lines:
        return "  (none)"
    shown = ["  " + line.rstrip("\r\n") for line in lines[:CONTEXT_LINES_SHOWN]]
    if len(lines) > CONTEXT_LINES_SHOWN:
        shown.append(f"  … ({len(lines) - CONTEXT_LINES_SHOWN} more lines)")
    return "\n".join(shown)


def conflict_outcome(path: Path, resolution: Resolution) -> EditOutcome:
    return EditOutcome(False, conflict_note(path.name, resolution), conflict=True)


def applied_outcome(path: Path, resolution: Resolution, version: int | None = None) -> EditOutcome:
    """An applied edit's outcome: a merge says so and gives the text that landed."""
    if not resolution.merged or resolution.text is None:
        return EditOutcome(True, version=version)
    return EditOutcome(
        True,
        merged_note(resolution),
        version=version,
        landed={path: resolution.text},
        merged_onto={path: resolution.onto} if resolution.onto is not None else {},
    )
