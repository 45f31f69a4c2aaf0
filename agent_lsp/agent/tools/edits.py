"""Side-effecting file tools: edit_file and write_file, applied through the Workspace port."""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import Field

from agent_lsp.agent.ports import Document
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError


def diff_summary(display: str, before: str | None, after: str) -> str:
    """`path: -a +b lines` plus a short unified diff, for approvals and results."""
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    diff = list(difflib.unified_diff(old, new, f"a/{display}", f"b/{display}", n=1))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    head = f"{'create' if before is None else 'edit'} {display}: -{removed} +{added} lines"
    body = "".join(diff[2:40]).rstrip("\n")
    if len(diff) > 40:
        body += f"\n… ({len(diff) - 40} more diff lines)"
    return f"{head}\n{body}" if body else head


async def _current(ctx: ToolContext, path: Path) -> Document | None:
    if not path.exists() and path not in ctx.workspace.open_texts():
        return None
    if path.is_dir():
        raise ToolError(f"{ctx.paths.display(path)} is a directory")
    try:
        return await ctx.workspace.read(path)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


async def _apply(ctx: ToolContext, path: Path, before: Document | None, after: str, summary: str) -> str:
    outcome = await ctx.workspace.apply(path, before, after)
    shown = ctx.paths.display(path)
    if not outcome.applied:
        reason = outcome.message or "the editor refused the edit"
        raise ToolError(f"the edit to {shown} was not applied: {reason}. Read the file again before retrying.")
    if path not in ctx.edited:
        ctx.edited.append(path)
    return f"applied: {summary.splitlines()[0]}"


class EditFileArgs(Args):
    path: str = Field(description="File to edit, relative to the workspace")
    old_text: str = Field(description="Exact text to replace; must occur exactly once")
    new_text: str = Field(description="Replacement text")


class EditFile(Tool):
    name = "edit_file"
    description = "Replace one exact occurrence of old_text with new_text in a file (applied in the editor)."
    args = EditFileArgs
    read_only = False

    async def prepare(self, args: EditFileArgs, ctx: ToolContext) -> Prepared:
        path = ctx.paths.resolve(args.path)
        before = await _current(ctx, path)
        if before is None:
            raise ToolError(f"{args.path} does not exist; use write_file to create it")
        if not args.old_text:
            raise ToolError("old_text is empty; give the exact text to replace")
        count = before.text.count(args.old_text)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolError(f"old_text {where} in {args.path}; it must occur exactly once (add surrounding lines)")
        after = before.text.replace(args.old_text, args.new_text, 1)
        summary = diff_summary(ctx.paths.display(path), before.text, after)
        return Prepared(summary, lambda: _apply(ctx, path, before, after, summary))


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
        summary = diff_summary(ctx.paths.display(path), before.text if before else None, args.content)
        return Prepared(summary, lambda: _apply(ctx, path, before, args.content, summary))
