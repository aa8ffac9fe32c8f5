"""Held-out evaluation of a draft against its target on Spec-Bench prompts (T = 0).

Notation: along the target's greedy path y_1..y_R of a prompt, m_i = 1[argmax q_i = y_i] (the draft's
argmax, teacher-forced on the same prefix, equals the target's). Greedy agreement a = mean m_i.
For a token-level draft under greedy verification, a round starting at position i with chain length K
accepts A_i(K) = min(K, number of consecutive m_i = m_{i+1} = ... = 1), exactly; E[A(K)] is the mean
over all i, tau(K) = 1 + E[A(K)] tokens per target call, and alpha_j = P(A >= j | A >= j - 1) the
acceptance rate of draft position j. Cost: c = draft step / target step (one token, warm KV cache),
v(n) = target forward over n tokens / over one; predicted speedup(K) = tau(K) / (K c + v(K + 1)).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from specviz.analysis.costs import measure_costs
from specviz.core.assets import SPEC_BENCH
from specviz.core.prompts import encode_prompt
from specviz.train.data import Distill, build_shards

KS = (1, 2, 3, 4, 5, 6)


def spec_bench_rows(path: Path = SPEC_BENCH) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def heldout_prompts(n: int, path: Path = SPEC_BENCH) -> list[tuple[str, str]]:
    """n Spec-Bench first turns spread evenly over the file (so every category is represented)."""
    rows = spec_bench_rows(path)
    step = len(rows) / n
    return [(rows[int(i * step)]["category"], rows[int(i * step)]["turns"][0]) for i in range(n)]


def heldout_data(pair, n: int, folder: Path, new_tokens: int = 128) -> Distill:
    """The target's greedy continuations of the held-out prompts (cached under `folder`)."""
    return build_shards(
        pair.target.model,
        pair.tokenizer,
        heldout_prompts(n),
        folder,
        f"specbench-{n}-{pair.info['dtype']}",
        temperature=0.0,
        max_new=new_tokens,
        top_k=4,
        seed=0,
        shard_size=n,
        max_batch=8,
        token_budget=4096,
    )


@torch.inference_mode()
def matches(draft, data: Distill) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per sequence, m_i with the draft's reduced head (as the engine runs it: with a context vocabulary, the row
    predicting position t + 1 covers ids_<=t, not the whole sequence the one forward was fed) and with its full head."""
    reduced, full = [], []
    for s in range(len(data)):
        ids, P, rows = data.sequence(s)
        want = ids[P:]
        draft.reset()
        out = draft.forward(ids[:-1].tolist(), rows=slice(P - 1, None))  # (R, V)
        ctx = None
        if getattr(draft, "context_vocab", False):
            ctx = torch.zeros(len(want), draft.vocab_size, dtype=torch.bool)
            ctx[0, ids[:P]] = True
            for r in range(1, len(want)):
                ctx[r] = ctx[r - 1]
                ctx[r, ids[P + r - 1]] = True
        reduced.append(draft.logits(out.hidden, ctx).argmax(-1) == want)
        full.append(draft.head(out.hidden).float().argmax(-1) == want)
    draft.reset()
    return reduced, full


def coverage(data: Distill, head_ids: torch.Tensor) -> dict:
    """How often the target's greedy token lies in a reduced head's ids, and in those ids or the context before it
    (what a context vocabulary covers, `ModelConfig.context_vocab`): the ceilings of the draft's agreement."""
    in_head = torch.zeros(max(int(data.tokens.max()), int(head_ids.max())) + 1, dtype=torch.bool)
    in_head[head_ids] = True
    head = ctx = n = 0
    for s in range(len(data)):
        ids, P, _ = data.sequence(s)
        for t in range(P, len(ids)):
            x = int(ids[t])
            head += bool(in_head[x])
            ctx += bool(in_head[x]) or bool((ids[:t] == x).any())
            n += 1
    return {"size": len(head_ids), "head": head / max(n, 1), "head_and_context": ctx / max(n, 1)}


