#!/usr/bin/env bash
# Grading spread over two GPUs with Dask, on the 2-GPU H200 machine, in one device call of about 7-8 minutes,
# everything packed under $OUT/pack.tgz (the tool brings back at most 8 files):
#   1. installs Dask (distributed, dask, dask-cuda and what they import at run time) offline from .clusterwheels
#      into /tmp/clustersite: carry .clusterwheels (git-ignored through .git/info/exclude; the list and the
#      command that downloads it: scripts/cluster_wheels.txt);
#   2. builds the batch: the grader's fault suite (tests/grading, 27 submissions) plus 20 mixed ones;
#   3. grades it with `lab grade` three ways: (a) on one GPU (CUDA_VISIBLE_DEVICES=0, the single-host path),
#      (b) --cluster local (one dask-cuda worker per GPU), (c) --cluster local again into a fresh folder while
#      scripts/cluster_compare.py kill-worker SIGKILLs one Dask worker after KILL_AFTER results;
#   4. compares them (each submission graded once per run, identical grades, wall time of (b) over (a), target
#      <= 0.6) into $OUT/pack/grading/cluster_h200x2.json, with provenance: copy it to results/h200/grading/;
#   5. with the budget's remainder (75 s or more), tests/test_gpu_classroom.py (the leaderboard's GPU identity).
#     bash scripts/cluster_run.sh
# Each run starts from empty compile caches (LAB_CACHE_DIR, CUPY_CACHE_DIR of its own), so none inherits
# another's compiled kernels. Exercise 01 is graded from a copy of lab/, kernels/ and exercises/ under $SCRATCH
# whose exercise.json has tests/test_gpu_grader.py's limits (6 s a check, 12 s a submission; the exercise's own
# 15 s and 60 s make the two hanging submissions cost 60 s each, which would not fit three runs in one call).
# Knobs (environment): LAB_COMMIT (pass $(git rev-parse HEAD)[+dirty] from the development machine), BUDGET_S
# (540: the whole call, every step's time box shrinks to fit it), KILL_AFTER (12), MIXED (20), SEED (4242),
# HIDDEN (0: visible checks only, like tests/test_gpu_grader.py; 1: the hidden checks too), CHECK_TIMEOUT_S (6)
# and TIME_LIMIT_S (12) (both empty: the exercise's own limits, graded from this tree), PYTHON (python3),
# WHEELS (.clusterwheels), SKIP_INSTALL=1 (use the Dask already importable), SCRATCH (/tmp/cluster-run),
# PHASE (all; or two calls of under 10 minutes each, as the device tool allows: `PHASE=a` builds the batch and
# grades it on one GPU, no Dask needed, and leaves $OUT/phase_a.tgz; copy that to .clusterphase/ and carry it
# with `PHASE=bc`, which installs Dask, grades (b) and (c) on the same submissions and compares all three).
set -uo pipefail
PY="${PYTHON:-python3}"
here="$PWD"
OUT="${OUT:-/tmp/out}"; pack="$OUT/pack"; mkdir -p "$pack/grading"
log="$pack/log.txt"
scratch="${SCRATCH:-/tmp/cluster-run}"; rm -rf "$scratch"; mkdir -p "$scratch"
subs="$scratch/subs"
site=/tmp/clustersite
WHEELS="${WHEELS:-$here/.clusterwheels}"
EXERCISE=01 SEED="${SEED:-4242}" KILL_AFTER="${KILL_AFTER:-12}" MIXED="${MIXED:-20}" HIDDEN="${HIDDEN:-0}"
CHECK_TIMEOUT_S="${CHECK_TIMEOUT_S-6}" TIME_LIMIT_S="${TIME_LIMIT_S-12}"
PHASE="${PHASE:-all}"
PHASE_A="${PHASE_A:-$here/.clusterphase/phase_a.tgz}"
case "$PHASE" in all|a|bc) ;; *) echo "PHASE must be all, a or bc; got $PHASE." >&2; exit 2 ;; esac
MIN_BUDGET_S=480  # the install and import steps reserve 400 s for the runs after them
[ "$PHASE" = a ] && MIN_BUDGET_S=300  # no install: the batch and the one-GPU run only
if [ "${BUDGET_S:-540}" -lt "$MIN_BUDGET_S" ]; then
  echo "BUDGET_S=${BUDGET_S} is under $MIN_BUDGET_S s: the install step would get no time (a 390 s budget left Dask" \
    "uninstalled on the H200 x2); give at least $MIN_BUDGET_S, or run the phases in separate calls." >&2
  exit 2
