"""Whether an allowed command line reaches outside the workspace (Decision 11): every argument,
the value after `=`, a short option's attached value and an `@file` / `<file` argument (curl's
`-d @/path`, `-F x=@file`) is a path; a bare name that is a link out counts; a glob or a brace
expansion counts unless every path it can become is proven inside."""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
from collections.abc import Collection
from pathlib import Path

# git options that point git at other files, programs or configuration: an allowlisted git
# command carrying one of them still asks (`git diff --output=/anywhere`).
GIT_RISKY = (
    "-c",
    "--config-env",
    "-C",
    "--git-dir",
    "--work-tree",
    "--exec-path",
    "--output",
    "-o",
    "--output-directory",
    "--upload-pack",
    "--receive-pack",
    "--ext-diff",
)
GLOB_CHARS = frozenset("*?[")
_MAX_MATCHES = 1000  # a pattern with more matches than this is not proven inside
_MAX_BRACES = 256
_EXTGLOB = re.compile(r"[?*+@!]\(")


def risky_reason(
    argv: list[str], cwd: Path, roots: list[Path], patterns: Collection[str] | None = None
) -> str | None:
    """Why an allowlisted line must still ask: it names a path outside the workspace, or it is
    git with an option that points it elsewhere. `patterns`: the arguments the shell expands
    (None: any argument holding `*`, `?`, `[` or `{`)."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    if name == "git":
        for arg in argv[1:]:
            for flag in GIT_RISKY:
                if (
                    arg == flag
                    or arg.startswith(flag + "=")
                    or (len(flag) == 2 and arg.startswith(flag) and not arg.startswith("--"))
                ):
                    return f"git option {arg.split('=')[0]} may read or write outside the workspace"
    if name in ("cd", "pushd") and (len(argv) == 1 or argv[1] == "-"):
        return f"`{' '.join(argv)}` changes to a folder outside the workspace"
    for arg in argv[1:]:
        expands = _expands(arg) if patterns is None else arg in patterns
        why = reaches_outside(arg, cwd, roots, expands)
        if why is not None:
            return f"argument {arg!r} {why}"
    return None


def _expands(token: str) -> bool:
    return any(c in GLOB_CHARS for c in token) or "{" in token


def reaches_outside(token: str, cwd: Path, roots: list[Path], expands: bool) -> str | None:
    """Why one argument may name something outside the workspace; None when it cannot."""
    for candidate in _candidates(token):
        for form in _braces(candidate) if expands else [candidate]:
            if form is None:
                return "expands to too many paths to check"
            why = _path_reaches_outside(form, cwd, roots, expands)
            if why is not None:
                return why
    return None


def _candidates(arg: str) -> list[str]:
    found = [arg]
    if "=" in arg:
        found.append(arg.split("=", 1)[1])
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
        found.append(arg[2:])  # -o/tmp/x, -d@/etc/passwd
    for candidate in list(found):
        if candidate[:1] in ("@", "<") and len(candidate) > 1:
            found.append(candidate[1:].split(";", 1)[0])  # curl -F 'f=@file;type=text/plain'
    return found


def _path_reaches_outside(
    candidate: str, cwd: Path, roots: list[Path], expands: bool
) -> str | None:
    text = candidate
    if text.startswith("~"):
        text = os.path.expanduser(text)
        if text.startswith("~"):  # `~+`, `~-`, an unknown user: not a path we can resolve
            return "names a home folder"
    if expands and any(c in GLOB_CHARS for c in text):
        return _glob_reaches_outside(text, cwd, roots)
    if expands and _EXTGLOB.search(text):
        return "is an extended pattern that cannot be checked"
    return None if _inside(Path(text), cwd, roots) else "points outside the workspace"


def _glob_reaches_outside(pattern: str, cwd: Path, roots: list[Path]) -> str | None:
    """A pattern is inside when none of its parts can match `.` or `..` and every path it
    matches now resolves inside (links followed)."""
    for part in Path(pattern).parts:
        if any(c in GLOB_CHARS for c in part) and (
            (part[:1] in (".", "[") and fnmatch.fnmatchcase("..", part))
            or _EXTGLOB.search(part)
        ):
            return "is a pattern that can match `..`"
    matches = glob.iglob(pattern, root_dir=cwd, include_hidden=True)
    for count, match in enumerate(itertools.islice(matches, _MAX_MATCHES + 1)):
        if count == _MAX_MATCHES:
            return "matches too many paths to check"
        if not _inside(Path(match), cwd, roots):
            return f"matches {match!r}, outside the workspace"
    stem = Path(*[p for p in Path(pattern).parts if not any(c in GLOB_CHARS for c in p)])
    return None if _inside(stem, cwd, roots) else "points outside the workspace"


def _inside(path: Path, cwd: Path, roots: list[Path]) -> bool:
    resolved = (path if path.is_absolute() else cwd / path).resolve()
    return any(resolved == r or resolved.is_relative_to(r) for r in roots)


def outside(target: str, cwd: Path, roots: list[Path]) -> bool:
    """A redirection's target (or any path) outside the workspace, patterns included."""
    return reaches_outside(target, cwd, roots, _expands(target)) is not None


def _braces(token: str) -> list[str | None]:
    """The words a brace expansion gives (`x{..,y}/z` -> `x../z`, `xy/z`); [None] when there
    are too many to check."""
    done: list[str | None] = []
    pending = [token]
    while pending:
        word = pending.pop()
        split = _first_brace(word)
        if split is None:
            done.append(word)
        else:
            head, options, tail = split
            pending += [head + o + tail for o in options]
        if len(done) + len(pending) > _MAX_BRACES:
            return [None]
    return done


def _first_brace(word: str) -> tuple[str, list[str], str] | None:
    for start, char in enumerate(word):
        if char != "{":
            continue
        depth, options, last = 0, [], start + 1
        for index in range(start, len(word)):
            if word[index] == "{":
                depth += 1
            elif word[index] == "}":
                depth -= 1
                if depth == 0:
                    options.append(word[last:index])
                    if len(options) > 1:
                        return word[:start], options, word[index + 1 :]
                    break
            elif word[index] == "," and depth == 1:
                options.append(word[last:index])
                last = index + 1
    return None
