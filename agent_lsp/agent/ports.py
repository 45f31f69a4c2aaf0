"""The interfaces the core needs from its host (the LSP server or the terminal)."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent_lsp.agent.messages import Event


@dataclass
class Document:
    """A file's text as the agent saw it; version is the editor buffer's (None: disk)."""

    path: Path
    text: str
    version: int | None = None


@dataclass
class EditOutcome:
    applied: bool
    message: str = ""


class Workspace(Protocol):
    """Reads see the editor's buffers; writes are proposals the host applies."""

    roots: list[Path]

    async def read(self, path: Path) -> Document:
        """The current text: the open buffer if there is one, else the file on disk."""
        ...

    async def apply(self, path: Path, before: Document | None, after: str) -> EditOutcome:
        """Replace the file's text (before=None: create it). Never raises for a refusal."""
        ...

    def open_texts(self) -> dict[Path, str]:
        """Open buffers whose text may differ from disk (search sees these)."""
        ...

    def unsaved(self) -> list[Path]:
        """Files the agent changed that are not yet saved to disk."""
        ...


class Decision(enum.StrEnum):
    ALLOW = "allow"
    ALLOW_SESSION = "allowSession"
    DENY = "deny"
    WITHDRAWN = "withdrawn"  # nobody answered in time, or the run was cancelled


@dataclass
class ApprovalRequest:
    call_id: str
    tool: str
    detail: str  # exactly what would run or change


class Approver(Protocol):
    async def ask(self, request: ApprovalRequest) -> Decision: ...


EventSink = Callable[[Event], None]
# Called in the model's order when a delegate call is prepared (so sub-agent ids are
# deterministic for replay); the returned callable runs the sub-agent and gives its summary.
SubAgentSpawner = Callable[[str], Callable[[], Awaitable[str]]]
