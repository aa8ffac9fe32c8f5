"""Model hub requests that end: a timeout on every request and a deadline over all of one load's requests, and the
sentence a load gives when the hub stayed silent (transformers rewraps such errors as OSError, with a message about
local folders that would mislead)."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import httpx
import huggingface_hub

HUB_TIMEOUT_S = 10.0  # every hub request: connecting, and each wait for bytes
HUB_DEADLINE_S = 60.0  # all of one pair's hub requests together


class HubTimeout(TimeoutError):
    """The hub did not answer in time: a load gives up with this rather than wait on a silent server."""


_hub = threading.local()


def timeouts() -> None:
    """Give every hub request a timeout. huggingface_hub's shared HTTP client waits forever by default, and some
    of its calls pass no timeout of their own, so a server that accepts the connection and never answers would
    hang a load; a request hook fills in HUB_TIMEOUT_S wherever a request has none, and never lets a request
    outlive the deadline that `deadline` sets."""
    client = huggingface_hub.get_session()
    hooks = client.event_hooks
    if _bounded not in hooks["request"]:
        client.event_hooks = {**hooks, "request": [*hooks["request"], _bounded]}


@contextmanager
def deadline(seconds: float | None = None):
    """Bound all hub requests this thread makes inside the block: a load makes many in a row (revision,
    config, tokenizer files, weights), and a per-request timeout alone would let a silent server hold it for
    minutes."""
    timeouts()
    seconds = HUB_DEADLINE_S if seconds is None else seconds
    outer = getattr(_hub, "deadline", None)
    _hub.deadline, _hub.seconds = time.monotonic() + seconds, seconds
    try:
        yield
    finally:
        _hub.deadline = outer


def _bounded(request) -> None:
    cap = HUB_TIMEOUT_S
    deadline = getattr(_hub, "deadline", None)
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HubTimeout(f"the model hub did not answer within {_hub.seconds:g} s ({request.url.host})")
        cap = min(cap, left)
    given = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        k: cap if given.get(k) is None else min(given[k], cap) for k in ("connect", "read", "write", "pool")
    }


def silence(e: BaseException) -> str | None:
    """Why a load failed, when the reason is a hub that did not answer: transformers rewraps such errors
    as OSError, with a message about local folders that would mislead."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, HubTimeout):
            return str(e)
        if isinstance(e, httpx.TimeoutException):
            return f"the model hub did not answer within {HUB_TIMEOUT_S:g} s"
        e = e.__cause__ or e.__context__
    return None
