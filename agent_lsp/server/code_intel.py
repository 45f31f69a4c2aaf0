"""Source 1 of code intelligence, the editor (CONTRACT "Code intelligence"): a client that
advertises `capabilities.experimental.agentLsp.codeIntel: true` answers
`agentLsp/codeIntel {method, params}` with that LSP method's result, from the language servers
it already runs (VS Code's providers, Neovim's other clients, eglot's server)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pygls.lsp.server import LanguageServer

from agent_lsp.agent.ports import CodeIntelError, CodeIntelSource, CodeIntelSources
from agent_lsp.server.capabilities import ClientCaps
from agent_lsp.server.rpc import ClientRequestError, client_request

log = logging.getLogger(__name__)

CODE_INTEL_METHOD = "agentLsp/codeIntel"
# A language server's first answer on a cold project (tsserver loading it, Neovim attaching a
# server to a file it opens for the request) takes seconds; a hung one must not hold the run.
CODE_INTEL_TIMEOUT = 30.0


class EditorCodeIntel:
    """The editor as a CodeIntelSource: every request goes to the client as
    `agentLsp/codeIntel`; positions count in the encoding negotiated with the client; the
    editor owns its buffers, so `sync` has nothing to do."""

    name = "editor"

    def __init__(self, ls: LanguageServer, timeout: float = CODE_INTEL_TIMEOUT):
        self.ls = ls
        self.timeout = timeout

    def handles(self, path: Path) -> bool:
        return True  # the editor says null for a file none of its servers knows

    def position_encoding(self, path: Path) -> str:
        encoding = self.ls.workspace.position_encoding
        value = getattr(encoding, "value", encoding)
        return str(value) if value else "utf-16"

    async def sync(self, path: Path, text: str) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any], path: Path) -> Any:
        try:
            return await client_request(
                self.ls, CODE_INTEL_METHOD, {"method": method, "params": params}, self.timeout
            )
        except TimeoutError:
            raise CodeIntelError(
                f"the editor did not answer {method} within {self.timeout:g}s"
            ) from None
        except ClientRequestError as exc:
            log.info("%s %s: %s", CODE_INTEL_METHOD, method, exc)
            raise CodeIntelError(f"the editor could not answer {method}: {exc}") from None


def editor_source(ls: LanguageServer, caps: ClientCaps) -> EditorCodeIntel | None:
    """The editor's source when the client advertised `codeIntel`, else None."""
    return EditorCodeIntel(ls) if caps.code_intel else None


def editor_sources(ls: LanguageServer) -> CodeIntelSources:
    """What the host asks per run (ports.CodeIntelSources): the editor, when the client
    advertised `codeIntel` (read at each run: the capabilities come with `initialize`)."""

    def sources(roots: list[Path]) -> list[CodeIntelSource]:
        caps = getattr(ls, "caps", None)
        found = editor_source(ls, caps) if isinstance(caps, ClientCaps) else None
        return [found] if found is not None else []

    return sources
