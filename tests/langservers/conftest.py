"""A small generated project with distractors, real language servers from the test extra, and
helpers to ask the started servers as the code-intel tools would (UTF-16 positions)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_lsp.langservers.manager import LanguageServers
from agent_lsp.settings_schema import LanguageServersSettings

BIN = Path(sys.executable).parent
FAKE = Path(__file__).with_name("fake_server.py")

LIB = '''\
class Greeter:
    def greet(self, name: str) -> str:
        return "hi " + name


class Other:
    def greet(self, name: str) -> str:
        return "yo " + name


def make() -> Greeter:
    return Greeter()
'''
APP = '''\
from lib import Greeter, Other, make

# greet is named in this comment
label = "greet"  # and in a string
s = "😀😀"; g = make(); g.greet("a")
o = Other(); o.greet("b")
Greeter().greet("c")
broken: int = "not an int"
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "lib.py").write_text(LIB, encoding="utf-8")
    (root / "app.py").write_text(APP, encoding="utf-8")
    return root


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (the test extra has it)")
    return found


def only_on_path(tmp_path: Path, *names: str) -> str:
    """A PATH holding just these programs (and the system's), for auto-detection."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        (bin_dir / name).symlink_to(tool(name))
    return os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])


def servers(root: Path, settings: dict[str, Any], **kwargs: Any) -> LanguageServers:
    return LanguageServers(LanguageServersSettings.model_validate(settings), [root], **kwargs)


def position(path: Path, line: int, symbol: str, occurrence: int = 1) -> dict[str, Any]:
    """The tools' conversion: 1-based line + the symbol's text -> an LSP position (UTF-16)."""
    text = path.read_text(encoding="utf-8").split("\n")[line - 1]
    index = -1
    for _ in range(occurrence):
        index = text.index(symbol, index + 1)
    return {"line": line - 1, "character": len(text[:index].encode("utf-16-le")) // 2}


def at(path: Path, line: int, symbol: str, occurrence: int = 1, **more: Any) -> dict[str, Any]:
    return {"textDocument": {"uri": path.as_uri()}, "position": position(path, line, symbol, occurrence), **more}


def where(locations: Any) -> list[tuple[str, int, str]]:
    """Locations (or links) as (file name, 1-based line, the text at the range) sorted."""
    if isinstance(locations, dict):
        locations = [locations]
    out = []
    for loc in locations or []:
        uri = loc.get("uri") or loc.get("targetUri")
        rng = loc.get("range") or loc.get("targetSelectionRange")
        path = Path(uri.removeprefix("file://"))
        line = path.read_text(encoding="utf-8").split("\n")[rng["start"]["line"]]
        start = _index(line, rng["start"]["character"])
        end = _index(line, rng["end"]["character"])
        out.append((path.name, rng["start"]["line"] + 1, line[start:end]))
    return sorted(out)


def _index(line: str, utf16: int) -> int:
    units = 0
    for index, char in enumerate(line):
        if units >= utf16:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(line)


def alive(pid: int, started: int | None = None) -> bool:
    """A process that exists and is not a zombie; with `started` (its start_time(), taken
    earlier), the same process: on a busy machine a pid is soon reused by another one."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and (started is None or int(fields[19]) == started)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> list[int]:
    """Every process whose ancestry reaches `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    parents[int(name)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        here = frontier.pop()
        kids = [p for p, parent in parents.items() if parent == here]
        found += kids
        frontier += kids
    return found


BROKEN = 'broken: int = "not an int"\n'


def marked(marker: str) -> list[int]:
    """Processes whose environment holds `marker` (a language server a test's agent started)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{name}/environ").read_bytes() and alive(int(name)):
                    found.append(int(name))
            except OSError:
                continue
    return found


def wait_gone(marker: str, timeout: float = 10) -> list[int]:
    import time

    deadline = time.monotonic() + timeout
    while (left := marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
