"""The search tool: file contents through ripgrep, the editor's unsaved buffers included; and
the path and async helpers list_files shares."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from agent_lsp.agent.fs import ripgrep
from agent_lsp.agent.fs.safeio import read_regular_sync
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.paths import PathGuard, PathRefused

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_MATCHES = 200
BUFFER_SEARCHES = 4  # rg processes searching editor buffers at once


# -- search -----------------------------------------------------------------------------------


class SearchArgs(Args):
    pattern: str = Field(
        description="Regular expression in ripgrep's (Rust regex) syntax, e.g. 'fn \\w+\\(' or "
        "'TODO|FIXME'; no look-around or backreferences"
    )
    path: str = Field(
        ".",
        description="Directory or file to search, relative to the workspace "
        "(default: every folder)",
    )
    glob: str | None = Field(
        None,
        description="Only files matching this glob, e.g. '*.py' or 'src/**/*.ts'; '!*.md' excludes",
    )
    ignore_case: bool = Field(False, alias="ignoreCase", description="Match case-insensitively")


class Search(Tool):
    name = "search"
    description = (
        "Search file contents with a ripgrep (Rust syntax) regex "
        "over every file .gitignore does not exclude (editor buffers as open); "
        f"returns `file:line: text` (at most {MAX_MATCHES})."
    )
    args = SearchArgs
    read_only = True

    async def prepare(self, args: SearchArgs, ctx: ToolContext) -> Prepared:
        no_nul(args.pattern, "pattern")
        no_nul(args.glob, "glob")
        if len(args.pattern.encode("utf-8", "surrogatepass")) > ripgrep.MAX_PATTERN_BYTES:
            raise ToolError(
                f"the pattern is too long ({len(args.pattern)} characters; the limit is "
                f"{ripgrep.MAX_PATTERN_BYTES} bytes): search for a shorter, distinctive part of it"
            )
        bases = search_bases(args.path, ctx.paths)
        detail = f"search {args.pattern!r} in {args.path}" + (
            f" ({args.glob})" if args.glob else ""
        )

        async def execute() -> str:
            return await _search(args, bases, ctx)

        return Prepared(detail, execute, paths=_given_bases(args.path, bases, ctx.paths))


@dataclass
class _Hit:
    root: int  # index of the workspace folder (sort: folders in order)
    path: str  # absolute
    line: int
    text: str

    def key(self) -> tuple[int, str, int]:
        return self.root, ripgrep.sort_key(self.path), self.line


async def _search(args: SearchArgs, bases: list[Path], ctx: ToolContext) -> str:
    paths = ctx.paths
    on_disk = [b for b in bases if b.exists()]
    for base in on_disk:
        if not base.is_dir() and not base.is_file():  # a FIFO would block rg forever
            raise ToolError(f"{paths.display(base)} is not a regular file or a directory")
    buffers, unread = await _changed_buffers(ctx, bases)
    if not on_disk and not any(buffers.values()):
        raise ToolError(f"{args.path} does not exist")
    skip = {str(p) for found in buffers.values() for p, _ in found}
    problems: list[str] = []
    if unread:
        problems.append(
            f"the editor's open buffers could not be read ({unread}): "
            "these results come from the files on disk, without unsaved changes"
        )
    try:
        # Every folder and the buffers at once, each disk search stopped once it has more
        # than the cap. rg's parallel walk prints in no fixed order, so when a search was
        # stopped, the first matches *in path order* come from a second, sorted run of that
        # tree (--sort path, stopped again after cap + 1): the shown set is deterministic.
        # (Worst case: more than the cap in all, but all in the last files in path order: the
        # sorted rerun then reads the whole tree on one thread.)
        def disk_search(base: Path, sort: bool = False) -> Awaitable[ripgrep.SearchResult]:
            return ripgrep.search(
                args.pattern,
                base,
                ctx.processes,
                glob=args.glob,
                ignore_case=args.ignore_case,
                limit=MAX_MATCHES + 1,
                skip=skip,
                sort=sort,
            )

        disk_task = asyncio.ensure_future(run_all(*(disk_search(base) for base in on_disk)))
        buffer_task = asyncio.ensure_future(_search_buffers(args, buffers, ctx))
        wanted_task = asyncio.ensure_future(_searchable(buffers, on_disk, args.glob, ctx))
        await run_all(disk_task, buffer_task, wanted_task)
        disk, from_buffers, wanted = disk_task.result(), buffer_task.result(), wanted_task.result()
        hits: list[_Hit] = []
        for base, result in zip(on_disk, disk, strict=True):
            if not result.complete:
                result = await disk_search(base, sort=True)
            if note := result.problems.note():
                problems.append(note)
            root = _root_index(base, paths)
            hits += [
                _Hit(root, m.path, m.line, m.text)
                for m in result.matches
                if _inside(m.path, paths) and not (ctx.hidden and ctx.hidden(Path(m.path)))
            ]
    except ripgrep.RipgrepMissing as exc:
        raise ToolError(f"search is unavailable: {exc}") from None
    except ripgrep.RipgrepError as exc:
        raise ToolError(f"rg refused the search: {exc}") from None
    hits += [
        h
        for h in from_buffers
        if h.path in wanted and not (ctx.hidden and ctx.hidden(Path(h.path)))
    ]
    hits.sort(key=_Hit.key)
    capped = len(hits) > MAX_MATCHES
    out = "\n".join(
        f"{_display(Path(h.path), paths)}:{h.line}: {h.text}" for h in hits[:MAX_MATCHES]
    )
    notes = (
        [
            f"[capped at {MAX_MATCHES} matches (the first ones in path order): "
            "narrow the pattern, path or glob]"
        ]
        if capped
        else []
    )
    notes += [f"[{note}]" for note in problems]
    if not hits:
        out = "no matches" if not problems else "no matches in the files that could be searched"
    return "\n".join([out, *notes])


async def _changed_buffers(
    ctx: ToolContext, bases: list[Path]
) -> tuple[dict[str, list[tuple[Path, str]]], str | None]:
    """Open buffers under the searched bases whose text differs from disk (or that have no
    file on disk), by kind: "edited" (the file exists) and "new"; and why the buffers could not
    be read, when they could not.

    Batching: the editor reports every open buffer, most of them saved. A saved buffer is the
    disk file, which the disk search already covers, so only the buffers that differ get an rg
    of their own (on stdin, at most BUFFER_SEARCHES at once). Telling them apart costs a stat
    per buffer and a read only when the sizes agree, in a worker thread (never on the loop).
    """
    try:
        texts = ctx.workspace.open_texts()
    except Exception as exc:  # the search goes on over the disk, and says so
        log.warning("search: the editor's open buffers could not be read", exc_info=True)
        return {"edited": [], "new": []}, f"{type(exc).__name__}: {exc}"
    return (
        await asyncio.to_thread(_compare_buffers, texts, bases)
        if texts
        else {"edited": [], "new": []}
    ), None


def _compare_buffers(
    texts: dict[Path, str], bases: list[Path]
) -> dict[str, list[tuple[Path, str]]]:
    out: dict[str, list[tuple[Path, str]]] = {"edited": [], "new": []}
    for raw, text in texts.items():
        try:
            path = Path(raw).resolve()  # the bases are inside the workspace folders already
        except (OSError, RuntimeError, ValueError):
            continue
        if ".git" in path.parts or not any(path == b or path.is_relative_to(b) for b in bases):
            continue
        data = text.encode("utf-8", "surrogatepass")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            out["new"].append((path, text))
            continue
        except OSError:
            continue
        if not path.is_file():
            continue
        try:
            same = size == len(data) and read_regular_sync(path, len(data)) == data
        except (OSError, ValueError):
            same = False
        if not same:
            out["edited"].append((path, text))
    return out


async def _searchable(
    buffers: dict[str, list[tuple[Path, str]]],
    bases: list[Path],
    glob: str | None,
    ctx: ToolContext,
) -> set[str]:
    """Which changed buffers rg would search, decided by rg alongside the searches:
    - an edited file: if `rg --files` with the same ignore rules and glob lists it (exactly the
      disk search's choice); one listing per searched folder holding edited buffers, and only
      when there are some;
    - a file only in a buffer: if rg's glob keeps its path (ignore rules cannot be asked
      about a file that does not exist: a new buffer is searched unless the glob excludes it).
    A searched path naming one file is searched whatever the glob, as rg does."""
    edited = {str(p) for p, _ in buffers["edited"]}
    wanted: set[str] = set()
    for base in bases:
        if edited and any(e == str(base) or e.startswith(str(base) + os.sep) for e in edited):
            listing = await ripgrep.list_files(base, ctx.processes, glob=glob)
            wanted |= edited.intersection(listing.paths())
    new = [p for p, _ in buffers["new"]]
    if not glob or not new:
        return wanted | {str(p) for p in new}
    for base in bases:
        under = {
            p.relative_to(base).as_posix(): p for p in new if p != base and p.is_relative_to(base)
        }
        wanted |= {str(p) for p in new if p == base}
        if under:
            wanted |= {
                str(under[name])
                for name in await ripgrep.glob_keeps(list(under), glob, ctx.processes)
            }
    return wanted


async def _search_buffers(
    args: SearchArgs, buffers: dict[str, list[tuple[Path, str]]], ctx: ToolContext
) -> list[_Hit]:
    todo = buffers["edited"] + buffers["new"]
    if not todo:
        return []
    gate = asyncio.Semaphore(BUFFER_SEARCHES)

    async def one(path: Path, text: str) -> list[_Hit]:
        async with gate:
            found = await ripgrep.search_text(
                args.pattern,
                text,
                ctx.processes,
                ignore_case=args.ignore_case,
                limit=MAX_MATCHES + 1,
                cwd=ctx.paths.roots[0],
            )
        root = _root_index(path, ctx.paths)
        return [_Hit(root, str(path), m.line, m.text) for m in found]

    results = await run_all(*(one(p, t) for p, t in todo))
    return [hit for found in results for hit in found]


# -- shared with list_files -------------------------------------------------------------------


async def run_all(*aws: Awaitable[T]) -> list[T]:
    """Like gather, but a failure cancels the others (no rg left running for nobody) and is
    raised as itself, not as an ExceptionGroup."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks: list[asyncio.Task[T]] = [group.create_task(_awaited(aw)) for aw in aws]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


