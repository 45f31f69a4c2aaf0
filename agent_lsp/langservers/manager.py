"""The language servers of one set of workspace folders: one per root and language, started on
the first request that needs it, restarted once after a crash, ended with agent-lsp. Each server
is a `CodeIntelSource` (`sources()`); their published diagnostics are a `DiagnosticsSource`
(`diagnostics`); `found()` lists them for `agent-lsp doctor` and `agentLsp.setup`."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_lsp.agent.fs.uris import path_of_uri
from agent_lsp.agent.ports import CodeIntelError
from agent_lsp.langservers.config import ServerSpec, chosen, extension, specs
from agent_lsp.langservers.positions import convert, documents
from agent_lsp.langservers.readiness import WORKSPACE_WIDE
from agent_lsp.settings_schema import LanguageServersSettings

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0  # one request, the first (cold) one included
START_TIMEOUT = 60.0  # process start + initialize
DIAGNOSTICS_WAIT = 2.0  # for fresh diagnostics after a change
DIAGNOSTICS_COLD_WAIT = 15.0  # ... when the server started for this question
KEPT_TEXTS = 200  # texts the agent synced before their server started


@dataclass
class _Slot:
    """One (root, server): its live connection, its restarts, why it failed for good."""

    spec: ServerSpec
    root: Path
    connection: Any = None
    restarts: int = 0
    failed: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ServerSource:
    """One configured or detected server as a code-intelligence source (agent/ports.py)."""

    def __init__(self, manager: LanguageServers, spec: ServerSpec):
        self.manager = manager
        self.spec = spec
        self.name = spec.name

    def handles(self, path: Path) -> bool:
        return self.manager.spec_for(path) is self.spec

    def position_encoding(self, path: Path) -> str:
        """Always UTF-16: a server that negotiated another encoding is converted for (see
        positions.py), so callers may count before the server has even started."""
        return "utf-16"

    async def sync(self, path: Path, text: str) -> None:
        self.manager.sync(path, text)

    async def request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        return await self.manager.request(self.spec, method, params, path)

    def caveat(self, method: str, path: Path) -> str | None:
        return self.manager.caveat(self.spec, method, path)


class LanguageServers:
    def __init__(
        self,
        settings: LanguageServersSettings,
        roots: list[Path],
        *,
        api_key_env: str = "OPENAI_API_KEY",
        path_env: str | None = None,
        request_timeout: float = REQUEST_TIMEOUT,
        start_timeout: float = START_TIMEOUT,
    ):
        self.specs = specs(settings, path_env)
        self.by_extension = chosen(self.specs)
        self.roots = [Path(r) for r in roots]
        self.api_key_env = api_key_env
        self.request_timeout = request_timeout
        self.start_timeout = start_timeout
        self._slots: dict[tuple[Path, str], _Slot] = {}
        self._texts: OrderedDict[Path, str] = OrderedDict()
        self._sources = [ServerSource(self, s) for s in self.specs if self._answers_some(s)]
        self._closed = False

    def _answers_some(self, spec: ServerSpec) -> bool:
        return any(self.by_extension.get(e) is spec for e in spec.extensions)

    # -- what answers ---------------------------------------------------------------------
    def sources(self) -> list[ServerSource]:
        return list(self._sources)

    def spec_for(self, path: Path) -> ServerSpec | None:
        return self.by_extension.get(extension(path))

    def root_for(self, path: Path) -> Path:
        """The deepest workspace folder holding `path`; a file outside them all (a library's
        source) is answered by the first folder's server."""
        inside = [r for r in self.roots if path == r or r in path.parents]
        if inside:
            return max(inside, key=lambda r: len(r.parts))
        return self.roots[0] if self.roots else path.parent

    def negotiated(self, spec: ServerSpec, path: Path) -> str | None:
        """The `positionEncoding` the server answering `path` chose (None: not started)."""
        slot = self._slots.get((self.root_for(path), spec.name))
        connection = slot.connection if slot is not None else None
        return str(connection.encoding) if connection is not None else None

    # -- documents -------------------------------------------------------------------------
    def sync(self, path: Path, text: str) -> None:
        """Kept for when its server starts; a running server hears didOpen/didChange now."""
        self._texts[path] = text
        self._texts.move_to_end(path)
        while len(self._texts) > KEPT_TEXTS:
            self._texts.popitem(last=False)
        spec = self.spec_for(path)
        slot = self._slots.get((self.root_for(path), spec.name)) if spec is not None else None
        if slot is not None and slot.connection is not None and slot.connection.alive:
            slot.connection.sync(path, text)

    async def _text(self, path: Path) -> str | None:
        """What the agent synced for `path`, else the disk's text (read off the event loop)."""
        if path in self._texts:
            return self._texts[path]
        return await asyncio.to_thread(_read_text, path)

    async def _lines(self, connection: Any, uris: set[str]) -> dict[str, list[str] | None]:
        """Each document's lines as the server sees them (what it was sent, else the synced
        text, else the disk's: the files not in memory are read off the event loop, together)."""
        texts: dict[str, str | None] = {}
        unread: dict[str, Path] = {}
        for uri in uris:
            path = path_of_uri(uri)
            sent = connection.opened.get(path) if path is not None else None
            if path is None or sent is not None:
                texts[uri] = sent[1] if sent is not None else None
            elif path in self._texts:
                texts[uri] = self._texts[path]
            else:
                unread[uri] = path
        if unread:
            read = await asyncio.to_thread(lambda: [_read_text(p) for p in unread.values()])
            texts.update(zip(unread, read, strict=True))
        return {u: None if t is None else re.split(r"\r\n|\r|\n", t) for u, t in texts.items()}

    async def _convert(
        self, connection: Any, node: Any, uri: str, source: str, target: str
    ) -> Any:
        """`node`'s positions re-counted from `source` to `target` code units (positions.py)."""
        if source == target:
            return node
        lines = await self._lines(connection, documents(node, uri))
        return convert(node, uri, lines.get, source, target)

    async def _open(self, connection: Any, path: Path) -> None:
        text = await self._text(path)
        if text is not None and path.is_absolute():
            connection.sync(path, text)

    # -- starting and restarting -----------------------------------------------------------
    def _slot(self, spec: ServerSpec, path: Path) -> _Slot:
        root = self.root_for(path)
        key = (root, spec.name)
        if key not in self._slots:
            self._slots[key] = _Slot(spec, root)
        return self._slots[key]

    async def _running(self, slot: _Slot) -> Any:
        """The slot's live connection: started now if it never ran, restarted (once in its
        life) if it died."""
        from agent_lsp.langservers.connection import Connection, ServerFailed, ServerTimeout

        async with slot.lock:
            if self._closed:
                raise CodeIntelError("the language servers are shut down (agent-lsp is ending)")
            if slot.failed is not None:
                raise CodeIntelError(slot.failed)
            if slot.connection is not None and slot.connection.alive:
                return slot.connection
            while True:
                if slot.connection is not None:  # it ran and died: its one restart
                    why = slot.connection.why_dead()
                    await slot.connection.close()
                    slot.connection = None
                    if slot.restarts >= 1:
                        slot.failed = (
                            f"{why}; it was restarted once already and is not started again"
                        )
                        raise CodeIntelError(slot.failed)
                    slot.restarts += 1
                    log.warning("%s; restarting it once", why)
                connection = Connection(slot.spec, slot.root, api_key_env=self.api_key_env)
                slot.connection = connection
                try:
                    await connection.start(self.start_timeout)
                    return connection
                except ServerTimeout as exc:
                    await connection.close()
                    slot.connection = None
                    raise self._failed(slot, f"{exc} (initialize), so it was stopped") from None
                except ServerFailed as exc:  # it never answered `initialize`: no retry
                    slot.connection = None
                    why = str(exc)
                    if connection.exit_code is not None:
                        why = f"language server `{slot.spec.name}` failed to start: "
                        why += connection.start_failure()
                    raise self._failed(slot, why) from None
                except BaseException:  # cancelled while starting: ended, and no crash counted
                    slot.connection = None
                    raise

    def _failed(self, slot: _Slot, why: str) -> CodeIntelError:
        """A server that could not start: said once, in one line; asked again only once its
        configuration changed (a new configuration is a new set of servers)."""
        slot.failed = why
        log.warning("%s; it is not started again until its configuration changes", why)
        return CodeIntelError(why)

    async def request(
        self, spec: ServerSpec, method: str, params: dict[str, Any], path: Path
    ) -> Any:
        from pygls.exceptions import JsonRpcException

        from agent_lsp.langservers.connection import ServerFailed, ServerTimeout

        slot = self._slot(spec, path)
        while True:  # a crash mid-request: _running restarts it once, or says why not
            connection = await self._running(slot)
            await self._open(connection, path)
            if method in WORKSPACE_WIDE:  # not before the server has read the workspace
                await connection.readiness.settled()
            encoding = connection.encoding
            uri = path.as_uri()
            try:
                sent = await self._convert(connection, params, uri, "utf-16", encoding)
                result = await connection.request(method, sent, self.request_timeout)
                return await self._convert(connection, result, uri, encoding, "utf-16")
            except ServerTimeout as exc:
                raise CodeIntelError(str(exc)) from None
            except JsonRpcException as exc:
                raise CodeIntelError(
                    f"language server `{spec.name}` refused {method}: {exc}"
                ) from None
            except ServerFailed:
                continue

    def caveat(self, spec: ServerSpec, method: str, path: Path) -> str | None:
        """Why an answer of the server may be incomplete: asked a workspace-wide question while
        still reading the workspace, after its wait ran out (readiness.py)."""
        connection = self._slot(spec, path).connection
        if method not in WORKSPACE_WIDE or connection is None:
            return None
        if connection.readiness.settled_now():
            return None
        return (
            f"language server `{spec.name}` was still reading the workspace when it answered: "
            "the answer may be incomplete"
        )

    # -- diagnostics (the DiagnosticsSource port) ------------------------------------------
    async def diagnostics(
        self, paths: list[Path] | None, after: dict[Path, int] | None
    ) -> list[dict[str, Any]] | None:
        """What the started servers published: for `paths` (each file's server started and the
        file opened if need be, with the text last synced, else the disk's; when that text is new
        to the server its fresh diagnostics are awaited, at most DIAGNOSTICS_WAIT s), or
        everything published so far. `after` (editor buffer versions) means nothing here."""
        if paths is None:
            out: dict[str, list[dict[str, Any]]] = {}
            for slot in self._slots.values():
                if slot.connection is not None:
                    for uri, (items, _, _) in slot.connection.diagnostics.items():
                        out[uri] = items
            return [{"uri": uri, "diagnostics": items} for uri, items in sorted(out.items())]
        answers = await asyncio.gather(*(self._file_diagnostics(p) for p in paths))
        found = [a for a in answers if a is not None]
        return found if found or not paths else None

    async def _file_diagnostics(self, path: Path) -> dict[str, Any] | None:
        spec = self.spec_for(path)
        if spec is None:
            return None
        slot = self._slot(spec, path)
        cold = slot.connection is None or not slot.connection.alive
        try:
            connection = await self._running(slot)
        except CodeIntelError as exc:
            log.info("diagnostics of %s: %s", path, exc)
            return None
        uri = path.as_uri()
        before = connection.opened.get(path)
        since = time.monotonic()
        await self._open(connection, path)
        now = connection.opened.get(path)
        if now is None:
            return None
        changed = before != now
        version = now[0]

        def ready() -> bool:
            got = connection.diagnostics.get(uri)
            if got is None:
                return False
            if not changed:
                return True
            return bool(got[1] >= version if got[1] is not None else got[2] >= since)

        wait = DIAGNOSTICS_COLD_WAIT if cold else DIAGNOSTICS_WAIT
        try:
            async with connection.published:
                await asyncio.wait_for(connection.published.wait_for(ready), wait)
        except TimeoutError:
            if uri not in connection.diagnostics:
                return None
        return {"uri": uri, "diagnostics": connection.diagnostics[uri][0]}

    # -- listing and the end ---------------------------------------------------------------
    def found(self) -> list[dict[str, Any]]:
        """`[{name, command, source, state, extensions, running, why?, error?}]` (Decision 37's
        languageServers entries; `state` active, or ignored with why)."""
        out = []
        for spec in self.specs:
            slots = [s for s in self._slots.values() if s.spec is spec]
            item: dict[str, Any] = {
                "name": spec.name,
                "command": list(spec.command),
                "source": spec.source,
                "state": "active",
                "extensions": list(spec.extensions),
                "running": sum(1 for s in slots if s.connection is not None and s.connection.alive),
            }
            if not self._answers_some(spec):
                item["state"] = "ignored"
                item["why"] = "another server answers for " + ", ".join(spec.extensions)
            failed = [s.failed for s in slots if s.failed]
            if failed:
                item["error"] = failed[0]
            out.append(item)
        return out

    async def aclose(self) -> None:
        """Every server: shutdown + exit, then its process group killed. Idempotent."""
        self._closed = True
        connections = [s.connection for s in self._slots.values() if s.connection is not None]
        for slot in self._slots.values():
            slot.connection = None
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
