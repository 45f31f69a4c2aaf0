"""Positions between the source's callers (UTF-16, the LSP default) and a server that
negotiated another `positionEncoding` (ty picks UTF-8): every `{line, character}` in a
request's params and in its result is converted on its own document's line.

Why the source converts instead of reporting the server's encoding to its callers: the server
starts lazily, on the first request, so a caller that asks `position_encoding()` before that
request could only be told a guess. Here the answer is UTF-16 from the first request on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Lines = Callable[[str], list[str] | None]  # a document's lines by URI (None: unreadable)


def to_index(line: str, offset: int, encoding: str) -> int:
    """The str index `offset` code units into `line` (clamped to the line's end)."""
    if encoding == "utf-32":
        return min(offset, len(line))
    width = 2 if encoding == "utf-16" else 1
    units = 0
    for index, char in enumerate(line):
        if units >= offset:
            return index
        code = ord(char)
        if width == 2:
            units += 2 if code > 0xFFFF else 1
        else:
            units += 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    return len(line)


def from_index(line: str, index: int, encoding: str) -> int:
    """The code units before str index `index` of `line`."""
    head = line[:index]
    if encoding == "utf-32":
        return len(head)
    if encoding == "utf-16":
        return len(head.encode("utf-16-le")) // 2
    return len(head.encode("utf-8"))


def convert(node: Any, uri: str, lines: Lines, source: str, target: str) -> Any:
    """`node` (params or a result) with every position re-counted from `source` to `target`
    code units; `uri` is the document positions belong to when nothing nearer names one."""
    if source == target:
        return node
    cache: dict[str, list[str] | None] = {}

    def position(doc: str, pos: dict[str, Any]) -> dict[str, Any]:
        if doc not in cache:
            cache[doc] = lines(doc)
        text = cache[doc]
        line, character = pos["line"], pos["character"]
        if text is None or not 0 <= line < len(text) or text[line].isascii():
            return pos
        row = text[line]
        return {**pos, "character": from_index(row, to_index(row, character, source), target)}

    def walk(value: Any, doc: str) -> Any:
        if isinstance(value, list):
            return [walk(item, doc) for item in value]
        if not isinstance(value, dict):
            return value
        if _is_position(value):
            return position(doc, value)
        here = _own_uri(value) or doc
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "changes" and isinstance(item, dict):  # WorkspaceEdit: uri -> edits
                out[key] = {u: walk(edits, u) for u, edits in item.items()}
            elif key == "originSelectionRange":  # a LocationLink's origin: the asked document
                out[key] = walk(item, doc)
            elif key == "fromRanges":  # incoming calls: in `from`; outgoing: in the caller
                origin = value.get("from")
                out[key] = walk(item, _own_uri(origin) or doc if isinstance(origin, dict) else doc)
            else:
                out[key] = walk(item, here)
        return out

    return walk(node, uri)


def documents(node: Any, uri: str) -> set[str]:
    """The documents whose lines `convert` needs for `node` (read them before converting)."""
    seen: set[str] = set()

    def record(doc: str) -> None:
        seen.add(doc)

    convert(node, uri, record, "utf-16", "utf-8")  # records every position's document
    return seen


def _is_position(value: dict[str, Any]) -> bool:
    return (
        len(value) == 2
        and isinstance(value.get("line"), int)
        and isinstance(value.get("character"), int)
    )


def _own_uri(value: dict[str, Any]) -> str | None:
    for key in ("uri", "targetUri"):
        if isinstance(value.get(key), str):
            return str(value[key])
    document = value.get("textDocument")
    if isinstance(document, dict) and isinstance(document.get("uri"), str):
        return str(document["uri"])
    return None
