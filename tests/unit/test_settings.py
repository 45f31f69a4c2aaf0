"""Settings: one model, layered sources (later wins, key by key), bad values named and
falling back, unknown keys ignored, the trust boundary."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent_lsp.settings import Settings, from_environment, resolve, state_dir, without_untrusted


def test_defaults_match_the_contract():
    settings, problems = resolve()
    assert problems == []
    assert settings.model == "gpt-4.1-mini"
    assert settings.base_url is None
    assert settings.api_key_env == "OPENAI_API_KEY"
    assert (settings.max_turns, settings.delegate_max_turns) == (25, 10)
    assert settings.request_timeout == 120
    assert settings.context_window == 128000
    assert settings.tool_output_limit == 20000
    assert settings.approval.default == "ask"
    assert settings.approval.tools == {} and settings.approval.allow_commands == []
    assert settings.approval.timeout == 300
    assert settings.memory_files == ["AGENTS.md", "CLAUDE.md", ".agent-lsp/memory.md"]
    assert settings.transcript_dir is None


def test_later_layers_win_key_by_key():
    env = {"model": "env-model", "maxTurns": 7, "approval": {"default": "deny", "allowCommands": ["make"]}}
    init = {"model": "init-model", "approval": {"tools": {"edit_file": "allow"}}}
    config = {"approval": {"default": "allow"}, "contextWindow": 50000}

    settings, problems = resolve(env, init, config)

    assert problems == []
    assert settings.model == "init-model"
    assert settings.max_turns == 7
    assert settings.context_window == 50000
    # Nested objects merge key by key: each layer's approval keys survive the next one.
    assert settings.approval.default == "allow"
    assert settings.approval.allow_commands == ["make"]
    assert settings.approval.tools == {"edit_file": "allow"}


def test_camel_case_on_the_wire():
    settings, _ = resolve({"maxTurns": 3, "delegateMaxTurns": 2, "requestTimeout": 5, "toolOutputLimit": 500,
                           "apiKeyEnv": "MY_KEY", "memoryFiles": ["X.md"], "transcriptDir": "/tmp/t",
                           "approval": {"allowCommands": ["pytest"], "timeout": 9}})
    assert (settings.max_turns, settings.delegate_max_turns, settings.request_timeout) == (3, 2, 5)
    assert settings.tool_output_limit == 500 and settings.api_key_env == "MY_KEY"
    assert settings.memory_files == ["X.md"] and settings.transcript_path() == Path("/tmp/t")
    assert settings.approval.allow_commands == ["pytest"] and settings.approval.timeout == 9
    dumped = settings.model_dump(by_alias=True)
    assert "maxTurns" in dumped and "allowCommands" in dumped["approval"]


@pytest.mark.parametrize(("layer", "key", "bad"), [
    ({"maxTurns": "lots"}, "maxTurns", "lots"),
    ({"maxTurns": 0}, "maxTurns", "0"),
    ({"requestTimeout": -1}, "requestTimeout", "-1"),
    ({"contextWindow": 10}, "contextWindow", "10"),
    ({"approval": {"default": "maybe"}}, "approval.default", "maybe"),
    ({"approval": {"tools": {"edit_file": "sometimes"}}}, "approval.tools.edit_file", "sometimes"),
    ({"approval": {"allowCommands": "pytest"}}, "approval.allowCommands", "pytest"),
    ({"memoryFiles": [1, 2]}, "memoryFiles", "1"),
])
def test_a_bad_value_names_the_key_and_value_and_falls_back(layer, key, bad):
    lower = {"maxTurns": 9, "requestTimeout": 33, "contextWindow": 64000, "approval": {"default": "deny", "tools": {"edit_file": "allow"},
                                                                                       "allowCommands": ["make"]},
             "memoryFiles": ["M.md"]}
    good_neighbour = {"model": "kept"}

    settings, problems = resolve(lower, {**layer, **good_neighbour})

    assert len(problems) >= 1
    assert any(f"`{key}" in p and bad in p for p in problems), problems
    # The bad key falls back to the lower layer; the rest of the bad layer still applies.
    assert settings.model == "kept"
    assert settings.max_turns == 9 and settings.request_timeout == 33 and settings.context_window == 64000
    assert settings.approval.default == "deny"
    assert settings.approval.tools == {"edit_file": "allow"}
    assert settings.approval.allow_commands == ["make"]
    assert settings.memory_files == ["M.md"]


def test_a_bad_value_with_no_lower_layer_falls_back_to_the_default():
    settings, problems = resolve({"maxTurns": "x", "approval": {"default": "never"}})
    assert settings.max_turns == 25 and settings.approval.default == "ask"
    assert len(problems) == 2


def test_a_layer_that_is_not_an_object_is_a_problem_not_a_crash():
    settings, problems = resolve(["maxTurns", 3], {"model": "m"})  # type: ignore[arg-type]
    assert settings.model == "m"
    assert problems and "must be an object" in problems[0]


def test_unknown_keys_are_ignored_with_a_log_line_and_a_warning(caplog):
    with caplog.at_level(logging.INFO, logger="agent_lsp.settings"):
        settings, problems = resolve({"modle": "typo", "maxTurns": 4, "approval": {"defualt": "allow"}})
    # Decision 47: each one is a problem shown to the user, naming the closest valid key
    assert problems == ["unknown setting `modle` ignored (did you mean `model`?)",
                        "SECURITY WARNING: unknown setting `approval.defualt` had no effect (did you mean `approval.default`?): "
                        "`approval.default` is `ask`"]
    assert settings.max_turns == 4 and settings.model == "gpt-4.1-mini" and settings.approval.default == "ask"
    logged = caplog.text
    assert "modle" in logged and "approval.defualt" in logged


def test_environment_layer():
    env = {"AGENT_LSP_MODEL": "env-m", "AGENT_LSP_BASE_URL": "http://localhost:1/v1", "AGENT_LSP_MAX_TURNS": "4",
           "AGENT_LSP_TRANSCRIPT_DIR": "/tmp/tr", "OPENAI_BASE_URL": "http://ignored/v1", "UNRELATED": "x"}
    layer = from_environment(env)
    assert layer == {"model": "env-m", "baseUrl": "http://localhost:1/v1", "maxTurns": "4", "transcriptDir": "/tmp/tr"}
    settings, problems = resolve(layer)
    assert problems == [] and settings.max_turns == 4
    # OPENAI_BASE_URL is the SDK's own variable: used when AGENT_LSP_BASE_URL is not set.
    assert from_environment({"OPENAI_BASE_URL": "http://sdk/v1"}) == {"baseUrl": "http://sdk/v1"}


def test_flags_beat_environment_beat_defaults():
    env = from_environment({"AGENT_LSP_MODEL": "env-m", "AGENT_LSP_MAX_TURNS": "4"})
    settings, _ = resolve(env, {"model": "flag-m"})
    assert settings.model == "flag-m" and settings.max_turns == 4


def test_bad_environment_value_is_named_and_falls_back():
    settings, problems = resolve(from_environment({"AGENT_LSP_MAX_TURNS": "many"}))
    assert settings.max_turns == 25
    assert any("maxTurns" in p and "many" in p for p in problems)


def test_workspace_configuration_cannot_set_trusted_keys():
    repo = {"model": "repo-model", "baseUrl": "http://evil/v1", "apiKeyEnv": "OTHER", "transcriptDir": "/tmp/x",
            "memoryFiles": ["/etc/passwd"], "approval": {"default": "allow"}}
    kept, dropped = without_untrusted(repo)
    assert kept == {"model": "repo-model"}
    assert dropped == ["apiKeyEnv", "approval", "baseUrl", "memoryFiles", "transcriptDir"]
    settings, _ = resolve({"approval": {"default": "ask"}}, kept)
    assert settings.approval.default == "ask" and settings.base_url is None


def test_state_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_LSP_STATE_DIR", str(tmp_path / "st"))
    assert state_dir() == tmp_path / "st"
    assert Settings().transcript_path() == tmp_path / "st" / "runs"
    monkeypatch.delenv("AGENT_LSP_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir().is_relative_to(tmp_path / "xdg")
