"""What the sandbox mounts over its read-only root: the private /tmp, (with the network off) the
host's runtime folders and the unix sockets named in the environment masked, the workspace folders,
their `.git` kept read-only, and the hidden secrets. Mounts are applied parent first, so a deeper
one (a workspace under /tmp or /run, a secret inside a workspace) always lands on top."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

# CONTRACT Decision 22, plus the credential stores a developer typically has (issue 20). An
# entry under ~/.config or ~/.local/share also hides its twin under $XDG_CONFIG_HOME /
# $XDG_DATA_HOME.
DEFAULT_HIDE = (
    "~/.ssh",
    "~/.aws",
    "~/.config/gcloud",
    "~/.gnupg",
    "~/.netrc",
    "~/.git-credentials",
    "~/.docker/config.json",
    "~/.kube",
    "~/.npmrc",
    "~/.pypirc",
    "~/.config/gh",
    "~/.config/git/credentials",
    "~/.config/hub",
    "~/.config/glab-cli",
    "~/.config/rclone",
    "~/.config/containers/auth.json",
    "$XDG_RUNTIME_DIR/containers/auth.json",
    "~/.local/share/keyrings",
    "~/.password-store",
    "~/.azure",
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
)
# Variables that point a command at a host service over a unix socket; dropped with the network off.
HOST_SOCKET_VARS = ("SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST")
_TWINS = (("~/.config/", "$XDG_CONFIG_HOME/"), ("~/.local/share/", "$XDG_DATA_HOME/"))
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


class CannotHide(Exception):
    """A path that must be hidden cannot be: the command must not run (the message says why)."""


def expand_hidden(
    entries: list[str] | tuple[str, ...], extra: list[Path], env: dict[str, str]
) -> tuple[Path, ...]:
    """Absolute paths for the hide entries (`~`, `$XDG_*` and other variables of the command's
    environment expanded, each ~/.config entry with its $XDG_CONFIG_HOME twin); an entry naming
    an unset variable is dropped."""
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = {
        "XDG_CONFIG_HOME": _xdg(env, "XDG_CONFIG_HOME", f"{home}/.config"),
        "XDG_DATA_HOME": _xdg(env, "XDG_DATA_HOME", f"{home}/.local/share"),
    }
    paths = [
        path
        for entry in entries
        for form in _with_twins(entry)
        if (path := _expand(form, home, xdg, env))
    ]
    paths += extra
    return tuple(dict.fromkeys(Path(os.path.normpath(p)) for p in paths if p.is_absolute()))


def _expand(form: str, home: str, xdg: dict[str, str], env: dict[str, str]) -> Path | None:
    if form == "~" or form.startswith("~/"):
        form = home + form[1:]
    elif form.startswith("~"):
        form = os.path.expanduser(form)
    values = {name: xdg.get(name) or env.get(name, "") for name in _VAR.findall(form)}
    if not all(values.values()):
        return None
    return Path(_VAR.sub(lambda m: values[m[1]], form))


def _xdg(env: dict[str, str], name: str, default: str) -> str:
    value = env.get(name, "")
    return value if value.startswith("/") else default  # the XDG spec ignores a relative value


def _with_twins(entry: str) -> list[str]:
    forms = [entry]
    for home_form, xdg_form in _TWINS:
        if entry.startswith(home_form):
            forms.append(xdg_form + entry[len(home_form) :])
        elif entry.startswith(xdg_form):
            forms.append(home_form + entry[len(xdg_form) :])
    return forms


def host_sockets(env: dict[str, str]) -> tuple[Path, ...]:
    """The filesystem sockets the environment names: SSH_AUTH_SOCK, every unix:path= of
    DBUS_SESSION_BUS_ADDRESS (abstract ones are cut by the network namespace), DOCKER_HOST's unix://."""
    found = []
    if env.get("SSH_AUTH_SOCK", "").startswith("/"):
        found.append(env["SSH_AUTH_SOCK"])
    for address in env.get("DBUS_SESSION_BUS_ADDRESS", "").split(";"):
        if address.startswith("unix:"):
            found += [
                kv[len("path=") :]
                for kv in address[len("unix:") :].split(",")
                if kv.startswith("path=/")
            ]
    if env.get("DOCKER_HOST", "").startswith("unix:///"):
        found.append(env["DOCKER_HOST"][len("unix://") :])
    return tuple(dict.fromkeys(Path(p) for p in found))


