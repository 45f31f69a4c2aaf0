"""The started language servers of every workspace a process serves, plugged into the host by a
front end's composition code (`plug`): the host's `code_intel` (roots -> sources: the sources
already plugged, such as the editor, first; then the started servers), their diagnostics for a
workspace whose client cannot answer `agentLsp/diagnostics` (`with_diagnostics`), and all of
them closed with the host."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_lsp.agent.ports import (
    CodeIntelSource,
    CodeIntelSources,
    Document,
    Workspace,
    answers_diagnostics,
)
from agent_lsp.langservers.manager import LanguageServers, ServerSource
from agent_lsp.settings_schema import Settings

log = logging.getLogger(__name__)


class LanguageServerHub:
    """`hub(roots)` is a `CodeIntelSources`. One manager per set of roots and languageServers
    setting; a manager whose setting changed keeps serving the runs that have it and is closed
    (its servers stopped) by `retire` once none does."""

    def __init__(self, settings: Callable[[], Settings], first: CodeIntelSources | None = None):
        self.settings = settings
        self.first = first  # sources asked before the started servers (the editor)
        self._managers: dict[tuple[Any, ...], LanguageServers] = {}

    def _key(self, where: tuple[str, ...], settings: Settings) -> tuple[Any, ...]:
        return (where, settings.language_servers.model_dump_json(), settings.api_key_env)

    def manager(self, roots: list[Path]) -> LanguageServers:
        settings = self.settings()
        key = self._key(tuple(str(r) for r in roots), settings)
        manager = self._managers.get(key)
        if manager is None:
            manager = LanguageServers(
                settings.language_servers, list(roots), api_key_env=settings.api_key_env
            )
            self._managers[key] = manager
        return manager

    def __call__(self, roots: list[Path]) -> list[CodeIntelSource]:
        first: list[CodeIntelSource] = []
        if self.first is not None:
            try:
                first = list(self.first(roots))
            except Exception:
                log.warning("the editor's code-intel source is unavailable", exc_info=True)
        return [*first, *self.manager(roots).sources()]

    def found(self, roots: list[Path]) -> list[dict[str, Any]]:
        return self.manager(roots).found()

    async def retire(self, in_use: list[Any]) -> None:
        """Close the managers of a replaced languageServers setting (their server processes
        stopped) that nothing in `in_use` (running runs' sources and workspaces) holds."""
        settings = self.settings()
        held = {id(m) for m in map(_manager_of, in_use) if m is not None}
        replaced = [
            key
            for key, manager in self._managers.items()
            if key != self._key(key[0], settings) and id(manager) not in held
        ]
        for key in replaced:
            try:
                await self._managers.pop(key).aclose()
            except Exception as exc:  # pragma: no cover - each closes what it can
                log.warning("closing the language servers of a replaced setting failed: %s", exc)

    async def aclose(self) -> None:
        managers, self._managers = list(self._managers.values()), {}
        for manager in managers:
            try:
                await manager.aclose()
            except Exception as exc:  # pragma: no cover - each closes what it can
                log.warning("closing the language servers failed: %s", exc)


def _manager_of(held: Any) -> LanguageServers | None:
    """The started servers a run's source (ServerSource) or workspace (_DiagnosingWorkspace)
    holds, if any."""
    if isinstance(held, ServerSource):
        return held.manager
    if isinstance(held, _DiagnosingWorkspace):
        return held._servers
    return None


def plug(host: Any, settings: Callable[[], Settings]) -> LanguageServerHub:
    """The started servers as the host's code-intel sources, after any source already plugged
    (the editor's); the host closes them with itself."""
    existing = host.code_intel
    if isinstance(existing, LanguageServerHub):
        return existing
    hub = LanguageServerHub(settings, first=existing)
    host.code_intel = hub
    return hub


class _DiagnosingWorkspace:
    """A run's workspace, unchanged, plus the started servers' diagnostics (CONTRACT
    "Code intelligence": they serve the `diagnostics` tool and the problems after an edit when
    the client cannot answer `agentLsp/diagnostics`)."""

    def __init__(self, inner: Workspace, manager: LanguageServers):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_servers", manager)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    @property
    def roots(self) -> list[Path]:
        return list(self._inner.roots)

    @property
    def has_diagnostics(self) -> bool:
        return True

    async def read(self, path: Path) -> Document:
        return await self._inner.read(path)

    async def diagnostics(
        self, paths: list[Path] | None, after: dict[Path, int] | None
    ) -> list[dict[str, Any]] | None:
        """The files' text as the agent sees it (an editor buffer, else the disk) is sent to
        their server first, so what comes back is about that text."""
        servers: LanguageServers = self._servers
        for path in paths or []:
            if servers.spec_for(path) is not None:
                try:
                    servers.sync(path, (await self._inner.read(path)).text)
                except OSError:
                    continue
        return await servers.diagnostics(paths, after)


def with_diagnostics(host: Any, workspace: Any) -> Any:
    """`workspace` itself when its client answers diagnostics or no server may start for its
    roots; else the same workspace with the started servers' diagnostics."""
    hub = getattr(host, "code_intel", None)
    if not isinstance(hub, LanguageServerHub) or answers_diagnostics(workspace):
        return workspace
    try:
        manager = hub.manager(list(workspace.roots))
    except Exception:
        log.warning("the language servers are unavailable", exc_info=True)
        return workspace
    return _DiagnosingWorkspace(workspace, manager) if manager.sources() else workspace
