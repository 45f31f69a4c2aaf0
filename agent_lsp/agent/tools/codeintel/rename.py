"""rename_symbol: the language server's rename as ONE edit over every file it touches: its
WorkspaceEdit (`changes` or `documentChanges`; creating, moving or deleting files is refused)
applied to each file's current text, reviewed as one approval showing every file's diff (or
in the editor's own preview, CONTRACT "Edit review"), checkpointed, and applied as one change
(CONTRACT "Code intelligence", Decision 39)."""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from agent_lsp.agent.ports import CodeIntelError, Document, EditOutcome, FileChange
from agent_lsp.agent.tools.base import EditRejected, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.codeintel.navigate import SymbolArgs
from agent_lsp.agent.tools.codeintel.positions import TextIndex, symbol_position
from agent_lsp.agent.tools.codeintel.service import (
    resolve_uri,
    sync_for_request,
    sync_sources,
    target,
)
from agent_lsp.agent.tools.codeintel.sources import caveat_of, encoding_of, no_source, with_notes
from agent_lsp.agent.tools.edits import applied_late, diff_summary, unified_diff
from agent_lsp.agent.tools.hunks import (
    RENAME_WARNING,
    Hunk,
    file_hunks,
    landed_hunks,
    partial_note,
    with_hunks,
)
from agent_lsp.agent.tools.paths import PathRefused

DETAIL_DIFF_LINES = 400  # the approval's detail: every file's diff, cut here (the event has all)


class RenameArgs(SymbolArgs):
    newName: str = Field(  # noqa: N815 - the contract's name
        min_length=1, description="The new name"
    )


class RenameSymbol(Tool):
    name = "rename_symbol"
    description = (
        "Rename a symbol everywhere it is used, through the language server (exact: not "
        "same-named other symbols, strings or comments), as one edit over every file it "
        "touches, reviewed and applied like an edit. Prefer it to edit_file for renames."
    )
    args = RenameArgs
    read_only = False

    async def prepare(self, args: RenameArgs, ctx: ToolContext) -> Prepared:
        if re.search(r"\s", args.newName):
            raise ToolError(f"newName {args.newName!r} holds whitespace; give one identifier")
        path, index, text = await target(ctx, args.path)
        if ctx.paths.root_of(path) is None:
            raise ToolError(f"{args.path} is outside the workspace; it is not renamed in")
        symbol_position(index, args.line, args.symbol, args.occurrence, "utf-16")  # a miss: now
        edit, encoding, caveat = await _ask_rename(ctx, args, path, index, text)
        touched: list[tuple[Path, Path]] = []
        changes = await file_changes(ctx, edit, encoding, touched)
        if not changes:
            raise ToolError(f"the language server's rename of `{args.symbol}` changes nothing")
        prepared = _prepared(ctx, args, changes, path, [caveat] if caveat else [])
        # Every file the rename writes, as the server named it and resolved: `Edit(…)` path
        # rules cover each one (CONTRACT Decision 28), not only the `path` argument.
        prepared.paths = touched
        return prepared


async def _ask_rename(
    ctx: ToolContext, args: RenameArgs, path: Path, index: TextIndex, text: str
) -> tuple[dict[str, Any], str, str | None]:
    """prepareRename first (a server that does not know it, or says nothing, is then asked to
    rename anyway), then textDocument/rename; the first source with an edit answers (with its
    caveat: a server still reading the workspace may rename only some uses)."""
    sources = ctx.code_intel.sources_for(path) if ctx.code_intel is not None else []
    if not sources:
        raise no_source(path)
    why: list[str] = []
    for source in sources:
        encoding = encoding_of(source, path)
        position = symbol_position(index, args.line, args.symbol, args.occurrence, encoding)
        doc = {"textDocument": {"uri": path.as_uri()}, "position": position}
        try:
            await sync_for_request(ctx, source, path, text)
            prepared = await source.request("textDocument/prepareRename", doc, path)
        except CodeIntelError as exc:
            prepared, note = None, str(exc)
        else:
            note = ""
        if isinstance(prepared, dict) and prepared.get("defaultBehavior") is False:
            why.append(f"{source.name}: it cannot rename there")
            continue
        try:
            edit = await source.request(
                "textDocument/rename", {**doc, "newName": args.newName}, path
            )
        except CodeIntelError as exc:
            why.append(f"{source.name}: {exc}" + (f" (prepareRename: {note})" if note else ""))
            continue
        if isinstance(edit, dict) and (edit.get("changes") or edit.get("documentChanges")):
            return edit, encoding, caveat_of(source, "textDocument/rename", path)
        why.append(f"{source.name}: no rename there" + (f" ({note})" if note else ""))
    raise ToolError(
        f"the language server cannot rename `{args.symbol}` at {args.path}:{args.line}: "
        + "; ".join(why)
    )


