"""Text that every writer can encode: a lone surrogate (`"\\ud800"` is valid JSON, and a model, an
MCP server or a client may send it) cannot be written as UTF-8, so it is found in arguments (a
tool error the model reads) and replaced with U+FFFD where the server writes (stream,
transcript, report)."""

from __future__ import annotations

import re
from typing import Any

# A surrogate code point in a str: lone, or one half of a pair a decoder left split.
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_wellformed(text: str) -> bool:
    return _SURROGATE.search(text) is None


def wellformed(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (a split pair is joined)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def wellformed_value(value: Any) -> Any:
    """`value` (dicts, lists, strings) with every string and key made well-formed; the same
    object when nothing needed it."""
    if malformed_at(value) is None:
        return value
    if isinstance(value, str):
        return wellformed(value)
    if isinstance(value, dict):
        return {wellformed_value(k): wellformed_value(v) for k, v in value.items()}
    return [wellformed_value(v) for v in value]


def malformed_at(value: Any, where: str = "") -> tuple[str, str] | None:
    """Where in `value` (a dotted path, "" for the value itself) a string or key holds a
    surrogate, and that surrogate as JSON escapes it (`\\ud800`); None when every string is
    well-formed."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return (where, f"\\u{ord(found.group()):04x}") if found else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if (bad := malformed_at(key, wellformed(name))) is not None:
                return bad
            if (bad := malformed_at(item, name)) is not None:
                return (wellformed(bad[0]), bad[1])
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (bad := malformed_at(item, f"{where}[{index}]")) is not None:
                return bad
    return None
