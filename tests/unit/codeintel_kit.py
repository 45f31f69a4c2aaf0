"""Code-intel test kit: a CodeIntelSource that answers with LSP JSON recorded from a real
language server (tests/unit/data/codeintel_basedpyright.json, basedpyright-langserver asked
about the small project stored there), and one scripted answer by answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_lsp.agent.ports import CodeIntelError

DATA = Path(__file__).parent / "data" / "codeintel_basedpyright.json"


def _swap(value: Any, old: str, new: str) -> Any:
    return json.loads(json.dumps(value).replace(old, new))


class RecordedSource:
    """Answers a request exactly as recorded (params compared after the project's root URI is
    put back in); a request never recorded answers None and is kept in `misses`."""

    def __init__(self, root: Path, *, name: str = "basedpyright", suffixes: tuple[str, ...] = (".py",),
                 encoding: str = "utf-16"):
        data = json.loads(DATA.read_text(encoding="utf-8"))
        self.root = root
        self.name = name
        self.suffixes = suffixes
        self.encoding = encoding
        uri = root.resolve().as_uri()
        self.responses = [_swap(r, "file://ROOT", uri) for r in data["responses"]]
        self.synced: list[tuple[Path, str]] = []
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.misses: list[tuple[str, dict[str, Any]]] = []

    @staticmethod
    def write_project(root: Path) -> None:
        data = json.loads(DATA.read_text(encoding="utf-8"))
        for rel, text in data["files"].items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")

    def handles(self, path: Path) -> bool:
        return path.suffix in self.suffixes

    def position_encoding(self, path: Path) -> str:
        return self.encoding

    async def sync(self, path: Path, text: str) -> None:
        self.synced.append((path, text))

    async def request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        self.asked.append((method, params))
        for r in self.responses:
            if r["method"] == method and r["params"] == params:
                return r["result"]
        self.misses.append((method, params))
        return None


class ScriptedSource:
    """Answers each method from a dict (a callable gets the params); an Exception value is
    raised as CodeIntelError."""

    def __init__(self, answers: dict[str, Any], *, name: str = "scripted", suffixes: tuple[str, ...] = (".py",),
                 encoding: str = "utf-16"):
        self.answers = answers
        self.name = name
        self.suffixes = suffixes
        self.encoding = encoding
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.synced: list[tuple[Path, str]] = []

    def handles(self, path: Path) -> bool:
        return path.suffix in self.suffixes

    def position_encoding(self, path: Path) -> str:
        return self.encoding

    async def sync(self, path: Path, text: str) -> None:
        self.synced.append((path, text))

    async def request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        self.asked.append((method, params))
        answer = self.answers.get(method)
        if callable(answer):
            answer = answer(params)
        if isinstance(answer, Exception):
            raise CodeIntelError(str(answer))
        return answer


class LanguageServerSource:
    """A real language server (basedpyright by default) behind the CodeIntelSource port, for the
    tests and the benchmark until agent-lsp's own started servers answer there: pygls's client,
    didOpen/didChange on sync, every request's params structured for lsprotocol and its result
    given back as JSON."""

    def __init__(self, root: Path, command: list[str] | None = None, *, name: str = "basedpyright"):
        import shutil
        import sys

        self.root = root.resolve()
        exe = shutil.which("basedpyright-langserver", path=str(Path(sys.executable).parent)) or "basedpyright-langserver"
        self.command = command or [exe, "--stdio"]
        self.name = name
        self.client: Any = None
        self.versions: dict[Path, int] = {}
        self.texts: dict[Path, str] = {}
        self.encoding = "utf-16"

    async def start(self) -> LanguageServerSource:
        from lsprotocol import types as t
        from pygls.lsp.client import LanguageClient

        self.client = LanguageClient("agent-lsp-tests", "0")
        await self.client.start_io(*self.command, cwd=str(self.root))
        caps = t.ClientCapabilities(
            general=t.GeneralClientCapabilities(position_encodings=[t.PositionEncodingKind.Utf16]),
            text_document=t.TextDocumentClientCapabilities(
                document_symbol=t.DocumentSymbolClientCapabilities(hierarchical_document_symbol_support=True),
                rename=t.RenameClientCapabilities(prepare_support=True),
                definition=t.DefinitionClientCapabilities(link_support=True),
            ),
            workspace=t.WorkspaceClientCapabilities(workspace_edit=t.WorkspaceEditClientCapabilities(document_changes=True)),
        )
        uri = self.root.as_uri()
        result = await self.client.initialize_async(
            t.InitializeParams(capabilities=caps, root_uri=uri, workspace_folders=[t.WorkspaceFolder(uri, self.root.name)]))
        self.encoding = str(result.capabilities.position_encoding or "utf-16")
        self.client.initialized(t.InitializedParams())
        return self

    async def warm(self, path: Path, line: int, character: int, timeout: float = 120) -> float:
        """Wait until the server has read the project: a cold basedpyright answers references
        with [] until then (it sends no progress a client without workDoneProgress sees).
        Returns the seconds waited."""
        import asyncio
        import time

        await self.sync(path, path.read_text(encoding="utf-8"))
        params = {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": character},
                  "context": {"includeDeclaration": True}}
        started = time.perf_counter()
        while not await self.request("textDocument/references", params, path):
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"{self.name} found no references within {timeout:g} s")
            await asyncio.sleep(0.3)
        return time.perf_counter() - started

    async def stop(self) -> None:
        if self.client is None:
            return
        import asyncio

        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        except Exception:
            pass
        await self.client.stop()

    def handles(self, path: Path) -> bool:
        return path.suffix in (".py", ".pyi")

    def position_encoding(self, path: Path) -> str:
        return self.encoding

    async def sync(self, path: Path, text: str) -> None:
        from lsprotocol import types as t

        uri = path.as_uri()
        if self.texts.get(path) == text:
            return  # the server has this text already: a didChange would make it analyse again
        self.texts[path] = text
        if path not in self.versions:
            self.versions[path] = 1
            self.client.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(uri, "python", 1, text)))
            return
        self.versions[path] += 1
        self.client.text_document_did_change(t.DidChangeTextDocumentParams(
            t.VersionedTextDocumentIdentifier(self.versions[path], uri),
            [t.TextDocumentContentChangeWholeDocument(text)]))

    async def request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        import asyncio

        from lsprotocol.types import METHOD_TO_TYPES

        converter = self.client.protocol._converter
        typed = converter.structure(params, METHOD_TO_TYPES[method][2])
        try:
            result = await asyncio.wait_for(self.client.protocol.send_request_async(method, typed), 60)
        except TimeoutError:
            raise CodeIntelError(f"{self.name} did not answer {method} within 60 s") from None
        except Exception as exc:
            raise CodeIntelError(f"{self.name}: {exc}") from None
        return converter.unstructure(result)


# -- a generated project with distractors ------------------------------------------------------

MODELS = '''"""Billing models."""


class Invoice:
    def total(self) -> int:
        return 1


class Receipt:
    def total(self) -> int:  # same name, another class: a distractor
        return 2
'''

CALLER = '''from pkg.models import Invoice, Receipt


def bill_{i}(invoice: Invoice) -> int:
    # the total is what we bill
    return invoice.total() + {i}


def keep_{i}(receipt: Receipt) -> int:
    return receipt.total()
'''

DISTRACTOR = '''from pkg.models import Receipt

LABEL_{i} = "total"  # the word total in a string and a comment


def keep_{i}(receipt: Receipt) -> int:
    """Return the total of a receipt."""
    return receipt.total() * {i}
'''

INVOICE_USER = '''from pkg.models import Invoice, Receipt

LABEL_{i} = "total"  # an Invoice made, its total never asked


def make_{i}() -> Invoice:
    return Invoice()


def keep_{i}(receipt: Receipt) -> int:
    return receipt.total() - {i}
'''

FILLER = '''def work_{i}(values: list[int]) -> int:
    """Sum values, {i}."""
    out = 0
    for value in values:
        out += value * {i}
    return out
'''


def make_project(root: Path, files: int = 40, every: int = 20, filler: int = 3) -> dict[str, Any]:
    """`files` modules under pkg/: every `every`-th calls Invoice.total (a true reference) beside
    Receipt.total; the others hold distractors (Receipt.total, `total` in strings and comments;
    every 7th also makes an Invoice without asking its total).
    Returns the truth: the true call sites as (path, 1-based line) and the distractor lines."""
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/models.py").write_text(MODELS)
    truth: dict[str, Any] = {"references": [], "callers": []}
    for i in range(files):
        rel = f"pkg/mod_{i:04d}.py"
        kind = CALLER if i % every == 0 else INVOICE_USER if i % 7 == 3 else DISTRACTOR
        body = kind.format(i=i)
        body += "\n\n" + "\n\n".join(FILLER.format(i=i * 10 + k) for k in range(filler))
        (root / rel).write_text(body)
        if i % every == 0:
            truth["references"].append((rel, 6))
            truth["callers"].append(rel)
    (root / "pyrightconfig.json").write_text('{"include": ["pkg"]}\n')
    return truth
