"""File access the agent cannot be tricked by: only regular files are read, reads are bounded
and never block (a FIFO or a device is refused before anything is read), state files are
private, and edits on disk never follow a planted link."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

import aiofiles

MAX_READ_BYTES = 10_000_000
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}


class NotReadable(ValueError):
    """A file the agent may not or cannot read; the message is for the model and the user."""


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular(path: Path, max_bytes: int = MAX_READ_BYTES) -> tuple[int, os.stat_result]:
    """An fd for a regular file of at most max_bytes. O_NONBLOCK: opening a FIFO never waits
    for a writer; O_NOFOLLOW: a link swapped in after the path was resolved is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotReadable(f"{path.name} does not exist") from None
    except OSError as exc:
        raise NotReadable(f"cannot read {path.name}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotReadable(
            f"{path.name} is {kind_of(info.st_mode)}, not a regular file: "
            "only regular files are read"
        )
    if info.st_size > max_bytes:
        os.close(fd)
        raise NotReadable(
            f"{path.name} is too large to read as text "
            f"({info.st_size} bytes; the limit is {max_bytes})"
        )
    return fd, info


async def read_regular(path: Path, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file, bounded (a file growing past the limit while read is
    refused)."""
    fd, info = open_regular(path, max_bytes)
    chunks: list[bytes] = []
    size = 0
    async with aiofiles.open(fd, "rb") as handle:
        while chunk := await handle.read(min(max_bytes - size, max(info.st_size - size, 0)) + 1):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise NotReadable(f"{path.name} grew past {max_bytes} bytes while it was read")
    return b"".join(chunks)


def read_regular_sync(path: Path, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """read_regular for worker threads (never on the event loop)."""
    fd, info = open_regular(path, max_bytes)
    chunks: list[bytes] = []
    size = 0
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(min(max_bytes - size, max(info.st_size - size, 0)) + 1):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise NotReadable(f"{path.name} grew past {max_bytes} bytes while it was read")
    return b"".join(chunks)


def confinement_problem(path: Path, roots: list[Path]) -> str | None:
    """Why `path` may not be written or deleted, checked as an edit is and per path component:
    not a plain absolute path, outside every (resolved) workspace folder, or a folder on its way
    (or the file itself) is a symbolic link now. None: it may be."""
    text = str(path)
    if not path.is_absolute() or os.path.normpath(text) != text:
        return "not a plain absolute path: refused"
    inside = [root for root in roots if path == root or path.is_relative_to(root)]
    if not inside:
        return "outside the workspace folders: refused"
    current = max(inside, key=lambda root: len(root.parts))
    for part in path.relative_to(current).parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return None  # the rest is created as plain folders
        except OSError as exc:
            return f"{current} cannot be checked ({exc.strerror}): refused"
        if stat.S_ISLNK(info.st_mode):
            return f"{current} is a symbolic link now (it may lead outside the workspace): refused"
    return None


def is_exact_text(data: bytes) -> bool:
    """Valid UTF-8 without NUL: text an edit can round-trip without changing other bytes."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def looks_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


# -- private state files -------------------------------------------------------------------
def private_dir(path: Path) -> Path:
    """Create path (and missing parents) as 0700 folders; tighten it if it already exists."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        pass
    return path


def open_private(path: Path, flags: int) -> int:
    """os.open with 0600 (existing files are tightened too); the folder is made private."""
    private_dir(path.parent)
    fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        pass
    return fd


def write_private(path: Path, data: bytes) -> None:
    """Write a whole private state file atomically (readers never see half of it)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


# -- edits on disk (headless) ----------------------------------------------------------------
def write_file_atomic(path: Path, data: bytes) -> None:
    """Replace path's content: a temp file created exclusively (never through a link), given
    the old file's mode, then renamed over the target (a rename replaces a link, it never
    follows one). Raises OSError."""
    try:
        old = os.lstat(path)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise OSError(0, f"{path.name} is {kind_of(old.st_mode)}, not a regular file")
    mode = stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~_umask()
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.agent-lsp.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
