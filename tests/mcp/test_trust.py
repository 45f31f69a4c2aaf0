"""The trust boundary: workspace-declared servers start only after consent and never see the API key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_lsp.mcp.config import McpDeclaration, from_user_settings, from_workspace
from agent_lsp.mcp.consent import ConsentStore
from agent_lsp.mcp.manager import McpManager

pytestmark = pytest.mark.timeout(60)
KEY = "OPENAI_API_KEY"
SECRET = "sk-mcp-test-0123456789abcdef"


class Asker:
    """The front end's consent callback: scripted answers, and what it was shown."""

    def __init__(self, *answers, sentinel: Path | None = None):
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []
        self.sentinel = sentinel

    async def __call__(self, decl: McpDeclaration, prompt: str):
        if self.sentinel is not None:
            assert not self.sentinel.exists(), "the server ran before the user answered"
        self.asked.append((decl.name, prompt))
        return self.answers.pop(0)


def declare(root: Path, servers: dict) -> list[McpDeclaration]:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    decls, problems = from_workspace([root])
    assert not problems
    return decls


def sentinel_server(helper_server: list[str], sentinel: Path, *extra: str) -> dict:
    return {"command": helper_server[0], "args": [*helper_server[1:], "--sentinel", str(sentinel), *extra]}


async def test_no_start_before_consent_and_deny_is_remembered(helper_server, workspace: Path, state_dir: Path):
    sentinel = workspace.parent / "sentinel"
    decls = declare(workspace, {"helper": sentinel_server(helper_server, sentinel)})
    store = ConsentStore(state_dir / "mcp-consent.json")
    ask = Asker("deny", sentinel=sentinel)
    manager = McpManager(decls, roots=[workspace], consent_store=store, ask_consent=ask)
    assert manager.status() == [{"name": "helper", "source": ".mcp.json", "state": "needs-consent", "tools": []}]
    assert await manager.tools() == []
    assert [name for name, _ in ask.asked] == ["helper"]
    prompt = ask.asked[0][1]
    assert str(workspace / ".mcp.json") in prompt and helper_server[1] in prompt and "--sentinel" in prompt
    assert manager.status()[0]["state"] == "denied" and not sentinel.exists()
    await manager.tools()
    assert len(ask.asked) == 1  # asked once
    await manager.aclose()

    # Another process with the same state dir: the answer holds, nobody is asked, nothing starts.
    nobody = Asker()
    again = McpManager(decls, roots=[workspace], consent_store=ConsentStore(state_dir / "mcp-consent.json"), ask_consent=nobody)
    assert again.status()[0]["state"] == "denied"
    assert await again.tools() == [] and nobody.asked == [] and not sentinel.exists()
    await again.aclose()

    # A changed declaration is a different one: asked again. Nobody to ask = not this time, not remembered.
    changed = declare(workspace, {"helper": sentinel_server(helper_server, sentinel, "--changed")})
    assert changed[0].fingerprint != decls[0].fingerprint
    unanswered = Asker(None, sentinel=sentinel)
    third = McpManager(changed, roots=[workspace], consent_store=store, ask_consent=unanswered)
    assert third.status()[0]["state"] == "needs-consent"
    assert await third.tools() == [] and len(unanswered.asked) == 1 and not sentinel.exists()
    assert third.status()[0]["state"] == "denied" and "nobody could be asked" in third.status()[0]["error"]
    assert store.get(str(workspace.resolve()), changed[0].fingerprint) is None
    no_asker = McpManager(changed, roots=[workspace], consent_store=store)  # e.g. headless without a TTY
    assert await no_asker.tools() == [] and not sentinel.exists()


async def test_allow_always_is_remembered_allow_is_not(helper_server, workspace: Path, state_dir: Path):
    sentinel = workspace.parent / "sentinel"
    decls = declare(workspace, {"helper": sentinel_server(helper_server, sentinel)})
    store = ConsentStore(state_dir / "consent.json")
    once = McpManager(decls, roots=[workspace], consent_store=store, ask_consent=Asker("allow", sentinel=sentinel))
    try:
        assert "helper__sleep" in {t.name for t in await once.tools()} and sentinel.exists()
    finally:
        await once.aclose()
    sentinel.unlink()

    always = Asker("allowAlways", sentinel=sentinel)  # "allow" was for that process only: asked again
    manager = McpManager(decls, roots=[workspace], consent_store=store, ask_consent=always)
    try:
        await manager.tools()
        assert len(always.asked) == 1 and manager.status()[0]["state"] == "running"
    finally:
        await manager.aclose()

    nobody = Asker()
    later = McpManager(decls, roots=[workspace], consent_store=store, ask_consent=nobody)
    try:
        assert later.status()[0]["state"] == "idle"
        await later.tools()
        assert nobody.asked == [] and later.status()[0]["state"] == "running"
    finally:
        await later.aclose()


