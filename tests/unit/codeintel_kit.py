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
