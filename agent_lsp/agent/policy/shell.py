"""A command line as the rules see it (CONTRACT Decisions 28 and 65): `tree-sitter-bash` finds
every simple command (inside `if`/`for`/`while`/`case` bodies, `{ …; }` groups, subshells, `!`,
command and process substitutions, here-documents, pipelines, `&&`, `||`, `;`), and each one's
argv keeps `shlex` token semantics. Commands given as text in the line (`sh -c`, `eval`, `trap`,
a here-document fed to a shell, `find -exec`) are parts too. Also: what may never be allowed by a
rule, and the wrappers looked through for deny rules and the destructive list."""

from __future__ import annotations

import codecs
import functools
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "mksh", "busybox"})
# Safe redirection targets outside the workspace.
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
# Statements that are neither a simple command nor plain structure: never allowed by a rule.
_OTHER_STATEMENTS = {
    "function_definition": "a function definition",
    "declaration_command": "a declaration (export, declare, local…)",
    "unset_command": "`unset`",
    "variable_assignment": "a variable assignment",
    "variable_assignments": "a variable assignment",
    "test_command": "a `[[ … ]]` test",
    "arithmetic_expansion": "an arithmetic expansion",
    "c_style_for_statement": "an arithmetic `for` loop",
    # Compound commands: their commands are checked one by one, but no allow rule passes the
    # structure (as before tree-sitter: "a line with shell syntax never matches").
    "compound_statement": "a `{ …; }` group",
    "subshell": "a `( … )` subshell",
    "if_statement": "an `if` statement",
    "while_statement": "a `while`/`until` loop",
    "for_statement": "a `for` loop",
    "case_statement": "a `case` statement",
    "negated_command": "a `!` negation",
}
_EXPANSIONS = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
    }
)
_MAX_DEPTH = 60  # nesting deeper than this is refused rather than checked
_MAX_LINE = 200_000  # longer lines are refused (checking costs ~6 µs a word)
_PLAIN = re.compile(r"[^\\'\"$`\s]*")  # a word shlex would return unchanged
_SURROGATE = re.compile("[\ud800-\udfff]")
_GLOB = re.compile(r"[*?\[{]")


@dataclass
class Part:
    """One simple command of a line: its argv, where it redirects, why no allow rule may match it
    (command substitution, a here-doc, `eval`, `sh -c`...), and why nobody but a person may pass
    it (`unchecked`: a line that does not parse, a shell reading commands from a pipe)."""

    argv: list[str]
    redirects: list[str] = field(default_factory=list)  # the target paths
    never_allow: str | None = None
    writes: list[str] = field(default_factory=list)  # targets of output redirections
    unchecked: str | None = None
    patterns: set[str] = field(default_factory=set)  # arguments the shell expands (globs, braces)


@functools.cache
def _language() -> Language:
    # Loaded when a command is first checked, never at import (start-up time).
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _parser() -> Parser:
    import tree_sitter

    return tree_sitter.Parser(_language())  # one per line: a parser is not shared across threads


def split_line(command: str) -> list[Part]:
    """Every simple command of a line, in source order. A line the grammar cannot read whole is
    one more part that no rule allows and only a person passes."""
    return _split(command, 0)


def unchecked(parts: list[Part]) -> str | None:
    """Why a person must pass the line because it cannot be checked (it does not parse, a shell
    reads commands from a pipe); None otherwise."""
    return next((p.unchecked for p in parts if p.unchecked), None)


def _split(command: str, depth: int) -> list[Part]:
    if depth > 3:
        return [_refused("commands nested as text too deeply to check")]
    if len(command) > _MAX_LINE:
        return [_refused(f"the line is longer than {_MAX_LINE:,} characters")]
    if _SURROGATE.search(command):
        return [_refused("the line holds characters that are not text")]
    tree = _parser().parse(command.encode("utf-8", "surrogatepass"))
    parts: list[Part] = []
    _collect(tree.root_node, parts, 0)
    if tree.root_node.has_error:
        parts.append(_refused("the line does not parse as shell"))
    for part in list(parts):
        for argv in (part.argv, *unwrap(part.argv)):
            parts.extend(_text_commands(argv, depth))
    return [p for p in parts if p.argv or p.redirects or p.never_allow or p.unchecked]


def _refused(why: str) -> Part:
    return Part([], never_allow=why, unchecked=f"{why}, so it cannot be checked")