def runtime_dirs(env: dict[str, str]) -> tuple[Path, ...]:
    """The host's runtime folders, where its services keep their sockets."""
    return tuple(
        Path(p) for p in ("/run", "/var/run", env.get("XDG_RUNTIME_DIR", "")) if p.startswith("/")
    )


def _real_folders(paths: tuple[Path, ...]) -> tuple[Path, ...]:
    """Each folder once, as its real path (/var/run is usually a link to /run, and bwrap cannot
    mount over a link), none inside another; never / itself."""
    found: list[Path] = []
    for path in paths:
        real = Path(os.path.realpath(path))
        if real != Path("/") and real.is_dir() and not any(_within(real, d) for d in found):
            found = [d for d in found if not _within(d, real)] + [real]
    return tuple(found)


@dataclass(frozen=True)
class Mount:
    # ro | rw: the host's own path; tmpfs: empty; null: /dev/null over a file;
    # link: a symlink to target
    kind: str
    dest: Path
    rank: int  # among mounts at the same depth, the higher applies later (wins)
    target: str = ""

    @property
    def shows_host(self) -> bool:
        return self.kind in ("ro", "rw")

    def args(self) -> list[str]:
        where = str(self.dest)
        if self.kind == "tmpfs":
            return ["--tmpfs", where]
        if self.kind == "null":
            return ["--ro-bind", "/dev/null", where]
        if self.kind == "link":
            return ["--symlink", self.target, where]
        return ["--bind" if self.kind == "rw" else "--ro-bind", where, where]


BASE, ROOTS, GIT, MASK, HIDE = range(5)
_ROOT = Mount("ro", Path("/"), BASE)


class MountPlan:
    def __init__(self) -> None:
        self.mounts: list[Mount] = []

    def add(self, kind: str, dest: Path, rank: int, target: str = "") -> None:
        self.mounts.append(Mount(kind, dest, rank, target))

    def ordered(self) -> list[Mount]:
        return sorted(self.mounts, key=lambda m: (len(m.dest.parts), m.rank))

    def governing(self, path: Path) -> Mount:
        """The mount that decides what the sandbox shows at path (the last applied one above it)."""
        found = _ROOT
        for mount in self.ordered():
            if _within(path, mount.dest):
                found = mount
        return found

    def args(self) -> list[str]:
        return [arg for mount in self.ordered() for arg in mount.args()]


def plan_mounts(
    *,
    network: bool,
    roots: tuple[Path, ...],
    writable: tuple[Path, ...],
    hide: tuple[Path, ...],
    runtime: tuple[Path, ...],
    sockets: tuple[Path, ...],
    tools: tuple[Path, ...] = (),
) -> MountPlan:
    """The mounts of one sandboxed command. CannotHide when a secret or socket cannot be hidden."""
    plan = MountPlan()
    plan.add("tmpfs", Path("/tmp"), BASE)
    if not network:
        runtime = _real_folders(runtime)
        for folder in runtime:
            plan.add("tmpfs", folder, BASE)
        _keep_runtime_links(plan, runtime)
    for tool in tools:  # never over a workspace (its own mount) or into what is hidden
        inside = any(_within(tool, p) for p in (*roots, *hide))
        if tool.exists() and not inside:
            plan.add("ro", tool, BASE)
    for root in roots:
        plan.add("rw" if root in writable else "ro", root, ROOTS)
    for root in writable:
        _protect_git(plan, root)
    found = [socket for path in hide for socket in _hide(plan, path)]
    # One pass over every socket: masking a folder twice would put back what the first pass hid.
    _mask_sockets(plan, tuple(found) + (sockets if not network else ()))
    return plan


