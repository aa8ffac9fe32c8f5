"""Command line: `python -m specviz generate ...` (stable; other tools rely on it) and `python -m specviz bench ...`."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .config import (DRAFTERS, DTYPES, METHODS, ChainConfig, DySpecConfig, HeuristicConfig, LookupConfig, ModelConfig,
                     RunConfig, SamplingConfig, SpecDecPPConfig, TreeConfig)

_D = RunConfig()


def read_prompts(path: str | Path, limit: int | None = None) -> list[dict]:
    """A JSON-lines file of objects with a `turns` list (Spec-Bench shape); the first turn is the prompt."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                turns = obj["turns"]
                if not (isinstance(turns, list) and turns and isinstance(turns[0], str)):
                    raise KeyError("turns")
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}:{n}: expected a JSON object with a non-empty 'turns' list of strings") from None
            out.append(obj)
            if limit and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path}: no prompts found")
    return out


def run_config(a: argparse.Namespace) -> RunConfig:
    return RunConfig(
        method=a.method, max_new_tokens=a.max_new_tokens,
        sampling=SamplingConfig(temperature=a.temperature, top_k=a.top_k, top_p=a.top_p, seed=a.seed),
        chain=ChainConfig(a.k if a.k is not None else _D.chain.k),
        heuristic=HeuristicConfig(start_k=a.k if a.k is not None else _D.heuristic.start_k,
                                  max_k=max(_D.heuristic.max_k, a.k or 0)),
        specdecpp=SpecDecPPConfig(threshold=a.threshold if a.threshold is not None else _D.specdecpp.threshold,
                                  k_min=_D.specdecpp.k_min, k_max=a.k_max or _D.specdecpp.k_max),
        dyspec=DySpecConfig(**{**_D.dyspec.__dict__, **({"budget": a.budget} if a.budget else {})}),
        lookup=LookupConfig(**{**_D.lookup.__dict__, **({"k": a.k} if a.k is not None else {})}),
        tree=TreeConfig(**{**_D.tree.__dict__, **({"budget": a.budget} if a.budget else {}),
                           **({"width": a.width} if a.width else {}), **({"depth": a.depth} if a.depth else {})}),
        drafter=a.drafter, copy=_D.copy if a.copy is None else a.copy)


def _generate_parser(sub):
    p = sub.add_parser("generate", help="decode prompts with one method and write GenerationTrace JSON lines")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one user message (wrapped in the target's chat template)")
    src.add_argument("--prompts", help="JSON-lines file with a 'turns' list per line (Spec-Bench shape)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N prompts of --prompts")
    p.add_argument("--method", choices=METHODS, default=_D.method)
    p.add_argument("--k", type=int, default=None, help="draft length K (chain, lookup), start K (heuristic)")
    p.add_argument("--copy", action=argparse.BooleanOptionalAction, default=None,
                   help="drafting methods (not ar, lookup): also copy tokens from the context (prompt lookup) "
                        "where that beats the draft")
    p.add_argument("--threshold", type=float, default=None, help="SpecDec++ stop threshold h")
    p.add_argument("--k-max", type=int, default=None, help="SpecDec++ maximum draft length")
    p.add_argument("--budget", type=int, default=None, help="tree node budget (dyspec, sequoia)")
    p.add_argument("--width", type=int, default=None, help="k-ary tree width")
    p.add_argument("--depth", type=int, default=None, help="k-ary tree depth")
    p.add_argument("--max-new-tokens", type=int, default=_D.max_new_tokens)
    p.add_argument("--temperature", type=float, default=_D.sampling.temperature)
    p.add_argument("--top-p", type=float, default=_D.sampling.top_p)
    p.add_argument("--top-k", type=int, default=_D.sampling.top_k)
    p.add_argument("--seed", type=int, default=_D.sampling.seed)
    p.add_argument("--dtype", choices=DTYPES, default=ModelConfig().dtype)
    p.add_argument("--device", default=ModelConfig().device)
    p.add_argument("--target", default=None, help="local folder, .gguf file or hub id (default: shipped SmolLM2-135M-Instruct)")
    p.add_argument("--draft", default=None, help="local folder or hub id (default: the draft shipped in models/)")
    p.add_argument("--eagle", default=None, help="EAGLE drafter folder ('none' = off; default: the shipped one "
                                                 "with the default pair)")
    p.add_argument("--context-vocab", action=argparse.BooleanOptionalAction, default=ModelConfig().context_vocab,
                   help="a reduced-vocabulary draft head also covers the tokens of its context (default: on)")
    p.add_argument("--drafter", choices=DRAFTERS, default=_D.drafter,
                   help="who drafts: the EAGLE drafter, the standalone draft, or auto (EAGLE where available)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--out", required=True, help="output JSON-lines file, one GenerationTrace per prompt")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_generate(a: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from .decode import encode_prompt, generate
    from .loading import load_pair
    if a.threads:
        torch.set_num_threads(a.threads)
    run = run_config(a)                                                   # validate before loading models
    prompts = [{"turns": [a.prompt]}] if a.prompt is not None else read_prompts(a.prompts, a.limit)
    t0 = time.perf_counter()
    pair = load_pair(ModelConfig(target=a.target, draft=a.draft, eagle=a.eagle, dtype=a.dtype, device=a.device,
                                 context_vocab=a.context_vocab),
                     progress=lambda m: print(m, file=sys.stderr))
    print(f"specviz: loaded {pair.info['target']} + {pair.info['draft']} ({pair.info['dtype']}, {pair.info['device']}) "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    encoded = [encode_prompt(pair.tokenizer, p["turns"][0]) for p in prompts]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    tokens = ms = 0
    with open(a.out, "w", encoding="utf-8") as f:
        for p, ids in tqdm(list(zip(prompts, encoded)), desc=a.method, unit="prompt", disable=a.quiet, file=sys.stderr):
            trace = generate(pair, ids, run, prompt_text=p["turns"][0])
            d = trace.to_dict()
            d["text"] = pair.tokenizer.decode(list(trace.output_ids))
            for k in ("question_id", "category"):
                if k in p:
                    d[k] = p[k]
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
            tokens += len(trace.output_ids)
            ms += trace.total_ms
            if a.prompt is not None and not a.quiet:
                print(d["text"], file=sys.stderr)
    print(f"specviz: {a.method}: {tokens} tokens in {ms / 1e3:.2f} s = {tokens / max(ms, 1e-9) * 1e3:.2f} tokens/s "
          f"(decode time only; {len(prompts)} prompt(s))", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        from .bench import main as bench_main
        return bench_main(argv[1:]) or 0
    ap = argparse.ArgumentParser(prog="python -m specviz", description="specviz: see speculative decoding")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _generate_parser(sub)
    sub.add_parser("bench", help="speed and acceptance benchmark (see python -m specviz bench --help)")
    a = ap.parse_args(argv)
    try:
        return cmd_generate(a)
    except (ValueError, FileNotFoundError) as e:
        print(f"specviz: error: {e}", file=sys.stderr)
        return 2
