"""MCP tools as agent tools: names the model accepts, the server's schema, results as text."""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ConfigDict

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.mcp.display import cut, visible
from agent_lsp.mcp.names import MAX_NAME, hashed_tool_name, raw_tool_name, sanitise

__all__ = [
    "MAX_NAME",
    "McpTool",
    "model_tool_name",
    "raw_tool_name",
    "render_result",
    "tool_aliases",
]

DETAIL_LIMIT = 2000
DESCRIPTION_LIMIT = 4000

CallTool = Callable[[str, dict[str, Any]], Awaitable[Any]]


class McpArguments(Args):
    """Whatever object the server's schema describes: the server validates it."""

    model_config = ConfigDict(extra="allow")


def model_tool_name(server: str, tool: str, *, force_hash: bool = False) -> str:
    """`<server>__<tool>` as `[A-Za-z0-9_-]{1,64}`: other characters become `_`; a name that is too
    long (or contested, `force_hash`: see names.py) is cut and ends in `_` + 8 hex of a hash."""
    safe = sanitise(raw_tool_name(server, tool))
    if len(safe) <= MAX_NAME and not force_hash:
        return safe
    return hashed_tool_name(server, tool, contested=force_hash)


def tool_aliases(tool: Tool) -> set[str]:
    """The names whose `approval.tools` entry applies in full to this tool: the model's name and,
    for MCP tools, the other names that cannot mean another tool (names.py)."""
    return {tool.name, *tool.aliases}


class McpTool(Tool):
    """One tool of one MCP server; `call` reaches the server through the manager."""

    args = McpArguments

    def __init__(
        self,
        *,
        server: str,
        tool: str,
        description: str,
        input_schema: Any,
        read_only: bool,
        call: CallTool,
        name: str | None = None,
        aliases: tuple[str, ...] | None = None,
        contested: tuple[str, ...] = (),
        source: str = "user",
    ):
        """`aliases`: other names approval.tools may use for it in full (default: the raw
        `<server>__<tool>`); `contested`: names that may mean it or another tool, whose `deny` and
        `ask` apply but never `allow` (the manager works both out over every declared server)."""
        self.server = server
        self.tool = tool
        self.source = source
        self.raw_name = raw_tool_name(server, tool)
        self.name = name or model_tool_name(server, tool)  # type: ignore[misc]
        self.aliases = tuple(
            a for a in ((self.raw_name,) if aliases is None else aliases) if a != self.name
        )
        self.contested_aliases = contested
        text = " ".join((description or "").split()) or "(no description)"
        self.description = f"[MCP server {server}] {text[:DESCRIPTION_LIMIT]}"  # type: ignore[misc]
        self.read_only = read_only
        self.parameters = _parameters(input_schema)
        self._call = call

    @property
    def grant_key(self) -> str:
        """An "Allow for session" grant remembers this tool of this server from this source, not a
        name another tool may carry in a later run."""
        return f"mcp:{self.source}:{json.dumps([self.server, self.tool])}"

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    def parse(self, raw: dict[str, Any]) -> Any:
        if not isinstance(raw, dict):
            raise ToolError(f"invalid arguments for {self.name}: expected a JSON object")
        missing = [
            key
            for key in self.parameters.get("required", ())
            if isinstance(key, str) and key not in raw
        ]
        if missing:
            raise ToolError(
                f"invalid arguments for {self.name}: missing required {', '.join(missing)}"
            )
        return raw

    async def prepare(self, args: Any, ctx: ToolContext | None = None) -> Prepared:
        arguments = dict(args) if isinstance(args, dict) else {}
        shown = visible(json.dumps(arguments, indent=2, ensure_ascii=False, default=str))
        detail = f"{visible(self.raw_name)}\n{cut(shown, DETAIL_LIMIT)}"

        async def execute() -> str:
            return render_result(await self._call(self.tool, arguments))

        return Prepared(detail=detail, execute=execute)


def _parameters(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return {"type": "object"}
    params = copy.deepcopy(schema)
    params.pop("$schema", None)
    params["type"] = "object"
    return params


def render_result(result: Any) -> str:
    """A CallToolResult as text: text joined, binary summarised, structured content as JSON when
    there is no text. `isError` raises ToolError with the text."""
    parts: list[str] = []
    has_text = False
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
            has_text = True
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {_b64_size(block.data)} bytes]")
        elif kind == "resource":
            resource = block.resource
            uri = str(getattr(resource, "uri", ""))
            if isinstance(getattr(resource, "text", None), str):
                parts.append(f"[resource {uri}]\n{resource.text}")
                has_text = True
            else:
                mime = getattr(resource, "mime_type", None) or "application/octet-stream"
                parts.append(
                    f"[resource {uri}: {mime}, {_b64_size(getattr(resource, 'blob', ''))} bytes]"
                )
        elif kind == "resource_link":
            about = f": {block.description}" if getattr(block, "description", None) else ""
            parts.append(f"[resource link {block.name} {block.uri}{about}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not has_text and structured is not None:
        parts.insert(0, json.dumps(structured, indent=2, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if getattr(result, "is_error", False):
        raise ToolError(text or "the tool reported an error without a message")
    return text or "(no output)"


def _b64_size(data: str) -> int:
    data = (data or "").strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))