async def _awaited(aw: Awaitable[T]) -> T:
    return await aw


def no_nul(value: str | None, what: str) -> None:
    if value is not None and "\x00" in value:
        raise ToolError(f"the {what} may not contain a NUL byte")


def search_bases(raw: str, paths: PathGuard) -> list[Path]:
    """Every workspace folder for "." (the default) when there are several; else the path
    resolved."""
    if raw.strip() in (".", "./") and len(paths.roots) > 1:
        return list(paths.roots)
    base = paths.resolve(raw)
    if paths.in_git_dir(base) or paths.in_git_dir(paths.given(raw)):
        # the rule that leaves .git out of every search holds for an explicit path too: its
        # config may hold a checkout's token (an Action's `http.extraheader`)
        raise PathRefused(
            f"{raw!r} is inside a repository's .git folder, which search and list_files never "
            "look into; read one of its files with read_file"
        )
    return [base]


def _given_bases(raw: str, bases: list[Path], paths: PathGuard) -> list[tuple[Path, Path]]:
    """The searched folders as path rules see them: as given and resolved."""
    if len(bases) == 1:
        return [(paths.given(raw), bases[0])]
    return [(b, b) for b in bases]


def _root_index(path: Path, paths: PathGuard) -> int:
    for index, root in enumerate(paths.roots):
        if path == root or path.is_relative_to(root):
            return index
    return len(paths.roots)


def _inside(raw: str, paths: PathGuard) -> bool:
    """rg never yields a symlink it meets while walking (no --follow), so every reported file
    is a real file under the searched folder; checked anyway for the few files that match."""
    if not os.path.islink(raw):
        return True
    try:
        paths.resolve(raw)
        return True
    except PathRefused:
        return False


def _display(path: Path, paths: PathGuard) -> str:
    return printable(paths.display(path))


def display_prefix(folder: Path, paths: PathGuard) -> str:
    """What PathGuard.display puts before a path relative to `folder`: "" in the first
    workspace folder's top, "sub/" below it, "<folder name>/…/" in the others."""
    shown = paths.display(folder)  # ".", "sub", "lib/." or "lib/sub"
    return "" if shown == "." else shown.removesuffix("/.") + "/"


def printable(shown: str) -> str:
    # A non-UTF-8 file name was decoded with surrogateescape; show it with U+FFFD instead.
    try:
        shown.encode("utf-8")
        return shown
    except UnicodeEncodeError:
        return shown.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
