"""find_definition, find_references, hover, call_hierarchy: a symbol named as the model sees it
(1-based line + its text on that line), asked of the language servers (CONTRACT "Code
intelligence")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agent_lsp.agent.ports import CodeIntelError
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.codeintel.positions import TextIndex, symbol_position
from agent_lsp.agent.tools.codeintel.service import (
    Asked,
    Line,
    Texts,
    ask,
    grouped,
    located,
    location_lines,
    resolve_uri,
    target,
)
from agent_lsp.agent.tools.codeintel.sources import caveat_of, with_notes

STEER = "Use it (not search) for code symbols; search is for text."


class SymbolArgs(Args):
    path: str = Field(description="The file, relative to the workspace")
    line: int = Field(ge=1, description="1-based line number, as read_file shows it")
    symbol: str = Field(
        min_length=1, description="The identifier's exact text on that line (a whole name)"
    )
    occurrence: int = Field(
        1, ge=1, description="Which appearance of symbol on that line (default 1: the first)"
    )


async def ask_at(
    ctx: ToolContext,
    args: SymbolArgs,
    method: str,
    extra: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> tuple[Asked | None, TextIndex]:
    """Ask `method` at the symbol's position; (answer or None, the file's text). `notes` gets
    the answer's caveats (service.ask)."""
    path, index, text = await target(ctx, args.path)
    symbol_position(index, args.line, args.symbol, args.occurrence, "utf-16")  # a miss: now

    def params(encoding: str) -> dict[str, Any]:
        return {
            "textDocument": {"uri": path.as_uri()},
            "position": symbol_position(index, args.line, args.symbol, args.occurrence, encoding),
            **(extra or {}),
        }

    return await ask(ctx, path, text, method, params, notes), index


class FindDefinition(Tool):
    name = "find_definition"
    description = (
        "Where a symbol is defined, from the language server: `path:line:col: line`. Give the "
        "file, the 1-based line where the symbol appears and its exact text. " + STEER
    )
    args = SymbolArgs

    async def prepare(self, args: SymbolArgs, ctx: ToolContext) -> Prepared:
        async def execute() -> str:
            asked, _ = await ask_at(ctx, args, "textDocument/definition")
            if asked is None:
                return f"the language server found no definition of `{args.symbol}` there"
            lines = await location_lines(Texts(ctx), asked.result, asked.encoding)
            if not lines:
                return f"the language server found no definition of `{args.symbol}` there"
            return "\n".join(line.render() for line in lines)

        return Prepared(f"find_definition {args.symbol} ({args.path}:{args.line})", execute)


class ReferencesArgs(SymbolArgs):
    includeDeclaration: bool = Field(  # noqa: N815 - the contract's name
        False, description="Also list the declaration itself (default false)"
    )


class FindReferences(Tool):
    name = "find_references"
    description = (
        "Every use of a symbol in the project, from the language server (exact: not same-named "
        "other symbols, strings or comments), grouped by file, `path:line:col: line`. "
        + STEER
        + " Prefer it to search for callers and usages."
    )
    args = ReferencesArgs

    async def prepare(self, args: ReferencesArgs, ctx: ToolContext) -> Prepared:
        async def execute() -> str:
            notes: list[str] = []
            return with_notes(await references(notes), notes)

        async def references(notes: list[str]) -> str:
            context = {"context": {"includeDeclaration": args.includeDeclaration}}
            asked, _ = await ask_at(ctx, args, "textDocument/references", context, notes)
            if asked is None:
                return f"the language server found no references to `{args.symbol}`"
            lines = await location_lines(Texts(ctx), asked.result, asked.encoding)
            if not lines:
                return f"the language server found no references to `{args.symbol}`"
            return grouped(lines, "reference")

        return Prepared(f"find_references {args.symbol} ({args.path}:{args.line})", execute)


class Hover(Tool):
    name = "hover"
    description = (
        "The type, signature and documentation the language server shows for a symbol "
        "(as on mouse hover). " + STEER
    )
    args = SymbolArgs

    async def prepare(self, args: SymbolArgs, ctx: ToolContext) -> Prepared:
        async def execute() -> str:
            asked, _ = await ask_at(ctx, args, "textDocument/hover")
            text = hover_text(asked.result if asked is not None else None)
            return text or f"the language server shows nothing for `{args.symbol}` there"

        return Prepared(f"hover {args.symbol} ({args.path}:{args.line})", execute)


