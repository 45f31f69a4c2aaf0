"""ACP's session config options (CONTRACT "ACP parity"): the mode, the model from the endpoint's
list and, once the model has streamed reasoning, its reasoning level; what a panel shows as its
mode, model and thinking pickers."""

from __future__ import annotations

from typing import Any

from acp import RequestError
from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption

# thought_level's values, each the `reasoning_effort` the model requests carry (off: none sent)
THOUGHT_LEVELS = {
    "off": ("Off", None),
    "low": ("Low", "low"),
    "medium": ("Medium", "medium"),
    "high": ("High", "high"),
}


def _select(
    config_id: str, name: str, category: str, current: str, values: list[tuple[str, str]]
) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        type="select",
        id=config_id,
        name=name,
        category=category,
        current_value=current,
        options=[SessionConfigSelectOption(value=v, name=label) for v, label in values],
    )


def config_options(
    modes: dict[str, tuple[str, str]],
    mode: str,
    model: str,
    models: list[str],
    thought_level: str | None,
) -> list[SessionConfigOptionSelect]:
    """The session's options: `mode`, `model` (the endpoint's list; the current model alone when
    it has none, and always among the values) and `thought_level` when the model reasons
    (`thought_level` None: it has not been seen reasoning)."""
    listed = models if model in models else [model, *models]
    options = [
        _select("mode", "Mode", "mode", mode, [(m, label) for m, (label, _) in modes.items()]),
        _select("model", "Model", "model", model, [(m, m) for m in listed]),
    ]
    if thought_level is not None:
        levels = [(level, label) for level, (label, _) in THOUGHT_LEVELS.items()]
        options.append(
            _select("thought_level", "Reasoning", "thought_level", thought_level, levels)
        )
    return options


def checked_value(options: list[SessionConfigOptionSelect], config_id: str, value: Any) -> str:
    """`value` if the option `config_id` offers it; -32602 naming what it offers otherwise."""
    option = next((o for o in options if o.id == config_id), None)
    if option is None:
        raise RequestError(
            -32602,
            f"session/set_config_option: unknown configId {config_id!r}; "
            f"available: {', '.join(o.id for o in options)}",
        )
    values = [o.value for o in option.options if isinstance(o, SessionConfigSelectOption)]
    if not isinstance(value, str) or value not in values:
        raise RequestError(
            -32602,
            f"session/set_config_option: {config_id} has no value {value!r}; "
            f"available: {', '.join(values)}",
        )
    return value
