"""Approval: the model proposes, the runtime decides. Policy per tool, allowCommands on argv,
"allow for session", and a denial fed back to the model as that call's result."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from agent_lsp.agent.display import show_command
from agent_lsp.agent.events import wire_fields
from agent_lsp.agent.loop.run import Session
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.policy.approval import ApprovalPolicy, SessionApprovals
from agent_lsp.agent.ports import Decision
from agent_lsp.agent.tools.base import CommandPlan, Prepared
from agent_lsp.agent.tools.command import needs_shell
from agent_lsp.agent.tools.toolsets import main_tools
from agent_lsp.settings import ApprovalSettings
from tests.unit.kit import ScriptedApprover, call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(30)

TOOLS = {t.name: t for t in main_tools()}
ROOT = Path("/work/space")


async def _noop() -> str:
    return ""


def decide(p: ApprovalPolicy, name: str, command: str | None = None) -> str:
    """The policy's verdict for a call of `name` (with `command`, prepared as run_command does)."""
    prepared = Prepared("", _noop)
    if command is not None:
        try:
            argv = shlex.split(command)
        except ValueError:
            argv = None
        prepared = Prepared("", _noop, command=CommandPlan(command, argv=argv, shell=needs_shell(command), cwd=ROOT, roots=[ROOT],
                                                           remember=command))
    return p.decide(TOOLS[name], prepared).verdict


def policy(session: SessionApprovals | None = None, **values) -> ApprovalPolicy:
    return ApprovalPolicy(ApprovalSettings.model_validate(values), session or SessionApprovals())


# -- the policy on its own -----------------------------------------------------------------

def test_read_only_tools_pass_by_policy_side_effects_ask():
    p = policy()
    for name in ("read_file", "list_files", "search", "delegate"):
        assert decide(p, name) == "allow", name
    for name in ("edit_file", "write_file"):
        assert decide(p, name) == "ask", name
    assert decide(p, "run_command", "ls") == "ask"


@pytest.mark.parametrize("default", ["allow", "ask", "deny"])
def test_default_applies_to_side_effects_only(default):
    p = policy(default=default)
    assert decide(p, "edit_file") == default
    assert decide(p, "run_command", "make") == default
    assert decide(p, "read_file") == "allow"


def test_per_tool_setting_beats_the_default():
    p = policy(default="ask", tools={"edit_file": "allow", "run_command": "deny", "search": "deny", "read_file": "ask"})
    assert decide(p, "edit_file") == "allow"
    assert decide(p, "write_file") == "ask"
    assert decide(p, "run_command", "ls") == "deny"
    assert decide(p, "search") == "deny"
    assert decide(p, "read_file") == "ask"


def test_a_denied_tool_stays_denied_even_if_its_command_is_allowed():
    p = policy(tools={"run_command": "deny"}, allowCommands=["pytest"])
    assert decide(p, "run_command", "pytest") == "deny"


@pytest.mark.parametrize("command", ["pytest", "pytest -x", "pytest -x tests/unit", "pytest -k 'a and b'", "git status", "git status --short"])
def test_allow_commands_match_on_argv_prefix(command):
    p = policy(allowCommands=["pytest", "git status"])
    assert decide(p, "run_command", command) == "allow"


@pytest.mark.parametrize("command", [
    "pytest; rm -rf /",
    "pytest && rm -rf /",
    "pytest || rm -rf /",
    "pytest | sh",
    "pytest $(rm -rf /)",
    "pytest `rm -rf /`",
    "pytest > /etc/passwd",
    "pytest < /etc/passwd",
    "pytest\nrm -rf /",
    "pytest -x\r\nrm -rf /",
    "pytest & rm -rf /",
    "pytestevil",
    "python -m pytest",
    "git push",
    "git",
    "pytest 'unclosed",
])
def test_allow_commands_never_let_shell_operators_ride_along(command):
    p = policy(allowCommands=["pytest", "git status"])
    assert decide(p, "run_command", command) == "ask"


