"""A failing tool, malformed arguments, an unknown tool or a path outside the workspace is a
result for the model, not a crash; repeated identical failures are capped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.ports import Decision
from agent_lsp.agent.tools.paths import PathGuard, PathRefused
from tests.unit.kit import (
    ScriptedApprover,
    assert_valid_conversation,
    call,
    last_tool_results,
    run,
    tools_reply,
)

pytestmark = pytest.mark.timeout(30)


async def _one_call(model, workspace, tool_call: dict, **values) -> str:
    """Run one reply with one call (id "x"); return the result the model got."""
    tool_call = {**tool_call, "id": "x"}
    model.add([{"tool_calls": [tool_call]}, {"text": "understood"}])
    report, _, _ = await run("try it", model, workspace, **values)
    assert report.stop_reason == StopReason.DONE, report.error
    return last_tool_results(model.requests[1])["x"]


async def test_malformed_json_arguments(model, workspace):
    result = await _one_call(model, workspace, {"name": "read_file", "arguments": '{"path": "calc.py"'})
    assert result.startswith("error:") and "not valid JSON" in result


async def test_arguments_that_are_not_an_object(model, workspace):
    result = await _one_call(model, workspace, {"name": "read_file", "arguments": '["calc.py"]'})
    assert result.startswith("error:") and "must be a JSON object" in result


async def test_arguments_that_do_not_fit_the_schema(model, workspace):
    result = await _one_call(model, workspace, call("read_file", paths="calc.py"))
    assert result.startswith("error: invalid arguments for read_file") and "path" in result


async def test_unknown_tool(model, workspace):
    result = await _one_call(model, workspace, call("delete_everything", path="."))
    assert result.startswith("error: unknown tool 'delete_everything'")
    assert "read_file" in result, "the model is told which tools exist"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP SECRET\n")
    return secret


OUTSIDE_KINDS = ["dotdot", "absolute", "symlink", "tilde", "nul", "dir-symlink", "file-uri"]


@pytest.mark.parametrize("tool", ["read_file", "edit_file", "write_file"])
async def test_paths_outside_the_workspace_are_refused(model, workspace, outside, tool):
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    paths = {
        "dotdot": "../outside/secret.txt",
        "absolute": str(outside),
        "symlink": "link.txt",
        "tilde": "~/secret.txt",
        "nul": "calc.py\x00../../outside/secret.txt",
        "dir-symlink": "linkdir/secret.txt",
        "file-uri": outside.as_uri(),
    }
    arguments = {"read_file": lambda p: {"path": p}, "edit_file": lambda p: {"path": p, "old_text": "TOP", "new_text": "LOW"},
                 "write_file": lambda p: {"path": p, "content": "pwned\n"}}[tool]
    model.add([{"tool_calls": [{"name": tool, "id": kind, "arguments": arguments(paths[kind])} for kind in OUTSIDE_KINDS]},
               {"text": "understood"}])

    report, _, _ = await run("try it", model, workspace, approval={"default": "allow"})

    assert report.stop_reason == StopReason.DONE, report.error
    results = last_tool_results(model.requests[1])
    assert list(results) == OUTSIDE_KINDS
    for kind, result in results.items():
        assert result.startswith("error:"), (kind, result)
        assert "TOP SECRET" not in result, kind
    assert "outside the workspace" in results["dotdot"] and "outside the workspace" in results["symlink"]
    assert "NUL" in results["nul"] and "`~`" in results["tilde"]
    assert outside.read_text() == "TOP SECRET\n"
    assert report.edited_files == []


async def test_refused_paths_for_listing_searching_and_commands(model, workspace, outside):
    model.add([tools_reply(
        call("list_files", id="l", path=".."),
        call("search", id="s", pattern="SECRET", path=str(outside.parent)),
        call("run_command", id="c", command="cat secret.txt", cwd="../outside"),
    ), {"text": "ok"}])

    await run("peek", model, workspace, approval={"default": "allow"})

    results = last_tool_results(model.requests[1])
    for key in "lsc":
        assert results[key].startswith("error:") and "outside the workspace" in results[key], results[key]
        assert "TOP SECRET" not in results[key]


async def test_symlinks_out_are_not_listed_or_searched(model, workspace, outside):
    (workspace / "link.txt").symlink_to(outside)
    model.add([tools_reply(call("list_files", id="l"), call("search", id="s", pattern="SECRET")), {"text": "ok"}])

    await run("peek", model, workspace)

    results = last_tool_results(model.requests[1])
    assert "link.txt" not in results["l"] and "calc.py" in results["l"]
    assert results["s"] == "no matches"


def test_path_guard_accepts_paths_inside(workspace):
    guard = PathGuard([workspace])
    assert guard.resolve("calc.py") == (workspace / "calc.py").resolve()
    assert guard.resolve("./sub/../calc.py") == (workspace / "calc.py").resolve()
    assert guard.resolve(str(workspace / "calc.py")) == (workspace / "calc.py").resolve()
    assert guard.resolve((workspace / "calc.py").as_uri()) == (workspace / "calc.py").resolve()
    for bad in ["", "   ", "../x", "/etc/passwd", "~", "~root/x", "a\x00b", "calc%2epy", "x" * 2000]:
        with pytest.raises(PathRefused):
            guard.resolve(bad)


async def test_edit_old_text_not_found(model, workspace):
    result = await _one_call(model, workspace, call("edit_file", path="calc.py", old_text="return a / b", new_text="x"),
                             approval={"default": "allow"})
    assert result.startswith("error:") and "does not occur" in result and "exactly once" in result


async def test_edit_old_text_found_several_times_gives_the_count(model, workspace):
    result = await _one_call(model, workspace, call("edit_file", path="calc.py", old_text="return a", new_text="x"),
                             approval={"default": "allow"})
    assert result.startswith("error:") and "occurs 2 times" in result
    assert "return a - b" in (workspace / "calc.py").read_text()


async def test_edit_of_a_missing_file(model, workspace):
    result = await _one_call(model, workspace, call("edit_file", path="nope.py", old_text="a", new_text="b"))
    assert result.startswith("error:") and "does not exist" in result and "write_file" in result


async def test_a_failing_command_is_a_result(model, workspace):
    result = await _one_call(model, workspace, call("run_command", command="ls definitely-not-here"),
                             approval={"default": "allow"})
    assert result.startswith("error: exit code") and "definitely-not-here" in result


async def test_a_command_that_does_not_exist_is_a_result(model, workspace):
    result = await _one_call(model, workspace, call("run_command", command="no-such-program-xyz --help"),
                             approval={"default": "allow"})
    assert result.startswith("error: cannot start 'no-such-program-xyz'")


async def test_a_command_timeout_is_a_result(model, workspace):
    result = await _one_call(model, workspace, call("run_command", command="sleep 30", timeout=0.3),
                             approval={"default": "allow"})
    assert result.startswith("error: timed out after 0.3s")


async def test_errors_are_not_sent_as_ok(model, workspace):
    model.add([tools_reply(call("read_file", id="bad", path="nope.txt"), call("read_file", id="good", path="README.md")),
               {"text": "ok"}])
    _, events, _ = await run("read", model, workspace)
    oks = {wire_fields(e)["callId"]: wire_fields(e)["ok"] for e in events.of("toolResult")}
    assert oks == {"bad": False, "good": True}


async def test_repeated_identical_failures_end_as_a_turn_budget_stop(model, workspace):
    """Issue 11.4: the spiral guard is a turn-budget guard, not a fatal error, and its summary
    names the repeated call."""
    model.add([tools_reply(call("read_file", path="nope.txt"), text="Let me read it.", repeat=10)])

    report, _, _ = await run("read nope", model, workspace, maxTurns=20)

    assert report.stop_reason == StopReason.MAX_TURNS and report.error is None
    assert "read_file call failed 5 times" in report.summary and "Left:" in report.summary
    assert len(model.requests) == 5
    # The model was warned before the stop.
    third = last_tool_results(model.requests[3])
    assert any("failed 3 times" in text for text in third.values())


async def test_repeated_denials_are_told_to_the_model_not_counted_as_a_spiral(model, workspace):
    model.add([tools_reply(call("write_file", path="x.txt", content="x"), repeat=7), {"text": "I give up"}])

    report, _, _ = await run("write", model, workspace, approver=ScriptedApprover(default=Decision.DENY), maxTurns=20)

    assert report.stop_reason == StopReason.DONE and report.final_text == "I give up"
    assert report.denied == 7
    fourth = list(last_tool_results(model.requests[4]).values())[0]
    assert fourth.startswith("denied:") and "proposed this exact call 4 times" in fourth


async def test_a_megabyte_output_repeated_is_keyed_by_hash(model, workspace):
    """The guard keys on a hash of the arguments and the result, not on whole megabyte outputs."""
    (workspace / "big.sh").write_text("head -c 1200000 /dev/zero | tr '\\0' x; exit 1\n")
    model.add([tools_reply(call("run_command", command="sh big.sh"), repeat=6)])

    report, _, _ = await run("run it", model, workspace, maxTurns=20, approval={"default": "allow"})

    assert report.stop_reason == StopReason.MAX_TURNS
    assert "run_command call failed 5 times" in report.summary


async def test_different_failures_do_not_trip_the_cap(model, workspace):
    model.add([tools_reply(call("read_file", path=f"nope{i}.txt")) for i in range(7)] + [{"text": "gave up"}])
    report, _, _ = await run("read", model, workspace, maxTurns=20)
    assert report.stop_reason == StopReason.DONE and report.final_text == "gave up"


async def test_binary_files_are_refused_gently(model, workspace):
    (workspace / "blob.bin").write_bytes(os.urandom(64) + b"\x00" * 64)
    result = await _one_call(model, workspace, call("read_file", path="blob.bin"))
    assert result.startswith("error:") and "binary" in result


async def test_an_unexpected_failure_while_preparing_a_call_is_a_result(model, workspace):
    # A host workspace can fail in ways the tools do not foresee (an editor that went away).
    class FlakyWorkspace(DiskWorkspace):
        async def read(self, path):
            if path.name == "calc.py":
                raise RuntimeError("the editor went away")
            return await super().read(path)

    session = Session()
    model.add([tools_reply(call("edit_file", id="e", path="calc.py", old_text="a - b", new_text="a + b"),
                           call("read_file", id="r", path="README.md")),
               {"text": "could not edit"}, {"text": "follow-up answer"}])

    report, _, _ = await run("fix", model, FlakyWorkspace([workspace]), session=session, approval={"default": "allow"})

    assert report.stop_reason == StopReason.DONE, report.error
    results = last_tool_results(model.requests[1])
    assert results["e"].startswith("error:") and "the editor went away" in results["e"]
    assert results["r"] == "1\t# sample"
    # The session stays usable.
    await run("and now?", model, workspace, session=session)
    assert_valid_conversation(model.requests[-1]["messages"])