def _keep_runtime_links(plan: MountPlan, runtime: tuple[Path, ...]) -> None:
    """Links at the top of /run that lead elsewhere (NixOS's /run/current-system holds every
    program) are put back: they give nothing their real path does not already show."""
    for folder in runtime:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_symlink():
                continue
            real = Path(os.path.realpath(entry.path))
            if any(_within(real, d) for d in runtime) or _is_socket(real):
                continue
            plan.add("link", Path(entry.path), BASE, os.readlink(entry.path))


def _protect_git(plan: MountPlan, root: Path) -> None:
    """A writable workspace's `.git` stays read-only: a command could otherwise plant config
    (filters, fsmonitor) or hooks that run later, outside the sandbox, in the user's own git."""
    git = root / ".git"
    if git.is_symlink():  # a link cannot be a mount point: only its target can be kept read-only
        target = _real(git)
        if target is not None and plan.governing(target).kind == "rw":
            plan.add("ro", target, GIT)
        return
    if not git.exists():
        return
    plan.add("ro", git, GIT)  # a mount point: it cannot be replaced either
    if git.is_file():  # a worktree or --separate-git-dir: the real git folders may be writable too
        for folder in _git_dirs(git):
            if plan.governing(folder).kind == "rw":
                plan.add("ro", folder, GIT)


def _git_dirs(git_file: Path) -> list[Path]:
    try:
        text = git_file.read_text(errors="replace").strip()
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    gitdir = Path(os.path.realpath(git_file.parent / text[len("gitdir:") :].strip()))
    found = [gitdir]
    try:
        common = (gitdir / "commondir").read_text().strip()
        found.append(Path(os.path.realpath(gitdir / common)))
    except OSError:
        pass
    return [p for p in found if p.is_dir()]


def _hide(plan: MountPlan, path: Path) -> list[Path]:
    """Hide what path names; a link is followed to its real file (bwrap cannot mount over a link,
    and the link then leads to the hidden target). Nothing there: nothing to hide. A socket is
    returned, for _mask_sockets."""
    real = _real(path)
    if real is None:
        return []
    mode = _mode(real)
    if stat.S_ISSOCK(mode):
        return [real]
    plan.add("tmpfs" if stat.S_ISDIR(mode) else "null", real, HIDE)
    return []


def _mask_sockets(plan: MountPlan, sockets: tuple[Path, ...]) -> None:
    """bwrap (0.8) cannot mount over a socket: the socket's folder gets an empty tmpfs and every
    other entry of it is put back as it was (read-only or writable, as the plan had it)."""
    by_folder: dict[Path, set[Path]] = {}
    for raw in sockets:
        real = _real(raw)
        if real is None or not plan.governing(real).shows_host:
            continue  # gone, or already under a tmpfs (/tmp, /run, a hidden folder)
        if not stat.S_ISSOCK(_mode(real)):
            _hide(plan, real)  # a variable naming a file or folder: hidden all the same
            continue
        by_folder.setdefault(real.parent, set()).add(real)
    for folder, names in by_folder.items():
        if folder == Path("/"):
            raise CannotHide(
                f"the socket {sorted(names)[0]} sits in / and cannot be masked: start the server "
                f"without the variable naming it, or set sandbox.network to true"
            )
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise CannotHide(
                f"cannot list {folder} to mask the socket in it ({exc.strerror or exc})"
            ) from None
        shown = {
            Path(e.path): plan.governing(Path(e.path)) for e in entries if Path(e.path) not in names
        }
        plan.add("tmpfs", folder, MASK)
        for entry in entries:
            path = Path(entry.path)
            if path in names or not shown[path].shows_host or shown[path].dest == path:
                # the socket; something not shown anyway; a mount of its own (deeper: lands on top)
                continue
            if entry.is_symlink():
                plan.add("link", path, MASK, os.readlink(path))
            else:
                plan.add(shown[path].kind, path, MASK)


def _real(path: Path) -> Path | None:
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return None  # dangling or looping: there is nothing to read
        raise CannotHide(f"cannot tell what {path} is ({exc.strerror or exc})") from None


def _mode(path: Path) -> int:
    try:
        return os.stat(path).st_mode
    except OSError as exc:
        raise CannotHide(f"cannot tell what {path} is ({exc.strerror or exc})") from None


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)
