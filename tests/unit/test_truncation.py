"""Results are designed, not dumped: over toolOutputLimit, head + tail stay in context and the
full text is spilled to a file under the state dir that the model can read_file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.loop.context import truncate_tool_output
from agent_lsp.agent.loop.run import Session
from tests.unit.kit import call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(30)

LIMIT = 400


@pytest.fixture
def big_file(workspace: Path) -> Path:
    path = workspace / "big.log"
    path.write_text("".join(f"line {i:03d} of the big log\n" for i in range(1, 201)))
    return path


async def test_truncate_tool_output_keeps_head_and_tail_and_spills(tmp_path):
    text = "".join(f"row {i}\n" for i in range(1000))
    cut = await truncate_tool_output(text, 300, tmp_path / "spill", "call/../x")

    assert cut.truncated
    assert cut.content.startswith("row 0\nrow 1\n")
    assert cut.content.endswith("row 998\nrow 999\n")
    assert "row 500\n" not in cut.content
    assert cut.spill_path is not None and cut.spill_path.parent == tmp_path / "spill"
    assert cut.spill_path.read_text() == text
    assert str(cut.spill_path) in cut.content
    assert len(cut.content) < 300 + 300  # the limit plus one explanatory line


async def test_short_output_is_untouched(tmp_path):
    cut = await truncate_tool_output("short", 300, tmp_path / "spill", "c")
    assert (cut.content, cut.truncated, cut.spill_path) == ("short", False, None)
    assert not (tmp_path / "spill").exists()


async def test_big_result_keeps_head_tail_and_the_model_can_read_the_spill(model, workspace, big_file, state_dir):
    run_id = "r-trunc"
    spill = state_dir / "spill" / run_id / "big.txt"
    model.add([
        tools_reply(call("read_file", id="big", path="big.log")),
        tools_reply(call("read_file", id="again", path=str(spill), offset=100, limit=3)),
        {"text": "seen it all"},
    ])

    report, events, _ = await run("read the log", model, workspace, run_id=run_id, toolOutputLimit=LIMIT)

    result = last_tool_results(model.requests[1])["big"]
    assert result.startswith("  1\tline 001 of the big log\n")
    assert result.rstrip().endswith("200\tline 200 of the big log")
    assert "line 100 of" not in result
    assert str(spill) in result, "the model must be given the spill file's path"
    assert len(result) < LIMIT + 300
    full = spill.read_text()
    assert full.count("\n") == 199 and "100\tline 100 of the big log" in full

    # The event says it was truncated and where the full text is.
    [event] = [e for e in events.of("toolResult") if wire_fields(e)["callId"] == "big"]
    assert wire_fields(event)["truncated"] is True and wire_fields(event)["spillPath"] == str(spill)

    # read_file may read that spill file, outside the workspace.
    again = last_tool_results(model.requests[2])["again"]
    assert "line 100 of the big log" in again and "line 102 of the big log" in again
    assert "outside" not in again
    assert report.final_text == "seen it all"


async def test_spill_files_of_this_session_stay_readable_in_a_follow_up(model, workspace, big_file, state_dir):
    session = Session()
    spill = state_dir / "spill" / "r-one" / "big.txt"
    # One conversation: the follow-up's first user message is still the first run's.
    model.add([tools_reply(call("read_file", id="big", path="big.log")), {"text": "ok"},
               tools_reply(call("read_file", id="s", path=str(spill), limit=1)), {"text": "ok"}])

    await run("read", model, workspace, session=session, run_id="r-one", toolOutputLimit=LIMIT)
    await run("now read the spill", model, workspace, session=session, run_id="r-two", toolOutputLimit=LIMIT)

    assert spill.exists()
    result = last_tool_results(model.requests[-1])["s"]
    assert "line 001 of the big log" in result


async def test_another_sessions_spill_is_refused(model, workspace, big_file, state_dir):
    spill = state_dir / "spill" / "r-one" / "big.txt"
    model.add("FIRST", [tools_reply(call("read_file", id="big", path="big.log")), {"text": "ok"}])
    model.add("OTHER", [tools_reply(call("read_file", id="s", path=str(spill))), {"text": "ok"}])

    await run("FIRST read", model, workspace, session=Session(), run_id="r-one", toolOutputLimit=LIMIT)
    assert spill.exists()
    await run("OTHER session", model, workspace, session=Session(), run_id="r-two", toolOutputLimit=LIMIT)

    result = last_tool_results(model.requests[-1])["s"]
    assert result.startswith("error:") and "outside the workspace" in result


async def test_other_files_in_the_state_dir_are_not_readable(model, workspace, big_file, state_dir):
    spill_dir = state_dir / "spill" / "r-one"
    model.add([
        tools_reply(call("read_file", id="big", path="big.log")),
        tools_reply(call("read_file", id="s", path=str(spill_dir / "secret.txt"))),
        {"text": "ok"},
    ])
    spill_dir.mkdir(parents=True)
    (spill_dir / "secret.txt").write_text("not yours\n")

    await run("read", model, workspace, run_id="r-one", toolOutputLimit=LIMIT)

    result = last_tool_results(model.requests[2])["s"]
    assert result.startswith("error:") and "not yours" not in result


async def test_command_output_is_truncated_too(model, workspace):
    model.add([tools_reply(call("run_command", id="c", command=f"{sys.executable} gen.py")), {"text": "ok"}])
    (workspace / "gen.py").write_text("for i in range(2000):\n    print('output line', i)\n")

    _, events, _ = await run("run", model, workspace, toolOutputLimit=LIMIT, approval={"default": "allow"})

    result = last_tool_results(model.requests[1])["c"]
    assert result.startswith("exit code 0\noutput line 0\n")
    assert result.endswith("output line 1999")
    assert len(result) < LIMIT + 300
    [event] = events.of("toolResult")
    assert wire_fields(event)["truncated"] is True
    assert Path(wire_fields(event)["spillPath"]).read_text().count("output line") == 2000
