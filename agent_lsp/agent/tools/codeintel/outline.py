"""symbols: a file's outline (DocumentSymbol trees or flat SymbolInformation), or the workspace's
symbols matching a query (workspace/symbol), from the language servers."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import Field

from agent_lsp.agent.ports import CodeIntelError, CodeIntelSource
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.codeintel.service import (
    MAX_SHOWN,
    Texts,
    ask,
    located,
    target,
)
from agent_lsp.agent.tools.codeintel.sources import (
    caveat_of,
    encoding_of,
    handles,
    no_source,
    with_notes,
)

KINDS = {
    1: "file", 2: "module", 3: "namespace", 4: "package", 5: "class", 6: "method",
    7: "property", 8: "field", 9: "constructor", 10: "enum", 11: "interface", 12: "function",
    13: "variable", 14: "constant", 15: "string", 16: "number", 17: "boolean", 18: "array",
    19: "object", 20: "key", 21: "null", 22: "enum member", 23: "struct", 24: "event",
    25: "operator", 26: "type parameter",
}  # fmt: skip
CALLABLE = {6, 9, 12}  # method, constructor, function
SKIPPED_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", "target", "dist", "build"}
WALK_LIMIT = 5000  # files looked at to find one each source handles (a query without path)


class SymbolsArgs(Args):
    path: str | None = Field(
        None, description="A file: its outline. With query: which language's server to ask"
    )
    query: str | None = Field(
        None, description="A name (or part of one): the workspace's symbols matching it"
    )


class Symbols(Tool):
    name = "symbols"
    description = (
        "From the language server: a file's outline (kind, name, line) with {path}, or the "
        "symbols of the whole workspace matching a name with {query}: where classes, functions "
        "and methods are. Use it (not search) to find a definition by name."
    )
    args = SymbolsArgs

    async def prepare(self, args: SymbolsArgs, ctx: ToolContext) -> Prepared:
        if not args.path and not args.query:
            raise ToolError("give path (a file's outline) or query (workspace symbols)")

        async def execute() -> str:
            if args.query:
                return await _workspace_symbols(ctx, args.query, args.path)
            assert args.path is not None
            return await _outline(ctx, args.path)

        what = f"query {args.query!r}" if args.query else args.path
        return Prepared(f"symbols {what}", execute)


async def _outline(ctx: ToolContext, raw: str) -> str:
    path, index, text = await target(ctx, raw)
    uri = path.as_uri()
    asked = await ask(
        ctx, path, text, "textDocument/documentSymbol", lambda enc: {"textDocument": {"uri": uri}}
    )
    items = asked.result if asked is not None and isinstance(asked.result, list) else []
    if not items or asked is None:
        return f"the language server lists no symbols in {raw}"
    out: list[str] = []
    if all(isinstance(i, dict) and "location" not in i for i in items):  # DocumentSymbol trees
        _tree(items, 0, index, asked.encoding, out)
    else:  # SymbolInformation: flat, with its container
        for item in items:
            if not isinstance(item, dict):
                continue
            start = ((item.get("location") or {}).get("range") or {}).get("start") or {}
            line = index.spot(start, asked.encoding).line
            inside = f" (in {item['containerName']})" if item.get("containerName") else ""
            out.append(f"{line}: {_kind(item)} {item.get('name', '?')}{inside}")
    more = f"\n[… {len(out) - MAX_SHOWN * 2} more]" if len(out) > MAX_SHOWN * 2 else ""
    return f"{ctx.paths.display(path)}:\n" + "\n".join(out[: MAX_SHOWN * 2]) + more


def _tree(items: list[Any], depth: int, index: Any, encoding: str, out: list[str]) -> None:
    for item in items:
        if not isinstance(item, dict):
            continue
        start = (item.get("selectionRange") or item.get("range") or {}).get("start") or {}
        line = index.spot(start, encoding).line
        detail = f" — {item['detail']}" if item.get("detail") else ""
        out.append(f"{'  ' * depth}{line}: {_kind(item)} {item.get('name', '?')}{detail}")
        if int(item.get("kind") or 0) not in CALLABLE:  # a function's locals are not outline
            _tree(item.get("children") or [], depth + 1, index, encoding, out)


def _kind(item: dict[str, Any]) -> str:
    return KINDS.get(int(item.get("kind") or 0), "symbol")


async def _workspace_symbols(ctx: ToolContext, query: str, raw: str | None) -> str:
    intel = ctx.code_intel
    if raw:
        path = ctx.paths.resolve(raw, for_read=True)
        pairs = [(s, path) for s in (intel.sources_for(path) if intel else [])]
        if not pairs:
            raise no_source(path)
    else:
        candidates = [
            *ctx.workspace.open_texts(),
            *await asyncio.to_thread(_some_files, ctx.paths.roots),
        ]
        pairs = _one_file_each(candidates, intel.sources if intel else [])
        if not pairs:
            raise ToolError(
                "no language server answers for the files of this workspace; use search"
            )
    failure, notes = None, []
    for source, path in pairs:
        try:
            result = await source.request("workspace/symbol", {"query": query}, path)
        except CodeIntelError as exc:
            failure = f"{source.name}: {exc}"
            continue
        caveat = caveat_of(source, "workspace/symbol", path)
        if result:
            found = await _symbol_list(ctx, result, encoding_of(source, path), query)
            return with_notes(found, [caveat] if caveat else [])
        notes += [caveat] if caveat else []
    if failure is not None:
        raise ToolError(f"the language server could not answer: {failure}")
    return with_notes(f"the language server found no symbols matching {query!r}", notes)


def _some_files(roots: list[Path]) -> list[Path]:
    """Up to about WALK_LIMIT files of the workspace (no hidden or vendored folders)."""
    out: list[Path] = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            out += [Path(folder) / f for f in sorted(files)]
            if len(out) > WALK_LIMIT:
                return out
    return out


def _one_file_each(
    candidates: list[Path], sources: list[CodeIntelSource]
) -> list[tuple[CodeIntelSource, Path]]:
    """A file each source handles (open buffers first), in the sources' order."""
    found: dict[int, Path] = {}
    for path in candidates:
        for i, source in enumerate(sources):
            if i not in found and handles(source, path):
                found[i] = path
        if len(found) == len(sources):
            break
    return [(sources[i], found[i]) for i in sorted(found)]


async def _symbol_list(ctx: ToolContext, items: Any, encoding: str, query: str) -> str:
    texts = Texts(ctx)
    out: list[str] = []
    total = 0
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        loc = item.get("location") or {}
        where_path = texts.path(str(loc.get("uri", "")))
        if where_path is not None and texts.hidden(where_path):
            continue  # a file a Read(…) deny rule covers is not shown
        total += 1
        if len(out) >= MAX_SHOWN:
            continue
        rng = loc.get("range")
        inside = f" (in {item['containerName']})" if item.get("containerName") else ""
        if isinstance(rng, dict):  # a WorkspaceSymbol may give only the uri
            line = await located(texts, str(loc.get("uri", "")), rng.get("start") or {}, encoding)
            where = f"{line.file}:{line.line}:{line.column}" if line else "?"
        else:
            where = ctx.paths.display_uri(str(loc.get("uri", "")))
        out.append(f"{where}: {_kind(item)} {item.get('name', '?')}{inside}")
    more = f"\n[… {total - MAX_SHOWN} more not shown: {total} in all]" if total > MAX_SHOWN else ""
    return (
        f"{total} symbol{'' if total == 1 else 's'} matching {query!r}:\n" + "\n".join(out) + more
    )
