"""Output ids of every method on the default pair: 12 Spec-Bench prompts x 64 tokens, greedy and T = 1 with fixed seeds.

    python tests/golden_ids.py record tests/data/golden_ids.json    # write the file
    python tests/golden_ids.py check tests/data/golden_ids.json     # every (method, T, prompt): the same ids

tests/test_golden_ids.py checks a rotation of it (every setting at both temperatures, each on one prompt) on each
run of the suite. Recorded on one machine: another CPU's kernels may round differently, so the check runs where the
CPU model and torch version match the file's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from specviz.core.assets import SPEC_BENCH
from specviz.core.config import ModelConfig, RunConfig, SamplingConfig
from specviz.core.device import machine_info
from specviz.core.prompts import encode_prompt
from specviz.engine import generate
from specviz.models.loading import load_pair

N_PROMPTS, NEW_TOKENS, TEMPERATURES = 12, 64, (0.0, 1.0)
# every method with its defaults, the standalone draft beside the EAGLE one, and the copying variants
SETTINGS = {
    "ar": {"method": "ar"},
    "chain": {"method": "chain"},
    "chain+model": {"method": "chain", "drafter": "model"},
    "heuristic": {"method": "heuristic"},
    "specdecpp": {"method": "specdecpp"},
    "specdecpp+model": {"method": "specdecpp", "drafter": "model"},
    "specdecpp+copy": {"method": "specdecpp", "copy": True},
    "dyspec": {"method": "dyspec"},
    "dyspec+copy": {"method": "dyspec", "copy": True},
    "kary": {"method": "kary"},
    "sequoia": {"method": "sequoia"},
    "lookup": {"method": "lookup"},
}


def prompts() -> list[str]:
    lines = SPEC_BENCH.read_text(encoding="utf-8").splitlines()
    return [json.loads(lines[i * (len(lines) // N_PROMPTS)])["turns"][0] for i in range(N_PROMPTS)]


def machine() -> str:
    m = machine_info()
    return f"{m['cpu']} / torch {m['torch']}"


def load():
    torch.set_num_threads(2)
    return load_pair(ModelConfig(dtype="fp32", device="cpu"), progress=lambda m: None)


def run_ids(pair, setting: str, temperature: float, i: int, text: str) -> list[int]:
    run = RunConfig(
        max_new_tokens=NEW_TOKENS, sampling=SamplingConfig(temperature=temperature, seed=1000 + i), **SETTINGS[setting]
    )
    return list(generate(pair, encode_prompt(pair.tokenizer, text), run).output_ids)


def key(setting: str, temperature: float, i: int) -> str:
    return f"{setting} T={temperature:g} #{i}"


def main(argv: list[str]) -> int:
    what, path = argv
    pair = load()
    texts = prompts()
    if what == "record":
        ids = {
            key(s, t, i): run_ids(pair, s, t, i, x) for s in SETTINGS for t in TEMPERATURES for i, x in enumerate(texts)
        }
        Path(path).write_text(json.dumps({"machine": machine(), "new_tokens": NEW_TOKENS, "ids": ids}, indent=0) + "\n")
        print(f"{len(ids)} runs recorded in {path}")
        return 0
    want = json.loads(Path(path).read_text())["ids"]
    bad = [k for k in want if run_ids(pair, *_parse(k), texts[_parse(k)[2]]) != want[k]]
    print(f"{len(want) - len(bad)} of {len(want)} runs give the recorded ids" + (f"; differ: {bad}" if bad else ""))
    return 1 if bad else 0


def _parse(k: str) -> tuple[str, float, int]:
    s, t, i = k.split()
    return s, float(t[2:]), int(i[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
