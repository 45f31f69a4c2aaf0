"""A tiny language server (pygls) that misbehaves on purpose: `crash` exits right after
`initialized`, `hang` never answers textDocument/definition, `mute` never answers initialize,
`config` asks workspace/configuration and answers hover with what it got, `env` answers
hover with the names of its API-key variables. Each start appends a
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


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
async def definition(params):
    if mode == "hang":
        await asyncio.sleep(3600)
    return None


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params):
    if mode == "env":
        return types.Hover(contents=json.dumps(sorted(k for k in os.environ if "API_KEY" in k)))
    return types.Hover(contents=json.dumps(got))


server.start_io()
