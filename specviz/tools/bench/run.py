"""`specviz bench`: speed, acceptance and a losslessness audit of every method, beside
autoregressive decoding and Hugging Face assisted generation, on one pair and one dtype per suite.

Notation: tau = tokens emitted per round (= per target forward); alpha_d = P(the accepted path
reaches draft depth d | it reached depth d - 1 and the draft offered depth d); margin = the
target's logit top1 - top2 at the first position where a method's output leaves the
autoregressive one.

Hygiene: an untimed warm-up of every setting first; then per prompt every setting runs back to
back, in an order rotated by the prompt index, so machine noise hits all alike; one dtype for
every method of a suite. This module computes records; `bench_report` renders them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.args import add_holding_flags, holding_options, output_file, positive
from specviz.core.assets import SPEC_BENCH
from specviz.core.config import (
    DTYPES,
    ModelConfig,
)
from specviz.core.device import machine_info as device_machine_info
from specviz.core.output import check_output, replacing
from specviz.core.prompts import encode_prompt, read_prompts, stratified
from specviz.core.server import ServerError
from specviz.kernels import rowkernel
from specviz.methods.registry import BUILDERS
from specviz.models.loading import load_pair
from specviz.tools.bench import report as bench_report
from specviz.tools.bench.engine import engine_settings
from specviz.tools.bench.prompt import Prompt, audit, run_one
from specviz.tools.bench.report import summarize
from specviz.tools.bench.specs import (
    BenchConfig,
    Setting,
    parse_settings,
)


# -- the suite ---------------------------------------------------------------------------------
def warm_up(pair, prompt: Prompt, settings: list[Setting], cfg: BenchConfig, progress: bool, log) -> dict[str, str]:
    """One short untimed run of every setting at every temperature; the settings that cannot run (a method whose
    head is not trained yet, say), each with why."""
    skipped = {}
    warm = [(t, s) for t in cfg.temperatures for s in settings] if cfg.warmup_tokens else []
    for t, s in tqdm(warm, desc="warm-up", unit="run", disable=not progress, file=sys.stderr):
        if s.key in skipped:
            continue
        try:
            run_one(pair, prompt, s, t, cfg.warmup_tokens, cfg.seed)
        except Exception as e:  # the report names it and goes on with the rest
            skipped[s.key] = f"{type(e).__name__}: {e}"
            log(f"specviz bench: skipping {s.key}: {skipped[s.key]}")
    return skipped


def head_rows(lm) -> int | None:
    """The rows of an LM's reduced head (None: the whole vocabulary)."""
    return None if lm.head_ids is None else int(lm.head_ids.numel())


def run_suite(
    pair,
    prompts: list[Prompt],
    settings: list[Setting],
    cfg: BenchConfig,
    progress: bool = True,
    log=print,
    keep: Callable[[float, Setting, Prompt, dict], None] | None = None,
) -> dict:
    """Warm up, then every prompt x temperature x setting, interleaved per prompt; audit at T = 0. `keep` receives
    each timed run's trace (specviz's methods), as a dict, with its temperature, setting and prompt."""
    skipped = warm_up(pair, prompts[0], settings, cfg, progress, log)  # 1. untimed, every setting
    settings = [s for s in settings if s.key not in skipped]
    runs, mismatches, agreement = [], [], {}
    ours = {s.key for s in settings if s.kind != "engine"}
    bar = tqdm(
        total=len(cfg.temperatures) * len(prompts) * len(settings),
        unit="run",
        disable=not progress,
        file=sys.stderr,
        desc=str(pair.info.get("dtype", "")),
    )
    for t in cfg.temperatures:  # 2. timed runs, interleaved per prompt
        for i, p in enumerate(prompts):
            outs = {}
            for s in settings[i % len(settings) :] + settings[: i % len(settings)]:
                bar.set_postfix_str(f"T={t:g} {s.key}", refresh=False)
                rec = run_one(pair, p, s, t, cfg.max_new_tokens, cfg.seed + i, keep=keep is not None)
                if "trace" in rec:
                    keep(t, s, p, rec.pop("trace"))
                outs[s.key] = rec["output_ids"]
                runs.append(
                    {"prompt": p.qid, "category": p.category, "task": p.task, "temperature": t, "setting": s.key, **rec}
                )
                bar.update()
            if t == 0:  # 3. losslessness audit (specviz's rows; an engine's agreement is counted beside it)
                mismatches += audit(pair, p, outs["ar"], {k: v for k, v in outs.items() if k in ours and k != "ar"})
                for k in outs.keys() - ours:
                    agreement[k] = agreement.get(k, 0) + (outs[k] == outs["ar"])
    bar.close()
    return {
        "dtype": pair.info.get("dtype"),
        "models": {
            **pair.info,
            "draft_is_target": pair.draft.model is pair.target.model,
            "eagle_head_ours": None if pair.eagle is None else head_rows(pair.eagle),
            "draft_head_ours": head_rows(pair.draft),
        },
        "settings": [asdict(s) for s in settings],
        "skipped": skipped,
        "prompts": [{"qid": p.qid, "category": p.category, "task": p.task, "n_ids": len(p.ids)} for p in prompts],
        "runs": runs,
        "mismatches": mismatches,
        "engine_agreement": agreement,  # engine row -> prompts whose greedy output equals specviz's AR output
        **summarize(runs, settings, mismatches),
    }


