"""A served engine as bench rows (`specviz bench --engine LABEL=URL`): the same prompts over HTTP, timed end to end.

An engine row's time is the request's wall time as the client sees it (the chat template, prefill, decode and the
reply), beside specviz's rows' whole-call time (prefill included); its τ counts the engine's forwards: the prefill
that emits the first token, then one per step. Its greedy output is not audited against specviz's autoregressive
one (another engine's kernels break near-ties their own way): `agreement` counts the prompts where they are equal.
"""

from __future__ import annotations

import functools

from specviz.core.server import Server, complete, probe
from specviz.tools.bench.specs import Setting

ENGINE_TIMEOUT_S = 600.0


def engine_settings(specs: list[str] | None) -> list[Setting]:
    """`LABEL=URL` -> one Setting each (kind "engine", the URL in `method`); a sentence for a malformed spec."""
    out = []
    for spec in specs or ():
        label, eq, url = spec.partition("=")
        if not eq or not label.strip() or not url.strip():
            raise ValueError(f"--engine {spec!r}: give LABEL=URL, such as vllm-k3=http://127.0.0.1:8000")
        server = serving(url.strip())
        out.append(
            Setting(
                key=f"engine:{label.strip()}",
                label=f"{server.name} {server.version} serving {server.model} ({server.url})",
                kind="engine",
                method=server.url,
            )
        )
    return out


@functools.cache
def serving(url: str) -> Server:
    """The server at `url`, asked once a run."""
    return probe(url)


def engine_one(s: Setting, ids: tuple[int, ...], text: str, temperature: float, max_new_tokens: int, seed: int) -> dict:
    """One prompt through the engine: a record shaped like specviz's rows' (`tools.bench.prompt.run_one`)."""
    c = complete(serving(s.method), text, max_new_tokens, temperature, seed, ENGINE_TIMEOUT_S)
    if list(c.prompt_ids) != list(ids):
        raise ValueError(
            f"{s.key}: the server's prompt ids differ from the target tokenizer's: it serves another model than the "
            "bench's target"
        )
    spec = c.spec or {}
    acc, drafted = spec.get("per_step_accepted"), spec.get("per_step_drafted")
    n = len(c.output_ids)
    if acc is None:  # no draft: one forward per token
        acc, drafted = [0] * max(n - 1, 0), [0] * max(n - 1, 0)
    return dict(
        output_ids=list(c.output_ids),
        tokens=n,
        total_ms=c.wall_s * 1e3,
        rounds=1 + len(acc),
        accepted=[0, *acc],
        depth=[0, *drafted],
    )
