"""MCP tools as agent tools: names the model accepts, the server's schema, results as text."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ConfigDict

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.mcp.display import cut, visible

MAX_NAME = 64
DETAIL_LIMIT = 2000
DESCRIPTION_LIMIT = 4000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

CallTool = Callable[[str, dict[str, Any]], Awaitable[Any]]


class McpArguments(Args):
    """Whatever object the server's schema describes: the server validates it."""

    model_config = ConfigDict(extra="allow")


def raw_tool_name(server: str, tool: str) -> str:
    return f"{server}__{tool}"


def model_tool_name(server: str, tool: str, *, force_hash: bool = False) -> str:
    """`<server>__<tool>` as `[A-Za-z0-9_-]{1,64}`: other characters become `_`; a name that is too
    long (or collides, `force_hash`) is cut and ends in `_` + 8 hex of the raw name's sha256."""
    raw = raw_tool_name(server, tool)
    safe = _UNSAFE.sub("_", raw)
    if len(safe) <= MAX_NAME and not force_hash:
        return safe
    suffix = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{safe[: MAX_NAME - 9]}_{suffix}"


def tool_aliases(tool: Tool) -> set[str]:
    """The names `approval.tools` may use for this tool: the model's name and, for MCP tools, the raw `<server>__<tool>`."""
    names = {tool.name}
    if isinstance(tool, McpTool):
        names.add(tool.raw_name)
    return names


class McpTool(Tool):
    """One tool of one MCP server; `call` reaches the server through the manager."""

    args = McpArguments

    @property
    def aliases(self) -> tuple[str, ...]:  # type: ignore[override]
        """approval.tools may name it by its raw `<server>__<tool>` too."""
        return (self.raw_name,)

    def __init__(self, *, server: str, tool: str, description: str, input_schema: Any, read_only: bool, call: CallTool, name: str | None = None):
        self.server = server
        self.tool = tool
        self.raw_name = raw_tool_name(server, tool)
        self.name = name or model_tool_name(server, tool)  # type: ignore[misc]
        text = " ".join((description or "").split()) or "(no description)"
        self.description = f"[MCP server {server}] {text[:DESCRIPTION_LIMIT]}"  # type: ignore[misc]
        self.read_only = read_only
        self.parameters = _parameters(input_schema)
        self._call = call

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": copy.deepcopy(self.parameters)}}

    def parse(self, raw: dict[str, Any]) -> Any:
        if not isinstance(raw, dict):
            raise ToolError(f"invalid arguments for {self.name}: expected a JSON object")
        missing = [key for key in self.parameters.get("required", ()) if isinstance(key, str) and key not in raw]
        if missing:
            raise ToolError(f"invalid arguments for {self.name}: missing required {', '.join(missing)}")
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
                parts.append(f"[resource {uri}: {mime}, {_b64_size(getattr(resource, 'blob', ''))} bytes]")
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