def accepted(m: list[torch.Tensor], K: int) -> tuple[float, list[float]]:
    """E[A(K)] over all start positions, and alpha_1..alpha_K."""
    counts = torch.zeros(K + 1)  # histogram of A
    for x in m:
        x = x.tolist()
        run = 0
        for i in range(len(x) - 1, -1, -1):  # run of matches starting at i
            run = run + 1 if x[i] else 0
            counts[min(run, K, len(x) - i)] += 1
    p = counts / counts.sum()
    at_least = [float(p[j:].sum()) for j in range(K + 1)]
    return float((p * torch.arange(K + 1)).sum()), [at_least[j] / max(at_least[j - 1], 1e-9) for j in range(1, K + 1)]


@torch.inference_mode()
def step_costs(pair, prompt_ids: list[int], reps: int = 30) -> dict:
    """Median ms of one-token target / draft steps on a warm cache of the prompt's length, and target forwards over
    n = 2..7 tokens relative to one (analysis.costs.measure_costs)."""
    c = measure_costs(pair, context=len(prompt_ids), max_tokens=7, repeats=reps)
    target = c.verify_ms[0]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return {
        "target_ms": target,
        "draft_ms": c.draft_ms,
        "c": c.draft_ms / target,
        "verify": {n: c.verify_ms[n - 1] / target for n in range(2, 8)},
        **({"busy_load": load} if load > (os.cpu_count() or 1) + 0.5 else {}),
    }


def busy_text(c: dict) -> str:
    """The card's warning where other work shared the cores while `step_costs` timed the steps (`busy_load`: the
    1-minute load average then, above the core count), else ''."""
    if "busy_load" not in c:
        return ""
    return (
        f" (timed while the machine was busy, load {c['busy_load']:.1f} on {os.cpu_count()} cores: these times, c "
        "and the predicted speedups are not this CPU's own)"
    )


def evaluate(pair, data: Distill, cost_prompt: str, reps: int = 30) -> dict:
    """All held-out figures of `pair.draft` on `data` (see the module docstring)."""
    reduced, full = matches(pair.draft, data)
    res = {"positions": int(sum(len(x) for x in reduced)), "prompts": len(data)}
    for name, m in (("reduced", reduced), ("full", full)):
        res[name] = {"agreement": float(torch.cat(m).float().mean())}
        for K in KS:
            e, alpha = accepted(m, K)
            res[name][f"K{K}"] = {"E_accepted": e, "tau": 1 + e, "alpha": alpha}
    by_cat: dict[str, list[torch.Tensor]] = {}
    for s, m in enumerate(reduced):
        by_cat.setdefault(data.meta[s]["category"], []).append(m)
    res["agreement_by_category"] = {c: float(torch.cat(v).float().mean()) for c, v in sorted(by_cat.items())}
    cost = step_costs(pair, encode_prompt(pair.tokenizer, cost_prompt), reps)
    res["cost"] = cost
    res["predicted_speedup"] = {
        f"K{K}": res["reduced"][f"K{K}"]["tau"] / (K * cost["c"] + cost["verify"][K + 1]) for K in KS
    }
    return res


def table(res: dict) -> str:
    """Markdown summary of `evaluate`'s result (for the model card and the console)."""
    c = res["cost"]
    lines = [
        f"Held-out: {res['prompts']} Spec-Bench prompts, {res['positions']} target greedy positions.",
        "",
        f"- greedy agreement: reduced head **{res['reduced']['agreement']:.3f}**, "
        f"full head {res['full']['agreement']:.3f}",
        f"- step time (bf16, one token, warm cache): target {c['target_ms']:.1f} ms, draft {c['draft_ms']:.2f} ms, "
        f"**c = {c['c']:.3f}**{busy_text(c)}",
        "- verify cost v(n) = target forward over n tokens / one: "
        + ", ".join(f"v({n}) = {v:.2f}" for n, v in c["verify"].items()),
        "",
        "| K | E[accepted] | tau = tokens / target call | alpha per draft position | full-head tau "
        "| predicted speedup |",
        "|---|---|---|---|---|---|",
    ]
    for K in KS:
        r, f = res["reduced"][f"K{K}"], res["full"][f"K{K}"]
        lines.append(
            f"| {K} | {r['E_accepted']:.2f} | {r['tau']:.2f} | {' '.join(f'{a:.2f}' for a in r['alpha'])} | "
            f"{f['tau']:.2f} | {res['predicted_speedup'][f'K{K}']:.2f}x |"
        )
    lines += [
        "",
        "Agreement by category: " + ", ".join(f"{k} {v:.2f}" for k, v in res["agreement_by_category"].items()),
    ]
    return "\n".join(lines)
