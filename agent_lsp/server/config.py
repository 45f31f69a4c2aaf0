"""Settings over LSP: env < initializationOptions < workspace/configuration (untrusted keys
dropped), re-read on didChangeConfiguration; the user's settings file and the environment re-read
when they changed (frontend.UserSources, as ACP does); problems shown to the user, never a crash."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agent_lsp.frontend import UserSources
from agent_lsp.settings import Settings, resolve, without_untrusted

log = logging.getLogger(__name__)


class SettingsState:
    def __init__(self) -> None:
        self.init_options: dict[str, Any] = {}
        self.workspace_config: dict[str, Any] = {}
        self.user = UserSources()  # the user's own settings file (trusted) and the environment
        self.user.refresh()
        self.file_problems = list(self.user.file_problems)  # shown with the next merge
        self.settings = Settings()
        self.standing_problems: list[str] = []  # of the last merge (agentLsp.health lists them)
        self._last_problems: set[str] = set()

    def update(self, *, init_options: Any = None, workspace_config: Any = None) -> list[str]:
        """Re-merge after a source changed; returns the problems to show."""
        problems: list[str] = []
        if init_options is not None:
            if isinstance(init_options, dict):
                self.init_options = (
                    init_options.get("agentLsp", init_options)
                    if isinstance(init_options.get("agentLsp"), dict)
                    else init_options
                )
            else:
                problems.append(
                    "initializationOptions must be an object, "
                    f"got {type(init_options).__name__}: ignored"
                )
        if workspace_config is not None:
            if isinstance(workspace_config, dict):
                kept, dropped = without_untrusted(workspace_config)
                for key in dropped:
                    log.warning(
                        "ignoring `%s` from workspace/configuration: "
                        "it may only come from the user's own settings "
                        "(the settings file, environment or initializationOptions)",
                        key,
                    )
                self.workspace_config = kept
            elif workspace_config not in (None, [], ""):
                problems.append(
                    "the `agentLsp` configuration section must be an object, "
                    f"got {type(workspace_config).__name__}: ignored"
                )
        if self.user.refresh():  # the file (or the environment) changed since the last merge
            self.file_problems = list(self.user.file_problems)
        self.settings, more = resolve(
            self.user.file, self.user.env, self.init_options, self.workspace_config
        )
        problems, self.file_problems = self.file_problems + problems, []
        # The same sources are merged again at `initialized` and after each configuration pull:
        # a problem already shown by the previous merge is not shown again.
        fresh = [p for p in problems + more if p not in self._last_problems]
        self._last_problems = set(more)
        self.standing_problems = list(more)
        return fresh

    def refresh(self) -> list[str]:
        """The user's settings file and the environment read again if they changed (a stat):
        the merge redone, the problems to show returned."""
        if not self.user.refresh():
            return []
        self.file_problems = list(self.user.file_problems)
        return self.update()

    @property
    def user_path(self) -> Path:
        return self.user.path

    @property
    def user_file_problems(self) -> list[str]:
        """The settings file's problems as it reads now (agentLsp.health lists them)."""
        return self.user.file_problems
