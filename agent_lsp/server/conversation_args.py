"""The arguments of `agentLsp.fork` and `agentLsp.history` (loaded with the core, after
`initialize`: pydantic is not a start-up cost)."""

from __future__ import annotations

from pydantic import Field, field_validator

from agent_lsp.server.commands import _Args


class HistoryArgs(_Args):
    session_id: str = Field(alias="sessionId")

    @field_validator("session_id")
    @classmethod
    def _session_id(cls, value: str) -> str:
        from agent_lsp.agent.state.sessions import check_session_id

        return check_session_id(value)


class ForkArgs(HistoryArgs):
    run_id: str = Field(alias="runId", min_length=1, max_length=200)
