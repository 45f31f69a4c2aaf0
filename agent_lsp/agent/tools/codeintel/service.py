"""The run's code-intel sources, asked in order (Decision 39): the first that handles the file,
an empty or null answer falling through only to a next source that handles it too; answers are
never merged. Locations in answers become `path:line:col` and the line's text; a file outside
the workspace that an answer names becomes readable for the session."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_lsp.agent.fs.disk_workspace import read_disk_document
from agent_lsp.agent.ports import CodeIntelError, CodeIntelSource
from agent_lsp.agent.tools.codeintel.positions import Spot, TextIndex, shorten
from agent_lsp.agent.tools.codeintel.sources import caveat_of, encoding_of, handles, no_source
from agent_lsp.agent.tools.errors import ToolError
from agent_lsp.agent.tools.paths import PathRefused, path_of_uri

if TYPE_CHECKING:
    from agent_lsp.agent.tools.base import ToolContext

log = logging.getLogger(__name__)

MAX_SHOWN = 200  # locations shown per answer; the total is said


@dataclass
class Asked:
    """One source's answer: the source, its position encoding for the file, the result."""

    source: CodeIntelSource
    encoding: str
    result: Any


async def ask(
    ctx: ToolContext,
    path: Path,
    text: str,
    method: str,
    params: Callable[[str], dict[str, Any]],
    notes: list[str] | None = None,
) -> Asked | None:
    """Ask the sources that handle `path`, in order, after syncing each with `text` (what the
    agent sees); `params(encoding)` builds the request for a source's encoding. The first
    non-empty answer, or None when every source answered empty. ToolError when no source
    handles the file, or when the last one asked failed. `notes` gets the caveats of the
    answer used (of every empty one when none was used)."""
    intel = ctx.code_intel
    sources = intel.sources_for(path) if intel is not None else []
    if not sources:
        raise no_source(path)
    failure: str | None = None
    empty: list[str] = []
    for source in sources:
        encoding = encoding_of(source, path)
        try:
            await sync_for_request(ctx, source, path, text)
            result = await source.request(method, params(encoding), path)
        except CodeIntelError as exc:
            failure = f"{source.name}: {exc}"
            continue
        caveat = caveat_of(source, method, path)
        if result not in (None, [], {}):
            if caveat and notes is not None:
                notes.append(caveat)
            return Asked(source, encoding, result)
        empty += [caveat] if caveat else []
        failure = None
    if failure is not None:
        raise ToolError(f"the language server could not answer: {failure}")
    if notes is not None:
        notes += empty
    return None


async def sync_for_request(
    ctx: ToolContext, source: CodeIntelSource, path: Path, text: str
) -> None:
    """Before a request: the source sees `path` as the agent does, and every editor buffer it
    handles that differs from disk (an answer's positions in those files must fit their text).
    The editor ignores it; a started server gets didOpen/didChange."""
    await source.sync(path, text)
    open_texts = ctx.workspace.open_texts()
    if not open_texts:
        return
    for other in await ctx.workspace.unsaved([p for p in open_texts if p != path]):
        if handles(source, other):
            await source.sync(other, open_texts[other])


async def sync_sources(ctx: ToolContext, path: Path, text: str) -> None:
    """An edit landed: the sources that handle the file see its new text (a started server
    gets didChange; the editor ignores it). A failing source costs nothing here."""
    if ctx.code_intel is None:
        return
    for source in ctx.code_intel.sources_for(path):
        try:
            await source.sync(path, text)
        except Exception as exc:
            log.info("code-intel source %s: sync of %s failed: %s", source.name, path, exc)


NOT_READ = "(outside the workspace: not read)"
GIT_NOT_READ = "(inside a .git folder: not read)"


