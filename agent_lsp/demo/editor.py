"""The demo's editor: a tiny LSP client's buffers and terminal output, as an editor shows a run.

It prints the streamed text, the progress, each approval (asking on a TTY), and applies the
server's workspace edits to its buffers, then saves them, as an editor does."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from agent_lsp.demo.edits import apply_text_edits
from agent_lsp.terminal.style import Style, read_line_async


class DemoEditor:
    def __init__(self, root: Path, yes: bool, out=sys.stdout):
        self.root = root
        self.out = out
        self.style = Style.for_stream(out)
        self.interactive = sys.stdin.isatty() and not yes
        self.yes = yes
        self.buffers: dict[str, list[Any]] = {}  # uri -> [version, text]
        self.report: dict[str, Any] | None = None
        self.stopped = asyncio.Event()
        self.in_text = False
        self.muted = False  # after Ctrl-C: the user asked for quiet, the late stream is not shown
        self.stderr_tail: list[str] = []
        # (uri, version, text) of buffers an edit changed
        self.changed: list[tuple[str, int, str]] = []

    # -- output -----------------------------------------------------------------------------
    def line(self, text: str = "") -> None:
        if self.muted:
            return
        if self.in_text:
            self.out.write("\n")
            self.in_text = False
        self.out.write(text + "\n")
        self.out.flush()

    def on_stream(self, event: dict[str, Any]) -> None:
        s = self.style
        kind = event.get("kind")
        if kind == "text" and not self.muted:
            self.out.write(s("36", event["text"]))
            self.in_text = True
            self.out.flush()
        elif kind == "toolCall":
            self.line(
                f"  {s('33', '▸')} {s.bold(event['tool'])} {s.dim(_short(event.get('arguments')))}"
            )
        elif kind == "toolResult":
            mark = s("32", "✓") if event.get("ok") else s("31", "✗")
            extra = s.dim(" (truncated, full output spilled)") if event.get("truncated") else ""
            self.line(f"  {mark} {s.dim(event['text'][:110])}{extra}")
        elif kind == "approval" and event.get("state") != "pending":
            self.line(
                f"  {s('35', '⚑')} approval {event['state']}: {event['detail'].splitlines()[0]}"
            )
        elif kind == "compaction":
            self.line(f"  {s.dim('⋯ ' + event['text'])}")
        elif kind == "stop":
            self.report = event.get("report")
            self.stopped.set()

    def on_progress(self, value: dict[str, Any]) -> None:
        kind = value.get("kind")
        if kind == "begin":
            self.line(
                self.style.dim(
                    f"[progress] {value.get('title')} (cancellable: {value.get('cancellable')})"
                )
            )
        elif kind == "report" and "asking the model" in (value.get("message") or ""):
            self.line(self.style.dim(f"[progress] {value.get('message')}"))
        elif kind == "end":
            self.line(
                self.style.dim(f"[progress] ended: {(value.get('message') or '').split(':')[0]}")
            )

    # -- approvals --------------------------------------------------------------------------
    async def approve(self, message: str, actions: list[str] | None = None) -> Any:
        s = self.style
        self.line("")
        self.line(
            f"  {s('35;1', '? approval requested by the server (window/showMessageRequest)')}"
        )
        for text in message.splitlines()[:14]:
            self.line(f"    {text}")
        if not self.interactive:
            why = "--yes" if self.yes else "no TTY"
            allow = f"→ Allow (approved automatically: {why}; the demo works on a copy)"
            self.line(f"    {s('32', allow)}")
            return "Allow"
        offered = actions or ["Allow", "Allow for session", "Deny"]
        answer = await read_line_async(approval_question(offered), self.out)
        return approval_answer(answer, offered)

    # -- edits, as an editor applies them to its buffers, then saves -----------------------
    def apply(self, edit: Any) -> tuple[bool, str | None]:
        from lsprotocol import types

        changes: list[tuple[str, list[Any]]] = []
        for change in edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                changes.append((change.uri, []))
            elif isinstance(change, types.TextDocumentEdit):
                version = change.text_document.version
                buffer = self.buffers.get(change.text_document.uri)
                if version is not None and buffer is not None and buffer[0] != version:
                    return False, f"document version {version} is stale"
                changes.append((change.text_document.uri, list(change.edits)))
        changes += list((edit.changes or {}).items())
        for uri, edits in changes:
            path = Path(uri.removeprefix("file://"))
            buffer = self.buffers.get(uri)
            old = (
                buffer[1] if buffer else (path.read_text(encoding="utf-8") if path.exists() else "")
            )
            new = apply_text_edits(old, edits)
            path.write_text(new, encoding="utf-8")  # the demo editor saves right after applying
            if buffer is not None:
                buffer[0] += 1
                buffer[1] = new
                self.changed.append((uri, buffer[0], new))
        return True, None


# The server's action titles (approvals, consent) as the demo offers them: key, how it is shown.
KEYS = {
    "Allow": ("a", "[a]llow"),
    "Allow for session": ("s", "allow for [s]ession"),
    "Always allow": ("w", "al[w]ays allow"),
    "Allow always for this workspace": ("w", "allow al[w]ays for this workspace"),
    "Deny": ("d", "[d]eny (d REASON to say why)"),
}


def approval_question(offered: list[str]) -> str:
    """`[a]llow / allow for [s]ession / al[w]ays allow / [d]eny (d REASON to say why)? `, for
    the actions the server offered (each letter only when its action is)."""
    shown = [KEYS[title][1] for title in offered if title in KEYS]
    return "    " + " / ".join(shown) + "? "


def approval_answer(typed: str | None, offered: list[str]) -> Any:
    """The action item for what was typed: a letter of an offered action (Enter allows), `d`
    followed by a reason (sent as the item's `reason`, CONTRACT "Approvals"), anything else a
    denial."""
    text = (typed if typed is not None else "d").strip()
    letter = "a" if text.lower() in ("", "y") else text.lower()[:1]
    for title in offered:
        if title in KEYS and KEYS[title][0] == letter and letter != "d":
            return title
    deny = next((t for t in offered if t == "Deny"), None)
    if deny is None:
        return None
    reason = text[1:].strip() if letter == "d" and text[1:2] == " " else ""
    return {"title": deny, "reason": reason} if reason else deny


def _short(arguments: Any) -> str:
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    else:
        text = str(arguments)
    return text if len(text) <= 90 else text[:87] + "…"
