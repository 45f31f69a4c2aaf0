"""Issue 11.10: `pip install agent-lsp` installs someone else's program (that PyPI name is another
project): no document, help text, health check or error message may say it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WRONG = re.compile(r"(?:pipx?|uv pip|uv tool) install\s+(?:-U\s+|--upgrade\s+)?agent-lsp(?![-\w])")
TEXT = (".md", ".txt", ".lua", ".ts", ".el", ".py", ".json", ".toml", ".sh", ".mjs", ".vim")
SKIP = {"node_modules", ".git", ".venv", "dist", "__pycache__"}


def test_the_distribution_is_agent_lsp_server():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == "agent-lsp-server"
    assert project["scripts"] == {"agent-lsp": "agent_lsp.cli:main"}


def test_no_file_tells_users_to_install_agent_lsp():
    offenders = []
    for path in REPO.rglob("*"):
        if path.suffix not in TEXT or SKIP & set(path.relative_to(REPO).parts) or not path.is_file():
            continue
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if WRONG.search(line) and "(?!" not in line:  # a regex that looks for the wrong name is fine
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_wrong_name_would_be_caught():
    assert WRONG.search("pip install agent-lsp") and WRONG.search("pipx install agent-lsp ")
    assert not WRONG.search("pip install agent-lsp-server") and not WRONG.search("pip install -e .")
