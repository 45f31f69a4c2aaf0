"""An edit in the editor's Refactor Preview hunk by hunk (Decision 80): one annotated change per
hunk that needs no confirmation (so the preview shows it ticked) plus one confirming no-op entry
(so the preview opens at all); the user unticks the hunks they do not want."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.tools.hunks import Hunk, hunks_of
from agent_lsp.server.positions import changed_span, lsp_lines, offset_position
from agent_lsp.server.preview_gate import PREVIEW_ANNOTATION


def hunk_annotation(hunk: Hunk) -> str:
    return f"agent-lsp-hunk-{hunk.index}"


def hunk_edits(
    ls: LanguageServer,
    before: str,
    after: str,
    hunks: list[Hunk],
    *,
    total: int | None = None,
    trim: bool = False,
) -> tuple[list[types.AnnotatedTextEdit], dict[str, types.ChangeAnnotation]]:
    """The file's edits, one per change of each hunk (the preview lists them under the hunk's
    name), and the hunks' annotations. `total`: the approval's count of hunks (every file's);
    `trim`: each changed line (of a change that keeps its line count) cut to the characters
    that differ (a rename's places), else each change's whole lines."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    starts = [0]
    for line in old:
        starts.append(starts[-1] + len(line))
    lines = lsp_lines(before)
    edits: list[types.AnnotatedTextEdit] = []
    annotations = {}
    for hunk in hunks:
        annotations[hunk_annotation(hunk)] = types.ChangeAnnotation(
            label=f"hunk {hunk.index + 1} of {total or len(hunks)} {hunk.header}",
            needs_confirmation=False,
            description=f"untick to leave lines {hunk.header} as they are",
        )
        for i1, i2, j1, j2 in _pieces(hunk.changes, old, new, trim):
            was, becomes = "".join(old[i1:i2]), "".join(new[j1:j2])
            first, end, end_new = (
                changed_span(was, becomes) if trim else (0, len(was), len(becomes))
            )
            edits.append(
                types.AnnotatedTextEdit(
                    range=types.Range(
                        start=offset_position(ls, lines, starts[i1] + first),
                        end=offset_position(ls, lines, starts[i1] + end),
                    ),
                    new_text=becomes[first:end_new],
                    annotation_id=hunk_annotation(hunk),
                )
            )
    return edits, annotations


def _pieces(
    changes: tuple[tuple[int, int, int, int], ...], old: list[str], new: list[str], by_line: bool
) -> list[tuple[int, int, int, int]]:
    """The changes, those that keep their line count split line by line (`by_line`; lines
    that stay the same dropped)."""
    if not by_line:
        return list(changes)
    out = []
    for i1, i2, j1, j2 in changes:
        if i2 - i1 != j2 - j1:
            out.append((i1, i2, j1, j2))
            continue
        out += [(i, i + 1, j1 + i - i1, j1 + i - i1 + 1) for i in range(i1, i2)]
    return [(i1, i2, j1, j2) for i1, i2, j1, j2 in out if old[i1:i2] != new[j1:j2]]


def confirming_entry(
    label: str,
) -> tuple[types.AnnotatedTextEdit, dict[str, types.ChangeAnnotation]]:
    """The no-op entry that needs confirmation, so the editor opens its preview at all."""
    noop = types.Position(line=0, character=0)
    entry = types.AnnotatedTextEdit(
        range=types.Range(start=noop, end=noop), new_text="", annotation_id=PREVIEW_ANNOTATION
    )
    return entry, {
        PREVIEW_ANNOTATION: types.ChangeAnnotation(
            label=label,
            needs_confirmation=True,
            description="tick this too or not: it changes nothing; the hunks below are the edit",
        )
    }


def hunk_workspace_edit(
    ls: LanguageServer, uri: str, open_doc: Any, before: str, after: str, label: str
) -> types.WorkspaceEdit:
    """A previewed edit of an existing file, hunk by hunk (versioned when the file is open)."""
    edits, annotations = hunk_edits(ls, before, after, hunks_of(before, after))
    noop, asks = confirming_entry(label)
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=open_doc.version if open_doc is not None else None
                ),
                edits=[noop, *edits],
            )
        ],
        change_annotations={**asks, **annotations},
    )
