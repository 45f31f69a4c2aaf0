"""The endpoint's models as `agentLsp.models` shows them (GET /models through the client)."""

from __future__ import annotations

from typing import Any

from agent_lsp.agent.model.client import Model, ModelError


async def models_of(model: Model | None, current: str) -> dict[str, Any]:
    """`{current, models, error?}`: a client that cannot list (or was not made) says why."""
    out: dict[str, Any] = {"current": current, "models": []}
    lister = getattr(model, "list_models", None)
    if model is None or lister is None:
        out["error"] = (
            "no model client could be made: set the API key variable named by apiKeyEnv, or baseUrl"
        )
        return out
    try:
        out["models"] = await lister()
    except ModelError as exc:
        out["error"] = str(exc)
    return out
