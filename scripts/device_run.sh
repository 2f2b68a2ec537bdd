#!/usr/bin/env bash
# What one call on the lent GPU machine runs (see the device tool's README): GPU tests, the tour,
# knob sweeps and (full mode) the notebooks, with everything packed under $OUT.
#   bash scripts/device_run.sh smoke|full
set -uo pipefail
mode="${1:-smoke}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 LAB_CACHE_DIR=/tmp/labcache
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT/pack"
log="$OUT/pack/log.txt"
{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -m lab doctor
  echo "== GPU tests"
  python3 -m pytest -m gpu -q -p no:cacheprovider ${GPU_TESTS:-tests} 2>&1 | tail -25
  echo "== knob sweep"
  python3 scripts/knob_sweep.py "$OUT/pack/knobs.json"
  if [ "$mode" = smoke ]; then
    python3 -m lab tour --quick --out "$OUT/pack/report"
  else
    python3 -m lab tour --out "$OUT/pack/report"
  fi
  if [ "$mode" = full ] && [ -d .nbwheels ]; then
    echo "== notebooks"
    python3 -m pip install -q --no-index --find-links .nbwheels nbclient ipykernel jupytext --target /tmp/nbsite \
      && export PYTHONPATH="$PYTHONPATH:/tmp/nbsite" && python3 -m ipykernel install --sys-prefix --name python3 >/dev/null
    python3 scripts/execute_notebooks.py --inplace && mkdir -p "$OUT/pack/notebooks" && cp notebooks/*.ipynb "$OUT/pack/notebooks/"
  fi
} 2>&1 | tee "$log"
tar -C "$OUT" -czf "$OUT/pack.tgz" pack && rm -rf "$OUT/pack"
