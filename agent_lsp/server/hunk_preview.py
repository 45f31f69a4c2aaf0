"""An edit in the editor's Refactor Preview hunk by hunk (Decision 80): one annotated change per
hunk that needs no confirmation (so the preview shows it ticked) plus one confirming no-op entry
(so the preview opens at all); the user unticks the hunks they do not want."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.tools.hunks import Hunk, hunks_of
from agent_lsp.server.positions import lsp_lines, offset_position
from agent_lsp.server.preview_gate import PREVIEW_ANNOTATION


def hunk_annotation(hunk: Hunk) -> str:
    return f"agent-lsp-hunk-{hunk.index}"


def hunk_edits(
    ls: LanguageServer, before: str, after: str, hunks: list[Hunk], label: str
) -> tuple[list[types.AnnotatedTextEdit], dict[str, types.ChangeAnnotation]]:
    """The file's edits, one run of whole lines per change of each hunk (the preview lists
    them under the hunk's name), the no-op that asks, and their annotations."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    starts = [0]
    for line in old:
        starts.append(starts[-1] + len(line))
    lines = lsp_lines(before)
    edits: list[types.AnnotatedTextEdit] = []
    annotations = {
        PREVIEW_ANNOTATION: types.ChangeAnnotation(
            label=label,
            needs_confirmation=True,
            description="tick this too or not: it changes nothing; the hunks below are the edit",
        )
    }
    for hunk in hunks:
        annotations[hunk_annotation(hunk)] = types.ChangeAnnotation(
            label=f"hunk {hunk.index + 1} of {len(hunks)} {hunk.header}",
            needs_confirmation=False,
            description=f"untick to leave lines {hunk.header} as they are",
        )
        for i1, i2, j1, j2 in hunk.changes:
            edits.append(
                types.AnnotatedTextEdit(
                    range=types.Range(
                        start=offset_position(ls, lines, starts[i1]),
                        end=offset_position(ls, lines, starts[i2]),
                    ),
                    new_text="".join(new[j1:j2]),
                    annotation_id=hunk_annotation(hunk),
                )
            )
    noop = types.Position(line=0, character=0)
    edits.insert(
        0,
        types.AnnotatedTextEdit(
            range=types.Range(start=noop, end=noop), new_text="", annotation_id=PREVIEW_ANNOTATION
        ),
    )
    return edits, annotations


def hunk_workspace_edit(
    ls: LanguageServer, uri: str, open_doc: Any, before: str, after: str, label: str
) -> types.WorkspaceEdit:
    """A previewed edit of an existing file, hunk by hunk (versioned when the file is open)."""
    edits, annotations = hunk_edits(ls, before, after, hunks_of(before, after), label)
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=open_doc.version if open_doc is not None else None
                ),
                edits=list(edits),
            )
        ],
        change_annotations=annotations,
    )
