"""What goes into a turn and what comes out besides text: prompt content blocks as one prompt
for the core, the slash commands, and a plan's numbered steps as ACP plan entries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import AvailableCommand, AvailableCommandInput, PlanEntry, UnstructuredCommandInput

from agent_lsp.agent.fs.prompt_files import PromptFiles
from agent_lsp.agent.images import ImagePart, ImageRefused, checked_image
from agent_lsp.agent.tools.paths import PathGuard

CONTEXT_CHARS = 200_000  # of one embedded resource put into the prompt
_STEP = re.compile(r"^\s{0,3}(?:\d+[.)]|[-*•])\s+(.+?)\s*$")
_NUMBERED = re.compile(r"^\s{0,3}\d+[.)]\s+")


def shown(uri: str, roots: list[Path]) -> str:
    """A file URI as the model sees paths (the core's PathGuard.display_uri): relative to its
    workspace folder, prefixed with the folder's name for folders after the first."""
    return PathGuard(roots).display_uri(uri)


def prompt_text(blocks: list[Any], roots: list[Path]) -> str:
    """Text blocks in order (a mention becomes its path in backticks); embedded resources and
    links follow as `File: <path>` context, with their text when the client sent it."""
    parts: list[str] = []
    context: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            where = shown(block.uri, roots)
            parts.append(f"`{where}`")
            context.append(f"File: {where} (read it with read_file when needed)")
        elif kind == "resource":
            resource = block.resource
            where = shown(resource.uri, roots)
            text = getattr(resource, "text", None)
            parts.append(f"`{where}`")
            if isinstance(text, str):
                cut = text[:CONTEXT_CHARS] + ("\n… (cut)" if len(text) > CONTEXT_CHARS else "")
                context.append(f"File: {where}\n```\n{cut}\n```")
            else:
                context.append(f"File: {where} (binary content, not shown)")
        elif kind == "audio":
            parts.append("[an audio clip was attached; this agent cannot take audio input]")
    text = " ".join(p.strip() for p in parts if p.strip())
    if context:
        text += "\n\n" + "\n\n".join(dict.fromkeys(context))
    return text


def prompt_images(blocks: list[Any]) -> list[ImagePart]:
    """The prompt's image blocks as the run's images (Decision 54's limits); -32602 naming the
    image otherwise, before any model call."""
    images = [b for b in blocks if getattr(b, "type", None) == "image"]
    try:
        return [checked_image(b.mime_type, b.data, i) for i, b in enumerate(images)]
    except ImageRefused as exc:
        raise RequestError(-32602, f"session/prompt: {exc}") from None


@dataclass
class SlashCommand:
    name: str  # plan | rewind
    argument: str


COMMANDS = {
    "plan": (
        "Plan first: read-only tools, the answer is a numbered plan (nothing is changed)",
        "what to plan",
    ),
    "rewind": (
        "Put back the files this session's last run changed (or a run id's; "
        "add --force to overwrite later changes)",
        "run id (optional)",
    ),
}


def available_commands(files: PromptFiles | None = None) -> list[AvailableCommand]:
    """Ours (`/plan`, `/rewind`), then the user's commands and the skills a `/name` runs
    (Decision 34), those our own names do not hide."""
    ours = [
        AvailableCommand(
            name=name,
            description=description,
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)),
        )
        for name, (description, hint) in COMMANDS.items()
    ]
    theirs = []
    found = files or PromptFiles()
    for kind, entries in (("command", found.commands), ("skill", found.skills)):
        for name in sorted(entries):
            if name in COMMANDS or (kind == "skill" and name in found.commands):
                continue
            entry = entries[name]
            hint = entry.argument_hint
            theirs.append(
                AvailableCommand(
                    name=name,
                    description=entry.description or f"{entry.scope} {kind}",
                    input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint))
                    if hint
                    else None,
                )
            )
    return ours + theirs


def slash_command(text: str) -> SlashCommand | None:
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    if name.strip() not in COMMANDS:
        return None
    return SlashCommand(name.strip(), argument.strip())


def plan_entries(text: str) -> list[PlanEntry]:
    """The plan's steps: numbered lines (or, without any, bullet lines), each a pending entry."""
    lines = text.splitlines()
    numbered = any(_NUMBERED.match(line) for line in lines)
    steps = []
    for line in lines:
        match = _STEP.match(line)
        if match and (not numbered or _NUMBERED.match(line)):
            steps.append(match.group(1))
    return [PlanEntry(content=step, priority="medium", status="pending") for step in steps]
