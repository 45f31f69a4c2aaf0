"""Server -> client requests that can be withdrawn safely.

pygls's `send_request_async` chains cancellation into the future pygls later resolves, which
can raise `InvalidStateError` inside pygls when the answer arrives after we stopped waiting
(pygls issue 621). Here our waiter is separate: a cancel or timeout leaves pygls's future
alone and withdraws the request with `$/cancelRequest`."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import attrs
from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger(__name__)


# Server->client requests sent and answered as plain JSON, extra properties included: a
# showMessageRequest's action items carry {runId, callId} and the answer the user's `reason`
# after Deny (CONTRACT "Approvals", Decision 13). Typed lsprotocol classes would drop both.
RAW_METHODS = frozenset({types.WINDOW_SHOW_MESSAGE_REQUEST, "agentLsp/diagnostics"})
# Answered with JSON kept exactly as it came: pygls turns an untyped result into namedtuples,
# which renames keys that are not identifiers (a WorkspaceEdit's `changes` is keyed by URI).
JSON_RESULT_METHODS = frozenset({"agentLsp/codeIntel", "agentLsp/debug"})


@attrs.define
class JsonResultMessage:
    """A response whose `result` stays plain JSON (dicts and lists)."""

    id: Any
    jsonrpc: str
    result: Any


class AgentProtocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._converter.register_structure_hook(JsonResultMessage, lambda obj, cls: cls(**obj))

    def get_message_type(self, method: str) -> Any:  # type: ignore[override]
        if method in RAW_METHODS or method in JSON_RESULT_METHODS:
            return None  # pygls then sends the params dict as it is
        return super().get_message_type(method)

    def get_result_type(self, method: str) -> Any:  # type: ignore[override]
        if method in JSON_RESULT_METHODS:
            return JsonResultMessage
        if method in RAW_METHODS:
            return None  # pygls then keeps the raw JSON result
        return super().get_result_type(method)


class ClientRequestError(Exception):
    """The client answered with a JSON-RPC error."""


class OutgoingRequest:
    """One request to the client; `answer` resolves with its result (or ClientRequestError)."""

    def __init__(self, ls: LanguageServer, method: str, params: Any):
        loop = asyncio.get_running_loop()
        self.ls = ls
        self.answer: asyncio.Future[Any] = loop.create_future()
        self.msg_id = f"agent-lsp-{uuid.uuid4().hex[:12]}"
        self._sent = ls.protocol.send_request(method, params, msg_id=self.msg_id)
        self._sent.add_done_callback(lambda done: loop.call_soon_threadsafe(self._settle, done))

    def _settle(self, done: Any) -> None:
        if self.answer.done():
            return
        if done.cancelled():
            self.answer.set_exception(ClientRequestError("the request was cancelled"))
        elif (exc := done.exception()) is not None:
            self.answer.set_exception(ClientRequestError(str(exc)))
        else:
            result = done.result()
            # An untyped answer (a raw method) arrives as namedtuples: make it plain JSON; a
            # typed one (an lsprotocol class) stays as it is.
            self.answer.set_result(result if hasattr(result, "__attrs_attrs__") else plain(result))

    def withdraw(self) -> None:
        """Tell the client we no longer wait for this answer (`$/cancelRequest`)."""
        if not self._sent.done():
            safe_notify(self.ls, types.CANCEL_REQUEST, types.CancelParams(id=self.msg_id))
        if not self.answer.done():
            self.answer.cancel()


async def client_request(
    ls: LanguageServer,
    method: str,
    params: Any,
    timeout: float | None = None,
    on_sent: Callable[[], None] | None = None,
    late: Callable[[Any], None] | None = None,
    settled: Callable[[], None] | None = None,
) -> Any:
    """Send a request and wait for its answer; TimeoutError when nobody answers in time.
    `on_sent` runs right after the request is written (see PITFALLS: eglot's reader). With
    `late`, a cancelled waiter leaves the request open (a user may still answer it, e.g. in the
    editor's preview) and `late` gets the answer when it comes. `settled` runs once the request
    is over in any way: answered, refused, withdrawn or its waiter gone."""
    try:
        request = OutgoingRequest(ls, method, params)
    except BaseException:
        if settled is not None:
            settled()
        raise
    if settled is not None:
        request.answer.add_done_callback(lambda _: settled())
    if on_sent is not None:
        on_sent()
    try:
        return await asyncio.wait_for(asyncio.shield(request.answer), timeout)
    except asyncio.CancelledError:
        if late is None:
            request.withdraw()
        else:
            request.answer.add_done_callback(
                lambda done: None if done.cancelled() or done.exception() else late(done.result())
            )
        raise
    except TimeoutError:
        request.withdraw()
        raise


def safe_notify(ls: LanguageServer, method: str, params: Any) -> None:
    """A notification that never raises (the client may be gone)."""
    if getattr(ls, "connection_closed", False):
        return  # after `exit` or a broken pipe every write would only log a traceback
    try:
        ls.protocol.notify(method, params)
    except Exception as exc:  # BrokenPipe after the editor died: nothing to tell anyone
        if isinstance(exc, BrokenPipeError):
            ls.connection_closed = True  # type: ignore[attr-defined]
        log.debug("could not send %s: %s", method, exc)


def plain(value: Any) -> Any:
    """JSON values as plain dicts and lists: pygls hands untyped results and params over as
    namedtuples (and typed ones as attrs classes)."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "__attrs_attrs__"):
        from pygls.protocol import default_converter

        return default_converter().unstructure(value)
    return value
