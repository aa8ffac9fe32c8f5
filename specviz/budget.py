"""Hardware-aware tree budget: how long one verification forward takes per number of tree tokens, and
the budget that maximises expected tokens per second (Sequoia §3.1.2's choice, with measured costs).

Notation: n = tokens in one forward (the root plus the drafted nodes), t(n) = measured median ms of that
forward on top of a realistic context; for a budget of m drafted nodes a round costs
t_target(m + 1) + (draft forwards) * t_draft and yields G(m) tokens in expectation, so the best budget is
argmax_m G(m) / cost(m). `python -m specviz.budget` measures the pair's curves and stores them in
assets/verify_curve.json, one record per dtype with the machine it was measured on, for the dashboard
to draw (`load_curves`), together with the budget `pick_tree_budget` chooses from the pair's measured
positional acceptance vector at T = 0 and T = 1 (the source of the DySpec and Sequoia default budgets).
"""
from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .lm import LM
from .static_trees import ACCEPTANCE_FILE, acceptance_key, expected_tokens, sequoia
from .tree import children, depths

CURVE_FILE = Path(__file__).resolve().parent.parent / "assets" / "verify_curve.json"
SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)


def machine_info() -> dict:
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():                                         # bf16 speed hinges on these flags
        lines = cpuinfo.read_text().splitlines()
        info["cpu"] = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")), "")
        flags = next((x.split(":", 1)[1].split() for x in lines if x.startswith("flags")), [])
        info["simd"] = sorted(f for f in flags if f.startswith(("avx", "amx")))
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _sync(lm: LM) -> None:
    if lm.device.type == "cuda":
        torch.cuda.synchronize(lm.device)


