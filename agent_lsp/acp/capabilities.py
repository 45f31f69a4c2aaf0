"""The client's capabilities, resolved once at `initialize` into plain booleans (kept free of the
core's imports: it is on the path to the `initialize` answer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class FsCaps:
    """Whether the client reads and writes files for the agent (`fs/read_text_file`,
    `fs/write_text_file`: its buffers, the editor in control)."""

    read: bool = False
    write: bool = False

    @classmethod
    def from_client(cls, capabilities: Any) -> FsCaps:
        fs = getattr(capabilities, "fs", None)
        return cls(
            bool(getattr(fs, "read_text_file", False)), bool(getattr(fs, "write_text_file", False))
        )