async def test_workspace_policy_setting(helper_server, workspace: Path, state_dir: Path):
    sentinel = workspace.parent / "sentinel"
    decls = declare(workspace, {"helper": sentinel_server(helper_server, sentinel)})
    nobody = Asker()
    denied = McpManager(decls, roots=[workspace], workspace_policy="deny", consent_store=ConsentStore(state_dir / "c.json"), ask_consent=nobody)
    assert await denied.tools() == [] and denied.status()[0]["state"] == "denied" and not sentinel.exists()
    assert "mcp.workspaceServers" in denied.status()[0]["error"]
    allowed = McpManager(decls, roots=[workspace], workspace_policy="allow", ask_consent=nobody)
    try:
        assert await allowed.tools() and sentinel.exists() and nobody.asked == []
    finally:
        await allowed.aclose()


async def test_api_key_and_read_only_hint_by_source(third_party, workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """server-everything's get-env returns its whole environment: the workspace's copy never sees the key."""
    monkeypatch.setenv(KEY, SECRET)  # the manager's default environment is ours
    ws = declare(workspace, {"wsenv": {"command": third_party.everything, "args": ["stdio"], "env": {KEY: "planted", "PLAIN": "${env:HOME}"}},
                             "wsask": {"command": third_party.everything, "args": ["stdio"], "env": {"LEAK": "${env:" + KEY + "}"}}})
    user, problems = from_user_settings({
        "plain": {"command": third_party.everything, "args": ["stdio"]},
        "named": {"command": third_party.everything, "args": ["stdio"], "env": {KEY: "${env:" + KEY + "}"}},
        "wsenv": {"command": "shadowed-by-nothing"},
    })
    user = [d for d in user if d.name != "wsenv"]
    manager = McpManager([*ws, *user], roots=[workspace], workspace_policy="allow")
    try:
        tools = {t.name: t for t in await manager.tools()}
        states = {s["name"]: s for s in manager.status()}
        assert {n: s["state"] for n, s in states.items()} == {"wsenv": "running", "wsask": "failed", "plain": "running", "named": "running"}, states
        assert KEY in states["wsask"]["error"] and SECRET not in states["wsask"]["error"]  # asked for the key: not started

        async def environment(server: str) -> dict:
            tool = tools[f"{server}__get-env"]
            return json.loads(await (await tool.prepare({}, None)).execute())

        leaked = await environment("wsenv")
        assert KEY not in leaked and leaked["PLAIN"]
        assert SECRET not in json.dumps(leaked)
        assert any(KEY in p for p in manager.problems)
        assert KEY not in await environment("plain")  # the user's server does not inherit it...
        assert (await environment("named"))[KEY] == SECRET  # ...unless it names it
        # readOnlyHint counts only from the user's own configuration.
        assert tools["plain__echo"].read_only and not tools["wsenv__echo"].read_only
    finally:
        await manager.aclose()


async def test_input_variables_and_name_clashes(helper_server, workspace: Path, state_dir: Path):
    sentinel = workspace.parent / "sentinel"
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "mcp.json").write_text(json.dumps({
        "inputs": [{"id": "token", "type": "promptString", "password": True}],
        "servers": {"needs": {**sentinel_server(helper_server, sentinel), "env": {"TOKEN": "${input:token}"}}, "dup": {"command": "ws-dup"}},
    }))
    ws, _ = from_workspace([workspace])
    user, _ = from_user_settings({"dup": {"command": helper_server[0], "args": helper_server[1:]}})
    manager = McpManager([*ws, *user], roots=[workspace], workspace_policy="allow")
    try:
        await manager.tools()
        status = {s["name"]: s for s in manager.status()}
        assert status["needs"]["state"] == "failed" and "token" in status["needs"]["error"] and not sentinel.exists()
        assert status["dup"]["source"] == "user" and status["dup"]["state"] == "running"
        assert any("`dup`" in p and "ignored" in p for p in manager.problems)
    finally:
        await manager.aclose()


async def test_concurrent_runs_ask_once(helper_server, workspace: Path, state_dir: Path):
    import asyncio

    sentinel = workspace.parent / "sentinel"
    decls = declare(workspace, {"helper": sentinel_server(helper_server, sentinel)})
    asked = []

    async def slow_deny(decl, prompt):
        asked.append(decl.name)
        await asyncio.sleep(0.2)
        return "deny"

    manager = McpManager(decls, roots=[workspace], consent_store=ConsentStore(state_dir / "c.json"), ask_consent=slow_deny)
    assert await asyncio.gather(manager.tools(), manager.tools()) == [[], []]
    assert asked == ["helper"] and not sentinel.exists()
