"""ACP: a `rename_symbol` approval shows one `diff` content item per file it changes (path, old
and new text), answered by a language server agent-lsp starts itself (basedpyright)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.acp.conftest import model_settings
from tests.langservers.conftest import tool, wait_gone
from tests.unit.kit import call, last_tool_results, tools_reply

PRICES = "def price_of(item: str) -> int:\n    return len(item)\n"
SHOP = "from prices import price_of\n\n\ndef shop() -> int:\n    return price_of('shop')\n"


def test_a_rename_approval_shows_a_diff_per_file(connect, model, workspace: Path):
    (workspace / "prices.py").write_text(PRICES)
    (workspace / "shop.py").write_text(SHOP)
    model.add("rename", [
        tools_reply(call("rename_symbol", "r1", path="prices.py", line=1, symbol="price_of", newName="cost_of")),
        {"text": "renamed"},
    ])
    servers = {"auto": False, "servers": {"bp": {"command": [tool("basedpyright-langserver"), "--stdio"],
                                                  "extensions": [".py"]}}}
    marker = uuid.uuid4().hex
    client = connect(model_settings(model, languageServers=servers), env={"AGENT_LSP_TEST_MARK": marker})
    client.initialize()
    session_id = client.new_session(workspace)
    client.permissions("allow")
    assert client.prompt(session_id, "rename: price_of to cost_of", timeout=90)["stopReason"] == "end_turn"
    assert last_tool_results(model.requests_for("rename")[1])["r1"].startswith("applied:")
    [permission] = client.of("permission")
    diffs = [c for c in permission["params"]["toolCall"]["content"] if c.get("type") == "diff"]
    assert sorted(d["path"] for d in diffs) == sorted(str((workspace / n).resolve()) for n in ("prices.py", "shop.py"))
    by_name = {Path(d["path"]).name: d for d in diffs}
    assert by_name["prices.py"]["oldText"] == PRICES
    assert by_name["prices.py"]["newText"] == PRICES.replace("price_of", "cost_of")
    assert by_name["shop.py"]["oldText"] == SHOP and by_name["shop.py"]["newText"] == SHOP.replace("price_of", "cost_of")
    assert (workspace / "shop.py").read_text() == SHOP.replace("price_of", "cost_of")
    client.close()
    assert wait_gone(marker) == []
