"""Files and selections the user attached to a prompt (`agentLsp.run {context}`, CONTRACT
Decisions 53, 75): read when the run starts through the workspace (an open buffer's text, else
the disk) under read_file's rules, each as a fenced block headed by its workspace-relative path
(and `:start-end` lines, 1-based) before the prompt, in the prompt's own user message."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_lsp.agent.ports import Workspace
from agent_lsp.agent.state.gitsafe import redact_git_secrets
from agent_lsp.agent.tools.files import split_lines
from agent_lsp.agent.tools.paths import PathGuard, PathRefused

MAX_ATTACHED_CHARS = 100_000  # of one attachment; the rest is a read_file away
_BACKTICKS = re.compile(r"`{3,}")


@dataclass(frozen=True)
class Attachment:
    uri: str  # a `file:` URI (or a path) as the front end gave it
    lines: tuple[int, int] | None = None  # first and last line, 1-based; None: the whole file


class AttachmentRefused(Exception):
    """An attached file that cannot be read; the message names it (the run ends `fatal`)."""


async def attached_text(
    attachments: list[Attachment],
    workspace: Workspace,
    paths: PathGuard,
    hidden: Callable[[Path], bool] | None = None,
) -> str:
    """The attachments' blocks, each followed by a blank line (to go before the prompt)."""
    blocks = [await _block(a, workspace, paths, hidden) for a in attachments]
    return "".join(f"{block}\n\n" for block in blocks)


async def _block(
    attachment: Attachment,
    workspace: Workspace,
    paths: PathGuard,
    hidden: Callable[[Path], bool] | None,
) -> str:
    shown = paths.display_uri(attachment.uri)
    try:
        path = paths.resolve(attachment.uri, for_read=True)
        if hidden is not None and hidden(path):
            raise ValueError("your permissions deny reading it")
        if path.is_dir():
            raise ValueError("it is a directory")
        doc = await workspace.read(path)
    except (PathRefused, ValueError, OSError) as exc:
        raise AttachmentRefused(f"the attached file {shown} could not be read: {exc}") from None
    text = redact_git_secrets(doc.text) if paths.in_git_dir(path) else doc.text
    head = paths.display(path)
    note = ""
    if attachment.lines is not None:
        first, last = attachment.lines
        lines = split_lines(text)
        last = min(last, len(lines))
        text = "\n".join(lines[first - 1 : last])
        head = f"{head}:{first}-{max(first, last)}"
        if first > len(lines):  # the file changed since the selection was made
            note = f"\n(past the end: the file has {len(lines)} lines)"
    if len(text) > MAX_ATTACHED_CHARS:
        note += f"\n(cut: {len(text)} characters; the first {MAX_ATTACHED_CHARS} are quoted)"
        text = text[:MAX_ATTACHED_CHARS]
    body = text.rstrip("\r\n")
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{head}\n{fence}\n{body}\n{fence}{note}"
