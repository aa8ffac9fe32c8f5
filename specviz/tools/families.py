"""`specviz families`: the support matrix, measured. For each family (`tools.zoo`), a tiny target and a draft
derived from its first layer are saved as folders with one byte-level BPE tokenizer (a chat template included),
as a user's own pair would be; a SpecDec++ head is trained for the pair with `python -m specviz.train head`;
the pair is loaded the way `specviz generate` loads one (source and tokenizer checks, the refusal and the
exactness probe) and every method, with and without copying, runs in fp32 and bf16 on the growing and the fixed
cache, each output compared with autoregressive decoding. Model types that cannot be verified are loaded too and
must be refused with a sentence. Writes a JSON record and the Markdown table of docs/models.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.assets import SPEC_BENCH
from specviz.core.config import ModelConfig, RunConfig
from specviz.core.output import check_output
from specviz.core.prompts import encode_prompt
from specviz.engine.record import generate
from specviz.methods.catalog import COPYING, with_knobs
from specviz.models.loading import load_pair
from specviz.tools.zoo import FAMILIES, REFUSED, VOCAB, tiny_model

DTYPES = ("fp32", "bf16")
CACHES = ("growing", "fixed")
KNOBS = {"k": 4, "budget": 8, "width": 2, "depth": 3, "start_k": 3}
RUNS = [(m, False) for m in ("chain", "heuristic", "specdecpp", "dyspec", "kary", "sequoia", "lookup")] + [
    (m, True) for m in COPYING
]
PROMPT = "Write a short story about a robot who learns to paint, in three sentences."
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def tiny_tokenizer():
    """A byte-level BPE tokenizer of VOCAB ids trained on the shipped Spec-Bench questions: <pad> 0, <s> 1, </s> 2,
    a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = SPEC_BENCH.read_text(encoding="utf-8").splitlines()
    tok.train_from_iterator((" ".join(json.loads(line)["turns"]) for line in lines if line.strip()), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def derive_draft(target, layers: int = 1):
    """A draft of the target's own family: its first `layers` decoder layers, embeddings, final norm and output
    layer (the weights copied)."""
    cfg = target.config.__class__.from_dict(target.config.to_dict())
    cfg.num_hidden_layers = layers
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = list(cfg.layer_types)[:layers]
    draft = type(target)(cfg).to(next(target.parameters()).dtype).eval()
    draft.load_state_dict(target.state_dict(), strict=False)
    draft.generation_config.eos_token_id = target.generation_config.eos_token_id
    return draft


def save_pair(name: str, folder: Path) -> tuple[Path, Path]:
    """The tiny pair of family `name` saved as two model folders under `folder`; (target, draft)."""
    tok = tiny_tokenizer()
    target = tiny_model(name, layers=2, seed=1)
    draft = derive_draft(target)
    out = []
    for model, role in ((target, "target"), (draft, "draft")):
        path = folder / name / role
        model.save_pretrained(path)
        tok.save_pretrained(path)
        out.append(path)
    return out[0], out[1]


def train_head(target: Path, draft: Path) -> float:
    """`python -m specviz.train head` for the pair at its smallest (the head lands beside the draft); seconds."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "specviz.train", "head", "--target", str(target), "--draft", str(draft)]
    cmd += ["--prompts", "16", "--new-tokens", "16", "--gen-batch", "8", "--epochs", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"training the head failed: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - t0


def check_family(target: Path, draft: Path, dtype: str, cache: str, tokens: int) -> dict:
    """Every method on the pair loaded as `specviz generate` loads it; the runs whose output left AR's."""
    pair = load_pair(
        ModelConfig(target=str(target), draft=str(draft), eagle="none", dtype=dtype, kv_cache=cache),
        progress=lambda m: None,
    )
    ids = encode_prompt(pair.tokenizer, PROMPT)
    pair.target.model.generation_config.eos_token_id = None  # run to the length: every method gets as far
    ar = generate(pair, ids, RunConfig(method="ar", max_new_tokens=tokens)).output_ids
    mismatches = []
    for method, copy in RUNS:
        run = with_knobs(RunConfig(method=method, max_new_tokens=tokens, copy=copy), method, KNOBS)
        if generate(pair, ids, run).output_ids != ar:
            mismatches.append(method + ("+copy" if copy else ""))
    return {
        "runs": len(RUNS),
        "mismatches": mismatches,
        "exactness": pair.info["exactness"],
        "forward": pair.info["forward"],
    }


def refused(model_type: str, folder: Path) -> str:
    """The loader's sentence for a tiny model of a type that cannot be verified (saved as a folder)."""
    path = folder / model_type
    tiny_model(model_type, layers=2, hidden=32).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    try:
        load_pair(ModelConfig(target=str(path), draft=str(path), eagle="none", dtype="fp32"), progress=lambda m: None)
    except ValueError as e:
        return str(e).replace(str(path), model_type)
    return ""


def markdown(record: dict) -> str:
    """The matrix as a Markdown table (docs/models.md)."""
    lines = [
        "| family | what it does differently | fp32 growing / fixed | bf16 growing / fixed | forward |",
        "|---|---|---|---|---|",
    ]
    for name, row in record["families"].items():
        cells = []
        for dtype in DTYPES:
            marks = []
            for cache in CACHES:
                r = row[f"{dtype} {cache}"]
                marks.append(f"{r['runs']} equal" if not r["mismatches"] else "differ: " + ", ".join(r["mismatches"]))
            cells.append(" · ".join(marks))
        lines.append(f"| {name} | {FAMILIES[name].note} | {cells[0]} | {cells[1]} | {row['forward']} |")
    lines += ["", "| refused | the loader's sentence |", "|---|---|"]
    lines += [f"| {t} | {why} |" for t, why in record["refused"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="specviz families", description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES), metavar="NAME")
    ap.add_argument("--tokens", type=int, default=24, help="new tokens a run (default %(default)s)")
    ap.add_argument("--work", default="out/families", help="where the tiny pairs are saved (default %(default)s)")
    ap.add_argument("--out", default="out/families.json", help="the JSON record (default %(default)s)")
    ap.add_argument("--md", default=None, help="also write the Markdown table here")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    check_output(a.out)
    if a.threads:
        torch.set_num_threads(a.threads)
    work = Path(a.work)
    record = {"families": {}, "refused": {}, "tokens": a.tokens, "torch": torch.__version__}
    t0 = time.perf_counter()
    for name in tqdm(a.families, desc="families", unit="family"):
        target, draft = save_pair(name, work)
        row = {"head_s": round(train_head(target, draft), 1)}
        for dtype in DTYPES:
            for cache in CACHES:
                row[f"{dtype} {cache}"] = check_family(target, draft, dtype, cache, a.tokens)
        row["forward"] = row["fp32 growing"]["forward"]
        record["families"][name] = row
        bad = {k: v["mismatches"] for k, v in row.items() if isinstance(v, dict) and v["mismatches"]}
        tqdm.write(f"{name}: {'0 mismatches' if not bad else bad} (head {row['head_s']} s)")
    for model_type in REFUSED:
        record["refused"][model_type] = refused(model_type, work / "refused")
    record["seconds"] = round(time.perf_counter() - t0, 1)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n")
    if a.md:
        Path(a.md).write_text(markdown(record))
    rows = record["families"].items()
    failed = {n for n, row in rows for v in row.values() if isinstance(v, dict) and v["mismatches"]}
    silent = [t for t, why in record["refused"].items() if not why]
    print(
        f"specviz families: {len(record['families'])} families, {len(failed)} with mismatches; "
        f"{len(record['refused']) - len(silent)} of {len(record['refused'])} refused with a sentence "
        f"({record['seconds']:.0f} s)"
    )
    return 1 if failed or silent else 0
