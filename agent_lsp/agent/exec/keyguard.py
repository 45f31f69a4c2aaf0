"""The model's API key kept inside this process: read once, then out of every child's environment
(by name and by value), out of the environment block `/proc/<pid>/environ` shows, and out of
reach of same-user debuggers (the process is made non-dumpable). CONTRACT Decision 45.

Only a real front end seals the process (`agent-lsp serve | run | acp | demo`, through the
CLI); in a test process nothing here changes the environment, but `child_env` scrubs alike."""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)

DEFAULT_KEY_NAMES = ("OPENAI_API_KEY",)  # the SDK's own variable is a key whatever `apiKeyEnv` says
MIN_SECRET = 6  # shorter values are placeholders ("none", "x"), as for the transcript Redactor
# A variable is dropped when its value *contains* a key only for keys at least this long: local
# servers take dummy keys like "ollama" or "lm-studio", and PATH=/opt/ollama/bin is no secret.
MIN_CONTAINED = 12
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
# The OTLP exporter's headers carry its backend's credentials (CONTRACT Decision 43): ours only,
# and so is an endpoint URL with a user or password in it (issue 32, P15).
OTLP_HEADERS = re.compile(r"OTEL_EXPORTER_OTLP_(?:[A-Z]+_)?HEADERS")
OTLP_ENDPOINT = re.compile(r"OTEL_EXPORTER_OTLP_(?:[A-Z]+_)?ENDPOINT")

_held: dict[str, str] = {}  # variables taken out of os.environ because they hold a key
_names: set[str] = set(DEFAULT_KEY_NAMES)
_sealed = False
_wiped = False  # the environment block was wiped at least once


def holds_key(value: str, secrets: Iterable[str]) -> bool:
    """The value is a key, or carries one (`Bearer sk-...`, `a:sk-...:b`)."""
    for secret in secrets:
        if len(secret) < MIN_SECRET:
            continue
        if value == secret or (len(secret) >= MIN_CONTAINED and secret in value):
            return True
    return False


def telemetry_credential(name: str, value: str) -> bool:
    """The variable carries the telemetry backend's credentials: the OTLP exporter's headers, or
    an OTLP endpoint whose URL holds a user or password (`https://user:token@collector/`)."""
    if OTLP_HEADERS.fullmatch(name):
        return True
    return bool(OTLP_ENDPOINT.fullmatch(name)) and _has_userinfo(value)


def telemetry_secrets(env: Mapping[str, str]) -> list[str]:
    """The credential values those variables carry (each header's value, an endpoint's
    user:password), to find them under any other name too."""
    found: list[str] = []
    for name, value in env.items():
        if OTLP_HEADERS.fullmatch(name):
            found += [value.strip()]
            for item in value.split(","):
                header = item.partition("=")[2].strip()
                found += [header, unquote(header)]
        elif OTLP_ENDPOINT.fullmatch(name) and _has_userinfo(value):
            userinfo = value.strip().split("://", 1)[-1].split("/", 1)[0].rpartition("@")[0]
            found += [userinfo, unquote(userinfo), unquote(userinfo.partition(":")[2])]
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SECRET]


def _has_userinfo(url: str) -> bool:
    try:
        parts = urlsplit(url.strip())
        return bool(parts.username or parts.password)
    except ValueError:
        return "@" in url


def key_names(*names: str | None) -> list[str]:
    """Every variable name that holds the key by definition: the given ones (`apiKeyEnv`),
    the SDK's own, and those a sealed process took out of its environment."""
    return list(dict.fromkeys([*(n for n in names if n), *_names]))


def secrets(env: Mapping[str, str] | None = None, names: Iterable[str | None] = ()) -> list[str]:
    """The key values known: those of the named variables in `env` (default: this process's
    environment as it was given, taken variables included), and every value taken at seal."""
    source = environment() if env is None else env
    found = [source.get(n) or "" for n in key_names(*names)]
    found += [_held[n] for n in _names if n in _held]
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SECRET]


