"""The user message of an `agentLsp.run`, from its arguments and the document text the server
holds: a `prompt` with its file, a `question` about a selection (worded here, CONTRACT
Decision 47), or the plan follow-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.server.commands import RunArgs, compose_prompt
from agent_lsp.server.folders import uri_to_path, workspace_folders
from agent_lsp.server.positions import lsp_lines
from agent_lsp.server.wording import selection_prompt


def range_text(ls: LanguageServer, text: str, rng: Any) -> str:
    """The exact text of an LSP range (positions in the negotiated encoding)."""
    lines = lsp_lines(text)
    codec = ls.workspace.position_codec
    start = codec.position_from_client_units(
        lines, types.Position(line=rng.start.line, character=rng.start.character)
    )
    end = codec.position_from_client_units(
        lines, types.Position(line=rng.end.line, character=rng.end.character)
    )
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(pos: Any) -> int:
        if pos.line >= len(lines):
            return len(text)
        return min(offsets[pos.line] + pos.character, offsets[pos.line + 1])

    return text[offset(start) : offset(end)]


@dataclass
class DocumentContext:
    shown: str  # how the model sees the file: workspace-relative (or the uri of an untitled buffer)
    text: str | None  # the document's text: the editor's buffer, else the file; None if unreadable
    language: str  # the editor's language id of an open buffer, else ""


def shown_name(ls: LanguageServer, uri: str) -> str:
    """A document as the model sees it: its workspace-relative path, else its path, else the uri."""
    path = uri_to_path(uri) if uri.startswith("file:") else None
    if path is None:
        return uri
    return PathGuard(*workspace_folders(ls)).display(path)


async def document_context(ls: LanguageServer, uri: str, *, need_text: bool) -> DocumentContext:
    """The run's document, read from the editor's buffer or, off the event loop, from disk.
    InvalidParams for a file outside every workspace folder (CONTRACT Decision 8)."""
    from agent_lsp.agent.fs.disk_workspace import read_disk_text

    roots, names = workspace_folders(ls)
    guard = PathGuard(roots, names)
    path = uri_to_path(uri) if uri.startswith("file:") else None
    if uri.startswith("file:") and (path is None or guard.root_of(path) is None):
        raise JsonRpcInvalidParams(
            f"agentLsp.run: textDocument {uri} is outside the workspace folders "
            f"({', '.join(map(str, roots))}); no run was started"
        )
    shown = guard.display(path) if path is not None else uri
    doc = ls.workspace.text_documents.get(uri)
    if doc is not None:
        return DocumentContext(shown, doc.source, doc.language_id or "")
    if not need_text or path is None:
        return DocumentContext(shown, None, "")
    try:
        text = (await read_disk_text(path))[0]
    except (ValueError, OSError):  # unreadable: a prompt goes without the selection
        text = None
    return DocumentContext(shown, text, "")


async def build_run_prompt(ls: LanguageServer, args: RunArgs) -> str:
    """The first user message of the run (InvalidParams when a question's selection cannot be
    read)."""
    if args.text_document is None:
        return compose_prompt(args, None, None)
    uri = args.text_document.uri
    wants_selection = args.range is not None and (
        args.question is not None or not args.selection_in_prompt
    )
    context = await document_context(ls, uri, need_text=wants_selection)
    selection = (
        range_text(ls, context.text, args.range)
        if wants_selection and context.text is not None
        else None
    )
    if args.question is None:
        return compose_prompt(args, context.shown, selection)
    if context.text is None:
        raise JsonRpcInvalidParams(
            f"agentLsp.run: the text of {uri} could not be read (not open in the editor, "
            "not a readable file): the question's selection is unknown; no run was started"
        )
    if not (selection or "").strip():
        raise JsonRpcInvalidParams(
            f"agentLsp.run: the range selects no text in {context.shown}: select the code "
            "the question is about (a question about no selection goes in `prompt`)"
        )
    return selection_prompt(
        args.question, context.shown, args.range, selection or "", context.language
    )
