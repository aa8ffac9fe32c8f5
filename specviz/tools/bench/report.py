"""Benchmark records -> aggregates, a markdown report and plotly HTML. No models, no torch.

Notation as in `specviz.tools.bench.run`: tau = tokens per round (per target forward); alpha_d = P(accepted path
reaches draft depth d | it reached d - 1 and the draft offered depth d). Tokens/s pools tokens
and wall time over all prompts of a (temperature, setting) cell; the per-prompt mean is kept too.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import plotly.graph_objects as go

MAX_ALPHA_DEPTH = 8


def alpha(accepted: list[int], depth: list[int | None]) -> list[float | None] | None:
    """alpha_d for d = 1..max offered depth (pooled over rounds); None when depths are unknown."""
    if not depth or any(d is None for d in depth) or max(depth) == 0:
        return None
    out = []
    for d in range(1, min(max(depth), MAX_ALPHA_DEPTH) + 1):
        offered = [a for a, D in zip(accepted, depth) if D >= d and a >= d - 1]
        out.append(sum(a >= d for a in offered) / len(offered) if offered else None)
    return out


def _cell(rs: list[dict]) -> dict:
    tokens, ms, rounds = sum(r["tokens"] for r in rs), sum(r["total_ms"] for r in rs), sum(r["rounds"] for r in rs)
    c = {
        "runs": len(rs),
        "tokens": tokens,
        "total_ms": ms,
        "tokens_per_s": tokens / ms * 1e3 if ms else 0.0,
        "tokens_per_s_prompt_mean": sum(r["tokens"] / r["total_ms"] * 1e3 for r in rs) / len(rs),
        "rounds": rounds,
        "tau": tokens / rounds if rounds else None,
        "alpha": alpha([a for r in rs for a in r["accepted"]], [d for r in rs for d in r["depth"]]),
    }
    if "draft_ms" in rs[0]:
        parts = {k: sum(r[f"{k}_ms"] for r in rs) for k in ("draft", "verify", "overhead")}
        parts["other"] = ms - sum(parts.values())  # prefill and loop setup
        c["split_pct"] = {k: 100 * v / ms for k, v in parts.items()}
        c["loop_tokens_per_s"] = tokens / (ms - parts["other"]) * 1e3 if ms > parts["other"] else None
        c["outside_forwards_pct"] = 100 * (1 - sum(r["forward_ms"] for r in rs) / ms)  # time not in LM.forward
        c["draft_forwards_per_round"] = sum(r["draft_forwards"] for r in rs) / rounds
    return c


def summarize(runs: list[dict], settings, mismatches: list[dict]) -> dict:
    """Aggregates per (temperature, setting) and per (temperature, task, setting), with speedups."""
    hf_assisted = {s.key for s in settings if s.hf_assisted}
    by = defaultdict(list)
    for r in runs:
        by[(r["temperature"], r["setting"])].append(r)
        by[(r["temperature"], r["task"], r["setting"])].append(r)
    summary, by_task = [], []
    for t in sorted({r["temperature"] for r in runs}):
        cells = {s.key: _cell(by[(t, s.key)]) for s in settings if by[(t, s.key)]}
        best_hf = max((k for k in cells if k in hf_assisted), key=lambda k: cells[k]["tokens_per_s"], default=None)
        for s in settings:
            if s.key not in cells:
                continue
            c = cells[s.key]
            bad = [m for m in mismatches if m["setting"] == s.key] if t == 0 else []
            summary.append(
                {
                    "temperature": t,
                    "setting": s.key,
                    "label": s.label,
                    "kind": s.kind,
                    **c,
                    "speedup_vs_ar": c["tokens_per_s"] / cells["ar"]["tokens_per_s"],
                    "loop_speedup_vs_ar": _ratio(c.get("loop_tokens_per_s"), cells["ar"].get("loop_tokens_per_s")),
                    "best_hf": best_hf,
                    "speedup_vs_best_hf": c["tokens_per_s"] / cells[best_hf]["tokens_per_s"] if best_hf else None,
                    "greedy_mismatches": len(bad) if t == 0 and s.kind != "engine" else None,
                    "min_mismatch_margin": min((m["margin"] for m in bad), default=None),
                }
            )
        for task in sorted({r["task"] for r in runs}):
            ar = by[(t, task, "ar")]
            ar_tps = _cell(ar)["tokens_per_s"] if ar else None
            for s in settings:
                rs = by[(t, task, s.key)]
                if rs:
                    c = _cell(rs)
                    by_task.append(
                        {
                            "temperature": t,
                            "task": task,
                            "setting": s.key,
                            "runs": len(rs),
                            "tokens_per_s": c["tokens_per_s"],
                            "tau": c["tau"],
                            "speedup_vs_ar": c["tokens_per_s"] / ar_tps if ar_tps else None,
                        }
                    )
    return {"summary": summary, "by_task": by_task}


def _ratio(a, b):
    return a / b if a and b else None


# -- markdown ----------------------------------------------------------------------------------
def _f(x, fmt="{:.2f}", none="n/a"):
    return none if x is None else fmt.format(x)


def _alpha_str(a):
    return "n/a" if a is None else " ".join(_f(x, "{:.2f}", "-") for x in a)


def _split_str(c):
    s = c.get("split_pct")
    return "n/a" if s is None else f"{s['draft']:.0f} / {s['verify']:.0f} / {s['overhead']:.0f} / {s['other']:.0f}"


def suite_markdown(suite: dict) -> list[str]:
    dt, m = suite["dtype"], suite["models"]
    cache = m.get("kv_cache", "growing") + (" with CUDA graphs" if m.get("cuda_graphs") else "")
    lines = [f"### {dt}: target {m.get('target')}, draft {m.get('draft')}, {cache} KV cache", ""]
    for t in sorted({c["temperature"] for c in suite["summary"]}):
        rows = [c for c in suite["summary"] if c["temperature"] == t]
        lines += [
            f"**T = {t:g}** ({rows[0]['runs']} prompts; best HF assisted: {rows[0]['best_hf']})",
            "",
            "| method | tokens/s | × our AR | × our AR, decode loop | × best HF assisted | τ | "
            "α per draft position 1.. | draft / verify / overhead / other % | outside forwards % | greedy mismatches |",
            "|---|---:|---:|---:|---:|---:|---|---|---:|---:|",
        ]
        for c in rows:
            mm = "" if c["greedy_mismatches"] is None else str(c["greedy_mismatches"])
            if c["greedy_mismatches"]:
                mm += f" (min margin {c['min_mismatch_margin']:.3g})"
            lines.append(
                f"| {c['setting']} — {c['label']} | {c['tokens_per_s']:.1f} | {c['speedup_vs_ar']:.2f} | "
                f"{_f(c.get('loop_speedup_vs_ar'))} | {_f(c['speedup_vs_best_hf'])} | {_f(c['tau'])} | "
                f"{_alpha_str(c['alpha'])} | "
                f"{_split_str(c)} | {_f(c.get('outside_forwards_pct'), '{:.1f}')} | {mm} |"
            )
        lines.append("")
        tasks = sorted({b["task"] for b in suite["by_task"]})
        lines += [
            f"Per task, × our AR (T = {t:g}):",
            "",
            "| method | " + " | ".join(tasks) + " |",
            "|---|" + "---:|" * len(tasks),
        ]
        for key in [c["setting"] for c in rows]:
            vals = {
                b["task"]: b["speedup_vs_ar"] for b in suite["by_task"] if b["temperature"] == t and b["setting"] == key
            }
            lines.append(f"| {key} | " + " | ".join(_f(vals.get(x)) for x in tasks) + " |")
        lines.append("")
    mism = suite["mismatches"]
    if any(c["temperature"] == 0 for c in suite["summary"]):
        lines.append(f"Greedy audit ({dt}): {len(mism)} mismatch(es) against our autoregressive output.")
    else:
        lines.append("Greedy audit: none (no T = 0 runs; the sampled distribution is checked by the chi-square tests).")
    for x in mism[:20]:
        lines.append(
            f"- prompt {x['prompt']} ({x['task']}), {x['setting']}: first difference at output position "
            f"{x['position']} (reference {x['ref_token']}, got {x['got_token']}); target margin top1 − top2 = "
            f"{x['margin']:.4g}"
        )
    if len(mism) > 20:
        lines.append(f"- … {len(mism) - 20} more in the JSON file")
    runs = {c["setting"]: c["runs"] for c in suite["summary"] if c["temperature"] == 0}
    for k, n in suite.get("engine_agreement", {}).items():
        lines.append(f"- {k}: greedy output equal to our autoregressive output on {n} of {runs.get(k, n)} prompts")
    for k, why in suite.get("skipped", {}).items():
        lines.append(f"- skipped {k}: {why}")
    return lines + [""]


def notes(result: dict) -> list[str]:
    out = [
        "Notes:",
        "- tokens/s = generated tokens ÷ wall time of the whole call (prefill included), pooled over prompts; "
        "× our AR and × best HF assisted divide tokens/s at the same temperature.",
        "- × our AR, decode loop: the same ratio without the prompt's prefill and the set-up (tokens ÷ the rounds' "
        "draft + verify + overhead time), what speculation buys once the prompt is in the cache; "
        "not measurable inside HF generate().",
        "- τ = tokens per round (per target forward). For Hugging Face it comes from a streamer whose put() counts "
        "the tokens of each round; α per position is known for our methods and HF constant K only.",
        "- draft / verify / overhead / other: shares of wall time in our decode loop (RoundTrace draft_ms, "
        "verify_ms, overhead_ms; other = prefill and setup). Not measurable inside HF generate().",
        "- outside forwards % = share of wall time not spent inside LM.forward of the target or the draft "
        "(model body + output layer): the engine's own cost (drafting logic, sampling, verification, cache moves).",
        "- HF assisted generation drives the standalone draft model with its full output layer; "
        "our engine's draft wrapper may use a reduced-vocabulary head (see draft_head_ours in the JSON).",
    ]
    if any(c["kind"] == "engine" for s in result["suites"].values() for c in s["summary"]):
        out.append(
            "- engine:… rows: a served engine over HTTP (`--engine`), timed end to end as its client sees each "
            "request (chat template, prefill, decode, reply); τ counts its prefill and one forward per step."
        )
    if not result["machine"].get("sklearn_for_hf_threshold"):
        out.append(
            "- scikit-learn is not installed, so HF's dynamic mode keeps its confidence threshold at 0.4 "
            "(no ROC adaptation)."
        )
    for dt, s in result["suites"].items():
        if s["models"].get("draft_is_target"):
            out.append(f"- {dt}: no trained draft was found; the target drafted for itself.")
    if len(result["suites"]) > 1:
        out.append(
            "- Greedy mismatches by dtype: "
            + ", ".join(f"{dt} {len(s['mismatches'])}" for dt, s in result["suites"].items())
            + " (specviz's methods must give 0 in either: its targets' forwards are batch-invariant on CPU, "
            "specviz.kernels; Hugging Face's own loop may flip a bf16 near-tie)."
        )
    return out


def markdown(result: dict) -> str:
    m, c = result["machine"], result["config"]
    lines = [
        "## specviz bench",
        "",
        f"Machine: {m['cpu']} ({m['cores']} cores, {m['torch_threads']} torch threads"
        + (f", GPU {m['gpu']}" if m.get("gpu") else "")
        + f"); torch {m['torch']}, transformers "
        f"{m['transformers']}, Python {m['python']}"
        + (f"; few-row products on the numba row kernel ({m['row_kernel']})" if m.get("row_kernel") else "")
        + ".",
        f"Suite: {c['n_prompts']} prompts from {Path(c['prompts_file']).name} (stratified by task, seed {c['seed']}), "
        f"{c['max_new_tokens']} new tokens, temperatures {', '.join(f'{t:g}' for t in c['temperatures'])}, "
        f"dtype {', '.join(c['dtypes'])}.",
        "",
    ]
    if c.get("command"):
        lines[-1:-1] = [f"Command: `{c['command']}`"]
    for suite in result["suites"].values():
        lines += suite_markdown(suite)
    return "\n".join(lines + notes(result)) + "\n"


# -- plotly ------------------------------------------------------------------------------------
def figures(result: dict) -> list:
    """The report's figures: per dtype, tokens/s per setting; then per temperature, acceptance per draft position,
    where specviz's wall time goes and the speedup per task."""
    figs = []
    for dt, s in result["suites"].items():
        temps = sorted({c["temperature"] for c in s["summary"]})
        f = go.Figure(
            [
                go.Bar(
                    name=f"T={t:g}",
                    x=[c["setting"] for c in s["summary"] if c["temperature"] == t],
                    y=[c["tokens_per_s"] for c in s["summary"] if c["temperature"] == t],
                )
                for t in temps
            ]
        )
        f.update_layout(title=f"Tokens per second ({dt})", barmode="group", yaxis_title="tokens/s")
        figs.append(f)
        for t in temps:
            figs += _temperature_figures(s, dt, t)
    return figs


