"""The destructive list (CONTRACT "Destructive commands always ask", Decision 65): what rewind
cannot bring back, read from each simple command's argv the way the program itself reads its
options (clustered short flags, long options by unique prefix, options after operands)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from agent_lsp.agent.policy.shell import Part, unwrap


@dataclass(frozen=True)
class Options:
    """A program's options: long names (without `--`) with whether each takes a value, and
    the short letters that take one."""

    long: dict[str, bool] = field(default_factory=dict)
    short_value: str = ""
    permute: bool = True  # options may follow operands (GNU getopt, git's parse-options)


@dataclass
class Parsed:
    flags: set[str]  # `-r`, `--recursive` (long options spelled out in full)
    operands: list[str]
    dashdash: list[str]  # the operands after `--`


def parse(args: list[str], spec: Options) -> Parsed:
    result = Parsed(set(), [], [])
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            result.dashdash = args[index:]
            result.operands += args[index:]
            break
        if arg.startswith("--"):
            name, eq, _ = arg[2:].partition("=")
            meant = _long_names(name, spec)
            result.flags.update(f"--{m}" for m in meant)
            if not eq and meant and all(spec.long.get(m) for m in meant):
                index += 1  # its value is the next argument
        elif arg.startswith("-") and len(arg) > 1:
            for position, letter in enumerate(arg[1:], 1):
                result.flags.add(f"-{letter}")
                if letter in spec.short_value:
                    index += 1 if position == len(arg) - 1 else 0
                    break
        else:
            result.operands.append(arg)
            if not spec.permute:
                result.operands += args[index:]
                break
    return result


def _long_names(given: str, spec: Options) -> list[str]:
    """What `--given` means: the exact option, else every option it is a prefix of (a unique
    one is what the program takes; an ambiguous one the program refuses, so all count)."""
    if given in spec.long or not given:
        return [given]
    found = [name for name in spec.long if name.startswith(given)]
    return found or [given]


def _longs(*names: str, values: tuple[str, ...] = ()) -> dict[str, bool]:
    return {**dict.fromkeys(names, False), **dict.fromkeys(values, True)}


RM = Options(
    _longs(
        "force",
        "interactive",
        "one-file-system",
        "no-preserve-root",
        "preserve-root",
        "recursive",
        "dir",
        "verbose",
        "help",
        "version",
    )
)
GIT_RESET = Options(
    _longs(
        "hard",
        "soft",
        "mixed",
        "merge",
        "keep",
        "quiet",
        "no-quiet",
        "patch",
        "intent-to-add",
        "recurse-submodules",
        "no-recurse-submodules",
        "pathspec-file-nul",
        "refresh",
        "no-refresh",
        values=("pathspec-from-file",),
    )
)
GIT_CLEAN = Options(
    _longs("dry-run", "force", "interactive", "quiet", values=("exclude",)), short_value="e"
)
_CHECKOUT_LONGS = (
    "quiet",
    "force",
    "merge",
    "detach",
    "track",
    "no-track",
    "patch",
    "ours",
    "theirs",
    "ignore-skip-worktree-bits",
    "overwrite-ignore",
    "no-overwrite-ignore",
    "recurse-submodules",
    "no-recurse-submodules",
    "progress",
    "no-progress",
    "guess",
    "no-guess",
    "pathspec-file-nul",
    "ignore-other-worktrees",
    "overlay",
    "no-overlay",
)
GIT_CHECKOUT = Options(
    _longs(*_CHECKOUT_LONGS, values=("orphan", "conflict", "pathspec-from-file")),
    short_value="bB",
)
GIT_RESTORE = Options(
    _longs(
        "patch",
        "worktree",
        "staged",
        "quiet",
        "progress",
        "no-progress",
        "ours",
        "theirs",
        "merge",
        "ignore-unmerged",
        "ignore-skip-worktree-bits",
        "recurse-submodules",
        "no-recurse-submodules",
        "overlay",
        "no-overlay",
        "pathspec-file-nul",
        values=("source", "conflict", "pathspec-from-file"),
    ),
    short_value="s",
)
GIT_SWITCH = Options(
    _longs(
        "detach",
        "guess",
        "no-guess",
        "force",
        "discard-changes",
        "merge",
        "quiet",
        "progress",
        "no-progress",
        "track",
        "no-track",
        "ignore-other-worktrees",
        "recurse-submodules",
        "no-recurse-submodules",
        values=("create", "force-create", "orphan", "conflict"),
    ),
    short_value="cC",
)
GIT_PUSH = Options(
    _longs(
        "all",
        "branches",
        "mirror",
        "tags",
        "follow-tags",
        "atomic",
        "dry-run",
        "porcelain",
        "delete",
        "prune",
        "force",
        "force-with-lease",
        "no-force-with-lease",
        "force-if-includes",
        "no-force-if-includes",
        "set-upstream",
        "thin",
        "no-thin",
        "quiet",
        "verbose",
        "progress",
        "no-progress",
        "verify",
        "no-verify",
        "ipv4",
        "ipv6",
        "signed",
        "no-signed",
        values=("repo", "receive-pack", "exec", "push-option", "recurse-submodules"),
    ),
    short_value="o",
)
GIT_BRANCH = Options(
    _longs(
        "delete",
        "force",
        "move",
        "copy",
        "list",
        "all",
        "remotes",
        "verbose",
        "quiet",
        "track",
        "no-track",
        "create-reflog",
        "edit-description",
        "show-current",
        "unset-upstream",
        "ignore-case",
        "omit-empty",
        values=("set-upstream-to", "contains", "no-contains", "merged", "no-merged", "sort"),
    ),
    short_value="u",
)
# git's own options before the subcommand, and which take the next argument.
_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}
)


def destructive(parts: list[Part]) -> str | None:
    """Why a line is destructive (rewind cannot bring back what it loses), looked through
    wrappers; None otherwise."""
    for part in parts:
        for argv in (part.argv, *unwrap(part.argv)):
            why = destructive_argv(argv)
            if why:
                return why
    return None


def destructive_argv(argv: list[str]) -> str | None:
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if any(c in name for c in "*?["):
        return f"the command name {name!r} is a pattern the shell expands"
    if name == "rm":
        flags = parse(argv[1:], RM).flags
        if flags & {"-r", "-R", "--recursive", "--dir"}:
            return "`rm -r` deletes whole folders"
    if name == "find" and any(a == "-delete" for a in argv[1:]):
        return "`find -delete` deletes every file it finds"
    if name == "git":
        return _destructive_git(argv[1:])
    return None


def _destructive_git(args: list[str]) -> str | None:
    sub, rest = git_subcommand(args)
    check = _GIT_CHECKS.get(sub)
    return check(rest) if check is not None else None


def _reset(rest: list[str]) -> str | None:
    if "--hard" in parse(rest, GIT_RESET).flags:
        return "`git reset --hard` throws away uncommitted changes"
    return None


def _clean(rest: list[str]) -> str | None:
    if not parse(rest, GIT_CLEAN).flags & {"-n", "--dry-run"}:
        return "`git clean` (without -n) deletes untracked files"
    return None


def _checkout(rest: list[str]) -> str | None:
    parsed = parse(rest, GIT_CHECKOUT)
    if parsed.flags & {"-f", "--force"}:
        return "`git checkout --force` throws away uncommitted changes"
    before = parsed.operands[: len(parsed.operands) - len(parsed.dashdash)]
    paths = (
        parsed.dashdash
        or before[1:]  # `git checkout HEAD~1 file`: a tree-ish, then paths
        or [p for p in before if _looks_like_path(p)]
    )
    if paths or "--pathspec-from-file" in parsed.flags:
        return "`git checkout -- <path>` throws away uncommitted changes"
    return None


def _looks_like_path(operand: str) -> bool:
    return operand.startswith((".", ":", "/")) or any(c in operand for c in "*?[")


def _restore(rest: list[str]) -> str | None:
    parsed = parse(rest, GIT_RESTORE)
    staged_only = parsed.flags & {"-S", "--staged"} and not parsed.flags & {"-W", "--worktree"}
    if (parsed.operands or "--pathspec-from-file" in parsed.flags) and not staged_only:
        return "`git restore <path>` throws away uncommitted changes"
    return None


def _switch(rest: list[str]) -> str | None:
    if parse(rest, GIT_SWITCH).flags & {"-f", "--force", "--discard-changes"}:
        return "`git switch --discard-changes` throws away uncommitted changes"
    return None


def _push(rest: list[str]) -> str | None:
    parsed = parse(rest, GIT_PUSH)
    forced = {"-f", "--force", "--force-with-lease", "--mirror"}
    if parsed.flags & forced or any(o.startswith("+") for o in parsed.operands):
        return "`git push --force` overwrites the remote's history"
    return None


def _branch(rest: list[str]) -> str | None:
    flags = parse(rest, GIT_BRANCH).flags
    deleting = flags & {"-d", "--delete"}
    if "-D" in flags or (deleting and flags & {"-f", "--force"}):
        return "`git branch -D` deletes a branch whatever it holds"
    return None


def _stash(rest: list[str]) -> str | None:
    if rest[:1] in (["drop"], ["clear"]):
        return f"`git stash {rest[0]}` deletes stashed changes"
    return None


_GIT_CHECKS = {
    "reset": _reset,
    "clean": _clean,
    "checkout": _checkout,
    "restore": _restore,
    "switch": _switch,
    "push": _push,
    "branch": _branch,
    "stash": _stash,
}


def git_subcommand(args: list[str]) -> tuple[str, list[str]]:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in _GIT_VALUE_OPTIONS else 1
    if index >= len(args):
        return "", []
    return args[index], args[index + 1 :]
