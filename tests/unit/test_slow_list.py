"""tests/slow_tests.txt (scripts/rank-slow) names tests that exist: a renamed or removed test
would otherwise leave a stale line, and a renamed slow test would silently join --fast."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def test_every_listed_slow_test_exists():
    lines = (TESTS / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
    listed = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert listed, "the list is empty: --fast would run everything"
    missing = []
    for entry in listed:
        file, _, name = entry.partition("::")
        source = TESTS / file
        if not source.is_file() or not re.search(rf"^\s*(async )?def {re.escape(name)}\(",
                                                 source.read_text(encoding="utf-8"), re.M):
            missing.append(entry)
    assert not missing, f"stale lines in tests/slow_tests.txt (rerun scripts/rank-slow): {missing}"
