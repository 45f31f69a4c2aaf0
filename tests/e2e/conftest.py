from __future__ import annotations

import pytest
import pytest_asyncio

from tests.e2e.harness import start_editor

E2E_TIMEOUT = 60  # seconds: a backstop; every wait inside a test has its own, shorter timeout


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))


@pytest_asyncio.fixture
async def open_editor(workspace, model):
    """Factory: start the real server under a scripted editor; stopped at teardown."""
    editors = []

    async def start(caps="visual-studio-code", init: dict | None = None, **kwargs):
        options = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "ask"}, **(init or {})}
        editor = await start_editor(workspace, caps, init_options=options, **kwargs)
        editors.append(editor)
        return editor

    yield start
    for editor in editors:
        await editor.quit()