def child_env(
    env: Mapping[str, str] | None = None,
    *,
    names: Iterable[str | None] = (),
    extra_secrets: Iterable[str] = (),
) -> dict[str, str]:
    """The environment a child process gets (a command, an MCP server, rg, git, bwrap): `env`
    (default: os.environ) without the key's variables by name, and without every variable
    whose value is or contains the key, whatever its name, and without the telemetry backend's
    credentials (the OTLP exporter's headers, an OTLP endpoint with a password), by name and by
    value. The one scrub every spawn site uses."""
    base = dict(os.environ if env is None else env)
    wanted = list(names)
    banned = set(key_names(*wanted))
    known = [
        *secrets(None, wanted),
        *(secrets(base, wanted) if env is not None else []),
        *(s for s in extra_secrets if s),
        *telemetry_secrets(environment()),
        *(telemetry_secrets(base) if env is not None else []),
    ]
    return {
        k: v
        for k, v in base.items()
        if k not in banned and not holds_key(v, known) and not telemetry_credential(k, v)
    }


def environment() -> dict[str, str]:
    """The environment as the user started us, the variables a sealed process took out of
    os.environ included: for reading the key itself (the model client, the redactor, an MCP
    server the user's own settings give the key to), never for handing to a child."""
    return {**_held, **os.environ}


def seal_process(names: Iterable[str] = ()) -> None:
    """A front end's start: non-dumpable, and the key out of the environment block. Later calls
    of `protect` (a settings source naming another `apiKeyEnv`) take that variable out too.
    The one switch of the process-wide effects (CONTRACT Decision 71): the entry points turn it
    on; a server built in a test's own process leaves it off (see `sealed`)."""
    from agent_lsp.settings import watch_key_env  # each `apiKeyEnv` a settings source names

    global _sealed
    _sealed = True
    _set_non_dumpable()
    watch_key_env(protect)
    protect(*names)


def protect(*names: str | None) -> None:
    """Take the named key variables, and every variable holding one of their values, out of
    os.environ (kept in memory for `environment()`) and wipe them from the original environment
    block. Nothing happens in a process that was not sealed (a test, a library user)."""
    global _wiped
    if not _sealed:
        return
    new = [n for n in names if n and n not in _names]
    _names.update(new)
    known = secrets()
    taken = [k for k, v in os.environ.items() if k in _names or holds_key(v, known)]
    for name in taken:
        _held[name] = os.environ.pop(name)  # os.environ.pop unsets it in libc's environ as well
    if not taken and not new and _wiped:
        return  # settings resolved again, nothing new: the block was wiped already
    _wiped = True
    _wipe_environ_block(
        lambda name, value: name in _names or name in _held or holds_key(value, known)
    )


def sealed() -> bool:
    """Whether an entry point owns this process (`seal_process`): only then may a front end
    take process-wide steps (the exit watchdog). A test's in-process server leaves it off."""
    return _sealed


def is_dumpable() -> bool | None:
    """prctl(PR_GET_DUMPABLE): None where there is no prctl (not Linux)."""
    libc = _libc()
    if libc is None:
        return None
    return bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0))


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _set_non_dumpable() -> None:
    """Same-user processes can no longer read our /proc files (environ, mem) or ptrace us;
    children are dumpable again from their exec."""
    libc = _libc()
    if libc is not None and libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("could not make the process non-dumpable (errno %d)", ctypes.get_errno())


def _wipe_environ_block(wipe: Callable[[str, str], bool]) -> None:
    """Zero, in place, the values of the matching `NAME=value` strings of the block the kernel
    shows as /proc/self/environ (env_start..env_end of /proc/self/stat). `os.unsetenv` only
    drops libc's pointer; the bytes stay there. Unset them first: a wiped value still in
    libc's environ would be read as empty."""
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # fields 50 and 51 (field 3 is index 0)
    except (OSError, IndexError, ValueError):
        log.warning("cannot find the environment block: /proc/self/environ still shows the key")
        return
    if not 0 < start < end:
        return
    block = ctypes.string_at(start, end - start)
    offset = 0
    for entry in block.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and value and wipe(os.fsdecode(name), os.fsdecode(value)):
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
        offset += len(entry) + 1
