"""An OpenAI-compatible server over HTTP (vLLM's), read with the standard library: what it is, and one completion.

Every failure is a `ServerError` with a sentence a person can act on: an address that does not answer, a server
that is not OpenAI-compatible, speculative decoding off, per-request metrics off (naming the flag), a timeout.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

DETAILED_FLAG = "--per-request-spec-decode-metrics detailed"
PROBE_TIMEOUT_S = 10.0


class ServerError(RuntimeError):
    """The server could not be used; the message says why and what to do."""


def check_url(url: str) -> str:
    """`url` as a base address (http or https, a host, no query), without a trailing slash or /v1."""
    u = urllib.parse.urlsplit(url.strip())
    if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
        raise ServerError(f"{url[:80]!r} is not a server address: give one like http://127.0.0.1:8000")
    return url.strip().rstrip("/").removesuffix("/v1")


def _call(url: str, path: str, body: dict | None = None, timeout: float = PROBE_TIMEOUT_S) -> tuple[int, str]:
    req = urllib.request.Request(
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (TimeoutError, urllib.error.URLError) as e:
        if isinstance(e, TimeoutError) or isinstance(e.reason, TimeoutError):  # socket.timeout is TimeoutError
            raise ServerError(
                f"{url}{path} did not answer within {timeout:g} s (raise --timeout for a slow server)"
            ) from None
        raise ServerError(f"nothing answers at {url} ({e.reason}): is the server running there?") from None
    except (ConnectionError, OSError) as e:
        raise ServerError(f"the connection to {url} failed ({e})") from None


def _json(url: str, path: str, body: dict | None = None, timeout: float = PROBE_TIMEOUT_S) -> dict:
    status, text = _call(url, path, body, timeout)
    try:
        d = json.loads(text)
    except json.JSONDecodeError:
        d = None
    if status != 200 or not isinstance(d, dict):
        said = (d or {}).get("error", {}) if isinstance(d, dict) else {}
        said = said.get("message", said) if isinstance(said, dict) else said
        raise ServerError(f"{url}{path} answered {status}: {str(said or text)[:300].strip() or 'no body'}")
    return d


@dataclass(frozen=True)
class Server:
    """What a server says of itself: its address, engine name and version, the model it serves."""

    url: str
    name: str
    version: str
    model: str
    root: str | None
    max_model_len: int | None
    spec_counters: bool  # its Prometheus metrics count speculative drafts

    def describe(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "url": self.url,
            "model": self.model,
            "root": self.root,
            "max_model_len": self.max_model_len,
        }


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> Server:
    """The server at `url`: /v1/models (one served model), /version and /metrics where it has them."""
    url = check_url(url)
    models = _json(url, "/v1/models", timeout=timeout).get("data") or []
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise ServerError(f"{url}/v1/models lists no model: is this an OpenAI-compatible server?")
    m = models[0]
    try:  # vLLM's; another server may have none
        version = str(_json(url, "/version", timeout=timeout).get("version", "unknown"))
    except ServerError:
        version = "unknown"
    name = str(m.get("owned_by") or "openai-compatible")  # vLLM names itself here
    status, metrics = _call(url, "/metrics", timeout=timeout)
    counters = status == 200 and "spec_decode_num_drafts" in metrics
    return Server(url, name, version, str(m["id"]), m.get("root"), m.get("max_model_len"), counters)


@dataclass(frozen=True)
class Completion:
    prompt_ids: list[int]
    output_ids: list[int]
    finish_reason: str | None
    wall_s: float
    metrics: dict  # the engine's per-request metrics, unchanged (speculative_decoding among them)
    fingerprint: str | None

    @property
    def spec(self) -> dict | None:
        return self.metrics.get("speculative_decoding")


def complete(
    server: Server, text: str, max_tokens: int, temperature: float, seed: int | None, timeout: float
) -> Completion:
    """One chat completion of the user message `text`, its token ids and its metrics returned."""
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "return_token_ids": True,
        "ignore_eos": False,
    }
    if seed is not None:
        body["seed"] = seed
    t0 = time.perf_counter()
    d = _json(server.url, "/v1/chat/completions", body, timeout)
    wall = time.perf_counter() - t0
    choice = (d.get("choices") or [{}])[0]
    if "token_ids" not in choice or "prompt_token_ids" not in d:
        raise ServerError(
            f"{server.url} returned no token ids (it ignores return_token_ids): specviz needs an engine that returns "
            "them, such as vLLM 0.11 or later"
        )
    return Completion(
        list(d["prompt_token_ids"] or []),
        list(choice["token_ids"] or []),
        choice.get("finish_reason"),
        wall,
        d.get("metrics") or {},
        d.get("system_fingerprint"),
    )


def check_speculative(server: Server, c: Completion) -> dict:
    """The completion's speculative metrics with their per-step counts, or a sentence saying what is off."""
    spec = c.spec
    if not spec and not server.spec_counters:
        raise ServerError(
            f"{server.url} runs without speculative decoding: start it with --speculative-config "
            '\'{"method": "draft_model", "model": DRAFT_DIR, "num_speculative_tokens": K}\' and '
            f"{DETAILED_FLAG}"
        )
    if not spec or spec.get("per_step_accepted") is None or spec.get("per_step_drafted") is None:
        raise ServerError(
            f"{server.url} decodes speculatively but reports no per-step counts: start it with {DETAILED_FLAG}"
        )
    return spec
