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


# Decision 63: `agent-lsp-server` is not on PyPI yet. Until it is, an install by that name is
# given only as the future one ("once published"), beside the install that works from a clone.
NOT_YET = re.compile(r"(?:pipx?|uv pip|uv tool) install\s+(?:-U\s+|--upgrade\s+)?['\"]?agent-lsp-server")
FROM_A_CLONE = ("pipx install .", "pip install -e .")
# The changelog is history.
NOT_YET_SKIP = {Path("CHANGELOG.md")}


def test_the_unpublished_name_is_given_only_as_the_future_install():
    offenders = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if path.suffix not in TEXT or SKIP & set(rel.parts) or not path.is_file() or rel.parts[0] == "tests":
            continue
        if rel in NOT_YET_SKIP:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if NOT_YET.search(line) and "published" not in line:
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == []


def test_every_install_instruction_gives_the_install_that_works_from_a_clone():
    places = [REPO / "editor-clients" / name / "README.md" for name in ("vscode", "neovim", "emacs")]
    places += [REPO / "editor-clients" / "vscode" / "src" / "server.ts"]
    for place in places:
        text = place.read_text()
        assert any(command in text for command in FROM_A_CLONE), place
        assert "agent-lsp-server" in text and "published" in text, place


def test_the_unpublished_name_rule_would_catch_the_old_advice():
    assert NOT_YET.search("pip install agent-lsp-server") and NOT_YET.search("pip install -U agent-lsp-server")
    assert NOT_YET.search("pip install 'agent-lsp-server[otel]'") and not NOT_YET.search("pipx install .")
