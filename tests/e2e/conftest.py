from __future__ import annotations

import pytest_asyncio

from tests.e2e.harness import start_editor


@pytest_asyncio.fixture
async def open_editor(workspace, model):
    """Factory: start the real server under a scripted editor; stopped at teardown."""
    editors = []

    async def start(caps: str = "visual-studio-code", init: dict | None = None, **kwargs):
        options = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "ask"}, **(init or {})}
        editor = await start_editor(workspace, caps, init_options=options, **kwargs)
        editors.append(editor)
        return editor

    yield start
    for editor in editors:
        try:
            await editor.client.shutdown_session()
        except Exception:
            pass
