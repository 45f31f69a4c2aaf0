"""What a prompt becomes before its run, the same in every front end: the user's prompt files
found (skills, commands, agents), a `/name args` prompt expanded (slash.py), and what its
command changes for that one run (the model, the tools it pre-allows)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_lsp.agent.fs.prompt_files import PromptFiles, discover_shared, skill_files
from agent_lsp.agent.loop.slash import (
    Invocation,
    expand,
    pre_allowed,
    run_model,
    unknown_command,
    with_files,
)
from agent_lsp.settings import Settings

log = logging.getLogger(__name__)

MODELS_TIMEOUT = 5.0  # seconds for the endpoint's model list (is `claude-x` one of its models?)
MODELS_TTL = 600.0
_listed: dict[tuple[str | None, str], tuple[float, set[str]]] = {}
ModelLister = Callable[[], Awaitable[list[str]]]
# A project prompt file's `allowed-tools` (the entries, the file) -> those the user consented to
# (Decision 30); None: nobody to ask, none apply.
AllowedToolsConsent = Callable[[list[str], str], Awaitable[set[str]]]


@dataclass
class PromptPlan:
    """A prompt ready to run: what the model gets, and the run's own changes."""

    typed: str  # as the user typed it (titles and hooks see this)
    prompt: str
    files: PromptFiles
    settings: Settings
    invocation: Invocation | None = None
    model: str | None = None  # this run's model (a command's), else the session's
    notes: list[str] = field(default_factory=list)  # said to the user as the run starts
    unknown: str | None = None  # a `/name` that names no command or skill (and no path)

    @property
    def readable(self) -> list[Path]:
        return self.invocation.readable if self.invocation is not None else []

    def status(self) -> str | None:
        """The line the run starts with when it runs a prompt file."""
        if self.invocation is None:
            return self.unknown_note()
        source = self.invocation.source
        line = f"/{self.invocation.name}: {source.scope} {source.kind} {source.path}"
        if self.model is not None:
            line += f" (model {self.model})"
        return "; ".join([line, *self.notes])


    def unknown_note(self) -> str | None:
        """What the user is told of a `/name` that is no command: it still goes to the model,
        as text (Decision 34)."""
        if self.unknown is None:
            return None
        return (
            f"/{self.unknown} is not a known command or skill: sent to the model as text "
            "(`agent-lsp doctor` lists your commands and skills)"
        )


async def plan_prompt(
    typed: str,
    roots: list[Path],
    settings: Settings,
    *,
    lister: ModelLister | None = None,
    files: PromptFiles | None = None,
    consent: AllowedToolsConsent | None = None,
) -> PromptPlan:
    """The prompt files of `roots` (found off the event loop unless given) and the prompt, a
    `/name args` one expanded. `lister`: the endpoint's model list (asked only for a `claude-*`
    model no alias maps)."""
    if files is None:
        files = await discover_shared(roots)
    invocation = expand(typed, files)
    if invocation is None:
        return PromptPlan(typed, typed, files, settings, unknown=unknown_command(typed))
    source = invocation.source
    if invocation.is_skill:
        with_files(invocation, await asyncio.to_thread(skill_files, source))
    plan = PromptPlan(typed, invocation.prompt, files, settings, invocation)
    requested = source.model
    if requested:
        listed: set[str] = set()
        if requested.lower().startswith("claude-") and requested not in settings.model_aliases:
            listed = await _listed_models(settings, lister)
        plan.model = run_model(requested, source.scope, settings, listed)
        if plan.model is None and requested.strip().lower() not in ("inherit", ""):
            plan.notes.append(f"its model {requested!r} runs on the session's model")
    granted: set[str] = set()
    if source.allowed_tools and source.scope != "user" and consent is not None:
        granted = await consent(list(source.allowed_tools), str(source.path))
    approval = pre_allowed(source, settings.approval, granted)
    if approval is not None:
        plan.settings = settings.model_copy(update={"approval": approval})
        applied = [e for e in source.allowed_tools or [] if source.scope == "user" or e in granted]
        plan.notes.append(f"allowed-tools pre-allowed for this run: {', '.join(applied)}")
        if len(applied) < len(source.allowed_tools or []):
            plan.notes.append("the rest of its allowed-tools are not applied (no consent)")
    elif source.allowed_tools and source.scope == "project":
        plan.notes.append("its allowed-tools are not applied (a project file's need your consent)")
    return plan


async def _listed_models(settings: Settings, lister: ModelLister | None) -> set[str]:
    if lister is None:
        return set()
    key = (settings.base_url, settings.api_key_env)
    cached = _listed.get(key)
    if cached is not None and time.monotonic() - cached[0] < MODELS_TTL:
        return cached[1]
    try:
        names = set(await asyncio.wait_for(lister(), MODELS_TIMEOUT))
    except Exception as exc:  # an endpoint without GET /models lists nothing
        log.info("the endpoint's model list is unavailable: %s", exc)
        names = set()
    _listed[key] = (time.monotonic(), names)
    return names
