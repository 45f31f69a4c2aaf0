"""The workspace folders of the LSP session, as resolved paths (the server's own folder when
the client names none)."""

from __future__ import annotations

from pathlib import Path

from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path


def uri_to_path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path).resolve() if path else None


def workspace_folders(ls: LanguageServer) -> tuple[list[Path], list[str]]:
    """Every workspace folder (didChangeWorkspaceFolders included) and its name."""
    roots: list[Path] = []
    names: list[str] = []
    for folder in list(ls.workspace.folders.values()):
        path = uri_to_path(folder.uri)
        if path is not None and path not in roots:
            roots.append(path)
            names.append(folder.name)
    if not roots and ls.workspace.root_path:
        roots = [Path(ls.workspace.root_path).resolve()]
        names = [roots[0].name]
    if not roots:
        roots, names = [Path.cwd().resolve()], [Path.cwd().name]
    return roots, names


def workspace_roots(ls: LanguageServer) -> list[Path]:
    return workspace_folders(ls)[0]
