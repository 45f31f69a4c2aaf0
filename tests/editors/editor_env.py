"""What the real-editor tests share: how a missing editor is handled, and the sample file."""

from __future__ import annotations

import os

import pytest

# A line with an accented letter and an emoji, so positions in every encoding are exercised.
SAMPLE_A = '''def greet(name):
    message = "héllo 😀 " + name
    return message


print(greet("world"))
'''


def require(found: object, what: str, install: str) -> None:
    """A missing editor fails the run in CI (a skip would hide it) and skips elsewhere."""
    if found:
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{what} not found: {install}")
    pytest.skip(f"{what} not found ({install})", allow_module_level=True)
