"""skill: load one of the user's skills (the Agent Skills format): its SKILL.md body and the list
of its other files, which read_file may then read for the rest of the session (Decision 33).
Also the system prompt's skills block: names and descriptions only, stable and capped, so the
provider's prompt cache keeps it (it changes only when the skills change)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from agent_lsp.agent.fs.prompt_files import PromptFile, skill_files
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError

BLOCK_LIMIT = 4000  # characters of the whole block (Decision 33)
DESCRIPTION_LIMIT = 250
BLOCK_HEAD = (
    "\n\n## Skills\n"
    "Skills hold instructions for particular tasks. When a task matches a skill's description, "
    "load it with the skill tool first and follow it.\n"
)
NAMES_ONLY = "More skills (load one to see what it does): "


def skills_block(skills: dict[str, PromptFile]) -> str:
    """The system prompt's skills block: sorted by name, each description cut to 250
    characters, at most BLOCK_LIMIT characters in all (past that, names only); empty without
    skills. Built from the skills alone: the same skills give the same bytes."""
    if not skills:
        return ""
    block = BLOCK_HEAD
    names = sorted(skills)
    rest: list[str] = []
    for index, name in enumerate(names):
        line = f"- {name}: {_cut(' '.join(skills[name].description.split()))}\n"
        if len(block) + len(line) > BLOCK_LIMIT:
            rest = names[index:]
            break
        block += line
    if rest:
        shown: list[str] = []
        for name in rest:
            trial = NAMES_ONLY + ", ".join([*shown, name]) + "\n"
            if len(block) + len(trial) > BLOCK_LIMIT:
                break
            shown.append(name)
        if shown:
            block += NAMES_ONLY + ", ".join(shown) + "\n"
    return block.rstrip("\n")


def _cut(text: str) -> str:
    return text if len(text) <= DESCRIPTION_LIMIT else text[: DESCRIPTION_LIMIT - 1] + "…"


class SkillArgs(Args):
    name: str = Field(description="The skill's name, as listed under Skills")


class LoadSkill(Tool):
    name = "skill"
    description = (
        "Load one of the skills listed in the system prompt: returns its instructions and the "
        "paths of its other files (scripts, references), which read_file can then read."
    )
    args = SkillArgs

    async def prepare(self, args: SkillArgs, ctx: ToolContext) -> Prepared:
        skills = ctx.prompt_files.skills if ctx.prompt_files is not None else {}
        skill = skills.get(args.name.strip().lstrip("/"))
        if skill is None:
            known = ", ".join(sorted(skills)) or "none"
            raise ToolError(f"no skill named {args.name!r}; the skills are: {known}")

        async def execute() -> str:
            files = await asyncio.to_thread(skill_files, skill)
            return skill_text(skill, files, ctx)

        return Prepared(f"skill: {skill.name}", execute)


def skill_text(skill: PromptFile, files: list[Path], ctx: ToolContext | None) -> str:
    """The body, then the skill's files, made readable for the session (a file a `Read(…)`
    deny rule covers is neither listed nor made readable: CONTRACT Decision 28)."""
    if ctx is not None and ctx.hidden is not None:
        hides = ctx.hidden
        files = [p for p in files if not hides(p)]
    if ctx is not None and ctx.allow_read is not None:
        for path in files:
            ctx.allow_read(path)
    text = skill.body.strip() or "(the skill's SKILL.md has no body)"
    text = f"{text}\n\n(skill {skill.name}, from {skill.path})"
    if files:
        text += "\n\nFiles (read with read_file): " + ", ".join(str(p) for p in files)
    return text