class Texts:
    """The texts of the files an answer names, read once per call: workspace files as the agent
    sees them (the editor's buffers), a library's source outside the workspace from disk
    (regular files only, then readable by read_file for the session). Any other file outside
    (a workspace symlink out, a secret) is judged as read_file judges it: not read (issue 32
    P1)."""

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self._cache: dict[Path, TextIndex | None] = {}
        self._paths: dict[str, Path | None] = {}
        self._refused: dict[str, str | None] = {}

    def path(self, uri: str) -> Path | None:
        """The file a URI names, resolved once per call (an answer names a file many times)."""
        if uri not in self._paths:
            self._paths[uri] = resolve_uri(self.ctx, uri)
        return self._paths[uri]

    def refused(self, uri: str) -> str | None:
        """Why the file the URI names is not read (None: it is): outside the workspace and no
        library's source, or inside a `.git` folder (its config may hold a token). Its location
        is still shown; it is not made readable."""
        if uri not in self._refused:
            path, why = self.path(uri), None
            if path is not None and not outside_readable(self.ctx, uri, path):
                why = NOT_READ
            elif path is not None and (
                self.ctx.paths.in_git_dir(path)
                or self.ctx.paths.in_git_dir(self.ctx.paths.given(uri))
            ):
                why = GIT_NOT_READ
            self._refused[uri] = why
        return self._refused[uri]

    def named(self, uri: str) -> str:
        """How a refused location is shown: the path as the answer named it (a workspace
        symlink keeps its workspace name)."""
        return self.ctx.paths.display(self.ctx.paths.given(uri))

    async def index(self, path: Path) -> TextIndex | None:
        if path not in self._cache:
            self._cache[path] = await self._read(path)
        return self._cache[path]

    async def preload(self, uris: list[str]) -> None:
        """Read the files these URIs name at once (an answer names many)."""
        paths = {
            p for uri in set(uris) if (p := self.path(uri)) is not None and not self.refused(uri)
        }
        todo = [p for p in paths if p not in self._cache]
        results = await asyncio.gather(*(self._read(p) for p in todo))
        self._cache.update(zip(todo, results, strict=True))

    def hidden(self, path: Path) -> bool:
        """A file a `Read(…)` deny rule covers: its locations are not shown, and outside the
        workspace it is not made readable (CONTRACT Decision 28)."""
        hides = self.ctx.hidden
        return hides is not None and hides(path)

    async def _read(self, path: Path) -> TextIndex | None:
        if self.hidden(path):
            return None
        inside = self.ctx.paths.root_of(path) is not None
        try:
            doc = await (self.ctx.workspace.read(path) if inside else read_disk_document(path))
        except (ValueError, OSError):
            return None
        if not inside and self.ctx.code_intel is not None:
            self.ctx.code_intel.allow_read(path)
        return TextIndex(doc.text)

    def display(self, path: Path) -> str:
        return self.ctx.paths.display(path)


def outside_readable(ctx: ToolContext, uri: str, path: Path) -> bool:
    """Whether an answer's file (`path`, resolved) may be read: inside the workspace folders, or
    already readable (read_file's rules); else only a library's source: named by its own path
    outside the workspace (not a workspace entry linking out), a file of a language the run's
    sources answer for, and none of the secrets the sandbox hides."""
    guard = ctx.paths
    if guard.root_of(path) is not None or path in guard.extra_readable:
        return True
    if guard.root_of(guard.given(uri)) is not None:
        return False  # a symlink in the workspace pointing out: read_file refuses it too
    if ctx.code_intel is None or not ctx.code_intel.sources_for(path):
        return False
    return not any(path == s or path.is_relative_to(s) for s in _secrets())


def _secrets() -> tuple[Path, ...]:
    from agent_lsp.agent.exec.sandbox_mounts import DEFAULT_HIDE, expand_hidden
    from agent_lsp.settings import state_dir

    found: list[Path] = []
    for entry in expand_hidden(DEFAULT_HIDE, [state_dir()], dict(os.environ)):
        found.append(entry)
        try:
            found.append(entry.resolve())
        except (OSError, RuntimeError):
            continue
    return tuple(found)


