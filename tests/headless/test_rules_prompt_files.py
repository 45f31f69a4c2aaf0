"""Permission rules over prompt files through `agent-lsp run` (CONTRACT Decisions 28, 30): a
skill's file that a `Read(…)` deny rule covers is neither listed nor made readable."""

from __future__ import annotations

import json

import pytest

from tests.headless.test_prompt_files_cli import home, write  # noqa: F401 - the fixture
from tests.headless.test_run_cli import agent_run, run_cli, run_on_a_tty
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(60)


def test_a_skill_file_a_read_deny_rule_covers_is_not_listed_nor_readable(model, workspace, home):  # noqa: F811
    skill = write(home / ".agents" / "skills" / "deploy" / "SKILL.md",
                  "---\nname: deploy\ndescription: Deploy the app.\n---\nRun scripts/go.sh.\n")
    script = write(skill.parent / "scripts" / "go.sh", "echo go\n")
    secret = write(skill.parent / "prod.env", "TOKEN=abc\n")
    write(home / ".claude" / "settings.json", json.dumps({"permissions": {"deny": ["Read(*.env)"]}}))
    model.add([
        tools_reply({"name": "skill", "id": "s", "arguments": {"name": "deploy"}}),
        tools_reply(call("read_file", id="r", path=str(secret.resolve())),
                    call("read_file", id="g", path=str(script.resolve()))),
        {"text": "ok"},
    ])
    proc = run_cli(agent_run(model, workspace, "deploy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded = last_tool_results(model.requests[1])["s"]
    assert str(script.resolve()) in loaded and "prod.env" not in loaded, loaded
    read = last_tool_results(model.requests[2])
    assert "TOKEN" not in read["r"] and read["r"].startswith(("denied", "error")), read["r"]
    assert "echo go" in read["g"]


def test_a_project_commands_allowed_tools_apply_after_consent_on_the_terminal(model, workspace, home):  # noqa: F811
    write(workspace / ".claude" / "commands" / "pcheck.md", "---\nallowed-tools: Bash(python3:*)\n---\nRun the check.\n")
    write(workspace / "check.py", "print(40 + 2)\n")
    model.add([tools_reply(call("run_command", id="c1", command="python3 check.py")), {"text": "done"}])
    # no --yes: the command runs only through the allowed-tools the user consents to here
    code, out, err = run_on_a_tty(agent_run(model, workspace, "/pcheck", yes=False), b"w\n")
    assert code == 0, out + err
    assert "Bash(python3:*)" in err and "pcheck.md" in err, err
    assert "allowed-tools pre-allowed for this run: Bash(python3:*)" in err, err
    assert "42" in last_tool_results(model.requests[1])["c1"]

    # "Allow always for this workspace" is remembered: no terminal now, and still applied
    model.add([tools_reply(call("run_command", id="c2", command="python3 check.py")), {"text": "done"}])
    proc = run_cli(agent_run(model, workspace, "/pcheck", yes=False))
    assert proc.returncode == 0, proc.stderr
    assert "42" in last_tool_results(model.requests[-1])["c2"]


def test_a_denied_project_commands_allowed_tools_are_not_applied_and_the_run_says_so(model, workspace, home):  # noqa: F811
    write(workspace / ".claude" / "commands" / "pcheck.md", "---\nallowed-tools: Bash(python3:*)\n---\nRun the check.\n")
    write(workspace / "check.py", "print(40 + 2)\n")
    model.add([tools_reply(call("run_command", id="c1", command="python3 check.py")), {"text": "done"}])
    code, out, err = run_on_a_tty(agent_run(model, workspace, "/pcheck", yes=False), b"d\nd\n")
    assert code == 0, out + err
    assert "its allowed-tools are not applied" in err, err
    assert last_tool_results(model.requests[1])["c1"].startswith("denied")