def machine_info() -> dict:
    """The machine (core.device.machine_info) and what else moves a bench's figures: HF's ROC-adapted threshold
    (only where sklearn is installed) and the row kernel."""
    try:
        import sklearn  # noqa: F401  (optional: HF adapts its confidence threshold by ROC only when present)

        has_sklearn = True
    except ImportError:
        has_sklearn = False
    return {
        **device_machine_info(),
        "sklearn_for_hf_threshold": has_sklearn,
        "row_kernel": rowkernel.version() if rowkernel.enabled() else None,
    }


# -- traces kept for `specviz report` -----------------------------------------------------------
def trace_label(dtype: str, temperature: float, key: str) -> str:
    """The name of one setting's trace file, and of that setting in `specviz report BENCH.json#LABEL`."""
    return f"{dtype}-T{temperature:g}-{key}"


def trace_folder(text: str) -> Path:
    """An argparse type: a folder that can hold trace files (made now, checked by a scrap file)."""
    try:
        return check_output(Path(text) / ".specviz-scrap", "trace folder").parent
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class TraceShelf:
    """Writes each kept trace as one line of its setting's file in `folder`; `index` maps labels to file names."""

    def __init__(self, folder: Path):
        self.folder, self._files = folder, {}

    @property
    def index(self) -> dict[str, str]:
        return {label: Path(f.name).name for label, f in self._files.items()}

    def keeper(self, dtype: str):
        def keep(t: float, s: Setting, p: Prompt, trace: dict) -> None:
            label = trace_label(dtype, t, s.key)
            if label not in self._files:
                name = label.replace(":", "-").replace("/", "-") + ".jsonl"
                self._files[label] = open(self.folder / name, "w", encoding="utf-8")  # closed by close()
            line = {**trace, "question_id": p.qid, "category": p.category}
            self._files[label].write(json.dumps(line, ensure_ascii=False) + "\n")

        return keep

    def close(self) -> None:
        for f in self._files.values():
            f.close()


