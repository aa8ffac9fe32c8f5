"""Record a served engine's run over a prompt set, and add specviz's reference to it.

`record` asks the server (`core.server`) for each prompt and keeps what it returned, unchanged. `add_reference`
runs the same prompts through specviz with the same target and draft folders, the engine's K and the given dtype
(chain speculative sampling with the standalone draft: the engine's `draft_model` method), once free
(`reference.output_ids`) and once replaying the engine's own output (`engine.replay`), and compares every step
(`analysis.served`). Nothing is written here: the caller writes the finished run in one piece.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone

from specviz.analysis.compare import first_difference
from specviz.analysis.served import compare_steps, reason_counts, sampled_check
from specviz.core.config import ChainConfig, RunConfig, SamplingConfig
from specviz.core.device import machine_name
from specviz.core.prompts import encode_prompt
from specviz.core.served import REASONS, RUN_FORMAT, EngineRun, Reference, validate_run
from specviz.core.server import Server, ServerError, check_speculative, complete
from specviz.engine.record import generate
from specviz.engine.replay import replay
from specviz.models.pair import Pair

# a server whose tokens are neither the target's choice nor a near-tie at more than this share of steps serves
# another model than the target given
FOREIGN_SHARE = 0.25
Progress = Callable[[int, int, str], None]


def record(
    server: Server,
    prompts: Sequence[dict],
    max_new_tokens: int,
    temperature: float,
    seed: int | None,
    timeout: float,
    progress: Progress | None = None,
    settings: dict | None = None,
) -> EngineRun:
    """One completion per prompt (a Spec-Bench row: `turns`, `question_id`, `category`), in order; a server that does
    not decode speculatively, or not with per-step counts, is refused."""
    rows, spec_seen = [], {}
    for i, p in enumerate(prompts):
        text = p["turns"][0]
        c = complete(server, text, max_new_tokens, temperature, seed, timeout)
        spec = check_speculative(server, c)
        if spec.get("num_spec_tokens") is not None:
            spec_seen = {"num_spec_tokens": spec["num_spec_tokens"]}
        rows.append(
            {
                "question_id": p.get("question_id"),
                "category": p.get("category"),
                "text": text,
                "prompt_ids": c.prompt_ids,
                "output_ids": c.output_ids,
                "per_step_accepted": spec["per_step_accepted"],
                "per_step_drafted": spec["per_step_drafted"],
                "finish_reason": c.finish_reason,
                "wall_s": round(c.wall_s, 4),
                "metrics": c.metrics,
            }
        )
        if progress:
            progress(i + 1, len(prompts), "engine")
    engine = server.describe() | {"speculative": spec_seen, "fingerprint": c.fingerprint}
    return validate_run(
        {
            "format": RUN_FORMAT,
            "engine": engine,
            "settings": {
                "max_new_tokens": max_new_tokens,
                "temperature": temperature,
                "seed": seed,
                **(settings or {}),
            },
            "prompts": rows,
            "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )


def reference_run(run: EngineRun, k: int) -> RunConfig:
    """specviz's settings for the reference: the engine's algorithm (a chain of K drafted by the standalone draft),
    its length, temperature and seed, and the inspector's records kept."""
    s = run.settings
    return RunConfig(
        method="chain",
        chain=ChainConfig(k=k),
        drafter="model",
        max_new_tokens=s["max_new_tokens"],
        sampling=SamplingConfig(temperature=float(s["temperature"]), seed=int(s.get("seed") or 0)),
    )


def check_prompts(run: EngineRun, pair: Pair) -> None:
    """The engine's prompt ids against the target tokenizer's chat template: another tokenizer, another model."""
    for p in run.prompts:
        ours = encode_prompt(pair.tokenizer, p.text)
        if ours != p.prompt_ids:
            at = first_difference(ours, p.prompt_ids)
            raise ServerError(
                f"the server turned prompt {p.question_id or p.text[:40]!r} into other token ids than the target's "
                f"tokenizer and chat template (from token {at} on): it serves another model than the pair given"
            )


def add_reference(run: EngineRun, pair: Pair, progress: Progress | None = None) -> EngineRun:
    """`run` with each prompt's reference: specviz's free run, its count at each engine step, the differences."""
    k = run.engine.get("speculative", {}).get("num_spec_tokens")
    if not k:
        raise ValueError("the engine run has no speculative steps to replay (its server drafted nothing)")
    check_prompts(run, pair)
    cfg = reference_run(run, int(k))
    decoder = f"{run.engine.get('name', 'engine')} {run.engine.get('version', '')}".strip()
    prompts, steps, foreign = [], 0, 0
    for i, p in enumerate(run.prompts):
        t0 = time.perf_counter()
        free = generate(pair, p.prompt_ids, cfg, prompt_text=p.text)
        wall = time.perf_counter() - t0
        rep = replay(pair, p.prompt_ids, p.output_ids, p.per_step_accepted, cfg, decoder, p.text)
        counts, diffs = compare_steps(p, rep)
        steps += len(counts)
        foreign += sum(d.reason == "target" for d in diffs)
        ref = Reference(
            output_ids=list(free.output_ids),
            per_step_accepted=counts,
            first_difference=diffs[0] if diffs else None,
            differences=diffs,
            output_first_difference=first_difference(list(free.output_ids), p.output_ids),
            free_run_accepted=[r.n_accepted for r in free.rounds],
            replay=rep.to_dict(),
            wall_s=round(wall, 4),
        )
        prompts.append(p.model_copy(update={"reference": ref}))
        if progress:
            progress(i + 1, len(run.prompts), "reference")
    if steps and foreign > FOREIGN_SHARE * steps:
        raise ServerError(
            f"at {foreign} of {steps} engine steps the server's token is neither the target's choice nor a near-tie: "
            "it serves another model than the target given"
        )
    settings = {
        "method": cfg.method,
        "k": cfg.chain.k,
        "drafter": cfg.drafter,
        "dtype": pair.info.get("dtype"),
        "device": pair.info.get("device"),
        "machine": machine_name(),
        "target": pair.info.get("target"),
        "draft": pair.info.get("draft"),
        "reasons": dict(REASONS),
    }
    out = run.model_copy(update={"prompts": prompts, "reference_settings": settings})
    settings["counts"] = reason_counts(out)
    if cfg.sampling.temperature > 0:  # sampled: the rates over the set, per draft position
        settings["sampled_check"] = [asdict(c) for c in sampled_check(out)]
    return validate_run(out.model_dump() | {"reference_settings": settings})
