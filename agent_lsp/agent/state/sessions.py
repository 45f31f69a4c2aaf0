"""Sessions that survive a restart: an index per session in the workspace's state folder, the
history rebuilt from the runs' transcripts, old sessions pruned (CONTRACT Decisions 18, 19)."""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_lsp.agent.display import clip
from agent_lsp.agent.fs.safeio import NotReadable, private_dir, read_regular_sync, write_private
from agent_lsp.agent.state.session import Entry, RunRecord, Session, apply_history_record
from agent_lsp.agent.wellformed import wellformed

log = logging.getLogger(__name__)

KEEP_SESSIONS = 100
KEEP_DAYS = 30
TITLE_CHARS = 80
INDEX_MAX_BYTES = 10_000_000
# a transcript larger than this is not replayed (a tampered one, or a file never ours)
TRANSCRIPT_MAX_BYTES = 512_000_000


class SessionError(ValueError):
    """An unknown, foreign or unreadable session; the message is for the user."""


class InvalidSessionId(SessionError):
    """A value that cannot be a session id at all (a usage error, -32602): not an unknown
    session, which a valid id may be."""


SESSION_ID_CHARS = 128  # ours are `s-` and 12 hex digits; a file name holds at most 255 bytes
_SESSION_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{SESSION_ID_CHARS}}}")


def check_session_id(value: object) -> str:
    """`value` when it can be a session id, else InvalidSessionId saying what one looks like:
    the one check of every place a session id comes in (CLI, LSP, ACP, the store's paths)."""
    if isinstance(value, str) and _SESSION_ID.fullmatch(value):
        return value
    shown = clip(repr(value), 40)
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    raise InvalidSessionId(
        f"invalid session id {shown}{size}: a session id is 1-{SESSION_ID_CHARS} letters, "
        "digits, `-` or `_` (see `agent-lsp sessions`)"
    )


def workspace_key(root: Path) -> str:
    return hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


def workspace_state(state: Path, root: Path) -> Path:
    return state / "workspaces" / workspace_key(root)


