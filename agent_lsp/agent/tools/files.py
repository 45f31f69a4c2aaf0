"""Read-only file tools: read_file, list_files, search."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pathspec
from pydantic import Field

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.paths import PathGuard

MAX_LIST = 500
MAX_MATCHES = 200
MAX_READ_LINES = 2000
MAX_SEARCH_BYTES = 2_000_000
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


class ReadFileArgs(Args):
    path: str = Field(description="File path, relative to the workspace")
    offset: int | None = Field(None, ge=1, description="First line to read, 1-based")
    limit: int | None = Field(None, ge=1, description="How many lines to read")


class ReadFile(Tool):
    name = "read_file"
    description = "Read a text file (the editor's unsaved buffer if it is open), with line numbers."
    args = ReadFileArgs

    async def prepare(self, args: ReadFileArgs, ctx: ToolContext) -> Prepared:
        path = ctx.paths.resolve(args.path, for_read=True)

        async def execute() -> str:
            if path.is_dir():
                raise ToolError(f"{args.path} is a directory; use list_files")
            try:
                doc = await ctx.workspace.read(path)
            except ValueError as exc:
                raise ToolError(str(exc)) from None
            lines = doc.text.splitlines()
            start = (args.offset or 1) - 1
            count = min(args.limit or MAX_READ_LINES, MAX_READ_LINES)
            chosen = lines[start : start + count]
            if not lines:
                return f"{args.path}: (empty file)"
            if not chosen:
                raise ToolError(f"offset {args.offset} is past the end of {args.path} ({len(lines)} lines)")
            width = len(str(start + len(chosen)))
            body = "\n".join(f"{start + i + 1:>{width}}\t{line}" for i, line in enumerate(chosen))
            if start + len(chosen) < len(lines):
                body += f"\n[{len(lines) - start - len(chosen)} more lines: read with offset={start + len(chosen) + 1}]"
            return body

        return Prepared(f"read {args.path}", execute)


class ListFilesArgs(Args):
    path: str = Field(".", description="Directory to list, relative to the workspace")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.py' or 'src/**/*.ts'")


class ListFiles(Tool):
    name = "list_files"
    description = f"List files recursively (respects .gitignore; at most {MAX_LIST} entries)."
    args = ListFilesArgs

    async def prepare(self, args: ListFilesArgs, ctx: ToolContext) -> Prepared:
        base = ctx.paths.resolve(args.path)

        async def execute() -> str:
            if not base.is_dir():
                raise ToolError(f"{args.path} is not a directory")
            files, capped = await asyncio.to_thread(walk, base, ctx.paths, args.glob, MAX_LIST)
            if not files:
                return "(no files)"
            out = "\n".join(ctx.paths.display(f) for f in files)
            return out + (f"\n[capped at {MAX_LIST} entries: narrow with path or glob]" if capped else "")

        return Prepared(f"list {args.path}", execute)


class SearchArgs(Args):
    pattern: str = Field(description="Python regular expression")
    path: str = Field(".", description="Directory or file to search")
    glob: str | None = Field(None, description="Only files matching this glob")


class Search(Tool):
    name = "search"
    description = f"Search file contents with a Python regex; returns `file:line: text` (at most {MAX_MATCHES})."
    args = SearchArgs

    async def prepare(self, args: SearchArgs, ctx: ToolContext) -> Prepared:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError(f"invalid regex {args.pattern!r}: {exc}") from None
        base = ctx.paths.resolve(args.path)

        async def execute() -> str:
            buffers = ctx.workspace.open_texts()
            hits = await asyncio.to_thread(_search, regex, base, args.glob, ctx.paths, buffers)
            if not hits:
                return "no matches"
            capped = len(hits) > MAX_MATCHES
            out = "\n".join(hits[:MAX_MATCHES])
            return out + (f"\n[capped at {MAX_MATCHES} matches: narrow the pattern, path or glob]" if capped else "")

        return Prepared(f"search {args.pattern!r} in {args.path}", execute)


def _spec(lines: list[str]) -> pathspec.PathSpec:
    return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def walk(base: Path, paths: PathGuard, glob: str | None, cap: int) -> tuple[list[Path], bool]:
    """Files under base, .gitignore respected, symlinks out of the workspace skipped."""
    if base.is_file():
        return [base], False
    root = next((r for r in paths.roots if base == r or base.is_relative_to(r)), paths.roots[0])
    ignores: list[tuple[Path, pathspec.PathSpec]] = []
    directory = root
    _add_gitignore(directory, ignores)
    for part in base.relative_to(root).parts:  # the .gitignore files above base apply too
        directory = directory / part
        _add_gitignore(directory, ignores)
    wanted = _spec([glob]) if glob else None
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        current = Path(dirpath)
        if current != base:
            _add_gitignore(current, ignores)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not _ignored(current / d, ignores, True))
        for name in sorted(filenames):
            file = current / name
            if _ignored(file, ignores, False):
                continue
            if file.is_symlink():
                try:
                    paths.resolve(str(file))
                except Exception:
                    continue
            if wanted is not None and not wanted.match_file(file.relative_to(base).as_posix()):
                continue
            found.append(file)
            if len(found) > cap:
                return found[:cap], True
    return found, False


def _add_gitignore(directory: Path, ignores: list[tuple[Path, pathspec.PathSpec]]) -> None:
    gitignore = directory / ".gitignore"
    if gitignore.is_file():
        try:
            ignores.append((directory, _spec(gitignore.read_text(encoding="utf-8", errors="replace").splitlines())))
        except OSError:
            pass


def _ignored(path: Path, ignores: list[tuple[Path, pathspec.PathSpec]], is_dir: bool) -> bool:
    for directory, spec in ignores:
        if path.is_relative_to(directory):
            rel = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
    return False


def _search(regex: re.Pattern[str], base: Path, glob: str | None, paths: PathGuard, buffers: dict[Path, str]) -> list[str]:
    files, _ = walk(base, paths, glob, 20000)
    hits: list[str] = []
    for file in files:
        text = buffers.get(file)
        if text is None:
            try:
                if file.stat().st_size > MAX_SEARCH_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue
            text = data.decode("utf-8", errors="replace")
        shown = paths.display(file)
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{shown}:{number}: {line.strip()[:300]}")
                if len(hits) > MAX_MATCHES:
                    return hits
    return hits
