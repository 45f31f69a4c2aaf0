"""The user's prompt files, found where Claude Code and the Agent Skills format keep them:
skills (`<dir>/<name>/SKILL.md`), commands (`**/*.md`, a subfolder a namespace `ns:name`) and
agents (`*.md`) under `.agents/` and `.claude/` of each workspace folder and of the home folder
(CONTRACT "Your existing setup", Decision 33). User files shadow project ones of the same
name. A malformed file is a problem with its path and the error, never a crash; the rest
still works. One PromptFiles holds what was found, for the run and for `agentLsp.setup`."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_lsp.agent.fs.front_matter import (
    FrontMatterError,
    list_field,
    split_front_matter,
    text_field,
)
from agent_lsp.agent.fs.safeio import NotReadable, read_regular_sync
from agent_lsp.agent.fs.shared_read import SharedRead

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()  # problems already logged by this process

Kind = Literal["skill", "command", "agent"]
Scope = Literal["user", "project"]

FOLDERS: dict[Kind, str] = {"skill": "skills", "command": "commands", "agent": "agents"}
MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 500  # per folder searched: a huge tree is cut, and said so
MAX_SKILL_FILES = 200  # listed by the skill tool
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")  # Agent Skills: lowercase, digits, hyphens
COMMAND_PART = re.compile(r"^[A-Za-z0-9_.-]+$")  # Decision 34's name characters
AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_NAME = 64
SHELL_LINE = re.compile(r"!`[^`\n]+`")
FILE_REF = re.compile(r"(?:^|\s)@[\w./~-]+")


@dataclass(frozen=True)
class PromptFile:
    """One skill, command or agent definition, as written."""

    kind: Kind
    name: str
    description: str
    path: Path  # the file (a skill's SKILL.md), resolved
    scope: Scope
    body: str
    fields: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    notes: tuple[str, ...] = ()  # what works differently here (`!`cmd`` is not run)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def argument_hint(self) -> str | None:
        return text_field(self.fields, "argument-hint")

    @property
    def model(self) -> str | None:
        return text_field(self.fields, "model")

    @property
    def allowed_tools(self) -> list[str] | None:
        return list_field(self.fields, "allowed-tools")

    @property
    def tools(self) -> list[str] | None:
        return list_field(self.fields, "tools")


@dataclass(frozen=True)
class Listed:
    """A row of `agentLsp.setup`'s skills, commands or agents (Decision 37)."""

    kind: Kind
    name: str
    description: str
    path: Path
    scope: Scope
    error: str | None = None
    notes: tuple[str, ...] = ()
    shadowed_by: Path | None = None  # the file of the same name that is used instead (`error`)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "scope": self.scope,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass
class PromptFiles:
    skills: dict[str, PromptFile] = field(default_factory=dict)
    commands: dict[str, PromptFile] = field(default_factory=dict)
    agents: dict[str, PromptFile] = field(default_factory=dict)
    # Every file looked at, in the order found: usable, shadowed or malformed.
    listed: list[Listed] = field(default_factory=list)

    def of(self, kind: Kind) -> dict[str, PromptFile]:
        return {"skill": self.skills, "command": self.commands, "agent": self.agents}[kind]

    def listing(self, kind: Kind) -> list[dict[str, Any]]:
        return [row.to_dict() for row in self.listed if row.kind == kind]

    @property
    def problems(self) -> list[dict[str, str]]:
        """Malformed files (shadowed ones are not problems)."""
        return [
            {"path": str(row.path), "error": row.error}
            for row in self.listed
            if row.error is not None and row.shadowed_by is None
        ]


