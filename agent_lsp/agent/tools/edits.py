"""Side-effecting file tools: edit_file and write_file, applied through the Workspace port.
A file that is not exact text (invalid UTF-8, NUL bytes) is never edited; line endings and the
final newline are kept; the run's checkpoint records each file before its first change."""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
from pathlib import Path

from pydantic import Field

from agent_lsp.agent.fs.merge import resolve
from agent_lsp.agent.ports import Document
from agent_lsp.agent.tools.base import Args, EditRejected, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.codeintel.service import sync_sources
from agent_lsp.agent.tools.diagnostics import problems_after_edit
from agent_lsp.agent.tools.hunks import Hunk, hunks_of, landed_hunks, partial_note, with_hunks

log = logging.getLogger(__name__)

SUMMARY_DIFF_LINES = 40


def unified_diff(display: str, before: str | None, after: str, context: int = 3) -> str:
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    lines = difflib.unified_diff(
        old, new, "/dev/null" if before is None else f"a/{display}", f"b/{display}", n=context
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def diff_summary(display: str, before: str | None, after: str) -> str:
    """`path: -a +b lines` plus a short unified diff, for approvals and results."""
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    diff = list(difflib.unified_diff(old, new, f"a/{display}", f"b/{display}", n=1))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    head = f"{'create' if before is None else 'edit'} {display}: -{removed} +{added} lines"
    body = "".join(diff[2 : SUMMARY_DIFF_LINES + 2]).rstrip("\n")
    if len(diff) > SUMMARY_DIFF_LINES + 2:
        body += f"\n… ({len(diff) - SUMMARY_DIFF_LINES - 2} more diff lines)"
    return f"{head}\n{body}" if body else head


def line_ending(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def with_endings(text: str, ending: str) -> str:
    if ending == "\r\n":
        return text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text


async def _current(ctx: ToolContext, path: Path) -> Document | None:
    if not path.exists() and not path.is_symlink() and path not in ctx.workspace.open_texts():
        return None
    if path.is_dir():
        raise ToolError(f"{ctx.paths.display(path)} is a directory")
    try:
        return await ctx.workspace.read(path)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


_LATE_RECORDS: set[asyncio.Task[None]] = set()  # referenced until done: never collected unseen


def _applied_late(ctx: ToolContext, path: Path, before: Document | None, after: str) -> None:
    """The run was cancelled while the editor's preview was open, and the user applied the edit
    afterwards: it goes into the run's checkpoint (rewindable) and the user is told, or told
    that it could not be recorded."""
    applied_late(ctx, [(path, before, after)], f"the edit to {ctx.paths.display(path)}")


def applied_late(
    ctx: ToolContext, files: list[tuple[Path, Document | None, str]], what: str
) -> None:
    """`_applied_late` for an edit of several files (a rename): every file is recorded."""

    def tell(text: str) -> None:
        if ctx.notify is not None:
            ctx.notify(
                f"{what} was applied in the editor's preview after the run was cancelled; {text}"
            )

    async def record() -> None:
        if ctx.checkpoint is None:
            tell("this run keeps no checkpoint, so rewind cannot take it back")
            return
        try:
            for path, before, after in files:
                await ctx.checkpoint.record_late(path, before, after)
        except Exception as exc:
            log.warning(
                "the late edit of %s could not be added to the run's checkpoint",
                ", ".join(str(f[0]) for f in files),
                exc_info=True,
            )
            tell(
                f"it could not be added to the run's checkpoint ({exc}), "
                "so rewind cannot take it back"
            )
            return
        tell("it is in the run's checkpoint (rewind can take it back)")

    task = asyncio.ensure_future(record())
    _LATE_RECORDS.add(task)
    task.add_done_callback(_late_done)


def _late_done(task: asyncio.Task[None]) -> None:
    _LATE_RECORDS.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("recording a late edit failed", exc_info=task.exception())


def _prepared(
    ctx: ToolContext, path: Path, before: Document | None, after: str, given: str | None = None
) -> Prepared:
    shown = ctx.paths.display(path)
    summary = diff_summary(shown, before.text if before else None, after)

    hunks = functools.cache(lambda: hunks_of(before.text if before else None, after))

    async def apply(
        preview: str | None = None, after: str = after, head: str = summary, note: str = ""
    ) -> str:
        first = ctx.checkpoint is not None and await ctx.checkpoint.before_change(path, before)
        if preview is None:
            outcome = await ctx.workspace.apply(path, before, after)
        else:
            outcome = await ctx.workspace.apply(
                path,
                before,
                after,
                preview=preview,
                late=lambda: _applied_late(ctx, path, before, after),
            )
        if outcome.rejected:
            raise EditRejected("the user rejected the edit in the preview")
        if not outcome.applied:
            reason = outcome.message or "the editor refused the edit"
            raise ToolError(
                f"the edit to {shown} was not applied: {reason}. "
                "Read the file again before retrying."
            )
        landed = outcome.landed.get(path, after)  # merged with the user's changes meanwhile
        if outcome.text is not None and outcome.text != after:  # hunks unticked in the preview
            head, note = _in_preview(shown, before, after, hunks(), outcome.text)
            landed = outcome.text
        ctx.changes.add(path)
        if ctx.checkpoint is not None:
            if first and path in outcome.merged_onto:  # a rewind keeps the user's changes
                await ctx.checkpoint.merged_onto(path, outcome.merged_onto[path])
            ctx.checkpoint.edited(path, landed)
        await sync_sources(ctx, path, landed)  # the language servers see the edit
        problems = await problems_after_edit(ctx, path, outcome.version)
        return (
            f"applied: {head.splitlines()[0]}"
            + (f"\n{note}" if note else "")
            + (f"\n{outcome.message}" if outcome.message else "")
            + problems
        )

    async def apply_hunks(chosen: set[int]) -> str:
        """Only the hunks the user kept (Decision 58); the result names the rejected ones."""
        partial = with_hunks(before.text if before else None, after, hunks(), chosen)
        kept = diff_summary(shown, before.text if before else None, partial)
        return await apply(None, partial, kept, partial_note([(shown, hunks())], chosen))

    label = f"agent-lsp: {'write_file' if before is None else 'edit_file'} {shown}"
    prepared = Prepared(
        summary,
        apply,
        preview=lambda: apply(label),
        uri=path.as_uri(),
        diff=unified_diff(shown, before.text if before else None, after),
        new_text=after,
        paths=[(ctx.paths.given(given) if given else path, path)],
        shown_path=shown,
        hunk_source=lambda: [(path.as_uri(), hunks())],
        apply_hunks=apply_hunks,
    )
    prepared.refresh = lambda: _refresh(ctx, prepared, path, before, after)
    return prepared


async def _refresh(
    ctx: ToolContext, prepared: Prepared, path: Path, before: Document | None, after: str
) -> None:
    """What the approval shows, on the file as it is when asked: the text changed since the
    read (a hook, a formatter, the user) -> the diff of the merge that will land, or the
    conflict said (the edit itself stays computed on what was read: Decision 57)."""
    try:
        now = await _current(ctx, path)
    except ToolError:
        return  # the apply says why
    base, current = (before.text if before else None), (now.text if now else None)
    if current == base:
        return
    shown = ctx.paths.display(path)
    # the hunks offered are the read-time edit's: no choice of them on a diff that differs
    prepared.apply_hunks = None
    resolution = resolve(base, current, after)
    if resolution.text is None:
        prepared.detail += (
            f"\n{shown} changed since it was read and this edit overlaps the change: "
            "it will not apply (the model is told to read the file again)"
        )
        return
    prepared.detail = (
        diff_summary(shown, current, resolution.text)
        + f"\n({shown} changed since it was read: this is the edit merged with that change)"
    )
    prepared.diff = unified_diff(shown, current, resolution.text)
    prepared.new_text = resolution.text


def _in_preview(
    shown: str, before: Document | None, after: str, hunks: list[Hunk], final: str
) -> tuple[str, str]:
    """The result's head and note for a preview in which the user unticked some hunks;
    EditRejected when they unticked them all (and ticked the entry that asks)."""
    old = before.text if before else None
    head = diff_summary(shown, old, final)
    chosen = landed_hunks(old, after, hunks, final)
    if chosen is not None and not chosen:
        raise EditRejected("the user rejected the edit in the preview")
    if chosen is None:
        return head, (
            "the user changed the edit in the editor's preview (not a choice of whole hunks); "
            "read the file again to see what landed"
        )
    return head, partial_note([(shown, hunks)], chosen)


class EditFileArgs(Args):
    path: str = Field(description="File to edit, relative to the workspace")
    old_text: str = Field(description="Exact text to replace; must occur exactly once")
    new_text: str = Field(description="Replacement text")


class EditFile(Tool):
    name = "edit_file"
    description = (
        "Replace one exact occurrence of old_text with new_text in a file (applied in the editor)."
    )
    args = EditFileArgs
    read_only = False

    async def prepare(self, args: EditFileArgs, ctx: ToolContext) -> Prepared:
        path = ctx.paths.resolve(args.path)
        before = await _current(ctx, path)
        if before is None:
            raise ToolError(f"{args.path} does not exist; use write_file to create it")
        if not before.exact:
            raise ToolError(
                f"{args.path} is not valid UTF-8 text (or holds NUL bytes); it is not edited, "
                "so none of its bytes are lost"
            )
        if not args.old_text:
            raise ToolError("old_text is empty; give the exact text to replace")
        old, new = args.old_text, args.new_text
        count = before.text.count(old)
        if count == 0 and line_ending(before.text) == "\r\n" and "\r\n" not in old:
            # the model wrote \n for a CRLF file
            old, new = with_endings(old, "\r\n"), with_endings(new, "\r\n")
            count = before.text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolError(
                f"old_text {where} in {args.path}; it must occur exactly once "
                "(add surrounding lines)"
            )
        return _prepared(ctx, path, before, before.text.replace(old, new, 1), args.path)


class WriteFileArgs(Args):
    path: str = Field(description="File to create or overwrite, relative to the workspace")
    content: str = Field(description="The whole new content")


class WriteFile(Tool):
    name = "write_file"
    description = "Create a file or overwrite it with the given content (applied in the editor)."
    args = WriteFileArgs
    read_only = False

    async def prepare(self, args: WriteFileArgs, ctx: ToolContext) -> Prepared:
        path = ctx.paths.resolve(args.path)
        before = await _current(ctx, path)
        content = args.content
        if before is not None:
            if not before.exact and before.text:
                raise ToolError(
                    f"{args.path} is not valid UTF-8 text (or holds NUL bytes); "
                    "it is not overwritten"
                )
            content = with_endings(content, line_ending(before.text))
            if before.text.endswith(("\n", "\r\n")) and content and not content.endswith("\n"):
                content += line_ending(before.text)
        return _prepared(ctx, path, before, content, args.path)
