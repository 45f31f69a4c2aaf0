"""Which name means which MCP tool: the name the model sees, and the names an approval rule may use.

`<server>__<tool>`, sanitised, is not one-to-one: servers `a.b` and `a_b` both give `a_b__probe`,
and server `x__y` with tool `z` gives the same `x__y__z` as server `x` with tool `y__z`. A rule
written for one of them must never reach the other, above all when one is the user's own server
and the other a workspace's. So a name counts for a tool only when it cannot mean anything else:

- a name is *contested* when another declared server could produce it, whatever tools that
  server lists (it starts with that server's `<name>__` or sanitised `<name>__`), or another tool
  of the same server sanitises to it. Declared servers count whether they run or not, so what a
  name means does not change when a server starts, fails or is denied.
- the model's name for a tool is its sanitised `<server>__<tool>` when that is uncontested and at
  most 64 characters; otherwise the sanitised name cut, plus `_` and 8 hex of a hash of
  (server, tool): distinct for distinct tools, and the same on every run.
- an `approval.tools` entry applies in full (`allow` too) only under the model's name or an
  uncontested raw name. Under a contested name only `deny` and `ask` apply, to every tool the name
  may mean: a name that may mean a tool never makes it run more freely.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitise(text: str) -> str:
    return _UNSAFE.sub("_", text)


def raw_tool_name(server: str, tool: str) -> str:
    return f"{server}__{tool}"


def hashed_tool_name(server: str, tool: str, *, contested: bool = True) -> str:
    """The sanitised name cut, plus 8 hex of a hash: of the (server, tool) pair for a contested
    name (the joined string is the same for `x__y`+`z` and `x`+`y__z`), of the raw name for a name
    that is only too long (as before)."""
    key = json.dumps([server, tool]) if contested else raw_tool_name(server, tool)
    suffix = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{sanitise(raw_tool_name(server, tool))[: MAX_NAME - 9]}_{suffix}"


@dataclass(frozen=True)
class ToolNames:
    name: str  # what the model sees and calls
    aliases: tuple[str, ...]  # other names whose approval.tools entry applies in full
    contested: tuple[str, ...]  # names that may mean this tool or another: only deny/ask apply


class Naming:
    """The names of the tools of every declared server (`servers`: all of them, running or not)."""

    def __init__(self, servers: Iterable[str]):
        self.servers = tuple(dict.fromkeys(servers))

    def overlaps(self) -> list[tuple[str, str]]:
        """Pairs of declared servers whose tools can end up with the same `<server>__<tool>`
        name."""

        def prefixes(server: str) -> set[str]:
            return {f"{server}__", f"{sanitise(server)}__"}

        pairs = []
        for i, one in enumerate(self.servers):
            for other in self.servers[i + 1 :]:
                if any(
                    p.startswith(q) or q.startswith(p)
                    for p in prefixes(one)
                    for q in prefixes(other)
                ):
                    pairs.append((one, other))
        return pairs

    def contested(self, name: str, server: str, siblings: Counter[str] | None = None) -> bool:
        if siblings is not None and siblings[name] > 1:
            return True
        return any(
            other != server
            and (name.startswith(f"{other}__") or name.startswith(f"{sanitise(other)}__"))
            for other in self.servers
        )

    def of_server(self, server: str, tools: Iterable[str]) -> dict[str, ToolNames]:
        """Names for each tool of one server, by the server's own tool name."""
        tools = list(dict.fromkeys(tools))
        plain = {tool: sanitise(raw_tool_name(server, tool)) for tool in tools}
        siblings = Counter(plain.values())  # `a.b` and `a_b` of one server
        out: dict[str, ToolNames] = {}
        for tool in tools:
            raw = raw_tool_name(server, tool)
            clean = plain[tool]
            free = not self.contested(clean, server, siblings)
            name = (
                clean
                if free and len(clean) <= MAX_NAME
                else hashed_tool_name(server, tool, contested=not free)
            )
            aliases: list[str] = []
            contested: list[str] = []
            for alias in dict.fromkeys((raw, clean)):
                if alias == name:
                    continue
                # The raw name of one tool is the sanitised name of no other tool of this server
                # unless they share it (counted in siblings).
                if self.contested(alias, server, siblings):
                    contested.append(alias)
                else:
                    aliases.append(alias)
            out[tool] = ToolNames(name, tuple(aliases), tuple(contested))
        return out
