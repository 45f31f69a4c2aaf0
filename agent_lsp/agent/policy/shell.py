"""A command line as the rules see it (CONTRACT Decision 28): split with `shlex` into parts at
`;`, `&&`, `||`, `|`, `&` and newlines, each part's argv and redirections; what may never be
allowed by a rule; the wrappers looked through for deny rules; the destructive list."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

SEPARATORS = frozenset({";", "&&", "||", "|", "&", "\n", ";;", "|&"})
REDIRECTIONS = frozenset({">", ">>", "<", "<>", ">|", "&>", "&>>", ">&", "<&"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"})
# Safe redirection targets outside the workspace.
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


@dataclass
class Part:
    """One simple command of a line: its argv, where it redirects, and why no allow rule may
    match it (command substitution, a here-doc, `eval`, `sh -c`...)."""

    argv: list[str]
    redirects: list[str] = field(default_factory=list)  # the target paths
    never_allow: str | None = None
    writes: list[str] = field(default_factory=list)  # targets of output redirections


def split_line(command: str) -> list[Part] | None:
    """The parts of a command line; None when it cannot be parsed (an unclosed quote)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.commenters = ""
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    parts: list[Part] = []
    current = Part([])
    pending_redirect = False
    writing = False
    for token in tokens:
        if token in SEPARATORS:
            parts.append(current)
            current = Part([])
            pending_redirect = False
            continue
        if pending_redirect:
            current.redirects.append(token)
            if writing and not (token.isdigit() or token == "-"):
                current.writes.append(token)
            pending_redirect = False
            continue
        if token in REDIRECTIONS:
            if current.argv and current.argv[-1].isdigit():
                current.argv.pop()  # `2>`: the descriptor, not an argument
            pending_redirect = True
            writing = token not in ("<", "<&")
            continue
        if token in ("<<", "<<<", "<<-"):
            current.never_allow = current.never_allow or "a here-document"
            pending_redirect = True
            continue
        if all(c in "()<>|&;" for c in token):
            # `(`, `)`, `<(`, `>(`: subshells and process substitution
            current.never_allow = current.never_allow or f"the shell syntax {token!r}"
            continue
        if "$" in token or "`" in token:
            current.never_allow = current.never_allow or "a shell expansion ($ or backticks)"
        current.argv.append(token)
    parts.append(current)
    parts = [p for p in parts if p.argv or p.redirects or p.never_allow]
    for part in parts:
        inner = unwrap(part.argv)
        for argv in (part.argv, *inner):
            name = os.path.basename(argv[0]) if argv else ""
            if name == "eval" or name in ("source", "."):
                part.never_allow = part.never_allow or f"`{name}` runs text as commands"
            if name in SHELLS and any(
                a.startswith("-") and not a.startswith("--") and "c" in a for a in argv[1:]
            ):
                part.never_allow = part.never_allow or f"`{name} -c` runs text as commands"
    return parts


# Wrappers that run their argument as a command, and how many of their options take a value.
_WRAPPER_VALUE_OPTIONS = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"},
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "nice": {"-n", "--adjustment"},
    "nohup": set(),
    "xargs": {"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "--arg-file", "--delimiter"},
    "command": set(),
    "exec": {"-a"},
    "time": set(),
    "stdbuf": {"-i", "-o", "-e"},
}


def unwrap(argv: list[str]) -> list[list[str]]:
    """The commands a wrapper line runs (`sudo rm -rf x` -> [`rm -rf x`]), innermost last;
    leading `A=1` assignments are looked through too."""
    found: list[list[str]] = []
    current = argv
    for _ in range(8):
        rest = _peel(current)
        if rest is None or not rest:
            break
        found.append(rest)
        current = rest
    return found


def _peel(argv: list[str]) -> list[str] | None:
    index = 0
    while index < len(argv) and _is_assignment(argv[index]):
        index += 1
    if index:
        return argv[index:]
    if not argv:
        return None
    name = os.path.basename(argv[0])
    takes_value = _WRAPPER_VALUE_OPTIONS.get(name)
    if takes_value is None:
        return None
    index = 1
    while index < len(argv):
        arg = argv[index]
        if name == "env" and _is_assignment(arg):
            index += 1
        elif arg == "--":
            index += 1
            break
        elif arg.startswith("-") and len(arg) > 1:
            index += 2 if arg in takes_value else 1
        else:
            break
    if name == "timeout" and index < len(argv):
        index += 1  # the duration
    return argv[index:]


def _is_assignment(token: str) -> bool:
    name, eq, _ = token.partition("=")
    return bool(eq) and name.replace("_", "a").isalnum() and not name[:1].isdigit()


# -- the destructive list (CONTRACT "Destructive commands always ask") -----------------------


def destructive(parts: list[Part]) -> str | None:
    """Why a line is destructive (rewind cannot bring back what it loses), looked through
    wrappers; None otherwise."""
    for part in parts:
        for argv in (part.argv, *unwrap(part.argv)):
            why = _destructive_argv(argv)
            if why:
                return why
    return None


def _short_flags(args: list[str]) -> str:
    return "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))


def _destructive_argv(argv: list[str]) -> str | None:
    if not argv:
        return None
    name = os.path.basename(argv[0])
    args = argv[1:]
    options = [a for a in args if a != "--"]
    if name == "rm" and (
        "r" in _short_flags(options).lower() or any(a in ("--recursive", "--dir") for a in options)
    ):
        return "`rm -r` deletes whole folders"
    if name != "git":
        return None
    sub, rest = _git_subcommand(args)
    flags = _short_flags(rest)
    if sub == "reset" and "--hard" in rest:
        return "`git reset --hard` throws away uncommitted changes"
    if sub == "clean" and ("f" in flags or "--force" in rest):
        return "`git clean -f` deletes untracked files"
    if sub == "checkout" and "--" in rest and any(p in (".", ":/", "*") for p in rest):
        return "`git checkout -- .` throws away uncommitted changes"
    if sub == "checkout" and rest == ["."]:
        return "`git checkout .` throws away uncommitted changes"
    if sub == "restore" and any(p in (".", ":/", "*") for p in rest) and "--staged" not in rest:
        return "`git restore .` throws away uncommitted changes"
    if sub == "push" and (
        "f" in flags
        or any(a == "--force" or a.startswith("--force-with-lease") for a in rest)
        or any(a.startswith("+") for a in rest)
    ):
        return "`git push --force` overwrites the remote's history"
    if sub == "branch" and (
        "D" in flags
        or ("--delete" in rest and "--force" in rest)
        or ("d" in flags and "f" in flags)
    ):
        return "`git branch -D` deletes a branch whatever it holds"
    if sub == "stash" and rest[:1] in (["drop"], ["clear"]):
        return f"`git stash {rest[0]}` deletes stashed changes"
    return None


_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def _git_subcommand(args: list[str]) -> tuple[str, list[str]]:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in _GIT_VALUE_OPTIONS else 1
    if index >= len(args):
        return "", []
    return args[index], args[index + 1 :]


def quoted(argv: list[str]) -> str:
    return shlex.join(argv)
