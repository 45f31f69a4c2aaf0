"""A prompt that starts with `/name args` runs a prompt file (Decision 34): the command's body,
with `$ARGUMENTS` and `$1`…`$9` filled in, becomes the prompt; `/name` finds commands, then
skills; an unknown name stays text (`/etc/hosts is broken`). Also what a command may change
for its one run: its `model` (Decision 35, through the trusted `modelAliases`) and, for the
user's own command files, the tools its `allowed-tools` pre-allows."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.fs.prompt_files import PromptFile, PromptFiles
from agent_lsp.agent.tools.names import tool_name
from agent_lsp.settings import ApprovalSettings, Settings, is_replay

COMMAND_LINE = re.compile(r"^/([A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)*)(\s+(.*))?$", re.DOTALL)
PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")
# Model names of Claude Code's files that mean "the model the run has" unless modelAliases maps
# them (Decision 35).
CLAUDE_MODELS = ("inherit", "sonnet", "opus", "haiku")


@dataclass
class Invocation:
    """A `/name args` prompt resolved to its prompt file."""

    typed: str  # the prompt as typed (session titles, hooks)
    name: str
    source: PromptFile
    arguments: str
    prompt: str  # what the model gets
    readable: list[Path] = field(default_factory=list)  # a skill's files, readable for the session

    @property
    def is_skill(self) -> bool:
        return self.source.kind == "skill"


def find_prompt_file(name: str, files: PromptFiles) -> PromptFile | None:
    """Commands first, then skills; a name without a namespace finds the one `ns:name`."""
    if name in files.commands:
        return files.commands[name]
    if name in files.skills:
        return files.skills[name]
    if ":" not in name:
        matches = [c for n, c in files.commands.items() if n.rsplit(":", 1)[-1] == name]
        if len(matches) == 1:
            return matches[0]
    return None


def expand(typed: str, files: PromptFiles) -> Invocation | None:
    """The invocation a prompt names, or None when it is text (no `/`, an unknown name)."""
    match = COMMAND_LINE.match(typed.strip())
    if match is None:
        return None
    source = find_prompt_file(match.group(1), files)
    if source is None:
        return None
    arguments = (match.group(3) or "").strip()
    # an empty file with no arguments: the prompt as typed (the model is not sent nothing)
    prompt = fill(source.body, arguments) or typed.strip()
    return Invocation(typed, source.name, source, arguments, prompt)


def unknown_command(typed: str) -> str | None:
    """The name of a prompt shaped like `/name args` that expand() left as text, unless
    `/name` is a path on this machine (`/tmp is full` is a sentence about /tmp): the user is
    told it is no command. None for any other prompt."""
    match = COMMAND_LINE.match(typed.strip())
    if match is None:
        return None
    name = match.group(1)
    try:
        if os.path.lexists("/" + name):
            return None
    except (OSError, ValueError):
        return None
    return name


def fill(body: str, arguments: str) -> str:
    """`$ARGUMENTS` is the arguments as typed; `$1`…`$9` each one, split like a shell would
    (on a quoting error: at whitespace); a body without `$ARGUMENTS` gets them appended."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return arguments
        index = int(key) - 1
        return words[index] if index < len(words) else ""

    text = PLACEHOLDER.sub(value, body)  # one pass: arguments holding `$1` stay as typed
    if "$ARGUMENTS" not in body and arguments:
        text = text.rstrip("\n") + f"\n\nARGUMENTS: {arguments}"
    return text.strip() or arguments


def with_files(invocation: Invocation, files: list[Path]) -> Invocation:
    """A skill run as a command: its files listed after its body, readable for the session."""
    if files:
        invocation.prompt += "\n\nFiles (read with read_file): " + ", ".join(map(str, files))
        invocation.readable = files
    return invocation


def run_model(
    requested: str | None, scope: str, settings: Settings, listed: set[str]
) -> str | None:
    """The model a command or agent file asks for, as this endpoint knows it (Decision 35):
    `modelAliases` first; `inherit`, `sonnet`, `opus`, `haiku` and a `claude-*` name the
    endpoint does not list mean the run's own model (None); a project file's `replay:` model
    is refused (None)."""
    if not requested:
        return None
    name = requested.strip()
    if name in settings.model_aliases:
        return settings.model_aliases[name]
    if name.lower() in CLAUDE_MODELS:
        return None
    if name.lower().startswith("claude-") and name not in listed:
        return None
    if is_replay(name) and scope != "user":
        return None
    return name


def pre_allowed(
    source: PromptFile, approval: ApprovalSettings, granted: set[str] | None = None
) -> ApprovalSettings | None:
    """The run's approval settings with a user command's `allowed-tools` allowed (None when it
    names none). A project file's need the user's consent first (Decision 30): only the
    `granted` entries apply (None or empty: none).
    `Bash(prefix:*)` and `Bash(exact line)` become allowCommands entries; a bare tool name
    allows that tool unless approval.tools denies it; path specifiers of file tools are left to
    the permission rules."""
    wanted = source.allowed_tools
    if source.scope != "user":
        wanted = [e for e in wanted or [] if e in (granted or set())]
    if not wanted:
        return None
    tools = dict(approval.tools)
    commands = list(approval.allow_commands)
    for entry in wanted:
        name, _, rest = entry.partition("(")
        tool = tool_name(name.strip())
        spec = rest[:-1].strip() if rest.endswith(")") else None
        if tool == "run_command" and spec:
            prefix = spec[:-2].strip() if spec.endswith(":*") else None
            commands.append(prefix if prefix is not None else f"exact:{spec}")
        elif spec is None and tools.get(tool) != "deny":
            tools[tool] = "allow"
    return approval.model_copy(update={"tools": tools, "allow_commands": commands})
