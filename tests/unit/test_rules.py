"""Permission rules (issue 24, CONTRACT Decisions 26 and 28): the grammar on its own, then
through run_task with real tools on a real workspace."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from agent_lsp.agent.policy.approval import ApprovalPolicy, SessionApprovals, permission_rules
from agent_lsp.agent.policy.destructive import destructive
from agent_lsp.agent.policy.rules import Rule
from agent_lsp.agent.policy.shell import split_line
from agent_lsp.agent.ports import Decision
from agent_lsp.agent.tools.base import CommandPlan, Prepared
from agent_lsp.agent.tools.command import needs_shell
from agent_lsp.agent.tools.toolsets import main_tools
from agent_lsp.settings import ApprovalSettings, Settings
from tests.unit.kit import ScriptedApprover, call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(60)

TOOLS = {t.name: t for t in main_tools()}
ROOT = Path("/work/space")


async def _noop() -> str:
    return ""


def policy(allow=(), ask=(), deny=(), **approval) -> ApprovalPolicy:
    settings = Settings.model_validate({"permissions": {"allow": list(allow), "ask": list(ask), "deny": list(deny)},
                                       "approval": approval})
    return ApprovalPolicy(settings.approval, SessionApprovals(), permission_rules(settings), roots=[ROOT],
                          can_save_always=True)


def command(p: ApprovalPolicy, line: str):
    try:
        argv = shlex.split(line)
    except ValueError:
        argv = None
    plan = CommandPlan(line, argv=argv, shell=needs_shell(line), cwd=ROOT, roots=[ROOT], remember=line)
    return p.decide(TOOLS["run_command"], Prepared("", _noop, command=plan))


def on_file(p: ApprovalPolicy, tool: str, given: str, resolved: str | None = None):
    g = ROOT / given
    prepared = Prepared("", _noop, paths=[(g, ROOT / (resolved or given))], shown_path=given)
    return p.decide(TOOLS[tool], prepared)


# -- commands ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "line", "verdict"), [
    ("Bash(npm test:*)", "npm test", "allow"),
    ("Bash(npm test:*)", "npm test -x", "allow"),
    ("Bash(npm test:*)", "npm tests", "ask"),
    ("Bash(npm test:*)", "npm", "ask"),
    ("Bash(git status)", "git status", "allow"),
    ("Bash(git status)", "git status --short", "ask"),
    ("Bash(git * main)", "git push origin main", "allow"),
    ("Bash(git * main)", "git push origin dev", "ask"),
    ("Bash(pytest tests/*.py)", "pytest tests/test_a.py", "allow"),
    ("Bash(pytest tests/*.py)", "pytest tests/test_a.txt", "ask"),
    ("Bash", "make anything", "allow"),
    ("run_command(make:*)", "make build", "allow"),
])
def test_command_rules_prefix_exact_and_wildcards(rule, line, verdict):
    assert command(policy(allow=[rule]), line).verdict == verdict


@pytest.mark.parametrize(("line", "verdict"), [
    ("npm test && npm run lint", "allow"),          # every part allowed
    ("npm test; npm run lint | grep x", "ask"),     # grep is not
    ("npm test && curl evil.example", "ask"),
    ("npm test $(curl evil)", "ask"),
    ("npm test `curl evil`", "ask"),
    ("npm test <(curl evil)", "ask"),
    ("npm test << EOF", "ask"),
    ("npm test > out.txt", "ask"),                  # a redirection that writes a file
    ("npm test > /etc/passwd", "ask"),
    ("npm test 2>/dev/null", "allow"),
    ("npm test ../../etc", "ask"),                  # a path outside the workspace
    ("npm test 'unclosed", "ask"),
])
def test_compound_lines_match_only_when_every_part_does_and_never_with_shell_tricks(line, verdict):
    assert command(policy(allow=["Bash(npm test:*)", "Bash(npm run lint)"]), line).verdict == verdict


@pytest.mark.parametrize("line", ["eval npm test", "sh -c 'npm test'", "bash -lc 'npm test'"])
def test_eval_and_sh_c_never_match_an_allow_rule(line):
    assert command(policy(allow=["Bash"]), line).verdict == "ask"


@pytest.mark.parametrize("line", ["curl x", "ls && curl x", "sudo curl x", "env A=1 curl x", "timeout 5 curl x",
                                  "nohup nice -n 5 curl x", "echo x | xargs -n 1 curl"])
def test_deny_rules_look_through_wrappers_and_any_part(line):
    p = policy(allow=["Bash"], deny=["Bash(curl:*)"])
    verdict = command(p, line)
    assert verdict.verdict == "deny" and "Bash(curl:*)" in verdict.why


def test_deny_beats_ask_beats_allow_and_the_first_match_wins():
    p = policy(allow=["Bash(git:*)"], ask=["Bash(git push:*)"], deny=["Bash(git push --tags)"])
    assert command(p, "git log").verdict == "allow"
    assert command(p, "git push origin").verdict == "ask"
    assert command(p, "git push origin").must_ask  # a person answers it: not --yes
    assert command(p, "git push --tags").verdict == "deny"


def test_git_guards_of_allow_commands_hold_for_rules():
    p = policy(allow=["Bash(git diff:*)"])
    assert command(p, "git diff").verdict == "allow"
    assert command(p, "git diff --output=/tmp/x").verdict == "ask"
    assert command(p, "git -C /etc diff").verdict == "ask"


@pytest.mark.parametrize("line", [
    "rm -r build", "rm -rf build", "rm -fR build", "rm --recursive build", "git reset --hard",
    "git clean -fd", "git checkout -- .", "git restore .", "git push --force", "git push -f origin main",
    "git push origin +main", "git branch -D old", "git stash drop", "git stash clear",
    "sudo rm -rf /", "env X=1 git push -f", "make && rm -rf dist", "git -C sub reset --hard HEAD~1",
])
def test_destructive_commands_ask_whatever_allows_them(line):
    p = policy(allow=["Bash"], default="allow", sandboxed="allow")
    verdict = command(p, line)
    assert verdict.verdict == "ask" and verdict.must_ask and "destructive" in verdict.why, line
    assert verdict.always is None  # "Always allow" is not offered for them


@pytest.mark.parametrize("line", ["rm build/x.o", "git reset HEAD~1", "git clean -n", "git push", "git branch -d x",
                                  "git stash pop", "git restore --staged ."])
def test_ordinary_commands_are_not_destructive(line):
    assert destructive(split_line(line) or []) is None, line


def test_always_rule_is_the_exact_command_and_not_offered_for_compound_lines():
    p = policy()
    assert command(p, "npm test -x").always == "Bash(npm test -x)"
    assert command(p, "npm test && ls").always is None
    assert command(p, "cat ../../etc/passwd").always is None
    assert command(policy(ask=["Bash(npm:*)"]), "npm test").always is None  # after an ask rule


# -- paths ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "path", "verdict"), [
    ("Edit(src/**)", "src/app.py", "allow"),
    ("Edit(src/**)", "src/deep/app.py", "allow"),
    ("Edit(src/**)", "lib/app.py", "ask"),
    ("Edit(./app.py)", "app.py", "allow"),
    ("Edit(./app.py)", "sub/app.py", "ask"),
    ("Edit(*.md)", "docs/deep/readme.md", "allow"),   # no `/`: at any depth
    ("Write(src/**)", "src/app.py", "allow"),          # a path rule covers every writer
    ("MultiEdit(src/**)", "src/app.py", "allow"),
    ("Edit(//work/space/src/**)", "src/app.py", "allow"),
])
def test_path_rules_are_gitignore_globs_from_each_folder(rule, path, verdict):
    assert on_file(policy(allow=[rule]), "edit_file", path).verdict == verdict


def test_read_deny_tests_the_given_and_the_resolved_path():
    p = policy(deny=["Read(./.env)"])
    assert on_file(p, "read_file", ".env").verdict == "deny"
    assert on_file(p, "read_file", "innocent-link", ".env").verdict == "deny"  # a symlink to it
    assert on_file(p, "read_file", "config/.env").verdict == "allow"
    assert on_file(policy(deny=["Read(.env)"]), "read_file", "config/.env").verdict == "deny"
    assert on_file(p, "search", ".env").verdict == "deny"


def test_an_allow_rule_needs_both_paths_inside_its_glob():
    p = policy(allow=["Edit(src/**)"])
    assert on_file(p, "edit_file", "src/link.py", "secrets/key.py").verdict == "ask"


def test_always_rule_for_an_edit_names_that_file():
    assert on_file(policy(), "edit_file", "src/app.py").always == "Edit(src/app.py)"
    assert on_file(policy(), "write_file", "new.py").always == "Write(./new.py)"


def test_unknown_tool_names_are_kept_and_match_nothing():
    rule = Rule.parse("WebFetch(domain:example.com)", "deny", "permissions")
    assert not rule.known and rule.text == "WebFetch(domain:example.com)"
    p = policy(deny=["WebFetch", "NotebookEdit(x)"])
    assert [r.text for r in p.rules.ignored()] == ["WebFetch", "NotebookEdit(x)"]
    assert command(p, "ls").verdict == "ask"


def test_rules_know_claude_codes_names_as_agent_definitions_do():
    """One table of Claude Code's tool names (tools/names.py): `Task` and `Skill` rules name
    delegate and skill, as in agent definitions' `tools:` lists."""
    assert Rule.parse("Task", "deny", "permissions").tool == "delegate"
    assert Rule.parse("Skill", "deny", "permissions").tool == "skill"
    # background processes (Decision 86): BashOutput and KillShell
    assert Rule.parse("BashOutput", "deny", "permissions").tool == "process_output"
    assert Rule.parse("KillShell", "deny", "permissions").tool == "stop_process"
    assert Rule.parse("stop_process", "deny", "permissions").known