fi
deadline=$(( $(date +%s) + ${BUDGET_S:-540} ))
hidden_flag=(); [ "$HIDDEN" = 1 ] || hidden_flag=(--no-hidden)

if [ -z "${LAB_COMMIT:-}" ]; then
  echo "warning: LAB_COMMIT is not set; the record takes its commit from this machine's .git" >&2
  LAB_COMMIT="$(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown) (the device machine's .git)"
fi
export LAB_COMMIT PYTHONUNBUFFERED=1 COLUMNS=200  # COLUMNS: rich never wraps `lab grade`'s one line per submission
export PYTHONPATH="$here:$site${PYTHONPATH:+:$PYTHONPATH}"

cap() {  # cap SECONDS [RESERVE]: SECONDS, or less so that RESERVE seconds of the budget stay for what follows
  local room=$(( deadline - $(date +%s) - ${2:-20} ))
  [ "$room" -lt 1 ] && room=1
  [ "$room" -lt "$1" ] && echo "$room" || echo "$1"
}

install_dask() {
  if [ "${SKIP_INSTALL:-0}" = 1 ]; then echo "== Dask: SKIP_INSTALL=1, using what is importable"; return 0; fi
  if ! compgen -G "$WHEELS/*.whl" >/dev/null; then
    echo "== no wheels in $WHEELS: carry .clusterwheels with this call"; return 1
  fi
  echo "== installing $(find "$WHEELS" -name '*.whl' | wc -l) wheels from $WHEELS into $site (offline, no" \
    "dependency resolution)"
  rm -rf "$site"
  timeout "$(cap 120 400)" "$PY" -m pip install -q --no-index --no-deps --target "$site" "$WHEELS"/*.whl 2>&1 | tail -5
}

check_dask() {
  echo "== importing Dask"
  timeout "$(cap 60 380)" "$PY" -c "
import importlib.metadata as m
from dask_cuda import LocalCUDACluster  # what --cluster local imports
import cupy, numpy

def version(dist):
    try:
        return m.version(dist)
    except m.PackageNotFoundError:
        return 'not installed'

print(', '.join(f'{d} {version(d)}' for d in ('dask', 'distributed', 'dask-cuda', 'cuda-core', 'cuda-bindings',
                                              'nvidia-ml-py', 'cupy-cuda13x', 'numpy')))"
}

lab_tree() {  # the lab that grades: this tree, or a copy whose exercise 01 has the shorter limits
  if [ -z "$CHECK_TIMEOUT_S$TIME_LIMIT_S" ]; then echo "$here"; return; fi
  local repo="$scratch/repo"
  mkdir -p "$repo" && cp -r "$here/lab" "$here/kernels" "$here/exercises" "$repo/"
  "$PY" - "$repo/exercises/01_vectorized_copy/exercise.json" "$CHECK_TIMEOUT_S" "$TIME_LIMIT_S" <<'EOF'
import json, sys
path, check, total = sys.argv[1:]
spec = json.load(open(path))
spec["check_timeout_s"], spec["time_limit_s"] = float(check), float(total)
open(path, "w").write(json.dumps(spec, indent=2) + "\n")
EOF
  echo "$repo"
}

grade() {  # grade NAME SECONDS one-gpu|cluster: one timed `lab grade` of the batch, from empty compile caches
  local name="$1" limit="$2" mode="$3" t0 t1 rc
  local -a where=()
  if [ "$mode" = one-gpu ]; then where=(env CUDA_VISIBLE_DEVICES=0); else where=(env); fi
  local -a extra=(); [ "$mode" = cluster ] && extra=(--cluster local)
  echo "== ($name) lab grade ${extra[*]:-on GPU 0}, time box ${limit} s"
  t0=$(date +%s.%N)
  # SIGINT first: `lab grade` handles it like Ctrl-C (kills its grading processes, keeps what it wrote)
  ( cd "$tree" && "${where[@]}" PYTHONPATH="$tree:$PYTHONPATH" LAB_CACHE_DIR="$scratch/cache_$name/lab" \
      CUPY_CACHE_DIR="$scratch/cache_$name/cupy" timeout -s INT -k 20 "$limit" "$PY" -m lab grade "$subs" --exercise "$EXERCISE" --hidden-seed "$SEED" \
      --out "$scratch/$name" "${hidden_flag[@]}" "${extra[@]}" ) >"$pack/grade_$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '{"start": %s, "end": %s, "exit_code": %d, "limit_s": %d}\n' "$t0" "$t1" "$rc" "$limit" >"$scratch/$name.wall.json"
  echo "   exit $rc after $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s; $(grep -c ': .*/.* (' "$pack/grade_$name.log") submissions announced"
  grep -E "^(error|Dask:|[0-9]+ graded)" "$pack/grade_$name.log" | tail -3
  echo "   leftover grading processes: $("$PY" scripts/cluster_compare.py leftovers "$subs" --kill)"
}

{
  echo "== $(date -u +%FT%TZ) commit $LAB_COMMIT, budget ${BUDGET_S:-540} s"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used --format=csv
  fi
  if [ "$PHASE" != a ]; then
    install_dask && check_dask || echo "!! Dask is not usable: runs (b) and (c) will fail and say why"
  fi
  tree="$(lab_tree)"
  echo "== grading from $tree (time limits: ${CHECK_TIMEOUT_S:-own} s a check, ${TIME_LIMIT_S:-own} s a submission)," \
    "seed $SEED, ${hidden_flag[*]:-hidden checks too}, phase $PHASE"
  if [ "$PHASE" = bc ]; then  # the batch and run (a) from the phase-a call, so all three grade the same files
    tar -C "$scratch" -xzf "$PHASE_A" || { echo "!! no phase-a results at $PHASE_A: run PHASE=a first"; exit 1; }
    cp "$scratch/grade_a.log" "$pack/grade_a.log"
  else
    timeout 60 "$PY" scripts/cluster_compare.py batch "$subs" "$scratch/batch.json" --mixed "$MIXED"
    if [ "$PHASE" = a ]; then
      grade a "$(cap 300 15)" one-gpu
      cp "$pack/grade_a.log" "$scratch/grade_a.log"
      tar -C "$scratch" -czf "$OUT/phase_a.tgz" subs batch.json a a.wall.json grade_a.log
      echo "== phase a done with $(( deadline - $(date +%s) )) s of the budget left: copy \$OUT/phase_a.tgz to" \
        ".clusterphase/ and run PHASE=bc carrying it"
      exit 0
    fi
    grade a "$(cap 260 250)" one-gpu
  fi
  grade b "$(cap 170 130)" cluster

  limit_c="$(cap 190 25)"
  "$PY" scripts/cluster_compare.py kill-worker "$scratch/c" "$scratch/kill.json" --after "$KILL_AFTER" \
    --timeout "$limit_c" >"$pack/kill_watcher.log" 2>&1 &
  watcher=$!
  grade c "$limit_c" cluster
  for _ in $(seq 30); do kill -0 "$watcher" 2>/dev/null || break; sleep 0.5; done
  kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
  cat "$pack/kill_watcher.log"

  echo "== comparing"
  timeout 90 "$PY" scripts/cluster_compare.py compare --batch "$scratch/batch.json" \
    --run one_gpu "$scratch/a" "$pack/grade_a.log" "$scratch/a.wall.json" \
    --run cluster "$scratch/b" "$pack/grade_b.log" "$scratch/b.wall.json" \
    --run cluster_worker_killed "$scratch/c" "$pack/grade_c.log" "$scratch/c.wall.json" \
    --kill "$scratch/kill.json" --out "$pack/grading/cluster_h200x2.json" \
    --setting "exercise=$EXERCISE" --setting "seed=$SEED" --setting "hidden_checks=$HIDDEN" \
    --setting "check_timeout_s=${CHECK_TIMEOUT_S:-exercise}" --setting "time_limit_s=${TIME_LIMIT_S:-exercise}" \
    --setting "kill_after_results=$KILL_AFTER" --setting "mixed=$MIXED" --setting "caches=empty for each run"
  for r in a b c; do cp "$scratch/$r/grades.csv" "$pack/grading/grades_$r.csv" 2>/dev/null; done
  cp "$scratch/batch.json" "$scratch/kill.json" "$pack/grading/" 2>/dev/null
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  fi
  if [ $(( deadline - $(date +%s) )) -ge 75 ]; then  # what is left of the budget: the leaderboard's GPU tests
    echo "== GPU tests: tests/test_gpu_classroom.py"
    timeout "$(cap 100 5)" "$PY" -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_classroom.py 2>&1 | tail -8
  else
    echo "== no time left for tests/test_gpu_classroom.py: run it in a call of its own"
  fi
  echo "== done with $(( deadline - $(date +%s) )) s of the budget left"
} 2>&1 | tee "$log"
tar -C "$OUT" -czf "$OUT/pack.tgz" pack && rm -rf "$pack"