def hover_text(result: Any) -> str:
    """A Hover's contents: MarkupContent, a MarkedString ({language, value} or a string) or a
    list of them, as plain text with code fenced."""
    if not isinstance(result, dict):
        return ""
    contents = result.get("contents")
    parts = contents if isinstance(contents, list) else [contents]
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and "language" in part:
            out.append(f"```{part.get('language') or ''}\n{part.get('value', '')}\n```")
        elif isinstance(part, dict):
            out.append(str(part.get("value", "")))
    return "\n\n".join(p.strip() for p in out if p and p.strip())


class CallHierarchyArgs(SymbolArgs):
    direction: Literal["incoming", "outgoing"] = Field(
        description="incoming: who calls it; outgoing: what it calls"
    )


class CallHierarchy(Tool):
    name = "call_hierarchy"
    description = (
        "The callers (direction incoming) or callees (outgoing) of a function or method, from "
        "the language server, each with where the call is. " + STEER
    )
    args = CallHierarchyArgs

    async def prepare(self, args: CallHierarchyArgs, ctx: ToolContext) -> Prepared:
        async def execute() -> str:
            notes: list[str] = []
            return with_notes(await hierarchy(notes), notes)

        async def hierarchy(notes: list[str]) -> str:
            asked, _ = await ask_at(ctx, args, "textDocument/prepareCallHierarchy", None, notes)
            items = asked.result if asked is not None else None
            if isinstance(items, dict):
                items = [items]
            if not items or asked is None or not isinstance(items[0], dict):
                return f"the language server has no call hierarchy for `{args.symbol}` there"
            item = items[0]
            method, item_path = f"callHierarchy/{args.direction}Calls", _item_path(ctx, item)
            try:
                calls = await asked.source.request(method, {"item": item}, item_path)
            except CodeIntelError as exc:
                raise ToolError(f"the language server could not answer: {exc}") from None
            notes += filter(None, [caveat_of(asked.source, method, item_path)])
            return await _calls(ctx, args, item, calls or [], asked.encoding)

        return Prepared(
            f"call_hierarchy {args.direction} {args.symbol} ({args.path}:{args.line})", execute
        )


def _item_path(ctx: ToolContext, item: dict[str, Any]) -> Path:
    return resolve_uri(ctx, str(item.get("uri", ""))) or ctx.paths.roots[0]


async def _calls(
    ctx: ToolContext, args: CallHierarchyArgs, item: dict[str, Any], calls: list[Any], enc: str
) -> str:
    """Incoming: each caller (where it is defined) with its call sites (fromRanges are in the
    caller's file). Outgoing: each callee with the call sites in the item's own file."""
    texts = Texts(ctx)
    blocks: list[str] = []
    count = 0
    for call in calls:
        if not isinstance(call, dict):
            continue
        other = call.get("from" if args.direction == "incoming" else "to")
        if not isinstance(other, dict):
            continue
        site_uri = str(other.get("uri") if args.direction == "incoming" else item.get("uri"))
        other_path = texts.path(str(other.get("uri", "")))
        if other_path is not None and texts.hidden(other_path):
            continue  # a file a Read(…) deny rule covers is not shown
        where = await _item_line(texts, other, enc)
        sites: list[Line] = []
        for rng in call.get("fromRanges") or []:
            line = await located(texts, site_uri, (rng or {}).get("start") or {}, enc)
            if line is not None and line not in sites:
                sites.append(line)
        count += 1
        head = f"{other.get('name', '?')} — defined at {where}"
        shown = [f"  call at {s.render()}" for s in sites]
        blocks.append("\n".join([head, *shown]))
    if not blocks:
        who = "callers" if args.direction == "incoming" else "callees"
        return f"the language server found no {who} of `{args.symbol}`"
    noun = "caller" if args.direction == "incoming" else "callee"
    return f"{count} {noun}{'' if count == 1 else 's'} of `{args.symbol}`:\n" + "\n".join(blocks)


async def _item_line(texts: Texts, item: dict[str, Any], enc: str) -> str:
    rng = item.get("selectionRange") or item.get("range") or {}
    line = await located(texts, str(item.get("uri", "")), rng.get("start") or {}, enc)
    return f"{line.file}:{line.line}:{line.column}" if line is not None else "?"
