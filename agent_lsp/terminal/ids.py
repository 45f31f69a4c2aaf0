"""Ids as a person types them at the terminal: a whole id, or a unique prefix of one of at least
MIN_PREFIX characters (`rewind RUN_ID`, `run --session ID`, `sessions delete ID`; Decision 46)."""

from __future__ import annotations

from collections.abc import Iterable

MIN_PREFIX = 4


class Ambiguous(ValueError):
    """A prefix that starts several ids: the message lists them (the caller exits 2)."""

    def __init__(self, prefix: str, matches: list[str], what: str):
        super().__init__(
            f"{prefix!r} is the start of {len(matches)} {what}s: "
            + ", ".join(matches)
            + "; give more of the id"
        )


def expand_prefix(given: str, ids: Iterable[str], what: str) -> str:
    """The whole id `given` names: itself when it is a whole id, else the one id it starts (at
    least MIN_PREFIX characters). Ambiguous when several do; an id nothing starts is passed on
    as given, and its command says it is unknown."""
    known = list(ids)
    if given in known or len(given) < MIN_PREFIX:
        return given
    matches = sorted(i for i in known if i.startswith(given))
    if len(matches) > 1:
        raise Ambiguous(given, matches, what)
    return matches[0] if matches else given
