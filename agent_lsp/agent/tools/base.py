"""What a tool is: a pydantic argument model, a read-only flag, and prepare -> execute."""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_lsp.agent.ports import SubAgentSpawner, Workspace
from agent_lsp.agent.tools.paths import PathGuard


class ToolError(Exception):
    """A failure the model should read and handle: never fatal to the run."""


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass
class ToolContext:
    """What tools may touch: the workspace (through its port), paths, processes, sub-agents."""

    workspace: Workspace
    paths: PathGuard
    output_limit: int
    spawn_subagent: SubAgentSpawner | None = None
    edited: list[Path] = field(default_factory=list)
    processes: set[Any] = field(default_factory=set)


@dataclass
class Prepared:
    """A validated call: `detail` says exactly what would run or change (for approval)."""

    detail: str
    execute: Callable[[], Awaitable[str]]
    remember: str | None = None  # what "allow for session" remembers (the exact command line + cwd)
    command: str | None = None  # the raw command line, matched against allowCommands


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    args: ClassVar[type[Args]]
    read_only: ClassVar[bool] = True

    def schema(self) -> dict[str, Any]:
        # Built once per tool class: pydantic's schema generation costs ~5 ms a tool, every turn.
        return copy.deepcopy(_schema_of(type(self)))

    def parse(self, raw: dict[str, Any]) -> Args:
        try:
            return self.args.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None

    async def prepare(self, args: Any, ctx: ToolContext) -> Prepared:
        raise NotImplementedError


@functools.cache
def _schema_of(tool: type[Tool]) -> dict[str, Any]:
    params = tool.args.model_json_schema()
    params.pop("title", None)
    for prop in params.get("properties", {}).values():
        prop.pop("title", None)
    return {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": params}}


class ToolBox:
    """The tools one agent may use, by name."""

    def __init__(self, tools: list[Tool]):
        self.tools = {t.name: t for t in tools}

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def get(self, name: str) -> Tool:
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; the tools are: {', '.join(self.tools)}")
        return tool