def _temperature_figures(s: dict, dt: str, t: float) -> list:
    rows = [c for c in s["summary"] if c["temperature"] == t]
    f = go.Figure(
        [
            go.Scatter(name=c["setting"], x=list(range(1, len(c["alpha"]) + 1)), y=c["alpha"], mode="lines+markers")
            for c in rows
            if c["alpha"]
        ]
    )
    f.update_layout(
        title=f"Acceptance per draft position ({dt}, T={t:g})",
        xaxis_title="draft depth d",
        yaxis_title="α_d",
        yaxis_range=[0, 1.05],
    )
    ours = [c for c in rows if c.get("split_pct")]
    g = go.Figure(
        [
            go.Bar(name=part, x=[c["setting"] for c in ours], y=[c["split_pct"][part] for c in ours])
            for part in ("draft", "verify", "overhead", "other")
        ]
    )
    g.update_layout(title=f"Where our wall time goes ({dt}, T={t:g})", barmode="stack", yaxis_title="% of wall time")
    tasks = sorted({b["task"] for b in s["by_task"]})
    keys = [c["setting"] for c in rows]
    speedup = {(b["task"], b["setting"]): b["speedup_vs_ar"] for b in s["by_task"] if b["temperature"] == t}
    z = [[speedup.get((task, k)) for task in tasks] for k in keys]
    h = go.Figure(go.Heatmap(z=z, x=tasks, y=keys, colorscale="RdBu", zmid=1.0, texttemplate="%{z:.2f}"))
    h.update_layout(
        title=f"Speedup over our autoregressive decoding, per task ({dt}, T={t:g})", height=120 + 28 * len(keys)
    )
    return [f, g, h]


def write_html(result: dict, folder: str | Path) -> list[Path]:
    """One self-contained page (plotly.js inlined once, so it opens offline)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    parts = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figures(result))]
    path = folder / "bench.html"
    path.write_text(
        "<html><head><meta charset='utf-8'><title>specviz bench</title></head><body>"
        + "\n".join(parts)
        + "</body></html>",
        encoding="utf-8",
    )
    return [path]