def title_of(prompt: str) -> str:
    return clip(" ".join(prompt.split()), TITLE_CHARS)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SessionStore:
    """The sessions of one workspace (its first folder, resolved)."""

    def __init__(self, state: Path, root: Path):
        self.root = root.resolve()
        self.dir = workspace_state(state, self.root) / "sessions"
        self.spill_root = state / "spill"  # where every run's spill files are written

    def _index(self, session_id: str) -> Path:
        return self.dir / f"{check_session_id(session_id)}.json"

    async def save(self, session: Session) -> None:
        data = {
            "sessionId": session.id,
            "workspace": str(self.root),
            "title": title_of(session.title),
            "created": session.created,
            "updated": session.updated,
            "model": session.model,
            "runs": [r.to_dict() for r in session.runs],
        }
        if session.code_intel is not None:  # its tool list, kept when a later process resumes it
            data["codeIntel"] = session.code_intel
        path = self._index(session.id)
        text = wellformed(json.dumps(data, ensure_ascii=False))
        await asyncio.to_thread(_save, path, text.encode())

    async def load(self, session_id: str) -> Session:
        """The session with its history rebuilt from its transcripts; SessionError otherwise."""
        return await asyncio.to_thread(self._load, session_id)

    def _load(self, session_id: str) -> Session:
        path = self._index(session_id)
        if not path.exists() and not path.is_symlink():
            raise SessionError(
                f"unknown sessionId {session_id!r}: no such session in this workspace "
                f"({self.root}); omit it to start a new session"
            )
        try:
            data = json.loads(_read_state_file(path, INDEX_MAX_BYTES))
        except (OSError, ValueError) as exc:
            raise SessionError(
                f"session {session_id} cannot be read ({exc}); its index is kept at {path}"
            ) from None
        if not isinstance(data, dict):
            raise SessionError(
                f"session {session_id} cannot be read (its index is not a JSON object); "
                f"it is kept at {path}"
            )
        if data.get("workspace") not in (None, str(self.root)):
            raise SessionError(
                f"session {session_id} belongs to another workspace ({data.get('workspace')})"
            )
        session = Session(
            id=session_id,
            title=str(data.get("title", "")),
            created=float(data.get("created", 0)),
            updated=float(data.get("updated", 0)),
            model=data.get("model"),
        )
        if isinstance(data.get("codeIntel"), bool):
            session.code_intel = data["codeIntel"]
        session.runs = [RunRecord.from_dict(r) for r in data.get("runs", [])]
        for record in session.runs:
            if record.stop is None:  # the process ended while it ran
                record.stop = "cancelled"
        session.history, spills = self.rebuild(session.runs)
        session.spill_files |= spills
        return session

    def rebuild(self, runs: builtins.list[RunRecord]) -> tuple[builtins.list[Entry], set[Path]]:
        """The history these runs (a session's, or its first ones) leave, replayed from their
        transcripts, and the spill files read_file may read again. A fork's base record holds
        the history of every run before it (its parent's, which a fork lists but never replays:
        their transcripts are the parent's), so the replay starts at the last one."""
        start = max((i for i, r in enumerate(runs) if r.kind == "base"), default=0)
        history: builtins.list[Entry] = []
        spills: set[Path] = set()
        for record in runs[start:]:
            spills |= self._own_spills(_replay(Path(record.transcript), history))
        return history, spills

    def _own_spills(self, named: set[Path]) -> set[Path]:
        """The spill files a transcript names that read_file may read again: only regular files
        inside the state dir's spill folder (a transcript is a file on disk; one naming
        /etc/passwd or a link out of the folder must not make that file readable)."""
        try:
            folder = self.spill_root.resolve()
        except (OSError, RuntimeError):
            return set()
        kept = set()
        for path in named:
            try:
                resolved = path.resolve()
                regular = (
                    resolved.is_relative_to(folder)
                    and resolved != folder
                    and stat.S_ISREG(os.lstat(resolved).st_mode)
                )
            except (OSError, RuntimeError, ValueError):
                continue
            if regular:
                kept.add(resolved)
            else:
                log.warning(
                    "a transcript names %s as a spill file: not under %s, or not a regular file; "
                    "not readable",
                    path,
                    folder,
                )
        return kept

    def list(self) -> builtins.list[dict[str, Any]]:
        """CONTRACT agentLsp.sessions items, newest `updated` first."""
        items = []
        for path in self._files():
            try:
                data = json.loads(_read_state_file(path, INDEX_MAX_BYTES))
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError):
                log.warning("session index %s is unreadable: skipped (kept on disk)", path)
                continue
            runs = [r for r in data.get("runs", []) if r.get("kind", "run") == "run"]
            edited = list(
                dict.fromkeys(u for r in runs if not r.get("rewound") for u in r.get("edited", []))
            )
            last = runs[-1].get("stop") if runs else None
            run_list = [
                {
                    "runId": str(r.get("runId", "")),
                    "started": iso(float(r.get("started", 0))),
                    "stopReason": r.get("stop"),
                    "editedFiles": list(r.get("edited") or []),
                    **({"forkedFrom": r["forkedFrom"]} if r.get("forkedFrom") else {}),
                }
                for r in runs
            ]
            items.append(
                {
                    "sessionId": data.get("sessionId", path.stem),
                    "title": title_of(str(data.get("title", ""))),
                    "created": iso(float(data.get("created", 0))),
                    "updated": iso(float(data.get("updated", 0))),
                    "runs": len(runs),
                    "runList": run_list,
                    "lastStop": last,
                    "editedFiles": edited,
                    "_updated": float(data.get("updated", 0)),
                }
            )
        items.sort(key=lambda i: i.pop("_updated"), reverse=True)
        return items

    def ids(self) -> builtins.list[str]:
        """The ids of the workspace's sessions (their index files), in no order."""
        return [path.stem for path in self._files()]

    def _files(self) -> builtins.list[Path]:
        return [path for _, path in self._stamped()]

    def _stamped(self) -> builtins.list[tuple[float, Path]]:
        """(mtime, path) of each session index: one directory read and one stat per file (a
        server prunes after every run, over up to a hundred indexes)."""
        found = []
        try:
            with os.scandir(self.dir) as entries:
                for entry in entries:
                    if entry.name.endswith(".json") and entry.is_file():
                        try:
                            found.append((entry.stat().st_mtime, Path(entry.path)))
                        except OSError:
                            continue
        except OSError:
            return []
        return found

    def prune(
        self, keep: int = KEEP_SESSIONS, days: float = KEEP_DAYS, protect: set[str] | None = None
    ) -> builtins.list[str]:
        """Drop the oldest sessions past `keep` or older than `days` (their index, and their
        runs' transcripts and spill folders under the state dir); returns the ids dropped.
        Never a file outside the state dir."""
        now = time.time()
        dropped = []
        for index, (mtime, path) in enumerate(sorted(self._stamped(), reverse=True)):
            if path.stem in (protect or set()):
                continue
            if index >= keep or now - mtime > days * 86400:
                self._drop(path, transcripts=True)
                dropped.append(path.stem)
        if dropped:
            log.info("pruned %d old session(s) of %s", len(dropped), self.root)
        return dropped

    def exists(self, session_id: str) -> bool:
        try:
            return self._index(session_id).is_file()
        except SessionError:
            return False

    def remove(self, session_id: str, transcripts: bool = True) -> bool:
        """Delete one session: its index and (with transcripts) the transcripts of its runs
        under the state dir. False when there is no such session."""
        if not self.exists(session_id):
            return False
        self._drop(self._index(session_id), transcripts)
        return True

    async def delete(self, session_id: str) -> None:
        """Forget a session that is not worth keeping (its runs never reached the model); its
        transcripts stay, since the report names them and they say what went wrong."""
        await asyncio.to_thread(self.remove, session_id, False)

    def older_than(self, seconds: float) -> builtins.list[str]:
        """The ids of the sessions last updated more than `seconds` ago."""
        now = time.time()
        found = []
        for path in self._files():
            try:
                updated = float(
                    json.loads(_read_state_file(path, INDEX_MAX_BYTES)).get("updated", 0)
                )
            except (OSError, ValueError, TypeError):
                updated = _mtime(path)
            if now - updated > seconds:
                found.append(path.stem)
        return found

    def _drop(self, path: Path, transcripts: bool) -> None:
        if transcripts:  # never a file outside the state dir, whatever the index says
            state = self.dir.parents[2].resolve()
            try:
                data = json.loads(_read_state_file(path, INDEX_MAX_BYTES))
                for run in data.get("runs", []):
                    if run.get("forkedFrom"):  # a fork's copy of its parent's run: not its files
                        continue
                    # resolved: no `..` out of the state dir
                    _remove_run_files(
                        state, str(run.get("runId", "")), Path(run.get("transcript", "")).resolve()
                    )
            except (OSError, ValueError, AttributeError, TypeError) as exc:
                log.warning(
                    "session index %s: its runs' files could not all be removed (%s)", path, exc
                )
        path.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _remove_run_files(state: Path, run_id: str, transcript: Path) -> None:
    """A run's transcript and spill folder, when they lie under the state dir (a transcriptDir
    the user chose elsewhere is theirs)."""
    if (
        transcript.name
        and transcript.is_relative_to(state)
        and transcript.is_file()
        and not transcript.is_symlink()
    ):
        transcript.unlink()
    if run_id and run_id.replace("-", "").replace("_", "").isalnum():
        spill = state / "spill" / run_id
        if spill.is_dir() and not spill.is_symlink():
            shutil.rmtree(spill, ignore_errors=True)


