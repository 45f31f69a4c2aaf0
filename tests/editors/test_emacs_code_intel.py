"""CONTRACT "Code intelligence", Source 1 in a real Emacs (28 + eglot 1.9): when agent-lsp runs
beside the buffer's own eglot server (Decision 39, the README's "beside it" mode), the client
advertises `codeIntel` and answers `agentLsp/codeIntel` from that server (a real
jedi-language-server); when agent-lsp manages the buffers itself it does not advertise it (its
own started servers answer). The server is agent-lsp's own with a probe command
(tests/e2e/code_intel_probe.py) that asks its editor source as the code-intel tools do."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_emacs as te  # noqa: E402

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
'''

HELPERS = r"""
(defun t-uri (rel) (agent-lsp--path-to-uri (expand-file-name rel t-root)))
(defun t-probe (method params rel)
  (agent-lsp--call t-server "agentLspTest.codeIntel"
                   (list :method method :params params :path (expand-file-name rel t-root))))
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "lib.py").write_text(LIB)
    (ws / "app.py").write_text(APP)
    return ws


@pytest.fixture
def model():
    with te.ScriptedModelServer() as srv:
        yield srv


def run(tmp_path: Path, workspace: Path, model, scenario: str, probe: bool = True) -> te.EmacsResult:
    """With `probe`, the probe server; else agent-lsp's own on the scripted model."""
    env = {"EMACS_TEST_NO_START": "1"}
    if probe:
        env["EMACS_TEST_COMMAND"] = json.dumps([sys.executable, str(PROBE)])
    return te.run_emacs(tmp_path, workspace, model, f"(defvar t-root {json.dumps(str(workspace))})\n"
                        + HELPERS + scenario, open_file="lib.py", extra_env=env)


def test_emacs_beside_jedi_answers_code_intel(tmp_path, workspace, model):
    """Beside jedi: references (Greeter.greet's use, not Other.greet, the string or the
    comment), a rename over both files, a definition asked from app.py (not open: visited,
    so eglot manages it), the outline; the health check names the source."""
    res = run(tmp_path, workspace, model, rf"""
        (set-buffer t-buffer)
        (let ((eglot-sync-connect t))
          (eglot '(python-mode) (project-current) 'eglot-lsp-server (list "{JEDI}") "python"))
        (t-wait 20 (lambda () (eglot-current-server)) "jedi")
        (setq t-server (agent-lsp-start))
        (let ((pos (list :line 1 :character 8))
              (doc (list :uri (t-uri "lib.py"))))
          (t-set :refs (t-probe "textDocument/references"
                                (list :textDocument doc :position pos
                                      :context (list :includeDeclaration :json-false)) "lib.py"))
          (t-set :rename (t-probe "textDocument/rename"
                                  (list :textDocument doc :position pos :newName "salute") "lib.py"))
          (t-set :app-open-before (and (find-buffer-visiting (expand-file-name "app.py" t-root)) t))
          (t-set :definition (t-probe "textDocument/definition"
                                      (list :textDocument (list :uri (t-uri "app.py"))
                                            :position (list :line 3 :character 8)) "app.py"))
          (t-set :app-server (with-current-buffer (find-buffer-visiting (expand-file-name "app.py" t-root))
                               (and (eglot-managed-p) (jsonrpc-name (eglot-current-server)))))
          (t-set :symbols (t-probe "textDocument/documentSymbol" (list :textDocument doc) "lib.py"))
          (t-set :health (format "%S" (agent-lsp--code-intel-health t-server))))
    """)
    assert not res.errors, res.explain()
    v = res.values
    refs = v["refs"]["result"]
    app_refs = [(r["range"]["start"]["line"], r["range"]["start"]["character"])
                for r in refs if r["uri"].endswith("/app.py")]
    assert app_refs == [(3, 8)], refs
    assert not any(r["uri"].endswith("/lib.py") and r["range"]["start"]["line"] == 6 for r in refs), refs
    edit = v["rename"]["result"]
    touched = {c["textDocument"]["uri"].rsplit("/", 1)[1] for c in edit.get("documentChanges") or []} | \
        {u.rsplit("/", 1)[1] for u in (edit.get("changes") or {})}
    assert touched == {"lib.py", "app.py"}, edit
    assert v["app-open-before"] is None
    definition = v["definition"]["result"]
    assert definition, (v["definition"], v["app-server"])
    first = definition[0] if isinstance(definition, list) else definition
    assert (first.get("uri") or first.get("targetUri")).endswith("/lib.py"), definition
    assert v["app-server"] and "agent-lsp" not in v["app-server"], v["app-server"]
    assert {"Greeter", "Other"} <= {s["name"] for s in v["symbols"]["result"]}
    assert "codeIntel advertised: agent-lsp runs beside" in v["health"], v["health"]


def test_emacs_managing_the_buffers_does_not_advertise_code_intel(tmp_path, workspace, model):
    """No other eglot server: agent-lsp manages the python buffers, the client does not
    advertise codeIntel (Decision 39: agent-lsp's own started servers answer)."""
    res = run(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-server (agent-lsp-start))
        (t-set :probe (t-probe "textDocument/hover"
                               (list :textDocument (list :uri (t-uri "lib.py"))
                                     :position (list :line 0 :character 6)) "lib.py"))
        (t-set :health (format "%S" (agent-lsp--code-intel-health t-server)))
    """)
    assert not res.errors, res.explain()
    assert res.values["probe"] == {"source": None}, res.values
    assert "manages these buffers itself" in res.values["health"]


def test_emacs_agent_finds_references_and_renames_through_jedi(tmp_path, workspace, model):
    """Beside jedi: the model's find_references is answered by jedi (Greeter.greet's call in
    app.py), its rename_symbol is one approval and lands in both files."""
    model.add("Rename greet", [
        {"tool_calls": [{"id": "refs", "name": "find_references",
                         "arguments": {"path": "lib.py", "line": 2, "symbol": "greet"}}]},
        {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                         "arguments": {"path": "lib.py", "line": 2, "symbol": "greet", "newName": "salute"}}]},
        {"text": "Renamed."},
    ])
    res = run(tmp_path, workspace, model, rf"""
        (set-buffer t-buffer)
        (let ((eglot-sync-connect t))
          (eglot '(python-mode) (project-current) 'eglot-lsp-server (list "{JEDI}") "python"))
        (t-wait 20 (lambda () (eglot-current-server)) "jedi")
        (setq t-server (agent-lsp-start))
        (setq t-approval-answer "Allow")
        (agent-lsp-run "Rename greet of Greeter to salute")
        (t-wait 30 #'t-stop-event "the stop event")
    """, probe=False)
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    requests = model.requests_for("Rename greet")
    refs = next(m["content"] for m in requests[1]["messages"] if m.get("tool_call_id") == "refs")
    assert "app.py:4:9" in refs, refs
    assert len(res.data["prompts"]) == 1, res.data["prompts"]
    assert (workspace / "lib.py").read_text().count("def salute(self, name)") == 1
    assert "def greet(self):" in (workspace / "lib.py").read_text()
    assert 'g.salute("a")' in (workspace / "app.py").read_text()