def measure_curve(lm: LM, context: Sequence[int], sizes: Sequence[int] = SIZES, repeats: int = 5,
                  clock: str = "wall") -> dict:
    """Median ms of one forward of n tree tokens (a binary-tree shape) on top of `context`, for each n.

    Sizes are interleaved within each repeat, so a slow spell hits all of them alike. clock "cpu" times
    the process's CPU time instead of wall time: on a CPU shared with other jobs (and one torch thread)
    that is what the forward would take on an idle core.
    """
    now = time.perf_counter if clock == "wall" else time.process_time
    lm.reset()
    lm.forward(list(context), rows=slice(0, 0))
    base = lm.length
    ids = [int(t) for t in context[-max(sizes):]] * (max(sizes) // max(1, len(context)) + 1)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(repeats + 1):                                 # the first pass warms up
        for n in sizes:
            parents = [-1] + [(i - 1) // 2 for i in range(1, n)]
            _sync(lm)
            t0 = now()
            lm.forward(ids[:n], parents=parents)
            _sync(lm)
            if r:
                times[n].append((now() - t0) * 1e3)
            lm.crop(base)
    return {"n": list(sizes), "ms": [round(sorted(times[n])[len(times[n]) // 2], 3) for n in sizes], "clock": clock}


def interpolate(curve: dict, n: float) -> float:
    """t(n) in ms, linear between measured sizes and beyond the last two."""
    xs, ys = curve["n"], curve["ms"]
    if n <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if n <= x1:
            return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = (xs[-2], ys[-2]), (xs[-1], ys[-1])
    return y1 + (y1 - y0) * (n - x1) / (x1 - x0)


@dataclass(frozen=True)
class BudgetChoice:
    budget: int
    tokens_per_s: float
    table: tuple[tuple[int, float, float, float], ...]      # (budget, expected tokens, round ms, tokens/s)


def pick_budget(curve: dict, expected_tokens: Callable[[int], float], budgets: Sequence[int],
                draft_ms: Callable[[int], float] = lambda m: 0.0) -> BudgetChoice:
    """The budget m maximising expected_tokens(m) / (t_target(m + 1) + draft_ms(m)) in tokens per second."""
    rows = []
    for m in budgets:
        g = float(expected_tokens(m))
        cost = interpolate(curve, m + 1) + float(draft_ms(m))
        rows.append((int(m), round(g, 4), round(cost, 3), round(1e3 * g / cost, 3)))
    best = max(rows, key=lambda r: r[3])
    return BudgetChoice(best[0], best[3], tuple(rows))


def level_draft_ms(parents: Sequence[int], draft_curve: dict) -> float:
    """Draft time to grow a tree level by level: one draft forward per depth over that depth's parents."""
    kids, dep = children(parents), depths(parents)
    per_level: dict[int, int] = {}
    for u, ks in enumerate(kids):
        if ks:
            per_level[dep[u]] = per_level.get(dep[u], 0) + 1
    return sum(interpolate(draft_curve, n) for n in per_level.values())


def pick_tree_budget(record: dict, P: Sequence[float], max_depth: int, budgets: Sequence[int] = range(1, 65)) -> BudgetChoice:
    """The budget that maximises expected tokens/s for Sequoia's tree from the acceptance vector P, with this
    machine's measured target and draft curves (`record`); the same number serves DySpec, whose tree is grown
    from the same per-rank acceptances at run time."""
    trees = {m: sequoia(m, P, max_depth) for m in budgets}
    return pick_budget(record["target"], lambda m: expected_tokens(trees[m], P), budgets,
                       lambda m: level_draft_ms(trees[m], record["draft"]))


def picks(record: dict, info: dict, max_depth: int) -> dict:
    """Best budget per temperature with a measured acceptance vector for this pair (assets/acceptance.json)."""
    table = json.loads(ACCEPTANCE_FILE.read_text()) if ACCEPTANCE_FILE.exists() else {}
    out = {}
    for t in (0.0, 1.0):
        row = table.get(acceptance_key(info.get("target"), info.get("draft"), t))
        if row:
            c = pick_tree_budget(record, row["vector"], max_depth)
            out[f"T={t:g}"] = {"budget": c.budget, "tokens_per_s": c.tokens_per_s, "acceptance": row["vector"],
                               "table": [list(r) for r in c.table]}
    return out


def load_curves(path: Path = CURVE_FILE) -> dict[str, dict]:
    """Stored measurements by dtype: {dtype: {"target": curve, "draft": curve, "machine": ..., ...}}."""
    return json.loads(path.read_text()) if path.exists() else {}


def device_curve(info: dict, path: Path = CURVE_FILE) -> dict | None:
    """The stored target verify curve for this pair's target, dtype and device type (`Pair.info`), else None.

    Measured on one machine; on another it is a guess of the same shape until `python -m specviz.budget`
    re-measures it there."""
    rec = load_curves(path).get(info.get("dtype"))
    if not rec or rec.get("models", {}).get("target") != info.get("target"):
        return None
    if str(rec["models"].get("device", "cpu")).split(":")[0] != str(info.get("device", "cpu")).split(":")[0]:
        return None
    return rec["target"]


def main(argv: Sequence[str] | None = None) -> None:
    import argparse
    from .config import DTYPES, ModelConfig, TreeConfig
    from .loading import REPO, load_pair
    ap = argparse.ArgumentParser(prog="python -m specviz.budget", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default=ModelConfig.dtype, choices=DTYPES)
    ap.add_argument("--context", type=int, default=256, help="tokens already in the cache")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                    help="cpu: process CPU time (use with --threads 1 on a machine shared with other jobs)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--questions", type=Path, default=REPO / "assets" / "spec_bench_questions.jsonl",
                    help="JSON lines with 'turns'; their first turns make the context")
    ap.add_argument("--device", default=ModelConfig.device, help="auto, cpu or cuda[:N]")
    ap.add_argument("--out", type=Path, default=CURVE_FILE)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    pair = load_pair(ModelConfig(dtype=a.dtype, device=a.device))
    text = " ".join(json.loads(line)["turns"][0] for line in a.questions.read_text().splitlines()[:40])
    context = pair.tokenizer(text)["input_ids"][:a.context]
    dtype = pair.info["dtype"]                                      # "auto" resolved
    record = {"machine": machine_info(), "models": dict(pair.info), "dtype": dtype, "context": len(context),
              "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
              "target": measure_curve(pair.target, context, repeats=a.repeats, clock=a.clock),
              "draft": measure_curve(pair.draft, context, repeats=a.repeats, clock=a.clock)}
    record["picks"] = picks(record, pair.info, TreeConfig().max_depth)
    a.out.write_text(json.dumps({**load_curves(a.out), dtype: record}, indent=1) + "\n")
    print(f"{dtype}: target ms by tree tokens n", dict(zip(record["target"]["n"], record["target"]["ms"])))
    print(f"{dtype}: draft ms by n", dict(zip(record["draft"]["n"], record["draft"]["ms"])))
    for t, p in record["picks"].items():
        top = sorted(p["table"], key=lambda r: -r[3])[:5]
        print(f"{t}: best tree budget {p['budget']} ({p['tokens_per_s']:.1f} expected tokens/s); top five "
              + ", ".join(f"{m}: {tps:.1f}" for m, _, _, tps in top))


if __name__ == "__main__":
    main()