def sweep_orphans(state: Path, live_runs: set[str], days: float = KEEP_DAYS) -> int:
    """Spill folders and transcripts under the state dir older than `days` that no session
    index (of any workspace) names and no live run owns: left by runs whose session was never
    saved or was deleted by hand. Returns how many were removed."""
    named = set(live_runs)
    for index in (state / "workspaces").glob("*/sessions/*.json"):
        try:
            data = json.loads(_read_state_file(index, INDEX_MAX_BYTES))
            named.update(str(r.get("runId", "")) for r in data.get("runs", []))
        except (OSError, ValueError, AttributeError):
            return 0  # an unreadable index may name anything: remove nothing
    cutoff = time.time() - days * 86400
    removed = 0
    candidates = [
        *_children(state / "spill"),
        *(p for p in _children(state / "runs") if p.suffix == ".jsonl"),
    ]
    for path in candidates:
        run_id = path.name.removesuffix(".jsonl")
        if run_id in named or _mtime(path) > cutoff or path.is_symlink():
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += 1
    if removed:
        log.info("removed %d old spill folder(s) and transcript(s) no session names", removed)
    return removed


def _children(folder: Path) -> builtins.list[Path]:
    try:
        return builtins.list(folder.iterdir())
    except OSError:
        return []


def _read_state_file(path: Path, max_bytes: int) -> str:
    """A state file's text, opened as a regular file only (O_NOFOLLOW|O_NONBLOCK, fstat: a FIFO,
    a device or a link put in its place is refused at once, never waited on; Decision 45).
    Raises NotReadable (a ValueError) or UnicodeDecodeError."""
    try:
        return read_regular_sync(path, max_bytes).decode("utf-8")
    except NotReadable as exc:
        if path.is_symlink():  # O_NOFOLLOW's ELOOP says "too many levels of symbolic links"
            raise NotReadable(
                f"{path} is a symbolic link, not a regular file: only regular files are read"
            ) from None
        raise NotReadable(str(exc).replace(path.name, str(path), 1)) from None


def _save(path: Path, data: bytes) -> None:
    private_dir(path.parent)
    write_private(path, data)


def _replay(transcript: Path, history: list[Entry]) -> set[Path]:
    """The main agent's history records of one run, in order; returns the spill files its
    results named (read_file may read them). A cut last line (the process died mid-write) is
    skipped with a log line; any other damage is an error naming the file."""
    spills: set[Path] = set()
    if not transcript.exists() and not transcript.is_symlink():
        raise SessionError(
            f"the transcript {transcript} of this session is missing; the session cannot be resumed"
        )
    try:
        text = _read_state_file(transcript, TRANSCRIPT_MAX_BYTES)
    except (OSError, ValueError) as exc:
        raise SessionError(
            f"the transcript {transcript} cannot be read ({exc}); it is kept as it is"
        ) from None
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == last:
                log.warning(
                    "transcript %s: its last line is cut (the process ended mid-write); "
                    "resumed without it",
                    transcript,
                )
                break
            raise SessionError(
                f"the transcript {transcript} is corrupt at line {number + 1}; it is kept as it is "
                "and the session cannot be resumed"
            ) from None
        if isinstance(record, dict) and record.get("agentId", "main") == "main":
            if record.get("type") == "toolResult" and record.get("spillPath"):
                spills.add(Path(record["spillPath"]))
            elif record.get("type") == "fork" and isinstance(record.get("spills"), list):
                spills |= {Path(str(p)) for p in record["spills"]}  # a fork's base: its parent's
            try:
                apply_history_record(history, record)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise SessionError(
                    f"the transcript {transcript} has a damaged record at line {number + 1} "
                    f"({exc}); it is kept as it is"
                ) from None
    return spills
