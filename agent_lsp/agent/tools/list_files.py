"""The list_files tool: the workspace's files as rg lists them (.gitignore respected), or by a
pathspec walk where rg is missing."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from pydantic import Field

from agent_lsp.agent.fs import ripgrep
from agent_lsp.agent.fs.walk import fallback_walk
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.search import (
    _given_bases,
    display_prefix,
    no_nul,
    printable,
    run_all,
    search_bases,
)

log = logging.getLogger(__name__)

MAX_LIST = 500


class ListFilesArgs(Args):
    path: str = Field(
        ".", description="Directory to list, relative to the workspace (default: every folder)"
    )
    glob: str | None = Field(
        None, description="Only files matching this glob, e.g. '*.py' or 'src/**/*.ts'"
    )


class ListFiles(Tool):
    name = "list_files"
    description = (
        "List files recursively (respects .gitignore; hidden files included; "
        f"at most {MAX_LIST} entries)."
    )
    args = ListFilesArgs
    read_only = True

    async def prepare(self, args: ListFilesArgs, ctx: ToolContext) -> Prepared:
        no_nul(args.glob, "glob")
        bases = search_bases(args.path, ctx.paths)

        async def execute() -> str:
            for base in bases:
                if not base.is_dir():
                    raise ToolError(
                        f"{args.path} is not a directory"
                        if base.exists()
                        else f"{args.path} does not exist"
                    )
            return await _list(args, bases, ctx)

        return Prepared(
            f"list {args.path}" + (f" ({args.glob})" if args.glob else ""),
            execute,
            paths=_given_bases(args.path, bases, ctx.paths),
        )


async def _list(args: ListFilesArgs, bases: list[Path], ctx: ToolContext) -> str:
    try:
        listings = await run_all(
            *(
                ripgrep.list_files(base, ctx.processes, glob=args.glob, limit=MAX_LIST + 1)
                for base in bases
            )
        )
        # Shown as PathGuard.display would, from strings (a Path per entry costs ~10 µs).
        hidden = ctx.hidden
        shown = [
            prefix + name
            for listing in listings
            for prefix in [display_prefix(listing.folder, ctx.paths)]
            for name in listing.names
            if hidden is None or not hidden(Path(listing.folder) / name)
        ]
        total = sum(listing.total for listing in listings) - (
            sum(len(listing.names) for listing in listings) - len(shown)
        )
        problems = [note for listing in listings if (note := listing.problems.note())]
    except ripgrep.RipgrepError as exc:
        raise ToolError(f"rg refused the listing: {exc}") from None
    except ripgrep.RipgrepMissing as exc:
        log.warning("list_files without rg (%s): using the slower pathspec walk", exc)
        shown, total = [], 0
        for base in bases:
            files = await asyncio.to_thread(fallback_walk, base, args.glob)
            files = [f for f in files if ctx.hidden is None or not ctx.hidden(Path(f))]
            shown += [ctx.paths.display(Path(f)) for f in files[: MAX_LIST + 1]]
            total += len(files)
        problems = []
    if not shown:
        return "(no files)" + "".join(f"\n[{note}]" for note in problems)
    lines = [printable(p) for p in shown[:MAX_LIST]]
    if total > MAX_LIST:
        lines.append(f"[capped at {MAX_LIST} of {total} files: narrow with path or glob]")
    lines += [f"[{note}]" for note in problems]
    return "\n".join(lines)