def claude_dir() -> Path | None:
    """The user's Claude Code folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude` (Decision 29)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser()
    home = _home()
    return home / ".claude" if home is not None else None


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # no HOME and no passwd entry: only the workspace's files count
        return None


def search_folders(kind: Kind, roots: list[Path]) -> list[tuple[Path, Scope, Path | None]]:
    """(folder, scope, the workspace folder it must stay in) in the order names are claimed:
    the user's folders first (they shadow the project's), `.agents/` before `.claude/`."""
    sub = FOLDERS[kind]
    home, claude = _home(), claude_dir()
    found: list[tuple[Path, Scope, Path | None]] = []
    for user in (home / ".agents" if home is not None else None, claude):
        if user is not None:
            found.append((user / sub, "user", None))
    project: Path | None
    for project in roots:
        found.append((project / ".agents" / sub, "project", project))
        found.append((project / ".claude" / sub, "project", project))
    seen: set[Path] = set()
    unique: list[tuple[Path, Scope, Path | None]] = []
    for folder, scope, root in found:
        try:
            key = folder.resolve()
        except (OSError, RuntimeError):
            continue
        if key not in seen:  # a workspace opened at ~ lists the user's folders once, as user
            seen.add(key)
            unique.append((folder, scope, root))
    return unique


_shared = SharedRead()


async def discover_shared(roots: list[Path]) -> PromptFiles:
    """`discover` off the event loop; runs started together share one (agent/fs/shared_read.py).
    The result is shared: read it, never change it."""
    return await _shared(tuple(roots), discover, roots)


def discover(roots: list[Path]) -> PromptFiles:
    """Every skill, command and agent of the user and of the workspace folders (blocking: call
    it off the event loop)."""
    found = PromptFiles()
    for kind in ("skill", "command", "agent"):
        for folder, scope, root in search_folders(kind, roots):
            for path, name, error in _candidates(kind, folder):
                _take(found, kind, path, name, scope, root, error)
    for problem in found.problems:  # said once per process (the editor's log), never skipped
        key = (problem["path"], problem["error"])
        if key not in _warned:
            _warned.add(key)
            log.warning("prompt file %s is not used: %s", *key)
    return found


def _candidates(kind: Kind, folder: Path) -> Iterator[tuple[Path, str, str | None]]:
    """(file, its name by location, a problem found while walking) of one folder."""
    if not folder.is_dir():
        return
    count = 0
    if kind == "skill":
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            yield folder, folder.name, f"cannot list the folder: {exc.strerror}"
            return
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            skill = entry / "SKILL.md"
            if not skill.exists():
                continue
            count += 1
            if count > MAX_FILES:
                yield folder, folder.name, f"more than {MAX_FILES} skills: the rest are not read"
                return
            yield skill, entry.name, None
        return
    for path in _markdown_files(folder, recursive=kind == "command"):
        count += 1
        if count > MAX_FILES:
            yield folder, folder.name, f"more than {MAX_FILES} files: the rest are not read"
            return
        parts = path.relative_to(folder).with_suffix("").parts
        yield path, ":".join(parts), None


def _markdown_files(folder: Path, recursive: bool) -> list[Path]:
    out: list[Path] = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if recursive else []
        out += [Path(top) / f for f in sorted(files) if f.endswith(".md") and not f.startswith(".")]
    return sorted(out, key=lambda p: p.relative_to(folder).parts)


def _take(
    found: PromptFiles,
    kind: Kind,
    path: Path,
    name: str,
    scope: Scope,
    root: Path | None,
    error: str | None,
) -> None:
    if error is None:
        try:
            entry = read_prompt_file(kind, path, name, scope, root)
        except PromptFileError as exc:
            found.listed.append(Listed(kind, exc.name or name, "", path, scope, str(exc)))
            return
        claimed = found.of(kind).get(entry.name)
        if claimed is None:
            found.of(kind)[entry.name] = entry
            found.listed.append(
                Listed(kind, entry.name, entry.description, entry.path, scope, None, entry.notes)
            )
        else:
            found.listed.append(
                Listed(
                    kind,
                    entry.name,
                    entry.description,
                    entry.path,
                    scope,
                    f"shadowed by {claimed.path} ({claimed.scope})",
                    shadowed_by=claimed.path,
                )
            )
        return
    found.listed.append(Listed(kind, name, "", path, scope, error))


class PromptFileError(ValueError):
    def __init__(self, message: str, name: str | None = None):
        super().__init__(message)
        self.name = name


def read_prompt_file(
    kind: Kind, path: Path, name: str, scope: Scope, root: Path | None
) -> PromptFile:
    """One file read and checked; PromptFileError says what is wrong with it."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:
        raise PromptFileError(f"cannot resolve the path: {exc}") from None
    if root is not None and not resolved.is_relative_to(root.resolve()):
        raise PromptFileError(f"it resolves to {resolved}, outside its workspace folder: not read")
    try:
        data = read_regular_sync(resolved, MAX_FILE_BYTES)
        text = data.decode("utf-8")
    except NotReadable as exc:
        raise PromptFileError(str(exc)) from None
    except UnicodeDecodeError:
        raise PromptFileError("it is not UTF-8 text") from None
    except OSError as exc:
        raise PromptFileError(f"cannot read it: {exc.strerror}") from None
    try:
        matter = split_front_matter(text)
    except FrontMatterError as exc:
        raise PromptFileError(str(exc), name) from None
    fields = matter.fields
    description = text_field(fields, "description")
    if kind == "skill":
        given = text_field(fields, "name") or name
        if given != name:
            raise PromptFileError(
                f"its name {given!r} differs from its folder's name {name!r} "
                "(the Agent Skills format wants them equal)",
                name,
            )
        _check_skill_name(name)
    elif kind == "agent":
        name = text_field(fields, "name") or name
        if len(name) > MAX_NAME or not AGENT_NAME.match(name):
            raise PromptFileError(
                f"bad agent name {name!r}: letters, digits, '-', '_' and '.', "
                f"at most {MAX_NAME} characters",
                name,
            )
    else:
        for part in name.split(":"):
            if not COMMAND_PART.match(part):
                raise PromptFileError(
                    f"bad command name {name!r}: each part may hold letters, digits, "
                    "'_', '.' and '-' only",
                    name,
                )
        if description is None:  # Claude Code's default: the prompt's first line
            description = next((ln.strip() for ln in matter.body.splitlines() if ln.strip()), "")
            description = description.lstrip("# ")[:100]
    if kind != "command" and not description:
        raise PromptFileError(f"its front matter has no `description` (a {kind} needs one)", name)
    return PromptFile(
        kind,
        name,
        description or "",
        resolved,
        scope,
        matter.body,
        fields,
        _notes(kind, matter.body),
    )


def _check_skill_name(name: str) -> None:
    if len(name) > MAX_NAME or not SKILL_NAME.match(name):
        raise PromptFileError(
            f"bad skill name {name!r}: lowercase letters, digits and single hyphens, "
            f"at most {MAX_NAME} characters",
            name,
        )


def _notes(kind: Kind, body: str) -> tuple[str, ...]:
    if kind != "command":
        return ()
    notes = []
    if SHELL_LINE.search(body):
        notes.append("its !`command` lines are not run here: they reach the model as text")
    if FILE_REF.search(body):
        notes.append("its @file references are not expanded here: they reach the model as text")
    return tuple(notes)


def skill_files(skill: PromptFile) -> list[Path]:
    """The skill's other files (not SKILL.md): regular files that resolve inside its folder,
    hidden folders skipped, at most MAX_SKILL_FILES (blocking)."""
    folder = skill.folder.resolve()
    out: list[Path] = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(top) / name
            if path == skill.path or name.startswith("."):
                continue
            try:
                resolved = path.resolve()
            except (OSError, RuntimeError):
                continue
            if resolved.is_relative_to(folder) and resolved.is_file():
                out.append(resolved)
            if len(out) >= MAX_SKILL_FILES:
                return out
    return out