def resolve_uri(ctx: ToolContext, uri: str) -> Path | None:
    """The file a location's URI names, resolved (None: another scheme)."""
    path = path_of_uri(uri)
    if path is None:
        return None
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def location_of(item: Any) -> tuple[str, dict[str, Any]] | None:
    """(uri, range) of a Location or a LocationLink (its selection range: the name itself)."""
    if not isinstance(item, dict):
        return None
    if "targetUri" in item:
        rng = item.get("targetSelectionRange") or item.get("targetRange")
        return (str(item["targetUri"]), rng) if isinstance(rng, dict) else None
    if "uri" in item and isinstance(item.get("range"), dict):
        return str(item["uri"]), item["range"]
    return None


@dataclass(order=True)
class Line:
    """One location as shown: sorted by file, then line and column."""

    file: str
    line: int
    column: int
    text: str = field(compare=False)

    def render(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.text}"


async def located(texts: Texts, uri: str, start: dict[str, Any], encoding: str) -> Line | None:
    path = texts.path(uri)
    if path is None:
        return Line(uri, int(start.get("line", 0)) + 1, int(start.get("character", 0)) + 1, "")
    if texts.hidden(path):
        return None
    why = texts.refused(uri)
    if why is not None:
        line, column = int(start.get("line", 0)) + 1, int(start.get("character", 0)) + 1
        return Line(texts.named(uri), line, column, why)
    index = await texts.index(path)
    if index is None:
        line = int(start.get("line", 0)) + 1
        return Line(texts.display(path), line, int(start.get("character", 0)) + 1, "")
    spot: Spot = index.spot(start, encoding)
    return Line(texts.display(path), spot.line, spot.column, shorten(index.line(spot.line - 1)))


async def location_lines(texts: Texts, items: Any, encoding: str) -> list[Line]:
    """Locations (or LocationLinks) -> their lines, sorted, duplicates dropped."""
    if isinstance(items, dict):
        items = [items]
    locations = [loc for i in (items if isinstance(items, list) else []) if (loc := location_of(i))]
    await texts.preload([loc[0] for loc in locations])
    out: dict[tuple[str, int, int], Line] = {}
    for loc in locations:
        line = await located(texts, loc[0], loc[1].get("start") or {}, encoding)
        if line is not None:
            out.setdefault((line.file, line.line, line.column), line)
    return sorted(out.values())


def grouped(lines: list[Line], noun: str, limit: int = MAX_SHOWN) -> str:
    """`N nouns in M files`, then each file's lines (a blank line between files), at most
    `limit` shown with the total said."""
    files = list(dict.fromkeys(line.file for line in lines))
    head = f"{len(lines)} {noun}{'' if len(lines) == 1 else 's'} in {len(files)} file" + (
        "" if len(files) == 1 else "s"
    )
    body: list[str] = []
    last = None
    for line in lines[:limit]:
        if last is not None and line.file != last:
            body.append("")
        body.append(line.render())
        last = line.file
    if len(lines) > limit:
        body.append(f"[… {len(lines) - limit} more not shown: {len(lines)} in all]")
    return "\n".join([head, *body])


async def target(ctx: ToolContext, raw: str) -> tuple[Path, TextIndex, str]:
    """The file a positional tool is about: resolved (read-only: a library file an earlier
    answer named may be asked about too), its text as the agent sees it."""
    try:
        path = ctx.paths.resolve(raw, for_read=True)
    except PathRefused as exc:
        raise ToolError(str(exc)) from None
    if path.is_dir():
        raise ToolError(f"{raw} is a directory; give a file")
    if ctx.hidden is not None and ctx.hidden(path):
        raise ToolError(f"{raw} is denied by a Read(…) rule; it is not read")
    try:
        doc = await ctx.workspace.read(path)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    return path, TextIndex(doc.text), doc.text
