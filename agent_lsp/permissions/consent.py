"""Consent for what a project's own files declare (CONTRACT Decision 30): per workspace and per
hash of the entry as written, for any kind of entry (`permissions.allow`, a hook, ...), kept in
the state dir beside the MCP servers' answers (same file format, same atomic writes)."""

from __future__ import annotations

import hashlib
from typing import Literal

from agent_lsp.mcp.consent import ConsentStore

Remembered = Literal["allow", "deny"]


def entry_key(kind: str, text: str) -> str:
    """The fingerprint of one entry as written: its kind and its exact text."""
    return hashlib.sha256(f"{kind}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


class ProjectConsent(ConsentStore):
    """`allow`/`deny` per workspace and entry, in one JSON file (0600, written atomically under
    a lock file)."""

    def answer(self, workspace: str, kind: str, text: str) -> Remembered | None:
        return self.get(workspace, entry_key(kind, text))

    def remember_entry(
        self, workspace: str, kind: str, text: str, answer: Remembered, origin: str = ""
    ) -> None:
        self._put(
            workspace,
            entry_key(kind, text),
            {"answer": answer, "kind": kind, "text": text, "origin": origin},
        )
