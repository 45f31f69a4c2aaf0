"""YAML front matter of Markdown prompt files (SKILL.md, commands, agents): parsed with a real
YAML parser, with one lenient fallback for the plain `key: value` lines Claude Code's own
examples write (`argument-hint: [pr-number] [priority]`, `description: Commit: staged files`),
which strict YAML rejects but Claude Code reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

_PLAIN_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?$")
# A value that means YAML syntax (a quote, a flow mapping, a block scalar, an anchor, a tag):
# the lenient reading would silently take something else than what was written.
_YAML_SYNTAX = ("{", '"', "'", "|", ">", "&", "*", "!", "%", "@", "`")


class FrontMatterError(ValueError):
    """The front matter cannot be read; the message says where and why."""


@dataclass(frozen=True)
class FrontMatter:
    fields: dict[str, Any]
    body: str
    present: bool  # the file had a front matter block at all


def split_front_matter(text: str) -> FrontMatter:
    """The fields and the body of a Markdown file. A file without a leading `---` line has no
    fields; an unclosed block or fields that are not a mapping raise FrontMatterError."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return FrontMatter({}, text, False)
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r\n").rstrip() == "---":
            break
    else:
        raise FrontMatterError("the front matter opened with `---` is never closed")
    raw = "".join(lines[1:end])
    body = "".join(lines[end + 1 :])
    return FrontMatter(parse_fields(raw), body.lstrip("\r\n"), True)


def parse_fields(raw: str) -> dict[str, Any]:
    import yaml  # only when a prompt file exists (a run without any never imports it)

    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        lenient = _plain_lines(raw)
        if lenient is None:
            raise FrontMatterError(f"bad YAML in the front matter: {_one_line(exc)}") from None
        return lenient
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"the front matter is a YAML {type(data).__name__}, not a mapping of fields"
        )
    return {str(k): v for k, v in data.items()}


def _plain_lines(raw: str) -> dict[str, Any] | None:
    """Every line `key: value` at column 0 (values kept as written), or None."""
    fields: dict[str, Any] = {}
    for line in raw.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _PLAIN_LINE.match(line.rstrip())
        if match is None:
            return None
        value = (match.group(2) or "").strip()
        if value.startswith(_YAML_SYNTAX) or not _balanced(value):
            return None
        fields[match.group(1)] = value
    return fields


def _balanced(value: str) -> bool:
    depth = 0
    for char in value:
        depth += {"[": 1, "]": -1, "(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _one_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        # +2: the line after the opening `---`, counted from 1
        return f"{problem} (line {mark.line + 2}, column {mark.column + 1})"
    return str(problem)


def text_field(fields: dict[str, Any], name: str) -> str | None:
    """A field as text: a string as is, a number as written, a list joined the way Claude Code
    shows `[a] [b]` hints; None when absent or empty."""
    value = fields.get(name)
    if value is None:
        return None
    if isinstance(value, list):
        text = " ".join(f"[{v}]" if name == "argument-hint" else str(v) for v in value)
    elif isinstance(value, dict):
        return None
    else:
        text = str(value)
    text = text.strip()
    return text or None


def list_field(fields: dict[str, Any], name: str) -> list[str] | None:
    """A list of names: a YAML list, or a string split at commas (Claude Code's `tools: Read,
    Grep`) or, without commas, at spaces outside parentheses (Agent Skills' `allowed-tools:
    Bash(git:*) Read`). None when absent."""
    value = fields.get(name)
    if value is None:
        return None
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value)
    if "," in _outside_parens(text):
        parts = _split_outside_parens(text, ",")
    else:
        parts = _split_outside_parens(text, " ")
    return [p.strip() for p in parts if p.strip()]


def _outside_parens(text: str) -> str:
    out, depth = [], 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if depth == 0 and char not in "()":
            out.append(char)
    return "".join(out)


def _split_outside_parens(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts
