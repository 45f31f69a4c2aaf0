"""The Emacs client keeps to agent-lsp's own connection (issue 22): loading it installs no
advice on any function, starting its server installs none either, and another language
server under Eglot in the same Emacs behaves exactly as without the package (its
showMessageRequest and applyEdit are handled by stock Eglot: its prompt and its y/n
question are asked, its answers sent at once). And the private Eglot symbols the client
still uses are only those Eglot offers no public way for, each named in a comment.

A real `emacs -q --batch` (Debian 12: Emacs 28 + Eglot 1.9), a real pygls language server
as the other server, and the real agent-lsp server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from editor_env import agent_lsp_command, require

REPO = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO / "editor-clients" / "emacs"
EMACS = shutil.which("emacs")

require(EMACS, "emacs", "apt-get install -y --no-install-recommends emacs-nox elpa-eglot")

# A plain language server: its `probe` command asks the editor to pick an action
# (window/showMessageRequest) and to apply an edit (workspace/applyEdit), and returns the
# answers it got.
PLAIN_SERVER = r'''
import sys
from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

server = LanguageServer("plain-ls", "1.0")


@server.command("probe")
async def probe(ls, *args):
    uri = args[0] if args and isinstance(args[0], str) else args[0][0]
    choice = await ls.window_show_message_request_async(t.ShowMessageRequestParams(
        type=t.MessageType.Info, message="plain-ls: pick one",
        actions=[t.MessageActionItem(title="First"), t.MessageActionItem(title="Second")]))
    edit = await ls.workspace_apply_edit_async(t.ApplyWorkspaceEditParams(
        edit=t.WorkspaceEdit(changes={uri: [t.TextEdit(
            range=t.Range(start=t.Position(line=0, character=0),
                          end=t.Position(line=0, character=0)),
            new_text="# plain\n")]})))
    return {"choice": choice.title if choice else None, "applied": edit.applied}


server.start_io()
'''

SCENARIO = r''';;; -*- lexical-binding: t; -*-
(require 'cl-lib)
(require 'json)
(require 'eglot)

(defvar t-out nil)
(defvar t-prompts nil)
(defun t-put (key value) (setq t-out (plist-put t-out key value)))

(defun t-advised ()
  "Names of every function that carries advice, sorted."
  (let (found)
    (mapatoms (lambda (s)
                (when (and (fboundp s) (advice--p (symbol-function s)))
                  (push (symbol-name s) found))))
    (vconcat (sort found #'string<))))

(setq confirm-kill-processes nil make-backup-files nil create-lockfiles nil
      auto-save-default nil enable-local-variables nil)
;; what a person answers: the second action, and y to Eglot's question
(setq completing-read-function
      (lambda (prompt _collection &rest _) (push prompt t-prompts) "Second"))
(defalias 'y-or-n-p (lambda (prompt) (push prompt t-prompts) t))

(defun t-main ()
  (t-put :advised-before (t-advised))
  (when (getenv "T_LOAD")
    (add-to-list 'load-path (getenv "T_CLIENT"))
    (require 'agent-lsp)
    (t-put :advised-after-load (t-advised)))
  (find-file (getenv "T_FILE"))
  (let ((eglot-sync-connect t))
    (eglot '(python-mode) (project-current) 'eglot-lsp-server
           (list (getenv "T_PYTHON") (getenv "T_PLAIN")) "python"))
  (let ((other (eglot-current-server)))
    (unless other (error "The plain server did not start"))
    (when (getenv "T_LOAD")
      (setq agent-lsp-server-command (append (json-parse-string (getenv "T_AGENT")) nil))
      (let ((agent (agent-lsp-start)))
        (t-put :agent-running (and agent (jsonrpc-running-p agent) t))
        (t-put :agent-beside (and agent (not (eq agent other))
                                  (eq (eglot-current-server) other) t))))
    (let ((done nil) (result nil))
      (jsonrpc-async-request
       other :workspace/executeCommand
       (list :command "probe" :arguments (vector (getenv "T_URI")))
       :success-fn (lambda (r) (setq done t result r))
       :error-fn (lambda (e) (setq done t result (list :error (format "%S" e))))
       :timeout-fn (lambda () (setq done t result '(:error "timeout")))
       :timeout 20)
      (let ((end (+ (float-time) 25)))
        (while (and (not done) (< (float-time) end))
          (accept-process-output nil 0.05)))
      (t-put :probe result))
    (t-put :other-alive (and (jsonrpc-running-p other) t))
    ;; both servers up (with the package): what carries advice now
    (t-put :advised-running (t-advised))
    (t-put :buffer (buffer-substring-no-properties (point-min) (point-max)))))

(condition-case err (t-main)
  (error (t-put :error (error-message-string err))))
(t-put :prompts (vconcat (reverse t-prompts)))
(with-temp-file (getenv "T_RESULT")
  (insert (json-serialize t-out :null-object nil :false-object :json-false)))
(kill-emacs 0)
'''


def run_plain(tmp_path: Path, *, load: bool) -> dict[str, Any]:
    """The scenario in a fresh Emacs, with the package loaded (and agent-lsp started
    beside the plain server) or not."""
    # the same paths in both runs, so that their prompts compare equal
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    ws = run / "ws"
    (ws / ".git").mkdir(parents=True)
    target = ws / "a.py"
    target.write_text("x = 1\n", encoding="utf-8")
    plain = run / "plain_ls.py"
    plain.write_text(PLAIN_SERVER, encoding="utf-8")
    scenario = run / "scenario.el"
    scenario.write_text(SCENARIO, encoding="utf-8")
    result = run / "result.json"
    home = run / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_LSP_", "OPENAI_", "XDG_", "EMACS"))}
    env.update({
        "HOME": str(home), "OPENAI_API_KEY": "test",
        "AGENT_LSP_STATE_DIR": str(run / "agent-state"),
        "T_CLIENT": str(CLIENT_DIR), "T_FILE": str(target), "T_URI": target.as_uri(),
        "T_PYTHON": sys.executable, "T_PLAIN": str(plain), "T_RESULT": str(result),
        "T_AGENT": json.dumps(agent_lsp_command("serve", "--stdio")),
    })
    if load:
        env["T_LOAD"] = "1"
    # -q, not -Q: -Q skips site-start, which puts Debian's elpa-eglot on the load path
    proc = subprocess.run([EMACS, "-q", "--batch", "-l", str(scenario)], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert result.exists(), proc.stderr[-4000:]
    data = json.loads(result.read_text(encoding="utf-8"))
    assert "error" not in data, (data, proc.stderr[-4000:])
    return data


def test_another_server_behaves_as_without_the_package_and_nothing_is_advised(tmp_path):
    without = run_plain(tmp_path, load=False)
    with_package = run_plain(tmp_path, load=True)

    # the package installs no advice at all: not when loaded, not when its server starts
    # (Eglot and the modes a file loads advise some functions of their own: the same with or
    # without the package)
    assert with_package["advised-after-load"] == with_package["advised-before"]
    assert with_package["advised-running"] == without["advised-running"]
    assert with_package["agent-running"] is True and with_package["agent-beside"] is True

    # the plain server: stock Eglot's answers, prompt and y/n question, with or without
    for data in (without, with_package):
        assert data["probe"] == {"choice": "Second", "applied": True}, data
        assert data["buffer"] == "# plain\nx = 1\n", data
        assert data["other-alive"] is True
        assert any("plain-ls: pick one" in p for p in data["prompts"]), data["prompts"]
        assert any("Server wants to edit" in p for p in data["prompts"]), data["prompts"]
    for key in ("probe", "buffer", "prompts"):
        assert with_package[key] == without[key], key


# What Eglot offers no public way to do (agent-lsp-base.el names each, and why). The last
# two serve only Eglot < 1.16, which has no `eglot-path-to-uri'/`eglot-uri-to-path'.
ALLOWED_PRIVATE = {
    "eglot--project", "eglot--server-info", "eglot--capabilities",
    "eglot--signal-textDocument/didChange", "eglot--versioned-identifier",
    "eglot--path-to-uri", "eglot--uri-to-path",
    # code intelligence beside another server (agent-lsp-code-intel.el)
    "eglot--major-modes", "eglot--cached-server",
}


def test_private_eglot_symbols_are_only_those_without_a_public_way():
    used: dict[str, set[str]] = {}
    for src in sorted(CLIENT_DIR.glob("*.el")):
        for name in re.findall(r"eglot--[A-Za-z0-9/_-]*[A-Za-z0-9]", src.read_text(encoding="utf-8")):
            used.setdefault(name, set()).add(src.name)
    assert set(used) <= ALLOWED_PRIVATE, {k: v for k, v in used.items() if k not in ALLOWED_PRIVATE}
    base = (CLIENT_DIR / "agent-lsp-base.el").read_text(encoding="utf-8")
    comments = "\n".join(line for line in base.splitlines() if line.lstrip().startswith(";"))
    for name in used:
        assert f"`{name}'" in comments, f"{name} is not named in agent-lsp-base.el's comment"
