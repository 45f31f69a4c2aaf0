"""Permission rules through `agent-lsp run` (issue 24): the destructive list under --yes and with
no terminal (denied, saying why), "Always allow" on a terminal (key `w`) saved for the next run,
and project allow rules asked on the terminal (no terminal: not used)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli, run_on_a_tty
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)


def results(model, index: int = -1) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.requests[index]["messages"] if m["role"] == "tool"}


def test_yes_does_not_pass_a_destructive_command_and_without_a_terminal_it_is_denied_saying_why(model, workspace):
    (workspace / "build").mkdir()
    model.add([tools_reply(call("run_command", id="c", command="rm -rf build")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "clean"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (workspace / "build").is_dir()
    assert results(model)["c"].startswith("denied:") and "destructive" in results(model)["c"]
    assert "--yes does not cover it" in proc.stderr and "rm -r" in proc.stderr
    assert report_of(proc.stdout)["denied"] == 1


def test_a_destructive_command_asks_on_a_terminal_even_with_yes(model, workspace):
    (workspace / "build").mkdir()
    model.add([tools_reply(call("run_command", id="c", command="rm -rf build")), {"text": "ok"}])
    code, out, err = run_on_a_tty(agent_run(model, workspace, "clean"), b"a\n")
    assert code == 0, out + err
    assert "destructive" in err and "al[w]ays" not in err  # asked, and Always allow not offered
    assert not (workspace / "build").exists()


def test_always_allow_on_the_terminal_is_saved_and_the_next_run_does_not_ask(model, workspace):
    settings = Path(os.environ["AGENT_LSP_SETTINGS"])
    model.add([tools_reply(call("run_command", id="c1", command="touch one")), {"text": "ok"}])
    code, out, err = run_on_a_tty(agent_run(model, workspace, "one", yes=False), b"w\n")
    assert code == 0, out + err
    assert "al[w]ays allow" in err and "saves the rule Bash(touch one)" in err
    assert json.loads(settings.read_text()) == {"permissions": {"allow": ["Bash(touch one)"]}}
    (workspace / "one").unlink()

    model.add([tools_reply(call("run_command", id="c2", command="touch one")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "again", yes=False))  # no terminal, no --yes
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results(model)["c2"].startswith("exit code 0") and (workspace / "one").exists()


def test_project_allow_rules_are_not_used_without_a_terminal_and_asked_on_one(model, workspace):
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.local.json").write_text(json.dumps({"permissions": {"allow": ["Bash(touch:*)"]}}))
    model.add([tools_reply(call("run_command", id="c1", command="touch one")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "one", yes=False))
    assert "project allow rules not used" in proc.stderr and "Bash(touch:*)" in proc.stderr
    assert results(model)["c1"].startswith("denied:")

    model.add([tools_reply(call("run_command", id="c2", command="touch two")), {"text": "ok"}])
    code, out, err = run_on_a_tty(agent_run(model, workspace, "two", yes=False), b"a\n")
    assert code == 0, out + err
    assert "Bash(touch:*)" in err and ".claude/settings.local.json" in err
    assert results(model)["c2"].startswith("exit code 0")


def test_a_malformed_claude_file_is_named_and_the_rest_still_works(model, workspace):
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text("{ nope")
    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    claude.mkdir(parents=True)
    (claude / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(touch:*)"]}}))
    model.add([tools_reply(call("run_command", id="c1", command="touch one")), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "one"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results(model)["c1"].startswith("denied:")  # the user's file still applies
    assert ".claude/settings.json is not valid JSON" in proc.stderr, proc.stderr


# -- issue 32: P3 (every simple command), P4 (globs, links out), P5 (patterns and Always allow) --

@pytest.mark.parametrize(("line", "allow"), [
    ("{ rm -rf build; }", []),
    ("if true; then rm -rf build; fi", []),
    ("! rm --recur build", []),
    ("find build -delete", ["Bash(find:*)"]),
    ("find build -exec rm -rf {} +", ["Bash(find:*)", "Bash(rm:*)"]),
])
def test_yes_and_allow_rules_do_not_pass_a_destructive_command_however_it_is_spelled(model, workspace, line, allow):
    Path(os.environ["AGENT_LSP_SETTINGS"]).write_text(json.dumps({"permissions": {"allow": allow}}))
    (workspace / "build").mkdir()
    (workspace / "build" / "keep.txt").write_text("keep")
    model.add([tools_reply(call("run_command", id="c", command=line)), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "clean"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (workspace / "build" / "keep.txt").read_text() == "keep"
    assert results(model)["c"].startswith("denied:") and "destructive" in results(model)["c"], results(model)


@pytest.mark.parametrize("line", ["cat .?/x", "cat link-out", "cat *-out/x"])
def test_an_allow_rule_does_not_read_outside_through_a_glob_or_a_link(model, workspace, line):
    (workspace.parent / "x").write_text("hunter2-outside")
    (workspace / "link-out").symlink_to(workspace.parent / "x")
    (workspace / "dir-out").symlink_to(workspace.parent)
    Path(os.environ["AGENT_LSP_SETTINGS"]).write_text(json.dumps({"permissions": {"allow": ["Bash(cat:*)"]}}))
    model.add([tools_reply(call("run_command", id="c", command=line)), {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "read", yes=False))  # no terminal: an ask is denied
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results(model)["c"].startswith("denied:"), results(model)
    assert "hunter2" not in json.dumps(model.requests[-1]["messages"])


def test_always_allow_is_not_offered_on_the_terminal_for_a_pattern_and_the_prompt_says_why(model, workspace):
    model.add([tools_reply(call("run_command", id="c", command="find . -name '*'")), {"text": "ok"}])
    code, out, err = run_on_a_tty(agent_run(model, workspace, "list", yes=False), b"s\n")
    assert code == 0, out + err
    assert "al[w]ays" not in err and "Always allow is not offered" in err and "allow for [s]ession" in err
    assert results(model)["c"].startswith("exit code 0")
    assert json.loads(Path(os.environ["AGENT_LSP_SETTINGS"]).read_text()) == {}  # nothing saved
