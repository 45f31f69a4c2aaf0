"""`file:` URIs to paths: the one parser of the core (tools, state) and the language servers."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse


def path_of_uri(uri: str) -> Path | None:
    """The file a `file:` URI names (percent-decoded, not resolved); None for another scheme."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))
