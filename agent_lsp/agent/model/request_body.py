"""A chat-completions request body encoded to the bytes the SDK would send, each history
message encoded once: an append-only history re-sends the same messages every turn, and
encoding ~50 KB tool results again each time was the request's largest cost of ours."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from agent_lsp.agent.wellformed import wellformed

# The SDK's encoding of a JSON body (openai._utils._json.openapi_dumps): compact, UTF-8, no NaN
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
CACHE_BYTES = 16_000_000  # encoded messages kept (least recently sent dropped first)


def _utf8(value: Any) -> bytes:
    return wellformed(_encode(value)).encode()


class RequestEncoder:
    """`body(...)` = the SDK's `openapi_dumps(body)`, byte for byte. A message is looked up by
    identity (the object is kept with its encoding, so its id cannot be reused meanwhile):
    history entries are never changed once appended (state/session.py `Entry`), and a
    replaced entry (a squeeze, a compaction) is a new object. One encoder serves every run
    of a shared model client; the cache is bounded by `CACHE_BYTES`."""

    def __init__(self, limit: int = CACHE_BYTES):
        self._cache: OrderedDict[int, tuple[object, bytes]] = OrderedDict()
        self._size = 0
        self._limit = limit

    def body(self, body: dict[str, Any]) -> bytes:
        pieces: list[bytes] = []
        for key, value in body.items():
            pieces += (b"," if pieces else b"{", _utf8(key), b":")
            if key == "messages" and type(value) is list:
                pieces.append(b"[")
                for index, message in enumerate(value):
                    if index:
                        pieces.append(b",")
                    pieces.append(self._cached(message))
                pieces.append(b"]")
            elif key == "tools" and type(value) is list:
                pieces.append(self._cached(value))  # the loop builds its schemas once
            else:
                pieces.append(_utf8(value))
        self._trim()
        pieces.append(b"}" if pieces else b"{}")
        return b"".join(pieces)

    def _cached(self, value: Any) -> bytes:
        if type(value) is not dict and type(value) is not list:
            return _utf8(value)
        cache = self._cache
        key = id(value)
        hit = cache.get(key)
        if hit is not None and hit[0] is value:
            cache.move_to_end(key)
            return hit[1]
        data = _utf8(value)
        if hit is not None:  # cannot happen while the old object is held; kept exact anyway
            self._size -= len(hit[1])
        cache[key] = (value, data)
        self._size += len(data)
        return data

    def _trim(self) -> None:
        while self._size > self._limit and self._cache:
            _, (_, data) = self._cache.popitem(last=False)
            self._size -= len(data)
