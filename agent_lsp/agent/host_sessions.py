"""The sessions a host keeps in memory: opened, loaded once, dropped when idle; AgentHost's base."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.fs.shared_read import SharedRead
from agent_lsp.agent.state.session import Session, SessionApprovals
from agent_lsp.agent.state.sessions import SessionError, SessionStore, sweep_orphans
from agent_lsp.settings import state_dir

log = logging.getLogger(__name__)

# A server runs all day: what it keeps in memory is bounded. Idle sessions past these bounds
# are dropped from memory (they reload from their transcripts on next use).
KEEP_LIVE_SESSIONS = 32
IDLE_SECONDS = 30 * 60
PRUNE_SECONDS = 30  # a workspace's old sessions on disk are looked for at most this often
SWEEP_SECONDS = 3600  # orphan spills and transcripts are looked for at most this often


@dataclass
class HostSessions:
    """Sessions by id, each with its store; one session id has at most one Session object."""

    # The live sessions of this process.
    sessions: dict[str, tuple[Session, SessionStore]] = field(default_factory=dict)
    keep_sessions: int = KEEP_LIVE_SESSIONS
    idle_seconds: float = IDLE_SECONDS
    # "Allow for session" grants outlive a session's eviction from memory, for the server's life
    # (CONTRACT Decision 46); a session of an earlier process still asks again (Decision 18).
    grants: dict[str, SessionApprovals] = field(default_factory=dict)
    _used: dict[str, float] = field(default_factory=dict)  # session id -> last used (monotonic)
    # Evicted sessions a front end may still hold (an ACP session object): found again rather
    # than loaded a second time, so one session id never has two live objects.
    _evicted: dict[str, tuple[weakref.ref[Session], SessionStore]] = field(default_factory=dict)
    _loads: SharedRead = field(default_factory=SharedRead)  # (store dir, session id) in flight
    _pruned: dict[Path, float] = field(default_factory=dict)  # store dir -> last prune
    _swept: float = 0.0

    def store(self, roots: list[Path]) -> SessionStore:
        return SessionStore(state_dir(), roots[0])

    async def open_session(
        self, roots: list[Path], session_id: str | None
    ) -> tuple[Session, SessionStore]:
        """A new session, a live one, or one of an earlier process rebuilt from its transcripts.
        SessionError (a ValueError) for an unknown, foreign, corrupt or busy session. One session
        id has at most one Session object: concurrent opens of a persisted session share its
        load."""
        store = self.store(roots)
        self.evict_idle()
        if session_id is None:
            session = Session()
            self._keep(session, store)
            return session, store
        live = self.live(session_id)
        if live is None:
            live = await self._load_once(store, session_id)
        if live[1].dir != store.dir:
            raise SessionError(
                f"session {session_id} belongs to another workspace ({live[1].root})"
            )
        session = live[0]
        if session.running:
            raise SessionError(
                f"session {session_id} is still running ({session.running}); "
                "wait for it or cancel it first"
            )
        self._keep(session, store)
        return session, store

    async def session_to_read(
        self, roots: list[Path], session_id: str
    ) -> tuple[Session, SessionStore]:
        """A session to read (its history, a fork of it), running or not: the live object, else
        loaded once. SessionError for an unknown, foreign or unreadable one."""
        store = self.store(roots)
        live = self.live(session_id) or await self._load_once(store, session_id)
        if live[1].dir != store.dir:
            raise SessionError(
                f"session {session_id} belongs to another workspace ({live[1].root})"
            )
        return live

    def live(self, session_id: str) -> tuple[Session, SessionStore] | None:
        """The session's object in this process, if any (kept, or evicted but still held)."""
        kept = self.sessions.get(session_id)
        if kept is not None:
            return kept
        evicted = self._evicted.get(session_id)
        session = evicted[0]() if evicted is not None else None
        return (session, evicted[1]) if session is not None and evicted is not None else None

    async def _load_once(
        self, store: SessionStore, session_id: str
    ) -> tuple[Session, SessionStore]:
        return await self._loads.join(
            (store.dir, session_id), lambda: self._load(store, session_id)
        )

    async def _load(self, store: SessionStore, session_id: str) -> tuple[Session, SessionStore]:
        session = await store.load(session_id)
        live = self.live(session_id)  # an eviction or a new run may have raced the load
        if live is not None:
            return live
        self._keep(session, store)
        return session, store

    def _keep(self, session: Session, store: SessionStore) -> None:
        session.approvals = self.grants.setdefault(session.id, session.approvals)
        self.sessions[session.id] = (session, store)
        self._evicted.pop(session.id, None)
        self._used[session.id] = time.monotonic()

    def forget_session(self, session_id: str) -> None:
        """A deleted session leaves memory too (its grants included)."""
        self.sessions.pop(session_id, None)
        self._evicted.pop(session_id, None)
        self._used.pop(session_id, None)
        self.grants.pop(session_id, None)

    async def end_sessions(self, reason: str = "other") -> None:
        """SessionEnd for every session used in this process (exit, LSP shutdown), at once."""
        sessions: list[Session | None] = [s for s, _ in self.sessions.values()]
        sessions += [r() for r, _ in self._evicted.values()]
        ends = [s.end_hooks(reason) for s in sessions if s is not None and s.end_hooks is not None]
        for session in sessions:
            if session is not None:
                session.end_hooks = None
        if ends:
            await asyncio.gather(*ends, return_exceptions=True)

    def evict_idle(self) -> list[str]:
        """Drop idle sessions from memory past `keep_sessions` (least recently used first) or
        idle for `idle_seconds`; a running one is never dropped. Returns the ids dropped."""
        now = time.monotonic()
        idle = sorted(
            (
                (self._used.get(sid, 0.0), sid)
                for sid, (s, _) in self.sessions.items()
                if not s.running
            ),
            reverse=True,
        )
        dropped = []
        for rank, (used, sid) in enumerate(idle):
            if rank >= self.keep_sessions or now - used > self.idle_seconds:
                session, store = self.sessions.pop(sid)
                self._evicted[sid] = (weakref.ref(session), store)
                self._used.pop(sid, None)
                dropped.append(sid)
        for sid in [sid for sid, (ref, _) in self._evicted.items() if ref() is None]:
            del self._evicted[sid]
        return dropped

    def held_run_ids(self) -> set[str]:
        """The runs of every session this process holds (live or evicted but still referenced)."""
        held = [*self.sessions.values(), *filter(None, map(self.live, list(self._evicted)))]
        return {r.run_id for session, _ in held for r in session.runs}

    async def prune_state(
        self, store: SessionStore, running: set[str], live_runs: set[str]
    ) -> None:
        """Sessions past 100 per workspace or 30 days go with their transcripts and spills; the
        sessions this process holds (and `running`) are kept. Orphan spills and transcripts (of
        runs no session index names, nor `live_runs`) are swept at most once an hour. A
        workspace is pruned at most once per PRUNE_SECONDS: twenty runs that end together list
        its sessions once, not twenty times. A failure costs the prune only."""
        last = self._pruned.get(store.dir)
        if last is not None and time.monotonic() - last < PRUNE_SECONDS:
            return
        self._pruned[store.dir] = time.monotonic()
        protect = set(self.sessions) | set(self._evicted) | running
        sweep = time.monotonic() - self._swept > SWEEP_SECONDS or not self._swept
        if sweep:
            self._swept = time.monotonic()
        try:
            dropped = await asyncio.to_thread(store.prune, protect=protect)
            if sweep:
                await asyncio.to_thread(sweep_orphans, state_dir(), live_runs | self.held_run_ids())
        except OSError as exc:
            log.warning("pruning old sessions failed: %s", exc)
            return
        for sid in dropped:
            self.grants.pop(sid, None)
