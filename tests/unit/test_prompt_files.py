"""Issue 24 / Decisions 33-35: skills, commands and agents found where Claude Code and the Agent
Skills format keep them; malformed files named with their error (never a crash); user files
shadow project ones; `/name args` expanded; the skills block stable and capped."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lsp.agent.fs.front_matter import list_field, split_front_matter
from agent_lsp.agent.fs.prompt_files import discover, skill_files
from agent_lsp.agent.loop.slash import expand, pre_allowed, run_model
from agent_lsp.agent.tools.skill import BLOCK_LIMIT, skills_block
from agent_lsp.settings import ApprovalSettings, Settings


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill(root: Path, name: str, description: str | None = "Does a thing.", body: str = "Do it.", folder: str = ".claude") -> Path:
    front = f"---\nname: {name}\n" + (f"description: {description}\n" if description is not None else "") + "---\n"
    return write(root / folder / "skills" / name / "SKILL.md", front + body + "\n")


def test_skills_commands_and_agents_are_found_in_every_folder(home, workspace):
    skill(home, "pdf-forms", "Fill PDF forms.", folder=".agents")
    skill(workspace, "release-notes", "Write release notes.")
    write(workspace / ".claude" / "commands" / "review.md", "---\ndescription: Review a file\nargument-hint: [file]\n---\nReview $1.\n")
    write(workspace / ".agents" / "commands" / "git" / "commit.md", "Commit the staged files.\n")
    write(home / ".claude" / "commands" / "hello.md", "---\nmodel: sonnet\n---\nSay hello to $ARGUMENTS\n")
    write(workspace / ".claude" / "agents" / "reviewer.md",
          "---\nname: code-reviewer\ndescription: Reviews code\ntools: Read, Grep\nmodel: haiku\n---\nYou review code.\n")

    found = discover([workspace])

    assert sorted(found.skills) == ["pdf-forms", "release-notes"]
    assert found.skills["pdf-forms"].scope == "user" and found.skills["release-notes"].scope == "project"
    assert sorted(found.commands) == ["git:commit", "hello", "review"]
    review = found.commands["review"]
    assert review.description == "Review a file" and review.argument_hint == "[file]" and review.scope == "project"
    # No description: Claude Code's default, the prompt's first line.
    assert found.commands["git:commit"].description == "Commit the staged files."
    assert found.commands["hello"].model == "sonnet" and found.commands["hello"].scope == "user"
    agent = found.agents["code-reviewer"]
    assert agent.tools == ["Read", "Grep"] and agent.body.strip() == "You review code."
    assert found.problems == []
    rows = found.listing("skill")
    assert {r["name"] for r in rows} == {"pdf-forms", "release-notes"}
    assert all({"name", "description", "path", "scope"} <= set(r) for r in rows)


def test_malformed_files_are_problems_named_with_their_error_and_the_rest_still_works(home, workspace):
    write(workspace / ".claude" / "skills" / "bad-yaml" / "SKILL.md", "---\nname: bad-yaml\ndescription: \"unclosed\n---\nx\n")
    skill(workspace, "no-description", None)
    skill(workspace, "Bad_Name", "A skill with a bad name.")
    write(workspace / ".claude" / "skills" / "other" / "SKILL.md", "---\nname: not-other\ndescription: d\n---\n")
    write(workspace / ".claude" / "agents" / "x.md", "---\nname: x\n---\nno description\n")
    write(workspace / ".claude" / "commands" / "bad name.md", "x\n")
    write(workspace / ".claude" / "commands" / "open.md", "---\ndescription: never closed\n")
    write(workspace / ".claude" / "commands" / "list.md", "---\n- a\n- b\n---\nbody\n")
    (workspace / ".claude" / "commands" / "bin.md").write_bytes(b"\xff\xfe\x00bad")
    skill(workspace, "good", "Still works.")

    found = discover([workspace])

    assert list(found.skills) == ["good"] and found.commands == {} and found.agents == {}
    problems = {Path(p["path"]).relative_to(workspace).as_posix(): p["error"] for p in found.problems}
    assert "bad YAML in the front matter" in problems[".claude/skills/bad-yaml/SKILL.md"]
    assert "(line 4, column 1)" in problems[".claude/skills/bad-yaml/SKILL.md"]  # where the quote never closed
    assert "no `description`" in problems[".claude/skills/no-description/SKILL.md"]
    assert "bad skill name 'Bad_Name'" in problems[".claude/skills/Bad_Name/SKILL.md"]
    assert "differs from its folder's name" in problems[".claude/skills/other/SKILL.md"]
    assert "no `description`" in problems[".claude/agents/x.md"]
    assert "bad command name 'bad name'" in problems[".claude/commands/bad name.md"]
    assert "never closed" in problems[".claude/commands/open.md"]
    assert "not a mapping" in problems[".claude/commands/list.md"]
    assert "not UTF-8" in problems[".claude/commands/bin.md"]
    rows = {r["name"]: r for r in found.listing("skill")}
    assert rows["good"].get("error") is None and "error" in rows["no-description"]


def test_claude_codes_own_plain_front_matter_is_read_although_strict_yaml_rejects_it(home, workspace):
    # Claude Code's documentation writes these; YAML calls both lines errors.
    write(workspace / ".claude" / "commands" / "pr.md",
          "---\nargument-hint: [pr-number] [priority] [assignee]\ndescription: Review PR: with priority\n---\nReview $1\n")
    command = discover([workspace]).commands["pr"]
    assert command.argument_hint == "[pr-number] [priority] [assignee]"
    assert command.description == "Review PR: with priority"


def test_user_files_shadow_project_files_and_the_shadowed_one_is_listed(home, workspace):
    skill(home, "deploy", "The user's deploy.")
    skill(workspace, "deploy", "The repository's deploy.")
    write(home / ".claude" / "commands" / "ship.md", "user ship\n")
    write(workspace / ".claude" / "commands" / "ship.md", "project ship\n")

    found = discover([workspace])

    assert found.skills["deploy"].description == "The user's deploy."
    assert found.commands["ship"].body.strip() == "user ship"
    rows = [r for r in found.listing("skill") if r["name"] == "deploy"]
    assert [r["scope"] for r in rows] == ["user", "project"]
    assert rows[1]["error"].startswith("shadowed by ") and found.problems == []


def test_claude_config_dir_replaces_the_home_claude_folder(home, workspace, tmp_path, monkeypatch):
    config = tmp_path / "claude-config"
    write(config / "commands" / "mine.md", "mine\n")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    assert discover([workspace]).commands["mine"].scope == "user"


def test_a_project_file_linked_out_of_its_workspace_is_not_read(home, workspace, tmp_path):
    outside = write(tmp_path / "secret.md", "---\ndescription: secret\n---\nTOP SECRET\n")
    (workspace / ".claude" / "commands").mkdir(parents=True)
    (workspace / ".claude" / "commands" / "leak.md").symlink_to(outside)
    found = discover([workspace])
    assert "leak" not in found.commands
    assert "outside its workspace folder" in found.problems[0]["error"]


def test_a_skills_files_are_its_regular_files_inside_its_folder(home, workspace, tmp_path):
    path = skill(workspace, "forms", "Forms.")
    write(path.parent / "scripts" / "fill.py", "print(1)\n")
    write(path.parent / "reference.md", "ref\n")
    write(path.parent / ".git" / "config", "x\n")
    (path.parent / "escape").symlink_to(write(tmp_path / "outside.txt", "no"))
    found = discover([workspace]).skills["forms"]
    names = [p.relative_to(path.parent.resolve()).as_posix() for p in skill_files(found)]
    assert names == ["reference.md", "scripts/fill.py"]


# -- `/name args` (Decision 34) ---------------------------------------------------------------
def test_a_command_is_expanded_with_its_arguments(home, workspace):
    write(workspace / ".claude" / "commands" / "fix.md", "Fix issue #$1 with priority $2. All: $ARGUMENTS\n")
    write(workspace / ".claude" / "commands" / "plain.md", "Explain the code.\n")
    write(workspace / ".claude" / "commands" / "frontend" / "component.md", "Make a component.\n")
    skill(workspace, "notes", "Notes.", body="Write notes in the house style.")
    files = discover([workspace])

    fix = expand('/fix 123 "very high"', files)
    assert fix is not None and fix.prompt == 'Fix issue #123 with priority very high. All: 123 "very high"'
    assert fix.typed == '/fix 123 "very high"'
    plain = expand("/plain src/app.py", files)
    assert plain is not None and plain.prompt == "Explain the code.\n\nARGUMENTS: src/app.py"
    assert expand("/plain", files).prompt == "Explain the code."
    # a unique `/name` finds `ns:name`; a skill's body is the prompt
    assert expand("/component Button", files).name == "frontend:component"
    assert expand("/frontend:component", files).name == "frontend:component"
    assert expand("/notes", files).prompt == "Write notes in the house style."
    # unknown names and paths stay text
    assert expand("/etc/hosts is broken", files) is None
    assert expand("/unknown thing", files) is None
    assert expand("fix 1", files) is None
    # a quoting error splits at whitespace; `$1` inside the arguments stays as typed
    odd = expand("/fix 'unclosed $1", files)
    assert odd is not None and odd.prompt == "Fix issue #'unclosed with priority $1. All: 'unclosed $1"


def test_commands_come_before_skills_and_an_ambiguous_short_name_is_text(home, workspace):
    skill(workspace, "review", "A skill.", body="skill body")
    write(workspace / ".claude" / "commands" / "review.md", "command body\n")
    write(workspace / ".claude" / "commands" / "a" / "lint.md", "a\n")
    write(workspace / ".claude" / "commands" / "b" / "lint.md", "b\n")
    files = discover([workspace])
    assert expand("/review", files).prompt == "command body"
    assert expand("/lint", files) is None and expand("/a:lint", files).prompt == "a"


def test_a_commands_model_follows_decision_35():
    settings = Settings.model_validate({"model": "m", "modelAliases": {"sonnet": "big-model", "claude-opus-4-1": "huge"}})
    assert run_model("sonnet", "user", settings, set()) == "big-model"
    assert run_model("claude-opus-4-1", "project", settings, set()) == "huge"
    assert run_model("haiku", "user", settings, set()) is None  # the run's own model
    assert run_model("inherit", "user", settings, set()) is None
    assert run_model("claude-3-7-sonnet", "user", settings, set()) is None
    assert run_model("claude-3-7-sonnet", "user", settings, {"claude-3-7-sonnet"}) == "claude-3-7-sonnet"
    assert run_model("gpt-4o", "project", settings, set()) == "gpt-4o"
    assert run_model("replay:/tmp/x.jsonl", "project", settings, set()) is None
    assert run_model("replay:/tmp/x.jsonl", "user", settings, set()) == "replay:/tmp/x.jsonl"


def test_a_user_commands_allowed_tools_pre_allow_and_a_projects_do_not(home, workspace):
    body = "---\nallowed-tools: Bash(git add:*), Bash(git status), Edit, mcp__github__get_issue\n---\nCommit.\n"
    write(home / ".claude" / "commands" / "commit.md", body)
    write(workspace / ".claude" / "commands" / "push.md", body)
    files = discover([workspace])
    approval = ApprovalSettings.model_validate({"tools": {"write_file": "deny", "edit_file": "ask"}})
    allowed = pre_allowed(files.commands["commit"], approval)
    assert allowed is not None
    assert allowed.allow_commands == ["git add", "exact:git status"]
    assert allowed.tools == {"write_file": "deny", "edit_file": "allow", "github__get_issue": "allow"}
    assert pre_allowed(files.commands["push"], approval) is None


def test_list_fields_take_commas_spaces_and_yaml_lists():
    fields = split_front_matter("---\na: Read, Grep\nb: Bash(git add:*) Read\nc: [Read, Edit]\n---\n").fields
    assert list_field(fields, "a") == ["Read", "Grep"]
    assert list_field(fields, "b") == ["Bash(git add:*)", "Read"]
    assert list_field(fields, "c") == ["Read", "Edit"]


# -- the skills block (Decision 33) ------------------------------------------------------------
def test_the_skills_block_is_sorted_cut_capped_and_stable(home, workspace):
    for i in range(60):
        skill(workspace, f"skill-{i:02d}", "x" * 400)
    files = discover([workspace])
    block = skills_block(files.skills)
    assert len(block) <= BLOCK_LIMIT
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert lines[0].startswith("- skill-00: ") and len(lines[0]) == len("- skill-00: ") + 250
    assert lines == sorted(lines)
    assert "More skills (load one to see what it does): " in block  # past the cap: names only
    assert block == skills_block(discover([workspace]).skills)  # the same skills, the same bytes
    assert skills_block({}) == ""


# -- agents (Decision 35) ----------------------------------------------------------------------
def test_a_delegate_to_an_agent_that_can_write_is_a_side_effect_call(home, workspace):
    import json

    from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
    from agent_lsp.agent.loop.services import LoopTools
    from agent_lsp.agent.messages import ToolCall
    from agent_lsp.agent.tools.base import ToolBox, ToolContext
    from agent_lsp.agent.tools.delegate import narrow
    from agent_lsp.agent.tools.paths import PathGuard
    from agent_lsp.agent.tools.toolsets import main_tools, plan_tools

    write(workspace / ".claude" / "agents" / "w.md", "---\nname: writer\ndescription: w\ntools: Read, Write\n---\nw\n")
    write(workspace / ".claude" / "agents" / "r.md", "---\nname: looker\ndescription: r\ntools: Read, mcp__gh__*\n---\nr\n")
    found = discover([workspace])
    tools = main_tools(agents=found.agents)
    loop = LoopTools(ToolBox(tools), ToolContext(DiskWorkspace([workspace]), PathGuard([workspace])))

    def delegate(**arguments):
        return ToolCall("c", "delegate", json.dumps({"task": "t", **arguments}))

    assert loop.has_side_effects(delegate(agent="writer"))
    assert not loop.has_side_effects(delegate(agent="looker"))
    assert not loop.has_side_effects(delegate())
    assert not loop.has_side_effects(ToolCall("c", "delegate", "not json"))
    assert loop.has_side_effects(ToolCall("c", "edit_file", "{}"))
    assert [t.name for t in narrow(found.agents["writer"], tools)] == ["read_file", "write_file"]
    # in plan mode the parent has no writer, so neither has the agent
    assert [t.name for t in narrow(found.agents["writer"], plan_tools(agents=found.agents))] == ["read_file"]
    # the background processes are the main agent's (Decision 86), whatever the definition says
    write(workspace / ".claude" / "agents" / "b.md", "---\nname: bg\ndescription: b\ntools: Bash, BashOutput, KillShell\n---\nb\n")
    write(workspace / ".claude" / "agents" / "a.md", "---\nname: any\ndescription: a\n---\na\n")
    found = discover([workspace])
    assert [t.name for t in narrow(found.agents["bg"], tools)] == ["run_command"]
    assert not {"process_output", "stop_process"} & {t.name for t in narrow(found.agents["any"], tools)}


def test_shell_lines_and_file_references_stay_text_and_are_flagged(home, workspace):
    write(workspace / ".claude" / "commands" / "commit.md",
          "---\ndescription: Commit\n---\n## Context\n- Status: !`git status`\n- Read @src/app.py\nCommit $ARGUMENTS\n")
    files = discover([workspace])
    invocation = expand("/commit now", files)
    assert invocation is not None
    assert invocation.prompt == "## Context\n- Status: !`git status`\n- Read @src/app.py\nCommit now"  # nothing ran
    row = next(r for r in files.listing("command") if r["name"] == "commit")
    assert any("not run here" in n for n in row["notes"]) and any("@file" in n for n in row["notes"])
