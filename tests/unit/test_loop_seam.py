"""The loop talks to its seams (loop/services.py) and never reaches past them (issue 22): no
`self.a.b.c` in the loop or its parts (model call, stops, tool calls, approval asking), and none
of the run's wide objects (the tool context, the path guard, the session, the policy) imported
there."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest

import agent_lsp.agent.loop
from agent_lsp.agent.loop.services import RunStats, Spill

LOOP = Path(agent_lsp.agent.loop.__file__).parent
NARROW = [LOOP / name for name in ("loop.py", "model_call.py", "stops.py", "tool_calls.py", "asker.py")]
WIDE = {"ToolContext", "PathGuard", "Session", "ApprovalPolicy", "SessionApprovals", "ToolBox"}


def _parse(source: str) -> ast.Module:
    gc.collect()  # see test_boundary._parse: no finaliser may run inside ast.parse
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        gc.enable()


def deep_chains(source: str) -> list[str]:
    """Every attribute chain of three or more names after `self` (`self.a.b.c`), once each."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(_parse(source)):
        names: list[str] = []
        inner: ast.expr = node if isinstance(node, ast.Attribute) else ast.Constant(None)
        while isinstance(inner, ast.Attribute):
            names.append(inner.attr)
            inner = inner.value
        # Reported at the node three names deep, so a longer chain is one finding.
        if len(names) == 3 and isinstance(inner, ast.Name) and inner.id == "self":
            found.append((node.lineno, f"line {node.lineno}: self.{'.'.join(reversed(names))}"))
    return [text for _, text in sorted(found)]


def wide_imports(source: str) -> set[str]:
    return {alias.asname or alias.name for node in ast.walk(_parse(source)) if isinstance(node, ast.ImportFrom)
            for alias in node.names} & WIDE


@pytest.mark.parametrize("path", NARROW, ids=lambda p: p.name)
def test_the_loop_never_reaches_past_its_seams(path):
    source = path.read_text(encoding="utf-8")
    assert deep_chains(source) == []
    assert wide_imports(source) == set()


def test_the_checker_would_catch_a_deep_reach():
    old = """
class ToolCalls:
    async def _finish(self, cut):
        self.s.tool_ctx.paths.extra_readable.add(cut.spill_path.resolve())
        self.s.policy.session.remember("x", None)
        self.s.stats.tool_calls += 1
        self.stats.tool_calls += 1
        self.transcript.write()
        stats = self.s
"""
    assert deep_chains(old) == ["line 4: self.s.tool_ctx.paths", "line 5: self.s.policy.session", "line 6: self.s.stats.tool_calls"]
    assert wide_imports("from agent_lsp.agent.tools.base import ToolContext, Prepared") == {"ToolContext"}


def test_a_reused_call_id_gets_a_fresh_one():
    stats = RunStats()
    assert [stats.claim_call_id(i) for i in ("a", "a", "", "a", "a_2", "")] == ["a", "a_2", "call_2", "a_3", "a_2_2", "call_3"]


async def test_a_spilled_result_is_granted_for_reading_by_an_explicit_call(tmp_path):
    granted: list[Path] = []
    spill = Spill(tmp_path, 100, granted.append)
    small = await spill.fit("short", "c1", str)
    assert not small.truncated and granted == []
    big = await spill.fit("x" * 1000, "c2", str)
    assert big.truncated and granted == [(tmp_path / "c2.txt").resolve()]
