"""`specviz sweep {run,pick-h}`: SpecDec++ against fixed-K chains, and choosing its threshold h.

run     times autoregressive decoding, chains with K in --ks and SpecDec++ at every h in --hs on three
        Spec-Bench families: chat (writing + roleplay), math (math + math_reasoning) and code (coding),
        at each temperature; reports tokens/s per family and over their union, the best fixed K, and
        SpecDec++'s gain over it. Hygiene as in `specviz bench`: an untimed warm-up of every setting, then
        per prompt every setting back to back in an order rotated by the prompt index. Tokens/s counts
        decode time only (the sum of round times): the target's prompt prefill is the same for every
        setting and is left out.
pick-h  measures the draft and verify step costs of the machine it runs on, drafts a calibration set
        (composed training prompts, never Spec-Bench) to a fixed length K_cal with the head's factors
        recorded, and replays the stop rule for every (h, k_max), and every fixed K, on those rounds with the
        measured costs (`specviz.analysis.costs.replay`, exact per round). The h with the least modelled time
        per token is the pick.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace

import torch
from tqdm import tqdm

from specviz.core.args import output_file, positive
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import (
    DRAFTERS,
    DTYPES,
    ChainConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    SpecDecPPConfig,
)
from specviz.core.output import replacing
from specviz.core.prompts import encode_prompt
from specviz.engine.loop import iter_rounds
from specviz.models.loading import load_pair
from specviz.tools.pick_h import pick_h

FAMILIES = {"chat": ("writing", "roleplay"), "math": ("math", "math_reasoning"), "code": ("coding",)}


def family_prompts(tokenizer, per_family: int, seed: int = 0) -> dict[str, list[list[int]]]:
    """`per_family` first-turn prompts per family, round robin over its categories, seeded order."""
    rows = [json.loads(line) for line in SPEC_BENCH.read_text().splitlines() if line.strip()]
    g = torch.Generator().manual_seed(seed)
    out = {}
    for fam, cats in FAMILIES.items():
        lists = [[r for r in rows if r["category"] == c] for c in cats]
        lists = [[lst[i] for i in torch.randperm(len(lst), generator=g).tolist()] for lst in lists]
        picked = [lst[i] for i in range(max(map(len, lists))) for lst in lists if i < len(lst)][:per_family]
        out[fam] = [encode_prompt(tokenizer, r["turns"][0]) for r in picked]
    return out


def settings(
    ks: list[int], hs: list[float], base: SpecDecPPConfig, k_mins: list[int] | None = None
) -> list[tuple[str, dict]]:
    """Autoregressive, fixed K in `ks`, and SpecDec++ at every (k_min, h); a setting whose k_min is `base`'s is
    named `h=..` alone, any other `h=..,k_min=..`."""
    spec = [
        (
            f"h={h:g}" + ("" if m == base.k_min else f",k_min={m}"),
            {"method": "specdecpp", "specdecpp": replace(base, threshold=h, k_min=m)},
        )
        for m in (k_mins or [base.k_min])
        for h in hs
    ]
    return [("ar", {"method": "ar"})] + [(f"K={k}", {"method": "chain", "chain": ChainConfig(k)}) for k in ks] + spec


def timed(
    pair, ids: list[int], method: dict, temperature: float, tokens: int, seed: int, drafter: str = "auto"
) -> dict:
    run = RunConfig(
        max_new_tokens=tokens, sampling=SamplingConfig(temperature=temperature, seed=seed), drafter=drafter, **method
    )
    rounds = list(iter_rounds(pair, ids, run))
    return {
        "tokens": sum(len(r.emitted) for r in rounds),
        "ms": sum(r.draft_ms + r.verify_ms + r.overhead_ms for r in rounds),
        "rounds": len(rounds),
        "drafted": sum(r.n_drafted for r in rounds),
        "accepted": sum(r.n_accepted for r in rounds),
        "output": [t for r in rounds for t in r.emitted],
    }


def sweep(
    pair,
    prompts: dict[str, list[list[int]]],
    grid: list[tuple[str, dict]],
    temperatures: list[float],
    tokens: int,
    seed: int = 0,
    progress: bool = True,
    drafter: str = "auto",
) -> list[dict]:
    """One record per (temperature, family, prompt, setting)."""
    first = next(iter(prompts.values()))[0]
    for t in temperatures:  # untimed warm-up
        for _, method in grid:
            timed(pair, first, method, t, 8, seed, drafter)
    n = len(temperatures) * sum(map(len, prompts.values())) * len(grid)
    bar = tqdm(total=n, unit="run", disable=not progress, file=sys.stderr)
    records = []
    for t in temperatures:
        i = 0
        for fam, items in prompts.items():
            for ids in items:
                for key, method in grid[i % len(grid) :] + grid[: i % len(grid)]:
                    bar.set_postfix_str(f"T={t:g} {fam} {key}", refresh=False)
                    rec = timed(pair, ids, method, t, tokens, seed + i, drafter)
                    records.append({"temperature": t, "family": fam, "prompt": i, "setting": key, **rec})
                    bar.update()
                i += 1
    bar.close()
    return records


def greedy_mismatches(records: list[dict]) -> list[tuple[str, int, str]]:
    """(family, prompt, setting) of every T = 0 run whose output differs from the autoregressive one."""
    ref = {(r["family"], r["prompt"]): r["output"] for r in records if r["temperature"] == 0 and r["setting"] == "ar"}
    return [
        (r["family"], r["prompt"], r["setting"])
        for r in records
        if r["temperature"] == 0
        and (r["family"], r["prompt"]) in ref
        and r["output"] != ref[(r["family"], r["prompt"])]
    ]


def summarize(records: list[dict], default_h: float) -> dict:
    """tokens/s per (temperature, family | 'union', setting); best fixed K; SpecDec++ (default h and best h) vs it."""
    out = {}
    for t in sorted({r["temperature"] for r in records}):
        order = dict.fromkeys(r["setting"] for r in records if r["temperature"] == t)  # grid order
        for fam in [*FAMILIES, "union"]:
            rs = [r for r in records if r["temperature"] == t and (fam == "union" or r["family"] == fam)]
            if not rs:
                continue
            table = {}
            for key in [k for k in order if any(r["setting"] == k for r in rs)]:
                sel = [r for r in rs if r["setting"] == key]
                tok, ms = sum(r["tokens"] for r in sel), sum(r["ms"] for r in sel)
                rounds = sum(r["rounds"] for r in sel)
                table[key] = {
                    "tok_s": 1e3 * tok / ms,
                    "tokens": tok,
                    "ms": ms,
                    "mean_k": sum(r["drafted"] for r in sel) / rounds,
                    "tokens_per_round": tok / rounds,
                }
            ks = {k: v["tok_s"] for k, v in table.items() if k.startswith("K=")}
            hs = {k: v["tok_s"] for k, v in table.items() if k.startswith("h=")}
            best_k = max(ks, key=ks.get) if ks else None
            row = {"table": table, "best_k": best_k}
            if best_k and hs:
                best_h = max(hs, key=hs.get)
                dflt = f"h={default_h:g}"
                row.update(best_h=best_h, gain_best_h=hs[best_h] / ks[best_k] - 1)
                if dflt in hs:
                    row["gain_default_h"] = hs[dflt] / ks[best_k] - 1
            if "ar" in table and best_k:
                row["best_k_speedup_vs_ar"] = ks[best_k] / table["ar"]["tok_s"]
            out[f"T={t:g}/{fam}"] = row
    return out


def report(summary: dict) -> str:
    lines = []
    for name, row in summary.items():
        lines.append(
            f"\n## {name}: best fixed {row['best_k']}"
            + (f"; SpecDec++ default h {row['gain_default_h']:+.1%}" if "gain_default_h" in row else "")
            + (f"; best {row['best_h']} {row['gain_best_h']:+.1%}" if "best_h" in row else "")
        )
        lines.append("| setting | tok/s | mean K | tokens/round |\n|---|---|---|---|")
        for key, v in row["table"].items():
            lines.append(f"| {key} | {v['tok_s']:.2f} | {v['mean_k']:.2f} | {v['tokens_per_round']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    d = SpecDecPPConfig()
    ap = argparse.ArgumentParser(prog="specviz sweep", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="time SpecDec++ against fixed K on chat / math / code")
    r.add_argument("--per-family", type=positive(int), default=8)
    r.add_argument("--ks", type=positive(int), nargs="+", default=[1, 2, 3, 4, 6])
    r.add_argument("--hs", type=float, nargs="+", default=[0.3, 0.5, 0.7, 0.9])
    r.add_argument("--k-mins", type=int, nargs="+", default=[d.k_min], help="SpecDec++ k_min values to time")
    p = sub.add_parser("pick-h", help="choose h from the step costs measured where it runs")
    p.add_argument("--prompts", type=positive(int), default=16)
    p.add_argument("--k-cal", type=positive(int), default=12)
    p.add_argument("--hs", type=float, nargs="+", default=[round(0.05 * i, 2) for i in range(1, 20)])
    p.add_argument("--k-maxs", type=positive(int), nargs="+", default=[6, 8, 10, 12])
    p.add_argument("--k-mins", type=int, nargs="+", default=[d.k_min], help="k_min values to choose from")
    p.add_argument(
        "--what-if-auc",
        type=float,
        nargs="*",
        default=[],
        metavar="AUC",
        help="also replay the head made better or worse, to each of these AUCs (0.5-1): what a better "
        "head would buy here",
    )
    for a in (r, p):
        a.add_argument("--tokens", type=positive(int), default=64)
        a.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
        a.add_argument("--draft", help="draft folder with its acceptance head (default: models/smollm2-draft)")
        a.add_argument(
            "--drafter",
            choices=DRAFTERS,
            default=RunConfig().drafter,
            help="which draft drafts (auto: the EAGLE drafter where it has an acceptance head)",
        )
        a.add_argument("--dtype", default=ModelConfig().dtype, choices=DTYPES)
        a.add_argument("--seed", type=int, default=0)
        a.add_argument("--out", type=output_file, help="write the full results as JSON here")
        a.add_argument("--threads", type=positive(int), default=None, help="torch CPU threads (default: torch's own)")
    a = ap.parse_args(argv)
    try:  # every setting checked before minutes of model loading
        grid = (
            settings(a.ks, a.hs, d, a.k_mins)
            if a.cmd == "run"
            else [
                SpecDecPPConfig(threshold=h, k_min=min(m, k), k_max=k) for h in a.hs for m in a.k_mins for k in a.k_maxs
            ]
        )
        for t in a.temperatures:
            SamplingConfig(temperature=t)
        if (
            a.tokens < 1
            or getattr(a, "per_family", 1) < 1
            or getattr(a, "prompts", 1) < 1
            or getattr(a, "k_cal", 1) < 1
        ):
            raise ValueError("--tokens, --per-family, --prompts and --k-cal must be at least 1")
        if any(not 0.5 <= x <= 1 for x in getattr(a, "what_if_auc", [])):
            raise ValueError(f"--what-if-auc values must lie in [0.5, 1], got {a.what_if_auc}")
    except ValueError as e:
        ap.error(str(e))
    if a.threads:
        torch.set_num_threads(a.threads)
    pair = load_pair(ModelConfig(draft=a.draft, dtype=a.dtype, device="cpu"))
    if a.cmd == "run":
        prompts = family_prompts(pair.tokenizer, a.per_family, a.seed)
        records = sweep(pair, prompts, grid, a.temperatures, a.tokens, a.seed, drafter=a.drafter)
        result = {
            "summary": summarize(records, d.threshold),
            "config": vars(a),
            "specdecpp": asdict(d),
            "greedy_mismatches": greedy_mismatches(records),
            "records": [{k: v for k, v in x.items() if k != "output"} for x in records],
        }
        print(report(result["summary"]))
        if 0 in a.temperatures:
            print(
                f"\nT=0 outputs that differ from autoregressive ({pair.info['dtype']}): "
                f"{len(result['greedy_mismatches'])}"
            )
    else:
        result = pick_h(
            pair,
            a.prompts,
            a.tokens,
            a.temperatures,
            a.k_cal,
            a.hs,
            a.k_maxs,
            a.k_mins,
            a.seed,
            a.drafter,
            a.what_if_auc,
        )
        for key, v in result.items():
            if key.startswith("T="):
                print(
                    f"{key}: pick h={v['h']:g} (k_min {v['k_min']}, k_max {v['k_max']}), best fixed K={v['best_k']}, "
                    "modelled gain "
                    f"{v['modelled_gain']:+.1%}; ms/token fixed {v['fixed_ms_per_token'][v['best_k']]:.2f}, "
                    f"oracle {v['oracle_ms_per_token']:.2f} ({v['rounds']} rounds)"
                )
                if "what_if" in v:
                    w = v["what_if"]
                    print(
                        f"  what if: the head's AUC on these rounds {w['head_auc']:.3f}; modelled gain with the head "
                        "sharpened to AUC " + ", ".join(f"{k}: {g:+.1%}" for k, g in w["gain"].items())
                    )
        print("measured costs:", result["measured"])
    if a.out:
        with replacing(a.out) as f:
            f.write(json.dumps(result, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