def _collect(node: Node, parts: list[Part], depth: int, piped: bool = False) -> None:
    """`piped`: the node reads a pipe (`… | sh`)."""
    if depth > _MAX_DEPTH:
        parts.append(_refused("the line nests too deeply"))
        return
    kind = node.type
    if kind == "command":
        part = _command_part(node)
        parts.append(part)
        _feed_shell(node, part, parts)  # `sh <<< 'text'`
        if piped:
            part.unchecked = _reads_commands_from_stdin(part.argv)
    elif kind == "redirected_statement":
        _redirected(node, parts, depth, piped)
        return
    elif kind in _OTHER_STATEMENTS and _is_statement(node):
        parts.append(Part([], never_allow=_OTHER_STATEMENTS[kind]))
    elif kind == "pipeline":
        for child in node.children:
            piped = piped or (not child.is_named and child.type in ("|", "|&"))
            if child.is_named:
                _collect(child, parts, depth + 1, piped)
        return
    for child in node.named_children:
        if child.named_child_count:  # a leaf word holds no command
            _collect(child, parts, depth + 1)


def _is_statement(node: Node) -> bool:
    """An assignment or expansion at the statement level (not `A=1 cmd`'s prefix)."""
    parent = node.parent
    return parent is None or parent.type != "command"


def _redirected(node: Node, parts: list[Part], depth: int, piped: bool) -> None:
    """A statement with redirections: they apply to its body (one part carries them)."""
    first = len(parts)
    body = node.child_by_field_name("body")
    if body is not None:
        _collect(body, parts, depth + 1, piped)
    if len(parts) == first:
        parts.append(Part([], never_allow="a redirection without a command"))
    owner = parts[first]
    extra: list[str] = []
    for redirect in node.children_by_field_name("redirect"):
        extra += _apply_redirect(redirect, owner, parts, depth)
    if extra:
        owner.argv += extra  # `rm 2>/dev/null -rf x`: the words after the target are arguments
    if body is not None and body.type == "command":
        _feed_shell(node, owner, parts)


def _command_part(node: Node) -> Part:
    part = Part([])
    for child in node.named_children:
        if child.type.endswith("_redirect"):
            part.argv += _apply_redirect(child, part, None, 0)
            continue
        if child.type == "word" and _PLAIN.fullmatch(text := _text(child)):
            part.argv.append(text)  # the common case, kept cheap for long lines
            if _GLOB.search(text):
                part.patterns.add(text)
            continue
        words = _words(child)
        if _is_pattern(child):
            part.patterns.update(words)
        if any(d.type in _EXPANSIONS for d in _descendants(child)) or any(
            "$" in w or "`" in w for w in words
        ):
            part.never_allow = part.never_allow or "a shell expansion ($ or backticks)"
        part.argv += words
    _argv_risks(part)
    return part


def _argv_risks(part: Part) -> Part:
    """What a part's own argv (looked through wrappers) keeps from any allow rule."""
    for argv in (part.argv, *unwrap(part.argv)):
        name = os.path.basename(argv[0]) if argv else ""
        if name in ("eval", "source", ".", "trap"):
            part.never_allow = part.never_allow or f"`{name}` runs text as commands"
        if name in SHELLS and _runs_text(argv):
            part.never_allow = part.never_allow or f"`{name} -c` runs text as commands"
        if name == "find":  # `-fprint FILE` writes a file, as `>` would
            part.writes += [argv[i + 1] for i in range(len(argv) - 1) if argv[i] in _FIND_WRITE]
    return part


def _apply_redirect(node: Node, part: Part, parts: list[Part] | None, depth: int) -> list[str]:
    """Record one redirection on `part`; the words tree-sitter puts after its target (they are
    the command's arguments) are returned."""
    if node.type in ("heredoc_redirect", "herestring_redirect"):
        part.never_allow = part.never_allow or "a here-document"
        if parts is not None:
            for child in node.named_children:
                if child.type not in ("heredoc_start", "heredoc_end"):
                    # `cat <<EOF | sh`: the pipeline; `$(…)` in the body
                    _collect(child, parts, depth + 1)
        return []
    targets = node.children_by_field_name("destination")
    if not targets:
        return []
    operator = next((c.type for c in node.children if not c.is_named), ">")
    target = " ".join(_words(targets[0]))
    if any(d.type in _EXPANSIONS for d in _descendants(targets[0])) or "$" in target:
        part.never_allow = part.never_allow or "a shell expansion ($ or backticks)"
    part.redirects.append(target)
    if operator not in ("<", "<&") and not (target.isdigit() or target == "-"):
        part.writes.append(target)
    return [w for t in targets[1:] for w in _words(t)]


def _feed_shell(statement: Node, owner: Part, parts: list[Part]) -> None:
    """A here-document or here-string given to a shell is commands: its text is parts too."""
    argv = owner.argv
    inner = [argv, *unwrap(argv)][-1]
    if not inner or os.path.basename(inner[0]) not in SHELLS or _shell_text(inner) is not None:
        return
    for redirect in statement.named_children:
        if not redirect.type.endswith("_redirect"):
            continue
        for child in redirect.named_children:
            if child.type == "heredoc_body":
                parts.extend(_split(_text(child), 1))
            elif redirect.type == "herestring_redirect":
                parts.extend(_split(" ".join(_words(child)), 1))


