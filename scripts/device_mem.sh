#!/usr/bin/env bash
# One call on the lent GPU for the memory-bound ladders (issue 8 A/B/E): GPU tests of copy and transpose,
# the L2 sweep and the anomaly probes, `lab bench transpose`. Everything lands in $OUT/mem.tgz.
#   bash scripts/device_mem.sh [all|tests|l2|variants|transpose]...
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 LAB_CACHE_DIR=/tmp/labcache
OUT="${OUT:-/tmp/out}"; pack="$OUT/mem"; mkdir -p "$pack"
steps="${*:-all}"
want() { [[ " $steps " == *" all "* || " $steps " == *" $1 "* ]]; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  if want tests; then
    echo "== GPU tests (memory ladder)"
    timeout 50 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_gpu_memory_ladder.py tests/test_l2.py -k "transpose or l2 or graph or empty or flush" 2>&1 | tail -25
  fi
  if want l2; then echo "== L2 sweep + probes"; timeout 80 python3 scripts/l2_sweep.py "$pack"; fi
  if want variants; then echo "== transpose variants"; timeout 30 python3 scripts/transpose_variants.py "$pack/transpose_variants.json"; fi
  if want transpose; then
    echo "== lab bench transpose"; timeout 70 python3 -m lab bench transpose --json "$pack/transpose.json" | tail -15
  fi
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
} 2>&1 | tee "$pack/log.txt"
tar -C "$OUT" -czf "$OUT/mem.tgz" mem && rm -rf "$pack"