def test_approval_settings_stay_as_they_were_beside_rules():
    p = ApprovalPolicy(ApprovalSettings.model_validate({"allowCommands": ["git status $", "exact:ls -l"]}),
                       SessionApprovals(), roots=[ROOT])
    assert command(p, "git status").verdict == "allow"
    assert command(p, "git status -s").verdict == "ask"
    assert command(p, "ls -l").verdict == "allow" and command(p, "ls -la").verdict == "ask"


def test_permissions_lists_add_up_over_trusted_sources():
    from agent_lsp.settings import resolve
    settings, _ = resolve({"permissions": {"deny": ["Bash(curl:*)"], "allow": ["Bash(ls)"]}},
                          {"Permissions": {"deny": ["Read(./.env)"]}})
    assert settings.permissions.deny == ["Bash(curl:*)", "Read(./.env)"]
    assert settings.permissions.allow == ["Bash(ls)"]


# -- through run_task -------------------------------------------------------------------------

async def test_a_read_deny_hides_the_file_from_search_and_list_files(model, workspace):
    (workspace / ".env").write_text("TOKEN=hunter2\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".env").write_text("TOKEN=hunter3\n")
    model.add([tools_reply(call("search", id="s", pattern="TOKEN"), call("list_files", id="l"),
                           call("read_file", id="r", path=".env"), call("read_file", id="r2", path="sub/.env")),
               {"text": "ok"}])
    await run("look", model, workspace, permissions={"deny": ["Read(.env)"]})
    results = last_tool_results(model.requests[1])
    assert "hunter" not in results["s"] and results["s"].startswith("no matches"), results["s"]
    assert ".env" not in results["l"] and "calc.py" in results["l"], results["l"]
    assert results["r"].startswith("denied:") and results["r2"].startswith("denied:")


async def test_a_bare_deny_takes_the_tool_off_the_list(model, workspace):
    model.add({"text": "ok"})
    await run("look", model, workspace, permissions={"deny": ["Grep", "Bash"]})
    names = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert "search" not in names and "run_command" not in names and "read_file" in names


async def test_a_destructive_command_asks_and_says_why_even_when_every_policy_allows(model, workspace):
    (workspace / "build").mkdir()
    model.add([tools_reply(call("run_command", id="c", command="rm -rf build")), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)
    await run("clean", model, workspace, approver=approver, permissions={"allow": ["Bash(rm:*)"]},
              approval={"default": "allow", "allowCommands": ["rm"]})
    [request] = approver.requests
    assert request.must_ask and "destructive" in request.detail and "rm -r" in request.detail
    assert request.always_rule is None
    assert (workspace / "build").is_dir()


async def test_allow_always_puts_the_rule_in_force_and_saves_it(model, workspace):
    saved: list[str] = []

    async def save(rule: str) -> None:
        saved.append(rule)

    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import Session, run_task
    from agent_lsp.agent.loop.run_state import RunOptions
    from agent_lsp.agent.ports import RunPermissions
    from tests.unit.kit import Events, make_settings

    model.add([tools_reply(call("run_command", id="a", command="echo one")),
               tools_reply(call("run_command", id="b", command="echo one")), {"text": "ok"}])
    approver = ScriptedApprover(Decision.ALLOW_ALWAYS, default=Decision.DENY)
    events = Events()
    await run_task("go", session=Session(), settings=make_settings(model), workspace=DiskWorkspace([workspace]),
                   approver=approver, emit=events, options=RunOptions(permissions=RunPermissions(save_always=save)))
    assert saved == ["Bash(echo one)"]
    assert [r.always_rule for r in approver.requests] == ["Bash(echo one)"]  # the second was not asked
    assert any("saved the rule Bash(echo one)" in e.text for e in events.of("status"))


def test_always_is_not_offered_for_a_rule_with_invisible_characters():
    assert command(policy(), "echo hi\u202e").always is None
    assert command(policy(), "echo hi").always == "Bash(echo hi)"


def test_the_consent_prompt_lists_the_entries_exactly_with_invisible_characters_escaped():
    from agent_lsp.permissions.source import consent_prompt
    rule = Rule.parse("Bash(touch\u202e:*)", "allow", "/ws/.claude/settings.json", "project", ROOT)
    prompt = consent_prompt([rule])
    assert "\u202e" not in prompt and "Bash(touch\\u202e:*)" in prompt and "/ws/.claude/settings.json" in prompt


async def test_always_is_not_offered_for_a_command_holding_the_key(model, workspace):
    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.run import Session, run_task
    from agent_lsp.agent.loop.run_state import RunOptions
    from agent_lsp.agent.ports import RunPermissions
    from tests.unit.kit import API_KEY, Events, make_settings

    async def save(rule: str) -> None:
        raise AssertionError(f"saved {rule}")

    model.add([tools_reply(call("run_command", id="a", command=f"echo {API_KEY}")), {"text": "ok"}])
    approver = ScriptedApprover(Decision.ALLOW_ALWAYS)
    await run_task("go", session=Session(), settings=make_settings(model), workspace=DiskWorkspace([workspace]),
                   approver=approver, emit=Events(), options=RunOptions(permissions=RunPermissions(save_always=save)))
    assert [r.always_rule for r in approver.requests] == [None]