def _reads_commands_from_stdin(argv: list[str]) -> str | None:
    """`… | sh`: the commands a shell reads from a pipe are not in the line to be checked."""
    inner = [argv, *unwrap(argv)][-1]
    name = os.path.basename(inner[0]) if inner else ""
    operands = [a for a in inner[1:] if not a.startswith("-")]
    if name in SHELLS and _shell_text(inner) is None and not operands:
        return f"`{name}` reads commands from a pipe, which cannot be checked"
    return None


def _is_pattern(node: Node) -> bool:
    """An unquoted word holding a glob or brace character: the shell expands it."""
    pieces = [node] if node.type == "word" else []
    if node.type == "concatenation":
        pieces = [c for c in node.named_children if c.type == "word"]
    return any(
        any(c in "*?[{" for c in re.sub(r"\\.", "", _text(piece))) for piece in pieces
    )


def _descendants(node: Node) -> list[Node]:
    found: list[Node] = []
    stack = list(node.named_children)
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.named_children)
    return found


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _words(node: Node) -> list[str]:
    """A word's tokens as `shlex` reads them, with `$'…'` strings decoded as bash does."""
    text = _text(node)
    if node.type in ("word", "number") and _PLAIN.fullmatch(text):
        return [text]  # nothing for shlex to do (most words): keeps long lines fast
    ansi = [d for d in _descendants(node) if d.type == "ansi_c_string"]
    if node.type == "ansi_c_string":
        ansi = [node]
    if ansi:
        start = node.start_byte
        raw = node.text or b""
        pieces, last = [], 0
        for string in sorted(ansi, key=lambda n: n.start_byte):
            if string.start_byte - start < last:
                continue
            pieces.append(raw[last : string.start_byte - start].decode("utf-8", "surrogatepass"))
            pieces.append(shlex.quote(_ansi_c(_text(string))))
            last = string.end_byte - start
        pieces.append(raw[last:].decode("utf-8", "surrogatepass"))
        text = "".join(pieces)
    try:
        return shlex.split(text)
    except ValueError:
        return [text]


def _ansi_c(text: str) -> str:
    body = text[2:-1] if text.startswith("$'") and text.endswith("'") else text
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


# -- commands given as text ---------------------------------------------------------------

_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITE = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})


def _shell_text(argv: list[str]) -> str | None:
    """The text after a shell's `-c` (`bash -lc 'x'`), None when it has none."""
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg in ("-o", "-O", "+o", "+O"):
            index += 2
            continue
        if arg == "--" or not arg.startswith(("-", "+")):
            return None  # a script operand: it runs a file
        if not arg.startswith("--") and "c" in arg[1:]:
            return argv[index + 1] if index + 1 < len(argv) else ""
        index += 1
    return None


def _runs_text(argv: list[str]) -> bool:
    """Any `-…c…` option of a shell, wherever it stands (never allowed by a rule)."""
    return any(a.startswith("-") and not a.startswith("--") and "c" in a for a in argv[1:])


def _text_commands(argv: list[str], depth: int) -> list[Part]:
    """The commands a part runs from text or argv of its own: `sh -c TEXT`, `eval TEXT…`,
    `trap TEXT SIG`, `find … -exec CMD… ;`."""
    if not argv:
        return []
    name = os.path.basename(argv[0])
    text: str | None = None
    if name in SHELLS:
        text = _shell_text(argv)
    elif name == "eval":
        text = " ".join(argv[1:])
    elif name == "trap" and len(argv) > 2 and not argv[1].startswith("-"):
        text = argv[1]
    found = _split(text, depth + 1) if text else []
    if name == "find" and depth < 4:
        for cmd in find_commands(argv):
            found.append(_argv_risks(Part(cmd)))
            for inner in (cmd, *unwrap(cmd)):
                found += _text_commands(inner, depth + 1)
    return found


def find_commands(argv: list[str]) -> list[list[str]]:
    """The commands `find … -exec CMD … ;` (or `+`, `-execdir`, `-ok`, `-okdir`) runs."""
    found: list[list[str]] = []
    index = 1
    while index < len(argv):
        if argv[index] in _FIND_EXEC:
            end = index + 1
            while end < len(argv) and argv[end] not in (";", "+"):
                end += 1
            found.append(argv[index + 1 : end])
            index = end
        index += 1
    return [cmd for cmd in found if cmd]


# Wrappers that run their argument as a command, and how many of their options take a value.
_WRAPPER_VALUE_OPTIONS: dict[str, set[str]] = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"},
    "doas": {"-u", "-C"},
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "-P", "-u"},
    "nohup": set(),
    "setsid": set(),
    "xargs": {"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "--arg-file", "--delimiter"},
    "command": set(),
    "builtin": set(),
    "exec": {"-a"},
    "time": set(),
    "coproc": set(),
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


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


def _is_assignment(token: str) -> bool:
    return _ASSIGNMENT.match(token) is not None


def quoted(argv: list[str]) -> str:
    return shlex.join(argv)

