#!/usr/bin/env bash
# One GPU, a few minutes: training tokens/s and MFU at 8K and 16K with our code path (bench/train_gpu.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
exec "$PY" bench/train_gpu.py --shape "${SHAPE:-1.7b}" --steps "${STEPS:-20}" --horizons "${HORIZONS:-8192,16384}" "$@"
