"""Which language servers may start: the user's `languageServers.servers`, and with `auto` the
static analysers of Decision 38 found on PATH (they run none of the project's code). Any other
server (jedi-language-server, pylsp, typescript-language-server, clangd, ...) only when
configured."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.settings_schema import LanguageServersSettings

PYTHON = (".py", ".pyi")
# Decision 38, in this order: the first found on PATH answers for Python files.
AUTO: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ty", ("ty", "server")),
    ("basedpyright", ("basedpyright-langserver", "--stdio")),
    ("pyright", ("pyright-langserver", "--stdio")),
    ("pyrefly", ("pyrefly", "lsp")),
)


@dataclass(frozen=True)
class ServerSpec:
    """One server that may start: its name, argv (program resolved on PATH when found), the
    extensions it answers for, and what it is sent."""

    name: str
    command: tuple[str, ...]
    extensions: tuple[str, ...]
    source: Literal["configured", "auto"]
    initialization_options: Any = None
    settings: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def language(self) -> str:
        return self.extensions[0] if self.extensions else ""

    def answers(self, path: Path) -> bool:
        return extension(path) in self.extensions


def extension(path: Path) -> str:
    return path.suffix.lower()


def _normal(ext: str) -> str:
    ext = ext.strip().lower()
    return ext if ext.startswith(".") else f".{ext}"


def specs(settings: LanguageServersSettings, path_env: str | None = None) -> list[ServerSpec]:
    """The configured servers (in the settings' order), then the first auto-detected analyser
    (when `auto` is on, and unless a configured server already answers for Python files)."""
    found = [
        ServerSpec(
            name,
            tuple(server.command),
            tuple(dict.fromkeys(_normal(e) for e in server.extensions)),
            "configured",
            server.initialization_options,
            dict(server.settings),
        )
        for name, server in settings.servers.items()
    ]
    covered = {e for s in found for e in s.extensions}
    if settings.auto and not covered & set(PYTHON):  # one server per language
        auto = detect(path_env)
        if auto is not None and auto.name not in settings.servers:
            found.append(auto)
    return found


def detect(path_env: str | None = None) -> ServerSpec | None:
    """The first of Decision 38's analysers on PATH (None: none is installed)."""
    search = os.environ.get("PATH", "") if path_env is None else path_env
    for name, (program, *args) in AUTO:
        where = find_program(program, search)
        if where is not None:
            return ServerSpec(name, (where, *args), PYTHON, "auto")
    return None


def chosen(all_specs: list[ServerSpec]) -> dict[str, ServerSpec]:
    """Extension -> the one server that answers for it (one per language: the first listed)."""
    out: dict[str, ServerSpec] = {}
    for spec in all_specs:
        for ext in spec.extensions:
            out.setdefault(ext, spec)
    return out
