"""How many tokens a request holds: an estimate from its characters, calibrated by the
prompt tokens the endpoint reports."""

from __future__ import annotations

import json
from typing import Any

from agent_lsp.agent.images import IMAGE_CHARS, image_count, without_images

CHARS_PER_TOKEN = 4.0


class TokenEstimator:
    """Characters / 4, calibrated by the prompt tokens the API reports. Message sizes are
    cached (messages are never changed once in the history), so a turn costs O(new messages)."""

    def __init__(self) -> None:
        self.ratio = 1.0
        self._sizes: dict[int, tuple[Any, int]] = {}

    def _size(self, message: Any) -> int:
        hit = self._sizes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        size = len(json.dumps(without_images(message), ensure_ascii=False))
        size += IMAGE_CHARS * image_count(message)
        self._sizes[id(message)] = (message, size)
        return size

    def raw(self, payload: Any, extra_chars: int = 0) -> float:
        if isinstance(payload, list):
            if len(self._sizes) > 2 * len(payload) + 256:  # forget messages compaction dropped
                self._sizes = {id(m): self._sizes[id(m)] for m in payload if id(m) in self._sizes}
            chars = sum(self._size(m) for m in payload)
        else:
            chars = len(json.dumps(payload, ensure_ascii=False))
        return (chars + extra_chars) / CHARS_PER_TOKEN

    def estimate(self, payload: Any, extra_chars: int = 0) -> int:
        return int(self.raw(payload, extra_chars) * self.ratio)

    def calibrate(self, payload: Any, prompt_tokens: int, extra_chars: int = 0) -> None:
        raw = self.raw(payload, extra_chars)
        if raw > 200 and prompt_tokens > 0:
            self.ratio = min(4.0, max(0.25, prompt_tokens / raw))
