#!/usr/bin/env bash
# A short call on a lent GPU when little device time is left: the softmax cluster rung's GPU tests, the cluster-rows
# study, compute-sanitizer (memcheck, racecheck, synccheck) on the cluster rungs; results under $OUT/quick.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 LAB_CACHE_DIR=/tmp/labcache
[ -f .labcache/commit ] && export LAB_COMMIT="$(cat .labcache/commit)"
out="${OUT:-/tmp/out}/quick"; mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
  echo "== GPU tests: softmax rung 05"
  timeout "${TEST_S:-100}" python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_softmax.py \
    -k "05_cluster or rung_05" 2>&1 | tail -6
  echo "== cluster-rows study"
  timeout "${STUDY_S:-80}" python3 -m lab.studies.cluster_rows_study "$out" --rounds 3 2>&1 | grep -E "softmax|written|not timed"
  for spec in softmax:05 rmsnorm:04 layernorm:04; do
    set -- ${spec/:/ }
    echo "== compute-sanitizer on $1 rung $2"
    timeout "${SAN_S:-45}" python3 scripts/gemm_tc_sanitize.py "$out/sanitize_${1}_$2.json" --family "$1" --rungs "$2" \
      --tools memcheck,racecheck,synccheck --budget "$(( ${SAN_S:-45} - 5 ))" | tail -5
  done
} 2>&1 | tee "$out/log.txt"