# -- command line ------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    d = BenchConfig()
    p = argparse.ArgumentParser(prog="specviz bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", default=str(SPEC_BENCH), help="JSON-lines file with 'turns' (and 'category')")
    p.add_argument(
        "--n-prompts", type=positive(int), default=d.n_prompts, help="stratified sample size (equal per task)"
    )
    p.add_argument("--max-new-tokens", type=positive(int), default=d.max_new_tokens)
    p.add_argument("--temperatures", type=float, nargs="+", default=list(d.temperatures))
    p.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="ar, chain[:K], heuristic, specdecpp[:h], dyspec[:budget], dyspec-level[:t], dyspec-heap, "
        "sequoia[:budget], kary[:width], hf, hf-assist[:K], hf-heuristic (default: all); a suffix "
        "@stock or @skinny picks the linear-layer kernels (default: skinny for specviz methods, "
        "with a draft's few-row steps over reduced weights (fp16 one-row for fp32, int8 1-4 rows for "
        "bf16), which @fp32draft turns off, and "
        "1-16-row products on the numba row kernel, which @mkl turns off; "
        "stock for Hugging Face), +eagle or +model the drafter (default: EAGLE where the pair "
        "has one; Hugging Face always runs the standalone draft), +static a reduced draft head "
        "without the context vocabulary, +norecord nothing kept for the node inspector (record_top 0)",
    )
    p.add_argument(
        "--dtype",
        nargs="+",
        choices=DTYPES,
        default=[ModelConfig().dtype],
        help="one suite per dtype; every method of a suite uses it",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--warmup-tokens", type=int, default=d.warmup_tokens)
    p.add_argument("--target", default=None)
    p.add_argument("--draft", default=None)
    p.add_argument(
        "--eagle",
        default=None,
        help="EAGLE drafter folder ('none' = off; default: the shipped one with the default pair)",
    )
    p.add_argument("--device", default=ModelConfig().device)
    add_holding_flags(p)
    p.add_argument("--threads", type=positive(int), default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument(
        "--out", type=output_file, default=None, help="write every figure (per prompt and aggregated) to this JSON file"
    )
    p.add_argument("--md", type=output_file, default=None, help="also write the markdown report to this file")
    p.add_argument("--html", default=None, help="write plotly HTML plots into this folder")
    p.add_argument(
        "--traces",
        type=trace_folder,
        default=None,
        help="also keep every timed run of specviz's methods as traces in this folder, one JSON-lines file per "
        "dtype, temperature and setting (for `specviz report`)",
    )
    p.add_argument(
        "--engine",
        nargs="+",
        default=None,
        metavar="LABEL=URL",
        help="also time a served engine on the same prompts, one row each (an OpenAI-compatible server that returns "
        "token ids, such as vLLM; docs/engines.md)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    try:
        cfg = BenchConfig(
            n_prompts=a.n_prompts,
            max_new_tokens=a.max_new_tokens,
            temperatures=tuple(a.temperatures),
            seed=a.seed,
            warmup_tokens=a.warmup_tokens,
        )
        settings = parse_settings(a.methods, cfg, list(BUILDERS)) + engine_settings(a.engine)
        rows = stratified(read_prompts(a.prompts), cfg.n_prompts, cfg.seed)
    except (ValueError, FileNotFoundError, TimeoutError, ServerError) as e:
        print(f"specviz bench: error: {e}", file=sys.stderr)
        return 2
    if a.threads:
        torch.set_num_threads(a.threads)
    result = {
        "machine": machine_info(),
        "config": {
            **asdict(cfg),
            "prompts_file": a.prompts,
            "command": " ".join(["specviz bench", *map(shlex.quote, argv)]),
            "methods": [s.key for s in settings],
            "dtypes": a.dtype,
        },
        "suites": {},
    }
    shelf = TraceShelf(a.traces) if a.traces else None
    for dtype in a.dtype:
        pair = load_pair(
            ModelConfig(
                target=a.target, draft=a.draft, eagle=a.eagle, dtype=dtype, device=a.device, **holding_options(a)
            ),
            progress=lambda m: print(m, file=sys.stderr),
        )
        prompts = [
            Prompt(
                str(r.get("question_id", i)),
                str(r.get("category", "all")),
                tuple(encode_prompt(pair.tokenizer, r["turns"][0])),
                r["turns"][0],
            )
            for i, r in enumerate(rows)
        ]
        dtype = pair.info["dtype"]  # "auto" resolved
        result["suites"][dtype] = run_suite(
            pair,
            prompts,
            settings,
            cfg,
            progress=not a.quiet,
            log=lambda m: print(m, file=sys.stderr),
            keep=shelf.keeper(dtype) if shelf else None,
        )
        del pair
    if shelf:
        shelf.close()
        folder = Path(os.path.relpath(a.traces, Path(a.out).parent)) if a.out else a.traces.resolve()
        result["traces"] = {label: str(folder / name) for label, name in shelf.index.items()}
    md = bench_report.markdown(result)
    print(md)
    if a.md:
        Path(a.md).write_text(md, encoding="utf-8")
    if a.out:
        with replacing(a.out) as f:
            f.write(json.dumps(result, ensure_ascii=False))
    if a.html:
        for path in bench_report.write_html(result, a.html):
            print(f"specviz bench: wrote {path}", file=sys.stderr)
    return 0