def test_session_remembers_the_exact_command_line_and_edit_tools():
    session = SessionApprovals()
    p = policy(session)
    session.remember("run_command", "make test")
    session.remember("edit_file", None)
    assert decide(p, "run_command", "make test") == "allow"
    assert decide(p, "run_command", "make test2") == "ask"
    assert decide(p, "run_command", "make") == "ask"
    assert decide(p, "edit_file") == "allow"
    assert decide(p, "write_file") == "ask"
    # Remembering a command does not approve every command.
    assert decide(p, "run_command", "make test; rm -rf /") == "ask"


# -- through the loop ----------------------------------------------------------------------

async def test_ask_policy_asks_with_exactly_what_would_change(model, workspace):
    model.add([tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")), {"text": "fixed"}])
    approver = ScriptedApprover(Decision.ALLOW)

    report, events, _ = await run("fix add", model, workspace, approver=approver)

    assert len(approver.requests) == 1
    request = approver.requests[0]
    assert request.tool == "edit_file"
    assert "calc.py" in request.detail
    assert "-    return a - b" in request.detail and "+    return a + b" in request.detail
    assert "return a + b" in (workspace / "calc.py").read_text()
    assert report.edited_files == [(workspace / "calc.py").resolve().as_uri()]
    states = [wire_fields(e)["state"] for e in events.of("approval")]
    assert states == ["pending", "allowed"]


async def test_allow_policy_runs_without_asking(model, workspace):
    model.add([tools_reply(call("write_file", path="new.txt", content="hello\n")), {"text": "written"}])
    approver = ScriptedApprover(default=Decision.DENY)

    report, _, _ = await run("write", model, workspace, approver=approver, approval={"tools": {"write_file": "allow"}})

    assert approver.requests == []
    assert (workspace / "new.txt").read_text() == "hello\n"
    assert report.denied == 0


async def test_deny_policy_never_asks_and_never_runs(model, workspace):
    model.add([tools_reply(call("run_command", id="c1", command="touch made-by-command")), {"text": "ok, I will not"}])
    approver = ScriptedApprover(default=Decision.ALLOW)

    report, events, _ = await run("touch it", model, workspace, approver=approver, approval={"tools": {"run_command": "deny"}})

    assert approver.requests == []
    assert not (workspace / "made-by-command").exists()
    result = last_tool_results(model.requests[1])["c1"]
    assert result.startswith("denied:") and "policy" in result
    assert report.denied == 1 and report.stop_reason == StopReason.DONE
    assert [wire_fields(e)["state"] for e in events.of("approval")] == ["denied"]


async def test_allow_commands_run_without_asking(model, workspace):
    model.add([tools_reply(call("run_command", id="c1", command="echo hi there")), {"text": "ran"}])
    approver = ScriptedApprover(default=Decision.DENY)

    await run("echo", model, workspace, approver=approver, approval={"allowCommands": ["echo"]})

    assert approver.requests == []
    assert last_tool_results(model.requests[1])["c1"] == "exit code 0\nhi there"


SHELL_LINES = ["echo hi; touch pwned", "echo hi && touch pwned", "echo hi | tee pwned", "echo $(touch pwned)",
               "echo `touch pwned`", "echo hi > pwned", "echo hi\ntouch pwned"]


async def test_allow_commands_with_shell_operators_ask_and_a_no_stops_them(model, workspace):
    model.add([tools_reply(*(call("run_command", id=f"c{i}", command=line) for i, line in enumerate(SHELL_LINES))),
               {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)

    await run("echo", model, workspace, approver=approver, approval={"allowCommands": ["echo"]})

    # The whole line is shown, a newline escaped rather than hiding what follows it.
    assert [r.detail.splitlines()[0].split("   ")[0] for r in approver.requests] == [f"$ {show_command(line)}" for line in SHELL_LINES]
    assert approver.requests[-1].detail.startswith("$ echo hi\\ntouch pwned")
    assert not (workspace / "pwned").exists()
    results = last_tool_results(model.requests[1])
    assert len(results) == len(SHELL_LINES) and all(r.startswith("denied:") for r in results.values())


async def test_allow_for_session_remembers_the_exact_command_only(model, workspace):
    model.add([
        tools_reply(call("run_command", command="echo one")),
        tools_reply(call("run_command", command="echo one")),
        tools_reply(call("run_command", id="c3", command="echo two")),
        {"text": "done"},
    ])
    approver = ScriptedApprover(Decision.ALLOW_SESSION, Decision.DENY)
    session = Session()

    await run("echo things", model, workspace, approver=approver, session=session)

    assert [r.detail for r in approver.requests] == ["$ echo one", "$ echo two"]
    assert last_tool_results(model.requests[3])["c3"].startswith("denied:")
    assert session.approvals.commands == {"echo one"}

    # Another session does not inherit it.
    model.add([tools_reply(call("run_command", command="echo one")), {"text": "done"}])
    other = ScriptedApprover(Decision.DENY)
    await run("echo again", model, workspace, approver=other, session=Session())
    assert [r.detail for r in other.requests] == ["$ echo one"]


async def test_allow_for_session_remembers_the_edit_tool(model, workspace):
    model.add([
        tools_reply(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")),
        tools_reply(call("edit_file", path="README.md", old_text="# sample", new_text="# Sample")),
        tools_reply(call("write_file", id="w", path="notes.txt", content="x")),
        {"text": "done"},
    ])
    approver = ScriptedApprover(Decision.ALLOW_SESSION, Decision.DENY)

    report, _, _ = await run("edit", model, workspace, approver=approver)

    assert [r.tool for r in approver.requests] == ["edit_file", "write_file"]
    assert (workspace / "README.md").read_text() == "# Sample\n"
    assert not (workspace / "notes.txt").exists()
    assert report.denied == 1


async def test_denial_is_fed_back_as_the_calls_result_and_the_run_goes_on(model, workspace):
    model.add([
        tools_reply(call("edit_file", id="e1", path="calc.py", old_text="a - b", new_text="a + b"), text="I'll fix it."),
        {"text": "Understood, I did not change anything."},
    ])
    approver = ScriptedApprover(Decision.DENY)

    report, events, _ = await run("fix add", model, workspace, approver=approver)

    assert report.stop_reason == StopReason.DONE
    assert report.final_text == "Understood, I did not change anything."
    assert report.denied == 1 and report.edited_files == []
    assert "return a - b" in (workspace / "calc.py").read_text()
    messages = model.requests[1]["messages"]
    assert messages[-2]["role"] == "assistant" and messages[-2]["tool_calls"][0]["id"] == "e1"
    assert messages[-1]["role"] == "tool" and messages[-1]["tool_call_id"] == "e1"
    assert messages[-1]["content"].startswith("denied: the user said no. The edit_file call did not run")
    result = [e for e in events.of("toolResult") if wire_fields(e)["callId"] == "e1"]
    assert len(result) == 1 and wire_fields(result[0])["ok"] is False


async def test_a_withdrawn_or_failing_approver_is_a_denial(model, workspace):
    class BrokenApprover:
        async def ask(self, request):
            raise RuntimeError("the editor went away")

    model.add([tools_reply(call("write_file", id="w", path="x.txt", content="x")), {"text": "ok"}])
    report, events, _ = await run("write", model, workspace, approver=BrokenApprover())

    assert report.stop_reason == StopReason.DONE
    assert not (workspace / "x.txt").exists()
    assert last_tool_results(model.requests[1])["w"].startswith("denied:")
    assert [wire_fields(e)["state"] for e in events.of("approval")] == ["pending", "withdrawn"]
