"""A tiny language server (pygls) that misbehaves on purpose: `crash` exits right after
`initialized`, `hang` never answers textDocument/definition, `mute` never answers initialize,
`config` asks workspace/configuration and answers hover with what it got, `env` answers
hover with the names of its API-key variables; `indexing` reports its reading of the workspace
as `$/progress` (1.5 s), `pyright` as the pyright family's log lines, `endless` never ends it:
until then references answer [] (as a cold basedpyright answers from its open files only); `point`
answers definition, references and workspace symbols with line 1 of each URI in $FAKE_LSP_POINT
(comma-separated), whatever was asked (a server naming files it was told of), and a rename with
an edit of line 1's first 3 characters in each. Each start appends a
line to $FAKE_LSP_LOG (pid), so a test counts the starts."""

import asyncio
import json
import os
import sys
import time

from lsprotocol import types
from pygls.lsp.server import LanguageServer

mode = sys.argv[1]
server = LanguageServer("fake", "0")
got: list = []
indexed: list = []
READ = 1.5
if os.environ.get("FAKE_LSP_LOG"):
    with open(os.environ["FAKE_LSP_LOG"], "a") as log:
        log.write(f"{os.getpid()}\n")

if mode == "mute":
    time.sleep(3600)


@server.feature(types.INITIALIZED)
async def initialized(params):
    if mode == "crash":
        os._exit(3)
    if mode == "config":
        items = [types.ConfigurationItem(section="fake.answer"), types.ConfigurationItem(section="fake")]
        got.append(await server.workspace_configuration_async(types.ConfigurationParams(items=items)))
    if mode in ("indexing", "endless"):
        await server.work_done_progress.create_async("index")
        server.work_done_progress.begin("index", types.WorkDoneProgressBegin(title="Indexing"))
        if mode == "endless":
            return
        await asyncio.sleep(READ)
        indexed.append(True)
        server.work_done_progress.end("index", types.WorkDoneProgressEnd())
    if mode == "pyright":
        server.window_log_message(types.LogMessageParams(types.MessageType.Info, "Starting service instance"))
        await asyncio.sleep(READ)
        indexed.append(True)
        server.window_log_message(types.LogMessageParams(types.MessageType.Info, "Found 3 source files"))


def pointed() -> list:
    start = types.Position(0, 0)
    return [types.Location(uri, types.Range(start, types.Position(0, 3)))
            for uri in os.environ.get("FAKE_LSP_POINT", "").split(",") if uri]


@server.feature(types.WORKSPACE_SYMBOL)
def workspace_symbols(params):
    return [types.SymbolInformation(name="secret", kind=types.SymbolKind.Variable, location=loc)
            for loc in pointed()]


@server.feature(types.TEXT_DOCUMENT_RENAME)
def rename(params):
    return types.WorkspaceEdit(changes={
        loc.uri: [types.TextEdit(loc.range, params.new_name)] for loc in pointed()})


@server.feature(types.TEXT_DOCUMENT_REFERENCES)
def references(params):
    if mode == "point":
        return pointed()
    where = types.Location(params.text_document.uri, types.Range(params.position, params.position))
    return [where] if indexed or mode not in ("indexing", "endless", "pyright") else []


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
async def definition(params):
    if mode == "hang":
        await asyncio.sleep(3600)
    return pointed() or None


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params):
    if mode == "env":
        return types.Hover(contents=json.dumps(sorted(k for k in os.environ if "API_KEY" in k)))
    return types.Hover(contents=json.dumps(got))


server.start_io()