def edits_by_uri(edit: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A WorkspaceEdit's text edits per document URI: `documentChanges` (TextDocumentEdits
    only) when present, else `changes`. ToolError for a file operation."""
    out: dict[str, list[dict[str, Any]]] = {}
    document_changes = edit.get("documentChanges")
    if document_changes:
        for change in document_changes:
            if not isinstance(change, dict):
                continue
            if "kind" in change:  # CreateFile, RenameFile, DeleteFile
                raise ToolError(
                    f"the rename would {change['kind']} a file "
                    f"({change.get('uri') or change.get('oldUri')}); renames that create, move "
                    "or delete files are refused: do that part with write_file/run_command"
                )
            uri = str((change.get("textDocument") or {}).get("uri", ""))
            out.setdefault(uri, []).extend(
                e for e in change.get("edits") or [] if isinstance(e, dict)
            )
        return out
    for uri, edits in (edit.get("changes") or {}).items():
        out.setdefault(str(uri), []).extend(e for e in edits or [] if isinstance(e, dict))
    return out


def apply_text_edits(text: str, edits: list[dict[str, Any]], encoding: str) -> str:
    """LSP text edits (positions in `encoding`) applied to `text`; ToolError when they overlap."""
    index = TextIndex(text)
    spans = []
    for edit in edits:
        rng = edit.get("range") or {}
        start = index.offset(rng.get("start") or {}, encoding)
        end = index.offset(rng.get("end") or {}, encoding)
        if end < start:
            raise ToolError("the language server's rename has an edit that ends before it starts")
        spans.append((start, end, str(edit.get("newText", ""))))
    spans.sort(key=lambda s: (s[0], s[1]))
    for (_, end_a, _), (start_b, _, _) in zip(spans, spans[1:], strict=False):
        if start_b < end_a:
            raise ToolError("the language server's rename has overlapping edits; not applied")
    out, last = [], 0
    for start, end, new in spans:
        out += [text[last:start], new]
        last = end
    return "".join([*out, text[last:]])


async def file_changes(
    ctx: ToolContext,
    edit: dict[str, Any],
    encoding: str,
    touched: list[tuple[Path, Path]] | None = None,
) -> list[FileChange]:
    """Each file's new text: the edits applied to its current text as the agent sees it.
    ToolError for a file outside the workspace or not exact text. `touched` gets each changed
    file as (named, resolved), for path rules."""
    changes: list[FileChange] = []
    for uri, edits in edits_by_uri(edit).items():
        path = resolve_uri(ctx, uri)
        if path is None:
            raise ToolError(f"the rename would change {uri}, which is not a file; refused")
        named = ctx.paths.given(uri)
        try:
            path = ctx.paths.resolve(str(path))
        except PathRefused:
            raise ToolError(
                f"the rename would change {path}, outside the workspace folders; refused"
            ) from None
        try:
            before: Document = await ctx.workspace.read(path)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if not before.exact:
            raise ToolError(
                f"{ctx.paths.display(path)} is not valid UTF-8 text (or holds NUL bytes); "
                "the rename is not applied"
            )
        after = apply_text_edits(before.text, edits, encoding)
        if after != before.text:
            changes.append(FileChange(path, before, after))
            if touched is not None:
                touched.append((named, path))
    return changes


def _prepared(
    ctx: ToolContext,
    args: RenameArgs,
    changes: list[FileChange],
    target_path: Path,
    notes: list[str],
) -> Prepared:
    shown = [ctx.paths.display(c.path) for c in changes]
    diffs = [unified_diff(s, c.before.text, c.after) for s, c in zip(shown, changes, strict=True)]
    head = (
        f"rename `{args.symbol}` to `{args.newName}` in {len(changes)} "
        f"file{'' if len(changes) == 1 else 's'}: {', '.join(shown)}"
    )
    body = "\n".join(
        diff_summary(s, c.before.text, c.after) for s, c in zip(shown, changes, strict=True)
    ).splitlines()
    if len(body) > DETAIL_DIFF_LINES:
        body = [*body[:DETAIL_DIFF_LINES], f"… ({len(body) - DETAIL_DIFF_LINES} more lines)"]
    label = f"agent-lsp: rename_symbol {args.symbol} -> {args.newName}"

    async def execute(
        preview: str | None = None, changes: list[FileChange] = changes, note: str = ""
    ) -> str:
        first: set[Path] = set()
        if ctx.checkpoint is not None:
            for change in changes:
                if await ctx.checkpoint.before_change(change.path, change.before):
                    first.add(change.path)
        if preview is None:
            outcome = await ctx.workspace.apply_all(changes, label=label)
        else:
            outcome = await ctx.workspace.apply_all(
                changes,
                label=label,
                preview=preview,
                late=lambda: applied_late(
                    ctx,
                    [(c.path, c.before, c.after) for c in changes],
                    f"the rename of `{args.symbol}` to `{args.newName}` ({', '.join(shown)})",
                ),
            )
        if outcome.rejected:
            raise EditRejected("the user rejected the edit in the preview")
        note = _unticked(changes, shown, outcome) if outcome.texts else note
        landed = changes if outcome.applied else await _landed(ctx, changes)
        final = {c.path: c.after for c in changes} | outcome.landed | outcome.texts
        for change in landed:
            ctx.changes.add(change.path)
            if ctx.checkpoint is not None:
                if change.path in first and change.path in outcome.merged_onto:
                    await ctx.checkpoint.merged_onto(change.path, outcome.merged_onto[change.path])
                ctx.checkpoint.edited(change.path, final[change.path])
        for change in landed:
            await sync_sources(ctx, change.path, final[change.path])
        if not outcome.applied:
            reason = outcome.message or "the editor refused the edit"
            raise ToolError(
                f"the rename was not applied: {reason}. Read the files again before retrying."
            )
        merged = f"\n{outcome.message}" if outcome.message else ""  # files merged meanwhile
        if note:
            return with_notes(f"applied in part: {head}\n{note}{merged}", notes)
        edits = sum(d.count("\n+") - d.count("\n+++") for d in diffs)
        return with_notes(f"applied: {head} ({edits} changed lines){merged}", notes)

    hunks = functools.cache(
        lambda: file_hunks([(c.path.as_uri(), c.before.text, c.after) for c in changes])
    )

    return Prepared(
        with_notes("\n".join([head, *body]), notes),
        execute,
        # the editor's own preview of every file, hunk by hunk (Decision 80)
        preview=lambda: execute(f"agent-lsp: rename_symbol {ctx.paths.display(target_path)}"),
        diff="".join(diffs),
        files=[{"uri": c.path.as_uri(), "diff": d} for c, d in zip(changes, diffs, strict=True)],
        file_texts=[(c.path.as_uri(), c.before.text, c.after) for c in changes],
        hunk_source=hunks,
        apply_hunks=lambda chosen: _apply_hunks(execute, changes, shown, hunks(), chosen),
    )


async def _apply_hunks(
    execute: Callable[[None, list[FileChange], str], Awaitable[str]],
    changes: list[FileChange],
    shown: list[str],
    hunks: list[tuple[str, list[Hunk]]],
    chosen: set[int],
) -> str:
    """Only the hunks the user kept (Decision 80); the model is warned that the rename is
    partial."""
    kept = [
        FileChange(c.path, c.before, with_hunks(c.before.text, c.after, h, chosen))
        for c, (_, h) in zip(changes, hunks, strict=True)
    ]
    note = partial_note(
        [(s, h) for s, (_, h) in zip(shown, hunks, strict=True)], chosen, rename=True
    )
    return await execute(None, [c for c in kept if c.after != c.before.text], note)


def _unticked(changes: list[FileChange], shown: list[str], outcome: EditOutcome) -> str:
    """What the model reads when the user unticked hunks of the rename in the editor's preview
    (Decision 80): the hunks numbered as the preview showed them (on each file's text as it was
    sent), which landed and which not, and the warning; EditRejected when none landed."""
    before = outcome.merged_onto  # the files merged meanwhile: what the preview was built on
    sent = [
        (c.path, before.get(c.path, c.before.text), outcome.landed.get(c.path, c.after))
        for c in changes
    ]
    per_file = file_hunks([(str(path), old, new) for path, old, new in sent])
    chosen: set[int] = set()
    for (path, old, new), (_, hunks) in zip(sent, per_file, strict=True):
        landed = landed_hunks(old, new, hunks, outcome.texts.get(path, new))
        if landed is None:
            return (
                "the user changed the rename in the editor's preview (not a choice of whole "
                f"hunks); read the files again to see what landed.\n{RENAME_WARNING}"
            )
        chosen |= landed
    if not chosen:
        raise EditRejected("the user rejected the edit in the preview")
    return partial_note(
        [(s, h) for s, (_, h) in zip(shown, per_file, strict=True)], chosen, rename=True
    )


async def _landed(ctx: ToolContext, changes: list[FileChange]) -> list[FileChange]:
    """The files a failed multi-file apply did write (file by file hosts stop midway)."""
    out = []
    for change in changes:
        try:
            if (await ctx.workspace.read(change.path)).text == change.after:
                out.append(change)
        except ValueError:
            continue
    return out
