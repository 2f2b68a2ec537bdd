#!/usr/bin/env bash
# What one call on the lent GPU machine runs (see the device tool's README), with everything packed
# under $OUT/pack.tgz (the tool brings back at most 8 files). Each step is time-boxed so one stuck
# step cannot take the rest of the call with it.
#   bash scripts/device_run.sh smoke|full      GPU tests, knob sweep, the tour (full: + notebooks)
#   bash scripts/device_run.sh gemm-records    GEMM tests, `lab bench` and `lab profile` for gemm_fp32
#   bash scripts/device_run.sh gemm-lessons    exercise and grader GPU tests, notebook 02 executed live
#   bash scripts/device_run.sh gemm-final      tuning round 5, then gemm-records, then notebook 02
#   bash scripts/device_run.sh notebook02      notebook 02 executed live
#   bash scripts/device_run.sh notebook03      notebook 03 (tensor cores) executed live (about 2 minutes on an H200)
#   bash scripts/device_run.sh bounds          GEMM GPU tests and `lab verify gemm_fp32 --seeds 5` (error/bound ratios)
#   bash scripts/device_run.sh quality         every GPU test (grader and exercise evidence), `lab verify` of every
#                                              family on several seeds (error/bound ratios), gemm_tc's tests
#   bash scripts/device_run.sh mem-records     the L2 sweep and probes, transpose variants, `lab bench` and
#                                              `lab profile` for transpose
#   bash scripts/device_run.sh records         mem-records, then gemm_tc's error-bound margins and headline bench
#   bash scripts/device_run.sh lessons         notebooks 00-02 executed live
#   bash scripts/device_run.sh tc-knobs        gemm_tc knob probes at 4096 and 8192 (rungs: TC_RUNGS, default 05; others
#                                              are verified first), and the repack's cost
#   bash scripts/device_run.sh tc-final        exercise 05's and gemm_tc's GPU tests, then `lab bench gemm_tc` (every kind)
#   bash scripts/device_run.sh tc-sanitize     memcheck of the Hopper rungs and racecheck of rungs 02-06
#   bash scripts/device_run.sh tc-smoke        gemm_tc's Hopper rungs through `lab verify`, then the headline bench
#   bash scripts/device_run.sh sched-a         scheduling: GPU tests of rungs 06/07, the tile orders, the work queue and
#                                              exercise 06, then stream-K's study and the small-items study
#   bash scripts/device_run.sh sched-b         scheduling: tile orders timed and read by ncu, and the FP32 contrast
#   bash scripts/device_run.sh sched-next      rung 07's GPU tests (with the do-while k-loop variant), the stream-K
#                                              study (it times that variant too), then notebook 04 live
#   bash scripts/device_run.sh notebook04      notebook 04 (scheduling) executed live
#   bash scripts/device_run.sh fusion-a        fusion: GPU tests of the fused epilogues, softmax and the norms, rung 07's
#                                              stream-K tests; `lab bench` of those families; the checklist study
#                                              (with ncu); the stream-K study (do-while k-loop variant)
#   bash scripts/device_run.sh fusion-b        fusion, after the fixes: the same GPU tests (and exercise 08's), `lab bench` of
#                                              the fused and norm families, the checklist study
#   bash scripts/device_run.sh fusion-nb       notebooks 06 and 07 executed live
#   bash scripts/device_run.sh fusion-sanitize compute-sanitizer memcheck over the fused, softmax and norm families, racecheck
#                                              over their last rungs
#   bash scripts/device_run.sh splitk-a        split-K's GPU tests, ncu on its kernels, the split-factor study,
#                                              `lab bench gemm_split_k`
#   bash scripts/device_run.sh splitk-b        the split-factor study alone (contiguous and interleaved splits)
#   bash scripts/device_run.sh overlap-d       the attention study (rung 05's other SOFTMAX_OVERLAP build beside its
#                                              default at each head dim), compute-sanitizer on rung 05 with D = 256
#   bash scripts/device_run.sh splitk-cluster  split-K's cluster mode: its GPU tests, compute-sanitizer, the rounds study
#                                              against torch.mm and cuBLASLt
#   bash scripts/device_run.sh persist-a       split-K's cluster launcher (GPU tests, rounds study), then attention rung 05's
#                                              PERSISTENT build: its GPU tests, the attention study
#   bash scripts/device_run.sh persist-default rung 05 persistent by default: attention and lab.ops.attention GPU
#                                              tests, the attention study, racecheck on the PERSISTENT build
#   bash scripts/device_run.sh persist-tests   its GPU tests alone
#   bash scripts/device_run.sh persist-profile persist-default's tests and study (no racecheck), with profile-c's ncu runs
#   bash scripts/device_run.sh fix-min         racecheck on attention rung 05 PERSISTENT=1, rung 05's and lab.ops.attention's
#                                              GPU tests, split-K's cluster plans against the driver's counts
#   bash scripts/device_run.sh profile-c       ncu on a decode attention step (rung 02 against SDPA) and on split-K's modes
#   bash scripts/device_run.sh persist-b       compute-sanitizer on attention rung 05's PERSISTENT build
#   bash scripts/device_run.sh underfill-b     GPU tests of split-K, grouped and decode, the split study, exercise
#                                              07's grading, `lab bench` (headline) of the three families
#   bash scripts/device_run.sh underfill-c     grouped and decode GPU tests and benches, exercise 07's timing diagnosis
#   bash scripts/device_run.sh underfill-final split-K, grouped and decode after the last changes: GPU tests,
#                                              exercise 07, the split study, split-K and grouped benches, notebook 05
#                                              executed live
#   bash scripts/device_run.sh underfill-sanitize compute-sanitizer memcheck over split-K, decode and grouped GEMM
#   bash scripts/device_run.sh tc-evidence     gemm_tc under compute-sanitizer (memcheck, racecheck, synccheck) and
#                                              `lab profile gemm_tc` (bank conflicts, DRAM bytes)
#   bash scripts/device_run.sh ops-verify      lab.ops's GPU tests, then notebook 08 on the committed records
#   bash scripts/device_run.sh ops-gemms       the trace's GEMMs alone (carry .opscache: the ops run's tune cache), then
#                                              notebook 08
#   bash scripts/device_run.sh ops-baseline    lab.ops against the library and PyTorch: `lab tune --table` (the sweep, the
#                                              table written from it), host cost per call, lab.ops's GPU tests (carry .whl
#                                              with nvmath-python; .labcache from an earlier call's labcache.tgz)
#   bash scripts/device_run.sh ops-records     lab.ops's GPU tests, the sweep (writes the table), host cost, lab.ops against
#                                              PyTorch eager and graphed on two models' traces, gemm_tc's headline bench
#   bash scripts/device_run.sh notebooks-a     notebooks 00-02 executed live, every figure checked (carry .nbwheels)
#   bash scripts/device_run.sh notebooks-b     notebooks 04 and 06-08 executed live, every figure checked
#   bash scripts/device_run.sh attention       the attention family's GPU tests, then its headline bench
#   bash scripts/device_run.sh attention-records attention's GPU tests (family, lab.ops, exercise 10), the study against
#                                              each SDPA backend, `lab bench attention`
#   bash scripts/device_run.sh notebooks-c     notebooks 04, 06, 07 executed live; notebooks-d: 08 and 09
#   bash scripts/device_run.sh notebooks-live FILES  the notebooks named (notebooks/src/NN_*.py) executed live
#   bash scripts/device_run.sh attention-final attention's GPU tests, notebooks 06 and 08 live, `lab bench attention`,
#                                              notebook 09 live, lab.ops.attention's and exercise 10's GPU tests
#   bash scripts/device_run.sh hopper-gemm     gemm_tc rungs 09 and 10: GPU tests, the Hopper GEMM study against
#                                              torch.mm and cuBLASLt, compute-sanitizer
#   bash scripts/device_run.sh hopper-pingpong gemm_tc rung 11 beside 06, 09, 10: GPU tests, the study, sanitizer
#   bash scripts/device_run.sh hopper-tiles    rung 10's narrower tile builds: GPU tests, the tile study, memcheck
#   bash scripts/device_run.sh decode-attention decode attention's GPU tests, its study against SDPA, its headline bench
#   bash scripts/device_run.sh rows-cluster    the row ladders' cluster rungs (norms 04, softmax 05): their GPU tests and
#                                              lab.ops's row tests, the cluster-rows study against PyTorch and the copy,
#                                              `lab bench` of the three families
#   bash scripts/device_run.sh rows-final      the row ladders' GPU tests (every rung and case) and lab.ops's rows, the
#                                              cluster-rows study, `lab bench` of the three families, compute-sanitizer
#                                              on the cluster rungs, attention rung 05 PEELED=1 (its test, the attention
#                                              study on one shape)
#   bash scripts/device_run.sh attention-peeled attention's GPU tests (family, lab.ops), the study against each SDPA
#                                              backend, `lab bench attention`'s sweep, compute-sanitizer on rung 05
#   bash scripts/device_run.sh records-now     the attention study, attention's GPU tests, the cluster-rows study, then
#                                              compute-sanitizer on attention rung 05 where time is left
#   bash scripts/device_run.sh records-next    rung 05's other builds' GPU tests, the attention sweep, racecheck on
#                                              attention rung 05 (long child), synccheck on LayerNorm rung 04, the
#                                              attention study (LONGEST_FIRST among its probes)
#   bash scripts/device_run.sh varlen-a        packed (varlen) attention's GPU tests, attention rung 05's, the varlen
#                                              study against padding, the attention study
#   bash scripts/device_run.sh varlen-b        varlen-a with lab.ops.attention_varlen's and lab.ops.attention's GPU tests
#   bash scripts/device_run.sh wide-heads      attention's and lab.ops.attention's GPU tests and the study, after rung 05's
#                                              D = 256 build; the row ladders' GPU tests on an H200
#   bash scripts/device_run.sh overlap         attention rung 05's SOFTMAX_OVERLAP and D = 256 builds: their GPU tests, the
#                                              attention study by head dim (128, 256, 64; STUDY_HEAD_DIMS)
#   bash scripts/device_run.sh overlap-b       compute-sanitizer on rung 05's SOFTMAX_OVERLAP build, lab.ops's attention
#                                              GPU tests; on an H200 the row ladders' GPU tests
#   bash scripts/device_run.sh overlap-c       rung 05's and the packed family's GPU tests with SOFTMAX_OVERLAP the default,
#                                              lab.ops's attention tests, sanitizers on the packed family, both studies
#   bash scripts/device_run.sh owed-one        split-K's cluster plans timed one by one, the attention study, decode rung
#                                              02's block timeline, rung 05's and lab.ops.attention's GPU tests in one
#                                              call; owed-short: the split-K plans and the decode timeline alone; owed-b
#                                              (after owed-one, same machine): rows-stats-b, then memcheck and synccheck
#                                              on attention rung 05 PERSISTENT=1
#   bash scripts/device_run.sh new-rungs       the candidate rungs (gemm_tc 12, gemm_tc_epilogue's 10): GPU tests,
#                                              their studies, compute-sanitizer (BUDGET_S 570; its own call)
#   bash scripts/device_run.sh hopper-sched    lab.ops's hopper path (rung 10's tile or rung 12, as the family schedules
#                                              them) and gemm_tc rungs 10 and 12: GPU tests; split-K's GPU tests and rounds
#   bash scripts/device_run.sh hopper-sched-b  lab.ops's sweep with the hopper path (the table it would choose, not
#                                              installed), the stream-K cluster study, decode's block timeline
#   bash scripts/device_run.sh split-plan      split-K's cluster-mode GPU tests and rounds after a plan-rule change
#                                              (BUDGET_S about 200)
#   bash scripts/device_run.sh rows-stats-b    the norms' GPU tests and lab.ops's rows, the cluster-rows study,
#                                              compute-sanitizer on LayerNorm rung 04
#   bash scripts/device_run.sh gpu-tests [FILES] the GPU tests of FILES (every GPU test when none) in one box, with
#                                              the slowest tests' durations
#   bash scripts/device_run.sh grading         the grader's GPU tests (fault batch, exercises 07-08, exercise 08's numerics
#                                              harness), then exercise09
#   bash scripts/device_run.sh layers          the Hopper rungs' families, the grader and exercises on the GPU, notebook 03
#   bash scripts/device_run.sh exercise09      exercise 09's calibration (it writes the reference table), its GPU tests
#   bash scripts/device_run.sh ops             lab.ops's GPU tests, its studies (dispatch overhead, autotune of the
#                                              trace's buckets, the trace, first-request latency), notebook 08, exercise 09's
#                                              GPU tests; each step boxed to fit BUDGET_S (570) in all
# Notebooks need the offline wheels carried as .nbwheels (cp -r ../shared/wheels/py312-notebook .nbwheels).
# The commit records and notebooks name: the device machine's copy of .git can be the session's starting commit
# (seen 2026-11-30 and 2026-12-02), and `$(git rev-parse HEAD)` written in the device command runs THERE. So write it
# on the development machine before the call, `git rev-parse HEAD > .labcache/commit` (carried with .labcache), or
# pass LAB_COMMIT as a literal hash.
# The script packs $OUT/pack.tgz itself and removes $OUT/pack: a device command must not tar pack again (that
# overwrote a whole run's records with an empty archive once).
set -uo pipefail
mode="${1:-smoke}"
if [ -z "${LAB_COMMIT:-}" ] && [ -f .labcache/commit ]; then export LAB_COMMIT="$(cat .labcache/commit)"; fi
[ -n "${LAB_COMMIT:-}" ] || echo "warning: LAB_COMMIT is not set; records take their commit from this machine's .git" >&2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 LAB_CACHE_DIR=/tmp/labcache
OUT="${OUT:-/tmp/out}"; pack="$OUT/pack"; mkdir -p "$pack"
log="$pack/log.txt"

gpu_tests() {  # gpu_tests SECONDS FILES...
  local limit="$1"; shift
  echo "== GPU tests: $*"
  local name; name="$(basename "$1" .py)"
  timeout "$limit" python3 -m pytest -m gpu -q -p no:cacheprovider "$@" 2>&1 | tee "$pack/pytest_$name.log" | tail -30
}

notebooks() {  # notebooks PATTERN...
  [ -d .nbwheels ] || { echo "== notebooks skipped: carry .nbwheels"; return; }
  echo "== notebooks: $*"
  case ":$PYTHONPATH:" in *:/tmp/nbsite:*) ;; *) export PYTHONPATH="$PYTHONPATH:/tmp/nbsite" ;; esac
  if [ ! -d /tmp/nbsite/nbclient ]; then  # once a call
    python3 -m pip install -q --no-index --find-links .nbwheels nbclient ipykernel jupytext --target /tmp/nbsite \
      && python3 -m ipykernel install --sys-prefix --name python3 >/dev/null
  fi
  # Each notebook is written when it ends, a failed one partly executed (for its traceback): all come back, and
  # the log says which failed.
  timeout "$(box "${NOTEBOOK_BOX:-560}" 5)" python3 scripts/execute_notebooks.py "$@" --inplace; mkdir -p "$pack/notebooks"
  for nb in "$@"; do cp "notebooks/$(basename "${nb%.py}").ipynb" "$pack/notebooks/"; done
}

carried() {  # carried wheels (.whl: nvmath-python for cuBLASLt) and a compile cache from an earlier call (.labcache)
  if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/nvmath*.whl \
      && export PYTHONPATH="$PYTHONPATH:/tmp/site"
    python3 -c "import nvmath.bindings.cublasLt" 2>/dev/null || { echo "== nvmath needs the carried cuda-core/pathfinder";
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/cuda_core*.whl .whl/cuda_pathfinder*.whl; }
  fi
  [ -f .labcache/labcache.tgz ] && mkdir -p /tmp/labcache && tar -C /tmp/labcache -xzf .labcache/labcache.tgz
  python3 - <<'PY'
import cupy, numpy
from lab.tools import library_gemm
try:
    import torch
    print("torch", torch.__version__, torch.cuda.get_device_name(), "cupy", cupy.__version__, "numpy", numpy.__version__)
except ImportError:
    print("no torch")
print("cuBLASLt:", library_gemm.lt_unavailable() or "available", "->", library_gemm.library_name())
PY
}

keep_cache() {  # the compile cache, for the next call to carry as .labcache/labcache.tgz
  tar -C /tmp/labcache -czf "$OUT/labcache.tgz" . 2>/dev/null; ls -la "$OUT/labcache.tgz"
}

exercise09() {
  mkdir -p "$pack/calibration"
  echo "== exercise 09's calibration"; timeout "$(box 300 200)" python3 -m lab.grading.exercise09_calibration \
    --out "$pack/calibration" --write-solution 2>&1 | tail -40
  cp exercises/09_dispatch_rules/solution/rules.json "$pack/calibration/solution_rules.json"
  gpu_tests "$(box 200 10)" tests/test_gpu_exercise09.py
  keep_cache
}

t0=$(date +%s)
box() {  # box WANT RESERVE: WANT seconds, or what is left of BUDGET_S after RESERVE for the steps after
  local room=$(( ${BUDGET_S:-570} - ($(date +%s) - t0) - $2 )); [ "$room" -lt 5 ] && room=5
  [ "$room" -lt "$1" ] && echo "$room" || echo "$1"; }

gemm_records() {
  gpu_tests 120 tests/test_gpu_gemm.py
  echo "== lab bench gemm_fp32"; timeout 330 python3 -m lab bench gemm_fp32 --json "$pack/gemm_fp32.json"
  echo "== lab profile gemm_fp32"; timeout 150 python3 -m lab profile gemm_fp32 --json "$pack/gemm_fp32_profile.json"
}

{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  case "$mode" in
    smoke|full)
      python3 -m lab doctor
      gpu_tests 400 tests
      echo "== knob sweep"; python3 scripts/knob_sweep.py "$pack/knobs.json"
      if [ "$mode" = smoke ]; then python3 -m lab tour --quick --out "$pack/report"
      else python3 -m lab tour --out "$pack/report"; notebooks notebooks/src/0*.py; fi ;;
    gemm-final)
      echo "== tuning round 5"; timeout 120 python3 scripts/gemm_sweep.py "$pack/gemm_sweep5.json" --round=5
      gemm_records
      notebooks notebooks/src/02_gemm_fp32.py ;;
    ops-baseline)  # lab.ops against the library and PyTorch: the sweep that writes the table, host cost, GPU tests
      carried; mkdir -p "$pack/ops"
      echo "== lab tune --table"; timeout "$(box 330 170)" python3 -m lab tune --table --out "$pack/ops" --rounds 3 \
        --write 2>&1 | tail -80
      cp lab/ops/default_table.json "$pack/ops/" 2>/dev/null
      echo "== host cost"; timeout "$(box 45 200)" python3 -m lab.studies.ops_sweep "$pack/ops" --host 2>&1 | tail -3
      echo "== row ops, round to round"; mkdir -p "$pack/rowops"
      timeout "$(box 100 110)" python3 -m lab.studies.rowops_study "$pack/rowops" --rounds 3 2>&1 | tail -40
      keep_cache
      gpu_tests "$(box 200 5)" tests/test_gpu_ops.py tests/test_gpu_gemm_tc.py -k "ops or ceiling or torch_peer or bench_reports" ;;
    ops-records)  # lab.ops's records against the library and PyTorch: GPU tests, the sweep (writes the table), host
                  # cost, lab.ops against PyTorch eager and graphed on two models' traces, gemm_tc's headline bench
      carried; mkdir -p "$pack/ops" "$pack/cmp"
      gpu_tests "$(box 150 400)" tests/test_gpu_ops.py tests/test_ops_graphs.py tests/test_ops_compare.py \
        tests/test_gpu_gemm_tc.py -k "ops or graphs or compare or ceiling or torch_peer or bench_reports"
      echo "== lab tune --table"; timeout "$(box 150 250)" python3 -m lab tune --table --out "$pack/ops" --rounds 3 \
        --write 2>&1 | tail -4
      cp lab/ops/default_table.json "$pack/ops/" 2>/dev/null
      echo "== host cost"; timeout "$(box 30 220)" python3 -m lab.studies.ops_sweep "$pack/ops" --host 2>&1 | tail -3
      for spec in llama3_8b:float16 qwen25_7b:bfloat16 llama3_8b:bfloat16 qwen25_7b:float16; do
        set -- ${spec/:/ }
        echo "== lab.ops against PyTorch: $1 $2"
        timeout "$(box 60 100)" python3 -m lab.studies.ops_compare "$pack/cmp" --model "$1" --dtype "$2" --steps 240 \
          --rounds 3 2>&1 | tail -14
      done
      echo "== lab.ops study: overhead"; timeout "$(box 45 130)" python3 -m lab.studies.ops_study "$pack/ops" overhead | tail -2
      for f in ${HEADLINE_FAMILIES:-gemm_tc}; do
        echo "== lab bench $f (headline)"
        timeout "$(box 120 5)" python3 -m lab bench "$f" --kinds headline --json "$pack/${f}_headline.json" 2>&1 | tail -3
      done
      keep_cache ;;
    gpu-tests)  # the GPU tests of the files named after the mode (every GPU test when none)
      carried; shift
      gpu_tests "$(box 560 15)" "${@:-tests}" --durations=15; keep_cache ;;
    ops-notebook)  # notebook 08 executed on the GPU (carry .nbwheels), on the committed records
      carried; notebooks notebooks/src/08_specialization_and_dispatch.py ;;
    layers)  # after a change across lab/'s layers: the Hopper rungs and the families built on them, the grader and
      # the exercises on the GPU, then notebook 03 executed (carry .nbwheels)
      carried
      gpu_tests "$(box 170 390)" tests/test_gpu_gemm_tc.py tests/test_gpu_split_k.py tests/test_gpu_grouped_gemm.py \
        tests/test_gpu_decode.py tests/test_gpu_norms.py
      gpu_tests "$(box 110 280)" tests/test_gpu_grader.py
      gpu_tests "$(box 120 170)" tests/test_gpu_exercises.py tests/test_gpu_exercise09.py tests/test_gpu_epilogue.py \
        -k "07_split_k or 08_epilogue or 06_tile or split_k_file or chosen_values or table or reference or starter"
      notebooks notebooks/src/03_tensor_cores.py
      keep_cache ;;
    grading)  # the grader's GPU tests (the exercise 01 fault batch, exercises 07-08 graded end to end, exercise 08's
      # numerics harness), then exercise 09's calibration study
      carried; mkdir -p "$pack/calibration"
      gpu_tests "$(box 150 260)" tests/test_gpu_grader.py
      gpu_tests "$(box 200 200)" tests/test_gpu_exercises.py tests/test_gpu_epilogue.py tests/test_plugin_numerics.py \
        -k "07_split_k or 08_epilogue or split_k_file or numerics or plugin or chosen_values"
      exercise09 ;;
    exercise09)  # exercise 09's calibration (the head probe writes the reference table), then its GPU tests
      carried; exercise09 ;;
    ops-tests)  # lab.ops's GPU tests alone (after a change that leaves the records standing)
      carried
      gpu_tests "$(box 300 5)" tests/test_gpu_ops.py tests/test_ops_graphs.py tests/test_ops_compare.py \
        tests/test_rowops_study.py tests/test_gpu_gemm_tc.py -k "ops or graphs or compare or rowops or ceiling or torch_peer or bench_reports"
      gpu_tests "$(box 120 5)" tests/test_gpu_epilogue.py -k "quantizers or per_row or rounds_once" ;;
    ops)
      mkdir -p "$pack/ops"
      gpu_tests "$(box 130 400)" tests/test_gpu_ops.py
      for study in overhead tune trace latency; do
        case $study in overhead) want=40; keep=330 ;; tune) want=130; keep=200 ;; trace) want=150; keep=110 ;;
          latency) want=70; keep=60 ;; esac
        echo "== lab.ops study: $study"; timeout "$(box $want $keep)" python3 -m lab.studies.ops_study "$pack/ops" "$study" 2>&1 | tail -6
      done
      cp /tmp/labcache/ops/tune.json "$pack/ops/tune_cache.json" 2>/dev/null
      echo "== lab tune (the CLI, two decode buckets)"
      COLUMNS=160 timeout "$(box 40 60)" python3 -m lab tune --shape 8x4096x4096 --shape 24x4096x14336 --epilogue residual 2>&1 | tail -12
      python3 -m lab ops stats 2>&1 | tail -30
      if [ -f notebooks/src/08_specialization_and_dispatch.py ] && [ -d .nbwheels ]; then
        mkdir -p results/h200 && cp "$pack"/ops/ops_*.json results/h200/ 2>/dev/null
        python3 -m pip install -q --no-index --find-links .nbwheels nbclient ipykernel jupytext --target /tmp/nbsite \
          && export PYTHONPATH="$PYTHONPATH:/tmp/nbsite" && python3 -m ipykernel install --sys-prefix --name python3 >/dev/null
        echo "== notebook 08"; timeout "$(box 80 30)" python3 scripts/execute_notebooks.py notebooks/src/08_specialization_and_dispatch.py --inplace \
          && mkdir -p "$pack/notebooks" && cp notebooks/08_specialization_and_dispatch.ipynb "$pack/notebooks/"
      fi
      [ -f tests/test_gpu_exercise09.py ] && gpu_tests "$(box 200 0)" tests/test_gpu_exercise09.py
      echo "== ops done after $(( $(date +%s) - t0 )) s" ;;
    ops-smoke)  # lab.ops's first GPU contact: its tests, the overhead study, one bucket tuned, a 12-step trace
      mkdir -p "$pack/ops"
      gpu_tests 200 tests/test_gpu_ops.py
      echo "== overhead"; timeout 45 python3 -m lab.studies.ops_study "$pack/ops" overhead 2>&1 | tail -4
      echo "== mini trace"; timeout 100 python3 -c "
import json, time
from lab.studies import serving_trace as st
from lab.ops import api
from lab.ops.shapes import GemmShape
from lab.ops.tune import tune_shape
rt = api.default_runtime()
t0 = time.perf_counter(); e = tune_shape(rt, GemmShape(24, 4096, 4096, 'float16', 'TN', True, 'residual'))
print('tuned', e['path'], e['config'], e['us'], [(c['path'], c.get('us'), c.get('rejected')) for c in e['candidates']], round(time.perf_counter() - t0, 1), 's')
steps = [st.Step('decode', m) for m in (1, 3, 8, 24, 100)] + [st.Step('prefill', 512)]
t0 = time.perf_counter(); rows = st.check_every_shape(steps, rt); print('checks', sum(r['bad'] for r in rows), 'bad of', len(rows), [r['path'] for r in rows], round(time.perf_counter() - t0, 1), 's')
t0 = time.perf_counter(); times = st.time_steps(steps, st.METHODS, runtime=rt); print(json.dumps(st.totals(steps, times)), round(time.perf_counter() - t0, 1), 's')
for k in sorted(times['lab_ops']): print(k, {m: round(times[m][k], 1) for m in times})
" 2>&1 | tail -30
      python3 -m lab ops stats 2>&1 | tail -5 ;;
    ops-verify)  # after the records: lab.ops's GPU tests again, then notebook 08 on the committed records
      gpu_tests 200 tests/test_gpu_ops.py
      notebooks notebooks/src/08_specialization_and_dispatch.py ;;
    ops-gemms)  # the trace's GEMMs alone with the tune cache of the ops run (carry .opscache), then notebook 08
      LAB_OPS_TUNE_FILE="$PWD/.opscache/tune.json" timeout 240 python3 -m lab.studies.ops_study results/h200 trace-gemms 2>&1 | tail -4
      mkdir -p "$pack/ops" && cp results/h200/ops_trace_gemms.json "$pack/ops/"
      notebooks notebooks/src/08_specialization_and_dispatch.py ;;
    gemm-records) gemm_records ;;
    notebook02) notebooks notebooks/src/02_gemm_fp32.py ;;
    notebooks-a)  # notebooks 00-02 executed live, each figure checked (carry .nbwheels, .whl, .labcache)
      carried; export LAB_CHECK_FIGURES=1
      notebooks notebooks/src/00_setup_and_method.py notebooks/src/01_memory_bound.py notebooks/src/02_gemm_fp32.py
      keep_cache ;;
    notebooks-b)  # notebooks 04 and 06-08 executed live, each figure checked
      carried; export LAB_CHECK_FIGURES=1
      notebooks notebooks/src/04_scheduling.py notebooks/src/06_epilogue_fusion.py \
        notebooks/src/07_softmax_and_norms.py notebooks/src/08_specialization_and_dispatch.py
      keep_cache ;;
    attention-final)  # after attention's last kernel change: its GPU tests, notebooks 06 and 08 live, `lab bench
      # attention` (headline, sweep) into results/h200 for notebook 09, notebook 09 live, then lab.ops.attention's and
      # exercise 10's GPU tests with what is left of BUDGET_S
      carried; export LAB_CHECK_FIGURES=1
      gpu_tests "$(box 130 330)" tests/test_gpu_attention.py -x --durations=5
      NOTEBOOK_BOX=150 notebooks notebooks/src/06_epilogue_fusion.py notebooks/src/08_specialization_and_dispatch.py
      echo "== lab bench attention"; COLUMNS=200 timeout "$(box 110 120)" python3 -m lab bench attention \
        --kinds headline,sweep --json "$pack/attention.json" 2>&1 | grep -v "^│ *│" | tail -70
      [ -f "$pack/attention.json" ] && cp "$pack/attention.json" results/h200/attention.json
      NOTEBOOK_BOX=100 notebooks notebooks/src/09_attention.py
      keep_cache
      gpu_tests "$(box 200 8)" tests/test_gpu_ops_attention.py tests/test_gpu_exercise10.py --durations=5 ;;
    hopper-pingpong)  # gemm_tc rung 11 (ping-pong) beside 06, 09, 10: a smoke run, rung 11's GPU tests, the Hopper
      # GEMM study on every shape (3 rounds), compute-sanitizer on rungs 11 and 10, then NOTEBOOKS live; rung 11 is
      # left out of the study when its smoke run fails
      carried
      echo "== rungs 10 and 11 smoke (a hang stops here)"
      study_rungs="06_persistent,09_cluster_multicast,10_tma_store,11_pingpong"
      timeout 90 python3 -c "
from lab.families import get_family; from lab.measure.verify import check_case
fam = get_family('gemm_tc'); ok = True
for key in ('10', '11'):
    for case in (dict(M=300, N=520, K=130, layout='TN', dtype='float16'), dict(M=4097, N=1000, K=200, layout='NN', dtype='bfloat16')):
        r = check_case(fam, fam.rung(key), case); print(r.line()); ok = ok and r.passed
raise SystemExit(0 if ok else 1)" || { echo "the smoke failed: rung 11 leaves the study"; study_rungs="06_persistent,09_cluster_multicast,10_tma_store"; }
      # Rungs 04-10 compile to the same SASS as at 5766ca4 (their GPU tests passed then): rung 11's tests.
      gpu_tests "$(box 170 330)" tests/test_gpu_gemm_tc.py -k "11 or pingpong" --durations=5
      cp "$pack/pytest_test_gpu_gemm_tc.log" "$pack/gemm_tc_gpu_tests_11.log" 2>/dev/null
      echo "== Hopper GEMM study"; timeout "$(box 260 165)" python3 -m lab.studies.hopper_gemm_study "$pack" \
        --rungs "$study_rungs" ${STUDY_ARGS:-} 2>&1 | tail -80
      echo "== compute-sanitizer, rungs 11 and 10"; timeout "$(box 110 3)" python3 scripts/gemm_tc_sanitize.py \
        "$pack/gemm_tc_sanitize_10_11.json" --rungs ${SANITIZE_RUNGS:-11,10} --budget 100 --tools ${SANITIZE_TOOLS:-memcheck,racecheck,synccheck} 2>&1 | tail -10
      keep_cache
      # NOTEBOOKS="notebooks/src/03_*.py ...": executed live in what is left, notebook 03 on the fresh study record,
      # only when every GPU test above passed and the study wrote its record.
      if [ -n "${NOTEBOOKS:-}" ] && [ -f "$pack/hopper_gemm_study.json" ] \
          && grep -q " passed" "$pack/pytest_test_gpu_gemm_tc.log" && ! grep -qE "[0-9]+ (failed|error)" "$pack/pytest_test_gpu_gemm_tc.log"; then
        cp "$pack/hopper_gemm_study.json" results/h200/hopper_gemm_study.json
        export LAB_CHECK_FIGURES=1; NOTEBOOK_BOX=$(box 600 5) notebooks $NOTEBOOKS
        keep_cache
      else
        echo "== notebooks not run (none named, a GPU test failed, or no study record)"
      fi ;;
    decode-attention)  # the decode-attention ladder: its GPU tests, then its study against SDPA (three rounds) and
      # `lab bench attention_decode --kinds headline`, all within BUDGET_S
      carried
      gpu_tests "$(box 260 250)" tests/test_gpu_attention_decode.py -x --durations=5
      echo "== decode attention study"; timeout "$(box 200 60)" python3 -m lab.studies.decode_attention_study "$pack" \
        ${STUDY_ARGS:-} 2>&1 | tail -90
      echo "== lab bench attention_decode"; COLUMNS=200 timeout "$(box 100 10)" python3 -m lab bench attention_decode \
        --kinds headline --json "$pack/attention_decode.json" 2>&1 | grep -v "^│ *│" | tail -40
      keep_cache ;;
    decode-records)  # decode attention after its last kernel change: its GPU tests and lab.ops.attention's, memcheck
      # on both rungs, the study (three rounds) and `lab bench attention_decode` into results/h200
      carried
      gpu_tests "$(box 150 400)" tests/test_gpu_attention_decode.py tests/test_gpu_ops_attention.py -x --durations=5
      echo "== compute-sanitizer memcheck"; timeout "$(box 90 310)" python3 scripts/gemm_tc_sanitize.py \
        "$pack/sanitize_attention_decode.json" --family attention_decode --tools memcheck --budget 80 2>&1 | tail -12
      echo "== decode attention study"; timeout "$(box 200 100)" python3 -m lab.studies.decode_attention_study "$pack" \
        2>&1 | tail -120
      echo "== lab bench attention_decode"; COLUMNS=200 timeout "$(box 100 5)" python3 -m lab bench attention_decode \
        --kinds headline,sweep --json "$pack/attention_decode.json" 2>&1 | grep -v "^│ *│" | tail -60
      keep_cache ;;
    hopper-gemm)  # gemm_tc rungs 09 (clusters, B multicast) and 10 (TMA-store epilogue): their GPU tests, the Hopper
      # GEMM study against torch.mm and cuBLASLt (3 rounds), compute-sanitizer on both
      carried
      echo "== rungs 09 and 10 smoke (a hang stops here)"
      timeout 60 python3 -c "
from lab.families import get_family; from lab.measure.verify import check_case
fam = get_family('gemm_tc')
for key in ('09', '10'):
    print(check_case(fam, fam.rung(key), dict(M=300, N=520, K=130, layout='TN', dtype='float16')).line())" \
        || { echo "the smoke failed: the rest is skipped"; keep_cache; exit 0; }
      gpu_tests "$(box 170 330)" tests/test_gpu_gemm_tc.py -k "09 or 10 or cluster or tma_store" --durations=5
      echo "== Hopper GEMM study"; timeout "$(box 240 165)" python3 -m lab.studies.hopper_gemm_study "$pack" \
        ${STUDY_ARGS:-} 2>&1 | tail -70
      echo "== compute-sanitizer, rungs 09 and 10"; timeout "$(box 160 3)" python3 scripts/gemm_tc_sanitize.py \
        "$pack/gemm_tc_sanitize_09_10.json" --rungs ${SANITIZE_RUNGS:-10,09} --budget 150 --tools ${SANITIZE_TOOLS:-memcheck,racecheck,synccheck} 2>&1 | tail -8
      keep_cache ;;
    hopper-verify)  # after a change to gemm_tc rung 10: its GPU tests, the study, compute-sanitizer on rung 10
      carried
      gpu_tests "$(box 80 210)" tests/test_gpu_gemm_tc.py -k "10 or tma_store" --durations=3
      echo "== Hopper GEMM study"; timeout "$(box 150 65)" python3 -m lab.studies.hopper_gemm_study "$pack" 2>&1 | tail -60
      echo "== compute-sanitizer, rung 10"; timeout "$(box 200 3)" python3 scripts/gemm_tc_sanitize.py \
        "$pack/gemm_tc_sanitize_10.json" --rungs 10 --budget "$(box 195 8)" --tools ${SANITIZE_TOOLS:-memcheck,racecheck,synccheck} \
        2>&1 | tail -5
      keep_cache ;;
    hopper-quick)  # the shortest check after a change to gemm_tc rung 10: its GPU tests, then the study on one shape
      carried
      gpu_tests "$(box 100 40)" tests/test_gpu_gemm_tc.py -k "10_tma_store or tma_store" --durations=3
      echo "== Hopper GEMM study (one shape)"; timeout "$(box 60 2)" python3 -m lab.studies.hopper_gemm_study "$pack" \
        --quick 2>&1 | tail -14 ;;
    decode-final)  # after decode attention's last change: the study and the headline bench into results/h200,
      # notebooks 06, 08 and 09 live, then the decode family's and lab.ops.attention's GPU tests
      carried; export LAB_CHECK_FIGURES=1
      echo "== decode attention study"; timeout "$(box 170 400)" python3 -m lab.studies.decode_attention_study "$pack" \
        2>&1 | tail -60
      [ -f "$pack/decode_attention_study.json" ] && cp "$pack/decode_attention_study.json" results/h200/
      echo "== lab bench attention_decode"; COLUMNS=200 timeout "$(box 75 330)" python3 -m lab bench attention_decode \
        --kinds headline --json "$pack/attention_decode.json" 2>&1 | grep -v "^│ *│" | tail -30
      [ -f "$pack/attention_decode.json" ] && cp "$pack/attention_decode.json" results/h200/
      NOTEBOOK_BOX=130 notebooks notebooks/src/06_epilogue_fusion.py notebooks/src/08_specialization_and_dispatch.py \
        notebooks/src/09_attention.py
      keep_cache
      gpu_tests "$(box 100 100)" tests/test_gpu_attention_decode.py --durations=3
      gpu_tests "$(box 120 3)" tests/test_gpu_ops_attention.py --durations=3 ;;
    decode-paged)  # after decode attention's plan fix: its GPU tests, the study into results/h200, notebook 09 live
      carried; export LAB_CHECK_FIGURES=1
      gpu_tests "$(box 110 210)" tests/test_gpu_attention_decode.py --durations=3
      echo "== decode attention study"; timeout "$(box 170 40)" python3 -m lab.studies.decode_attention_study "$pack" \
        2>&1 | tail -60
      [ -f "$pack/decode_attention_study.json" ] && cp "$pack/decode_attention_study.json" results/h200/
      NOTEBOOK_BOX=60 notebooks notebooks/src/09_attention.py ;;
    hopper-tiles)  # rung 10's narrower tile builds (BN 192 and 128, lab/families/gemm_tc_tiles.py): a smoke run, their
      # GPU tests, the tile study (kept in /tmp/keep for a notebooks-live call on the same machine), memcheck of both
      carried
      echo "== rung 10 tile builds smoke (a hang stops here)"
      timeout 150 python3 -c "
import dataclasses
from lab.families import get_family, gemm_tc_tiles as tiles; from lab.measure.verify import check_case
fam = get_family('gemm_tc'); base = fam.rung('10'); ok = True
for bn, case in ((192, dict(M=300, N=520, K=130, layout='TN', dtype='float16')), (128, dict(M=4097, N=1000, K=200, layout='NN', dtype='bfloat16'))):
    r = check_case(fam, dataclasses.replace(base, spec=base.spec.with_knobs(**tiles.TILE_KNOBS[bn])), case); print(bn, r.line()); ok = ok and r.passed
raise SystemExit(0 if ok else 1)" || echo "the smoke failed"
      gpu_tests "$(box 200 330)" tests/test_gpu_gemm_tc.py -k "tile and not order" --durations=5
      cp "$pack/pytest_test_gpu_gemm_tc.log" "$pack/gemm_tc_gpu_tests_tiles.log" 2>/dev/null
      echo "== tile study"; timeout "$(box 260 100)" python3 -m lab.studies.hopper_tile_study "$pack" 2>&1 | tail -80
      mkdir -p /tmp/keep && cp "$pack/hopper_tile_study.json" /tmp/keep/ 2>/dev/null
      for spec in "192 TN" "128 TN,NN"; do
        set -- $spec
        echo "== compute-sanitizer memcheck, rung 10 BN=$1"
        timeout "$(box 75 5)" python3 scripts/gemm_tc_sanitize.py "$pack/gemm_tc_sanitize_10_bn$1.json" --rungs 10 \
          --knobs "$(python3 -c "from lab.families.gemm_tc_tiles import TILE_KNOBS as k; print(','.join(f'{a}={b}' for a, b in k[$1].items()))")" \
          --layouts "$2" --tools memcheck --budget 65 2>&1 | tail -4
      done
      keep_cache ;;
    notebooks-live)  # the notebooks named after the mode (notebooks/src/NN_*.py) executed live, each figure checked
      carried; export LAB_CHECK_FIGURES=1; shift
      notebooks "$@"
      keep_cache ;;
    notebooks-c)  # notebooks 04, 06 and 07 executed live, each figure checked
      carried; export LAB_CHECK_FIGURES=1
      notebooks notebooks/src/04_scheduling.py notebooks/src/06_epilogue_fusion.py notebooks/src/07_softmax_and_norms.py
      keep_cache ;;
    notebooks-d)  # notebooks 08 and 09 executed live, each figure checked
      carried; export LAB_CHECK_FIGURES=1
      notebooks notebooks/src/08_specialization_and_dispatch.py notebooks/src/09_attention.py
      keep_cache ;;
    attention)  # the attention family's GPU tests, then its headline bench against PyTorch SDPA
      carried
      gpu_tests "$(box 300 200)" tests/test_gpu_attention.py --durations=10
      echo "== lab bench attention (headline)"; timeout "$(box 180 10)" python3 -m lab bench attention --kinds headline \
        --json "$pack/attention_headline.json" 2>&1 | tail -20
      keep_cache ;;
    attention-records)  # attention after its last kernel change: its GPU tests (family, lab.ops, exercise 10), the
      # study against each SDPA backend (3 rounds, rung 03's knobs), then `lab bench attention` (every kind)
      carried
      gpu_tests "$(box 200 330)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py tests/test_gpu_exercise10.py \
        --durations=10
      echo "== attention study"; timeout "$(box 150 180)" python3 -m lab.studies.attention_study "$pack" --rounds 3 2>&1 | tail -45
      echo "== lab bench attention"; COLUMNS=200 timeout "$(box 170 10)" python3 -m lab bench attention \
        --json "$pack/attention.json" 2>&1 | grep -v "^│ *│" | tail -60
      keep_cache ;;
    notebook03) notebooks notebooks/src/03_tensor_cores.py ;;
    notebook04) notebooks notebooks/src/04_scheduling.py ;;
    sched-next)
      gpu_tests 200 tests/test_gpu_gemm_tc.py -k "stream_k"
      echo "== stream-K study"; timeout 150 python3 -m lab study streamk --out "$pack" | grep -v "^{'M'" | tail -5 \
        && cp "$pack/schedule_stream_k.json" results/h200/ && notebooks notebooks/src/04_scheduling.py ;;
    sched-a)
      gpu_tests 200 tests/test_gpu_gemm_tc.py -k "stream_k or tile_order or 06_persistent or 07_stream_k"
      gpu_tests 90 tests/test_gpu_work_queue.py
      LAB_EXERCISE_SUMMARY="$pack/gemm_tc_exercise06.json" gpu_tests 150 tests/test_gpu_exercises.py -k 06_tile
      echo "== stream-K study"; timeout 150 python3 -m lab study streamk --out "$pack" | tail -25
      echo "== small items"; timeout 90 python3 -m lab study items --out "$pack" | tail -15 ;;
    sched-b)  # the three studies in turn, all within BUDGET_S (570 s); a failure in one does not stop the next
      for study in orders counters fp32; do
        echo "== tile orders: lab study $study"; timeout "$(box 560 0)" python3 -m lab study "$study" --out "$pack" | tail -30
      done ;;
    quality)
      LAB_EXERCISE_SUMMARY="$pack/gemm_exercises.json" LAB_GRADER_SUMMARY="$pack/grader_summary.json" \
        gpu_tests 400 tests
      for fam in gemm_fp32 copy transpose; do
        echo "== lab verify $fam"
        timeout 60 python3 -m lab verify "$fam" --seeds 5 --seed 100 --json "$pack/${fam}_bounds.json" | tail -12
      done ;;
    mem-records|records)
      timeout 40 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_l2.py 2>&1 | tail -5
      echo "== L2 sweep + probes"  # one 80 s box for both, the probes after the sweep
      timeout 80 sh -c 'python3 -m lab study l2 --out "$1" && python3 -m lab study probes --out "$1"' sh "$pack"
      echo "== transpose variants"; timeout 30 python3 -m lab study transpose-variants --out "$pack"
      echo "== lab bench transpose"; timeout 100 python3 -m lab bench transpose --json "$pack/transpose.json" | tail -20
      echo "== lab profile transpose"
      timeout 70 python3 -m lab profile transpose --json "$pack/transpose_profile.json" | tail -10
      if [ "$mode" = records ]; then
        echo "== gemm_tc: share of the error bound used"; timeout 90 python3 scripts/gemm_tc_margin.py "$pack/gemm_tc_margin.json"
        echo "== gemm_tc headline bench"
        timeout 90 python3 -c "
from lab.measure import bench, records
from lab.families.gemm_tc import GemmTcFamily
rs = bench.run(GemmTcFamily(), bench.BenchPlan(kinds=('headline',), min_time_ms=10))
records.save('$pack/gemm_tc.json', rs)
for r in rs.records:
    print(r.rung, r.params['dtype'], r.params['layout'], r.params['M'], f'{r.value:.1f} TFLOP/s', f'{r.ratio:.3f}x')"
      fi ;;
    tc-smoke)
      for r in 04 05; do
        echo "== lab verify gemm_tc --rung $r"
        timeout 200 python3 -m lab verify gemm_tc --rung "$r" --seeds 1 --seed 100 --json "$pack/verify_$r.json" | tail -6
      done
      echo "== gemm_tc headline bench"; timeout 200 python3 -m lab bench gemm_tc --kinds headline --json "$pack/gemm_tc_headline.json" ;;
    tc-final)
      LAB_EXERCISE_SUMMARY="$pack/gemm_tc_exercise.json" gpu_tests 120 tests/test_gpu_exercises.py -k "05_mma or tensor_core"
      gpu_tests 330 tests/test_gpu_gemm_tc.py
      echo "== lab bench gemm_tc (headline, sweep, tail)"
      timeout 200 python3 -m lab bench gemm_tc --json "$pack/gemm_tc.json" | tail -40 ;;
    tc-sanitize)  # the second sanitizer pass: what the first (tc-evidence) had no time for
      timeout 260 python3 scripts/gemm_tc_sanitize.py "$pack/gemm_tc_sanitize_memcheck.json" --tools memcheck \
        --rungs 04,05,06 --budget 240 | tail -5
      timeout 300 python3 scripts/gemm_tc_sanitize.py "$pack/gemm_tc_sanitize_racecheck.json" --tools racecheck \
        --rungs 02,03,04,05,06 --budget 280 | tail -7 ;;
    tc-knobs)
      for r in ${TC_RUNGS:-05}; do
        [ "$r" = 05 ] || { echo "== lab verify gemm_tc --rung $r"; timeout 200 python3 -m lab verify gemm_tc --rung "$r" --seeds 1 --seed 100 | tail -4; }
        for side in 4096 8192; do
          echo "== rung $r knobs at $side"; timeout 120 python3 scripts/gemm_tc_knobs.py "$pack/gemm_tc_knobs_${r}_$side.json" "$r" "$side"
        done
      done
      echo "== repack cost"; timeout 60 python3 scripts/gemm_tc_repack.py "$pack/gemm_tc_repack.json" ;;
    lessons) notebooks notebooks/src/00_setup_and_method.py notebooks/src/01_memory_bound.py notebooks/src/02_gemm_fp32.py ;;
    bounds)
      gpu_tests 200 tests/test_gpu_gemm.py
      echo "== lab verify gemm_fp32 --seeds 5"
      timeout 240 python3 -m lab verify gemm_fp32 --seeds 5 --seed 100 --json "$pack/gemm_fp32_bounds.json" ;;
    gemm-lessons)
      LAB_EXERCISE_SUMMARY="$pack/gemm_exercises.json" gpu_tests 200 tests/test_gpu_exercises.py
      LAB_GRADER_SUMMARY="$pack/grader_summary.json" gpu_tests 200 tests/test_gpu_grader.py
      notebooks notebooks/src/02_gemm_fp32.py ;;
    fusion-a)
      gpu_tests 420 tests/test_gpu_epilogue.py tests/test_gpu_softmax.py tests/test_gpu_norms.py
      for f in gemm_tc_epilogue gemm_fp32_epilogue; do
        echo "== lab bench $f"; timeout 200 python3 -m lab bench "$f" --kinds headline --json "$pack/$f.json" | tail -12
      done
      for f in softmax rmsnorm layernorm; do
        echo "== lab bench $f"; timeout 150 python3 -m lab bench "$f" --kinds headline,tail --json "$pack/$f.json" | tail -14
      done
      echo "== checklist study"; timeout 300 python3 -m lab study checklist --out "$pack" | tail -30
      gpu_tests 200 tests/test_gpu_gemm_tc.py -k "stream_k"
      echo "== stream-K study"; timeout 150 python3 -m lab study streamk --out "$pack" | grep -v "^{'M'" | tail -8 ;;
    fusion-b)
      gpu_tests 420 tests/test_gpu_epilogue.py tests/test_gpu_softmax.py tests/test_gpu_norms.py
      gpu_tests 200 tests/test_gpu_gemm_tc.py -k "stream_k"
      LAB_EXERCISE_SUMMARY="$pack/gemm_tc_exercise08.json" gpu_tests 300 tests/test_gpu_exercises.py -k "08 or epilogue_exercise"
      echo "== lab bench gemm_tc_epilogue"
      timeout 200 python3 -m lab bench gemm_tc_epilogue --kinds headline,sweep --json "$pack/gemm_tc_epilogue.json" | tail -4
      echo "== lab bench gemm_fp32_epilogue"
      timeout 120 python3 -m lab bench gemm_fp32_epilogue --kinds headline --json "$pack/gemm_fp32_epilogue.json" | tail -4
      for f in rmsnorm layernorm; do
        echo "== lab bench $f"; timeout 150 python3 -m lab bench "$f" --kinds headline,tail --json "$pack/$f.json" | tail -4
      done
      echo "== checklist study"; timeout 300 python3 -m lab study checklist --out "$pack" | tail -24 ;;
    fusion-sanitize)
      for spec in "gemm_tc_epilogue memcheck 120 ''" "softmax memcheck 120 ''" "rmsnorm memcheck 90 ''" "layernorm memcheck 90 ''" \
                  "softmax racecheck 50 04" "rmsnorm racecheck 50 03" "layernorm racecheck 50 03"; do
        set -- $spec; rungs="${4//\'/}"
        echo "== compute-sanitizer $2 on $1 ${rungs:-(every rung)}"
        timeout $(( $3 + 15 )) python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_${1}_${2%%,*}.json" --family "$1" \
          --tools "$2" --budget "$3" ${rungs:+--rungs "$rungs"} | tail -8
      done ;;
    fusion-nb)
      notebooks notebooks/src/06_epilogue_fusion.py notebooks/src/07_softmax_and_norms.py ;;
    rows-cluster)
      gpu_tests "$(box 170 390)" tests/test_gpu_norms.py tests/test_gpu_softmax.py tests/test_gpu_ops.py \
        -k "cluster or rung_04 or rung_05 or row_ops"
      echo "== cluster-rows study"; mkdir -p "$pack/study"
      timeout "$(box 160 235)" python3 -m lab.studies.cluster_rows_study "$pack/study" --rounds 3 2>&1 | tail -60
      for f in rmsnorm layernorm softmax; do
        echo "== lab bench $f"; timeout "$(box 75 70)" python3 -m lab bench "$f" --kinds "${BENCH_KINDS:-headline,sweep,tail}" \
          --json "$pack/$f.json" | tail -3
      done
      for spec in rmsnorm:04 softmax:05; do  # what time is left: memcheck of the cluster rungs
        set -- ${spec/:/ }
        echo "== compute-sanitizer memcheck on $1 rung $2"
        timeout "$(box 35 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_${1}_$2_memcheck.json" --family "$1" \
          --rungs "$2" --tools memcheck --budget 30 | tail -4
      done ;;
    rows-final)  # the cluster rungs after their fixes: every GPU test of the row ladders (all rungs, all cases) and of
                 # lab.ops's rows, the cluster-rows study, `lab bench` of the three families, compute-sanitizer on the
                 # cluster rungs, then attention rung 05 PEELED=1 (its test, the attention study on one shape)
      gpu_tests "$(box 200 330)" tests/test_gpu_norms.py tests/test_gpu_softmax.py tests/test_gpu_ops.py \
        -k "${ROW_TESTS:-not test_gpu_ops or row_ops}"
      echo "== cluster-rows study"; mkdir -p "$pack/study"
      timeout "$(box 90 240)" python3 -m lab.studies.cluster_rows_study "$pack/study" --rounds 3 2>&1 | tail -3
      for f in ${BENCH_FAMILIES-rmsnorm layernorm softmax}; do
        echo "== lab bench $f"; timeout "$(box 50 190)" python3 -m lab bench "$f" --json "$pack/$f.json" | tail -2
      done
      for spec in rmsnorm:04 layernorm:04 softmax:05; do
        set -- ${spec/:/ }
        echo "== compute-sanitizer on $1 rung $2"
        timeout "$(box 45 100)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_${1}_$2.json" --family "$1" \
          --rungs "$2" --tools memcheck,racecheck,synccheck --budget 40 | tail -5
      done
      gpu_tests "$(box 45 60)" tests/test_gpu_attention.py -k peeled
      echo "== attention study (one shape)"; timeout "$(box 60 3)" python3 -m lab.studies.attention_study \
        "$pack/study" --quick 2>&1 | tail -14 ;;
    rows-stats)  # LayerNorm rung 04 with its statistics in one exchange (STATS): every GPU test of the row ladders and of
                 # lab.ops's rows, the cluster-rows study (the other STATS build beside it), compute-sanitizer on
                 # LayerNorm rung 04,
                 # then attention: rung 05 PEELED=1's test and the attention study (every shape, D = 64 stage probes)
      gpu_tests "$(box 170 380)" tests/test_gpu_norms.py tests/test_gpu_softmax.py tests/test_gpu_ops.py \
        -k "not test_gpu_ops or row_ops"
      echo "== cluster-rows study"; mkdir -p "$pack/study"
      timeout "$(box 200 180)" python3 -m lab.studies.cluster_rows_study "$pack/study" --rounds 3 2>&1 | tail -40
      echo "== compute-sanitizer on layernorm rung 04"
      timeout "$(box 60 130)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_layernorm_04.json" --family layernorm \
        --rungs 04 --tools memcheck,racecheck,synccheck --budget 55 | tail -5
      gpu_tests "$(box 40 95)" tests/test_gpu_attention.py -k peeled
      echo "== attention study"; timeout "$(box 240 3)" python3 -m lab.studies.attention_study "$pack/study" 2>&1 \
        | tail -70 ;;
    attention-peeled)  # attention rung 05 with its loop peeled by default, first in lab.ops.attention's order: the
                       # GPU tests (family, lab.ops), the study against each SDPA backend (3 rounds), the sweep of
                       # `lab bench attention` (S = 256-16384, every flash rung), compute-sanitizer on rung 05
      gpu_tests "$(box 200 290)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py --durations=8
      echo "== attention study"; mkdir -p "$pack/study"
      timeout "$(box 170 120)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -60
      echo "== lab bench attention (sweep)"; COLUMNS=200 timeout "$(box 70 50)" python3 -m lab bench attention \
        --kinds sweep --json "$pack/attention_sweep.json" 2>&1 | grep -v "^│ *│" | tail -40
      echo "== compute-sanitizer on attention rung 05"
      timeout "$(box 50 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_attention_05.json" --family attention \
        --rungs 05 --tools memcheck,racecheck,synccheck --budget 45 | tail -5 ;;
    records-now)  # the records first, in one call: the attention study (rung 05 peeled by default, PEELED=0 beside
                  # it), attention's GPU tests (family, lab.ops), the cluster-rows study (both LayerNorm STATS
                  # builds); then, where BUDGET_S leaves time, compute-sanitizer on attention rung 05 and the sweep
      carried; mkdir -p "$pack/study"
      echo "== attention study"
      timeout "$(box 150 310)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -60
      gpu_tests "$(box 160 140)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py --durations=8
      echo "== cluster-rows study"
      timeout "$(box 130 5)" python3 -m lab.studies.cluster_rows_study "$pack/study" --rounds 3 2>&1 | tail -40
      if [ "$(box 60 0)" -ge 40 ]; then
        echo "== compute-sanitizer on attention rung 05"
        timeout "$(box 60 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_attention_05.json" --family attention \
          --rungs 05 --tools memcheck,racecheck,synccheck --budget "$(( $(box 60 3) - 5 ))" | tail -5
      fi
      keep_cache ;;
    records-next)  # what the H100 run at 5b68074 left: rung 05's other builds' GPU tests (PEELED=0, LONGEST_FIRST=1),
                   # the attention sweep (S = 256-16384, rungs 04 and 05 beside each other for lab.ops's order),
                   # racecheck on attention rung 05 with a long child, synccheck on LayerNorm rung 04 (STATS = 2),
                   # then the attention study again (on an H200 when the call gets one)
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 60 480)" tests/test_gpu_attention.py -k other_builds
      echo "== lab bench attention (sweep)"; COLUMNS=200 timeout "$(box 120 420)" python3 -m lab bench attention \
        --kinds sweep --json "$pack/attention_sweep.json" 2>&1 | grep -v "^│ *│" | tail -40
      echo "== compute-sanitizer racecheck on attention rung 05"
      timeout "$(box 260 170)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_attention_05_racecheck.json" \
        --family attention --rungs 05 --tools racecheck --budget 255 --child-timeout 240 | tail -3
      echo "== compute-sanitizer synccheck on layernorm rung 04"
      timeout "$(box 65 120)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_layernorm_04_synccheck.json" \
        --family layernorm --rungs 04 --tools synccheck --budget 60 --child-timeout 45 | tail -3
      echo "== attention study"
      timeout "$(box 150 3)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -30
      keep_cache ;;
    varlen-a)  # packed (varlen) attention: its GPU tests, attention rung 05's (its source took the VARLEN knob; the
               # dense builds' SASS is unchanged), the varlen study against padding, then the attention study
               # (LONGEST_FIRST among its probes) with what is left
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 200 330)" tests/test_gpu_attention_varlen.py --durations=5
      gpu_tests "$(box 130 200)" tests/test_gpu_attention.py -k "05" --durations=5
      echo "== varlen attention study"
      timeout "$(box 160 40)" python3 -m lab.studies.varlen_attention_study "$pack/study" --rounds 3 2>&1 | tail -45
      echo "== attention study"
      timeout "$(box 200 3)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -30
      keep_cache ;;
    varlen-b)  # packed attention after lab.ops.attention_varlen: the varlen family's and lab.ops's varlen GPU tests,
               # attention rung 05's and lab.ops.attention's, the varlen study, the attention study
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 150 380)" tests/test_gpu_attention_varlen.py tests/test_gpu_ops_attention_varlen.py \
        --durations=5
      gpu_tests "$(box 160 230)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py -k "05 or ops" \
        --durations=5
      echo "== varlen attention study"
      timeout "$(box 110 120)" python3 -m lab.studies.varlen_attention_study "$pack/study" --rounds 3 2>&1 | tail -40
      echo "== attention study"
      timeout "$(box 200 3)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -30
      keep_cache ;;
    wide-heads)  # attention rung 05's D = 256 build (64-key tiles): every attention rung's GPU tests (the check cases
                 # hold D = 256 now), lab.ops.attention's, the attention study (D = 256 among its shapes); on an H200,
                 # the row ladders' GPU tests with what is left
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 220 300)" tests/test_gpu_attention.py -k "${ATTENTION_TESTS:-not nothing}" --durations=5
      gpu_tests "$(box 120 180)" tests/test_gpu_ops_attention.py -k "${OPS_TESTS:-not nothing}" --durations=3
      echo "== attention study"
      timeout "$(box 170 10)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 \
        ${STUDY_HEAD_DIM:+--head-dim "$STUDY_HEAD_DIM"} 2>&1 | tail -40
      if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "$(box 60 0)" -ge 50 ]; then
        gpu_tests "$(box 400 3)" tests/test_gpu_norms.py tests/test_gpu_softmax.py tests/test_gpu_ops.py \
          -k "not test_gpu_ops or row_ops"
      fi
      keep_cache ;;
    overlap)  # attention rung 05's SOFTMAX_OVERLAP build and its D = 256 build: their GPU tests (rung 05's check cases,
              # D = 256 among them; lab.ops.attention's head-dim picks), then the attention study by head dim, D = 128
              # first (the overlap beside the default), then D = 256, then D = 64, each to its own record
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 200 300)" tests/test_gpu_attention.py -k "${ATTENTION_TESTS:-05 and not unpeeled and not longest_first}" \
        --durations=5
      gpu_tests "$(box 60 240)" tests/test_gpu_ops_attention.py -k "${OPS_TESTS:-head_dim}" --durations=3
      for d in ${STUDY_HEAD_DIMS:-128 256 64}; do
        echo "== attention study, D = $d"
        timeout "$(box 150 5)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 --head-dim "$d" 2>&1 | tail -30
      done
      keep_cache ;;
    overlap-b)  # what follows the overlap run: compute-sanitizer on rung 05 with SOFTMAX_OVERLAP = 1, lab.ops's
                # attention GPU tests (the strided-offsets varlen test among them), on an H200 the rows' GPU tests
      carried; mkdir -p "$pack/sanitize"
      echo "== compute-sanitizer on attention rung 05, SOFTMAX_OVERLAP=1"
      timeout "$(box 200 250)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05_overlap.json" \
        --family attention --rungs 05 --knobs SOFTMAX_OVERLAP=1 --tools memcheck,racecheck,synccheck --budget 190 | tail -5
      gpu_tests "$(box 150 100)" tests/test_gpu_ops_attention.py tests/test_gpu_ops_attention_varlen.py --durations=3
      if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
        gpu_tests "$(box 300 3)" tests/test_gpu_norms.py tests/test_gpu_softmax.py tests/test_gpu_ops.py \
          -k "not test_gpu_ops or row_ops"
      fi
      keep_cache ;;
    overlap-c)  # after a change of rung 05's SOFTMAX_OVERLAP default and lab.ops sending D = 256 to it: rung 05's GPU tests
                # (ATTENTION_TESTS: -k filter, "05" by default, its other builds among them), the packed family's and
                # lab.ops's attention tests, compute-sanitizer on rung 05 and the packed family, the attention study
                # (every shape, one record), the varlen study; each boxed to fit BUDGET_S
      carried; mkdir -p "$pack/study" "$pack/sanitize"
      gpu_tests "$(box 170 200)" tests/test_gpu_attention.py -k "${ATTENTION_TESTS:-05}" --durations=6
      gpu_tests "$(box 100 150)" tests/test_gpu_attention_varlen.py tests/test_gpu_ops_attention.py \
        tests/test_gpu_ops_attention_varlen.py --durations=3
      echo "== compute-sanitizer on attention rung 05 and attention_varlen"
      timeout "$(box 45 110)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05.json" \
        --family attention --rungs 05 --tools memcheck,racecheck,synccheck --budget 40 | tail -5
      timeout "$(box 70 90)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_varlen.json" \
        --family attention_varlen --tools memcheck,racecheck,synccheck --budget 65 | tail -5
      echo "== attention study"
      timeout "$(box 130 5)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -45
      echo "== varlen attention study"
      timeout "$(box 120 3)" python3 -m lab.studies.varlen_attention_study "$pack/study" --rounds 3 2>&1 | tail -30
      keep_cache ;;
    overlap-d)  # the attention study with rung 05's other SOFTMAX_OVERLAP build at each head dim (1 at D = 64 and 128,
                # 2 at D = 256) beside its default, then compute-sanitizer on rung 05 with its D = 256 cases
      carried; mkdir -p "$pack/study" "$pack/sanitize"
      echo "== attention study"
      timeout "$(box 150 100)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -50
      echo "== compute-sanitizer on attention rung 05 (D = 64, 128 and 256)"
      timeout "$(box 95 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05.json" \
        --family attention --rungs 05 --tools memcheck,racecheck,synccheck --budget 90 --child-timeout 40 | tail -6
      keep_cache ;;
    sanitize-05)  # compute-sanitizer alone on attention rung 05, its D = 256 cases among them
      carried; mkdir -p "$pack/sanitize"
      timeout "$(box 100 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05.json" \
        --family attention --rungs 05 --tools memcheck,racecheck,synccheck --budget 90 --child-timeout 40 | tail -6 ;;
    rows-stats-b)  # LayerNorm rung 04 (STATS) again: the norms' GPU tests and lab.ops's rows in a longer box, the
                   # cluster-rows study (the other STATS build beside it), compute-sanitizer on LayerNorm rung 04
      gpu_tests "$(box 190 220)" tests/test_gpu_norms.py tests/test_gpu_ops.py -k "not test_gpu_ops or row_ops" \
        --durations=8
      echo "== cluster-rows study"; mkdir -p "$pack/study"
      timeout "$(box 160 60)" python3 -m lab.studies.cluster_rows_study "$pack/study" --rounds 3 2>&1 | tail -40
      echo "== compute-sanitizer on layernorm rung 04"
      timeout "$(box 60 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_layernorm_04.json" --family layernorm \
        --rungs 04 --tools memcheck,racecheck,synccheck --budget 55 | tail -5 ;;
    splitk-cluster)  # split-K's cluster mode (rung 08, SPLIT_MODE 3): its GPU tests (every check case, bits run to run,
                     # the clusters that fit) beside the other modes' determinism tests, compute-sanitizer on it, then
                     # the rounds study against torch.mm and cuBLASLt; each boxed to fit BUDGET_S
      carried; mkdir -p "$pack/study" "$pack/sanitize"
      gpu_tests "$(box 170 230)" tests/test_gpu_split_k.py -k "cluster or deterministic or launch_notes" --durations=6
      echo "== compute-sanitizer on rung 08's cluster mode"
      timeout "$(box 100 125)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_split_k_cluster.json" \
        --family gemm_split_k --rungs 08_split_k_cluster --tools memcheck,racecheck,synccheck --budget 90 | tail -6
      echo "== split-K rounds study"
      timeout "$(box 150 5)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -40
      keep_cache ;;
    splitk-cluster-b)  # the same after a launcher change alone (the kernel as sanitized): GPU tests and the study
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 170 60)" tests/test_gpu_split_k.py -k "cluster or launch_notes" --durations=4
      echo "== split-K rounds study"
      timeout "$(box 150 5)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -40
      keep_cache ;;
    persist-a)  # split-K's cluster launcher (its GPU tests, the rounds study), then attention rung 05's PERSISTENT build:
                # its GPU tests (a few blocks looping over many items) and the attention study by head dim (D = 128,
                # then 256 and 64 as time allows: records attention_study_d<D>.json); boxed to fit BUDGET_S (360 s)
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 65 295)" tests/test_gpu_split_k.py -k "cluster or launch_notes" --durations=4
      echo "== split-K rounds study"
      timeout "$(box 80 215)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -40
      gpu_tests "$(box 85 130)" tests/test_gpu_attention.py -k "persistent" --durations=4
      for d in 128 256 64; do
        echo "== attention study, D = $d"
        timeout "$(box 75 3)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 --head-dim "$d" 2>&1 | tail -20
      done
      keep_cache ;;
    persist-short)  # the shortest form of persist-a (270 s): split-K's cluster tests but the every-case one (the kernel
                    # passed it before the launcher change; the launcher's own plans are checked by the bit-for-bit
                    # tests), the rounds study, rung 05 PERSISTENT's GPU tests, the attention study at D = 128
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 30 240)" tests/test_gpu_split_k.py -k "cluster_reduction or fit_at_once or launch_notes" \
        --durations=4
      echo "== split-K rounds study"
      timeout "$(box 80 160)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -40
      gpu_tests "$(box 85 75)" tests/test_gpu_attention.py -k "persistent" --durations=4
      echo "== attention study, D = 128"
      timeout "$(box 75 3)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 --head-dim 128 2>&1 | tail -20
      keep_cache ;;
    persist-min)  # the least of persist-a (175 s): split-K's cluster plans (fit, bits) and rounds study, rung 05
                  # PERSISTENT's GPU tests
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 30 145)" tests/test_gpu_split_k.py -k "cluster_reduction or fit_at_once" --durations=4
      echo "== split-K rounds study"
      timeout "$(box 75 70)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -40
      gpu_tests "$(box 70 2)" tests/test_gpu_attention.py -k "persistent" --durations=4 ;;
    persist-default)  # rung 05 persistent by default at D = 128 and causal D = 64: the attention family's and
                      # lab.ops.attention's GPU tests, split-K's launch notes, the attention study, then racecheck on
                      # the PERSISTENT build in what is left (its cases past one block an SM need more than 45 s)
      carried; mkdir -p "$pack/study" "$pack/sanitize"
      gpu_tests "$(box 170 200)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py \
        tests/test_gpu_split_k.py -k "not test_gpu_split_k or launch_notes" --durations=6
      echo "== attention study"
      timeout "$(box 135 60)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -50
      keep_cache
      echo "== racecheck on attention rung 05 PERSISTENT=1"
      timeout "$(box 200 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05_persistent_race.json" \
        --family attention --rungs 05 --knobs PERSISTENT=1 --tools racecheck --budget "$(box 195 8)" \
        --child-timeout 150 | tail -4 ;;
    persist-tests)  # the least of persist-default: the attention family's and lab.ops.attention's GPU tests, split-K's
                    # launch notes
      carried
      gpu_tests "$(box 240 3)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py \
        tests/test_gpu_split_k.py -k "not test_gpu_split_k or launch_notes" --durations=6 ;;
    persist-profile)  # the owed checks first, then the profiles, each boxed to fit BUDGET_S (580): the attention family's
                      # and lab.ops.attention's GPU tests with rung 05 persistent by default, split-K's launch notes; ncu
                      # on a decode step; the attention study of the new defaults; ncu on split-K's modes
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 170 410)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py \
        tests/test_gpu_split_k.py -k "not test_gpu_split_k or launch_notes" --durations=6
      echo "== ncu on a decode step"; timeout "$(box 110 290)" python3 scripts/decode_ncu.py "$pack" | tail -30
      echo "== attention study"
      timeout "$(box 135 150)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -50
      keep_cache
      echo "== ncu on the split-K kernels"; timeout "$(box 150 3)" python3 scripts/split_k_ncu.py "$pack" | tail -40 ;;
    fix-min)  # in BUDGET_S 320: racecheck on rung 05 PERSISTENT = 1, rung 05's GPU tests (its default
              # build on every case, the PERSISTENT builds, large logits) with lab.ops.attention's, split-K's cluster plans
      carried; mkdir -p "$pack/sanitize"
      echo "== racecheck on attention rung 05 PERSISTENT=1"
      timeout "$(box 100 200)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05_persistent_race.json" \
        --family attention --rungs 05 --knobs PERSISTENT=1 --tools racecheck --budget 95 --child-timeout 90 | tail -4
      gpu_tests "$(box 175 25)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py -k "05 or persistent or ops" \
        --durations=6
      echo "== split-K cluster plans"; timeout "$(box 25 2)" python3 scripts/split_k_cluster_fit.py "$pack/split_k_cluster_fit.json" ;;
    profile-c)  # Nsight Compute where two targets stand furthest off: a decode attention step (rung 02 and SDPA's
                # kernels, B = 1 and 8, L = 8192) and split-K's four modes (the cluster mode's stalls beside the others)
      carried
      echo "== ncu on a decode step"; timeout "$(box 170 200)" python3 scripts/decode_ncu.py "$pack" | tail -30
      echo "== ncu on the split-K kernels"; timeout "$(box 300 3)" python3 scripts/split_k_ncu.py "$pack" | tail -40 ;;
    persist-b)  # compute-sanitizer on attention rung 05's PERSISTENT build (its cases past one block an SM, D = 256)
      carried; mkdir -p "$pack/sanitize"
      timeout "$(box 150 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05_persistent.json" \
        --family attention --rungs 05 --knobs PERSISTENT=1 --tools memcheck,racecheck,synccheck --budget 140 \
        --child-timeout 45 | tail -6 ;;
    splitk-a)
      gpu_tests 300 tests/test_gpu_split_k.py -x
      echo "== ncu on the split-K kernels"; timeout 200 python3 scripts/split_k_ncu.py "$pack" | tail -40
      echo "== lab study splitk"; timeout 200 python3 -m lab study splitk --out "$pack" | tail -30
      echo "== lab bench gemm_split_k"
      timeout 150 python3 -m lab bench gemm_split_k --kinds headline --json "$pack/gemm_split_k.json" | tail -12 ;;
    splitk-b)
      echo "== lab study splitk"; timeout 300 python3 -m lab study splitk --out "$pack" | tail -30 ;;
    underfill-b)
      gpu_tests 400 tests/test_gpu_split_k.py tests/test_gpu_grouped_gemm.py tests/test_gpu_decode.py
      echo "== lab study splitk"; timeout 200 python3 -m lab study splitk --out "$pack" | tail -3
      LAB_EXERCISE_SUMMARY="$pack/gemm_split_k_exercise07.json" gpu_tests 300 tests/test_gpu_exercises.py -k "07_split_k or split_k"
      for f in gemm_split_k grouped_gemm decode; do
        echo "== lab bench $f"; timeout 200 python3 -m lab bench "$f" --kinds headline --json "$pack/$f.json" | tail -3
      done
      echo "== decode knob study"
      timeout 150 python3 -c "from lab.families.decode import knob_study; import json; print(json.dumps(knob_study(), indent=1))" \
        > "$pack/decode_knobs.json"; tail -c 600 "$pack/decode_knobs.json" ;;
    underfill-c)
      gpu_tests 300 tests/test_gpu_grouped_gemm.py tests/test_gpu_decode.py
      echo "== exercise 07 timing diagnosis"; timeout 120 python3 scripts/exercise07_timing.py
      for f in grouped_gemm decode; do
        echo "== lab bench $f"; timeout 200 python3 -m lab bench "$f" --kinds headline --json "$pack/$f.json" | tail -3
      done ;;
    underfill-final)
      gpu_tests 330 tests/test_gpu_split_k.py tests/test_gpu_grouped_gemm.py tests/test_gpu_decode.py
      LAB_EXERCISE_SUMMARY="$pack/gemm_split_k_exercise07.json" gpu_tests 200 tests/test_gpu_exercises.py -k "07_split_k or split_k"
      echo "== exercise 07 timing"; timeout 90 python3 scripts/exercise07_timing.py
      echo "== lab study splitk"; timeout 200 python3 -m lab study splitk --out "$pack" | tail -3
      for f in gemm_split_k grouped_gemm; do
        echo "== lab bench $f"; timeout 200 python3 -m lab bench "$f" --kinds headline --json "$pack/$f.json" | tail -3
      done
      echo "== grouped table cost"; timeout 120 python3 -m lab study grouped-table-cost --out "$pack" | tail -3
      mkdir -p results/h200 && cp "$pack"/split_k_factors.json "$pack"/gemm_split_k.json "$pack"/grouped_gemm.json \
        "$pack"/grouped_table_cost.json results/h200/ 2>/dev/null  # the notebook replays this run's records beside it
      notebooks notebooks/src/05_split_k_decode_grouped.py ;;
    underfill-sanitize)
      for spec in ${SANITIZE_SPECS:-gemm_split_k:100 decode:100 grouped_gemm:100}; do  # family:budget_s
        set -- ${spec/:/ }
        echo "== compute-sanitizer memcheck on $1"
        timeout $(( $2 + 15 )) python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_${1}_memcheck.json" --family "$1" \
          --tools memcheck --budget "$2" | tail -6
      done ;;
    tc-evidence)
      echo "== gemm_tc under compute-sanitizer"
      timeout 200 python3 scripts/gemm_tc_sanitize.py "$pack/gemm_tc_sanitize.json" --budget 180
      echo "== lab profile gemm_tc"; timeout 150 python3 -m lab profile gemm_tc --json "$pack/gemm_tc_profile.json" ;;
    owed-one)  # the owed measurements in one call (BUDGET_S about 450, no compile cache): split-K's cluster plans timed
               # one by one, the attention study after the q_empty fix, decode rung 02's block timeline, then rung 05's
               # and lab.ops.attention's GPU tests in what is left
      carried; mkdir -p "$pack/study"
      echo "== split-K plans"
      timeout "$(box 190 230)" python3 -m lab.studies.split_k_plans "$pack/study" --rounds 3 2>&1 | tail -70
      echo "== attention study"
      timeout "$(box 160 80)" python3 -m lab.studies.attention_study "$pack/study" --rounds 3 2>&1 | tail -50
      echo "== decode timeline"; timeout "$(box 60 15)" python3 scripts/decode_timeline.py "$pack" | tail -12
      keep_cache
      gpu_tests "$(box 260 5)" tests/test_gpu_attention.py tests/test_gpu_ops_attention.py -k "05 or persistent or ops" \
        --durations=6 ;;
    owed-short)  # the least of owed-one (BUDGET_S about 230): split-K's cluster plans timed one by one, decode rung 02's
                 # block timeline
      carried; mkdir -p "$pack/study"
      echo "== split-K plans"
      timeout "$(box 150 70)" python3 -m lab.studies.split_k_plans "$pack/study" --rounds 3 2>&1 | tail -70
      echo "== decode timeline"; timeout "$(box 60 3)" python3 scripts/decode_timeline.py "$pack" | tail -12 ;;
    owed-b)  # in BUDGET_S 580, after owed-one on the same machine: rows-stats-b, then memcheck and synccheck on
             # attention rung 05 PERSISTENT = 1
      carried; mkdir -p "$pack/sanitize" "$pack/study"
      gpu_tests "$(box 170 250)" tests/test_gpu_norms.py tests/test_gpu_ops.py -k "not test_gpu_ops or row_ops" \
        --durations=8
      echo "== cluster-rows study"
      timeout "$(box 120 130)" python3 -m lab.studies.cluster_rows_study "$pack/study" --rounds 3 2>&1 | tail -40
      echo "== compute-sanitizer on layernorm rung 04"
      timeout "$(box 60 70)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize_layernorm_04.json" --family layernorm \
        --rungs 04 --tools memcheck,racecheck,synccheck --budget 55 | tail -5
      echo "== memcheck and synccheck on attention rung 05 PERSISTENT=1"
      timeout "$(box 150 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_attention_05_persistent_mem_sync.json" \
        --family attention --rungs 05 --knobs PERSISTENT=1 --tools memcheck,synccheck --budget "$(box 145 8)" \
        --child-timeout 60 | tail -6
      keep_cache ;;
    new-rungs)  # in BUDGET_S about 570: the rungs not yet in the ladder, first checked (GPU tests), then timed, then
                # under compute-sanitizer: gemm_tc rung 12 (stream-K over clusters on rung 10's loop) and
                # gemm_tc_epilogue's rung 10 (the chain before the TMA store)
      carried; mkdir -p "$pack/study" "$pack/sanitize"
      gpu_tests "$(box 150 400)" tests/test_gpu_gemm_tc.py -k "12" --durations=6
      gpu_tests "$(box 120 280)" tests/test_gpu_epilogue.py -k "rung_10" --durations=4
      echo "== stream-K cluster study"
      timeout "$(box 100 180)" python3 -m lab.studies.stream_k_cluster_study "$pack/study" --rounds 3 2>&1 | tail -30
      echo "== fused epilogue study"
      timeout "$(box 80 100)" python3 -m lab.studies.fused_epilogue_study "$pack/study" --rounds 3 2>&1 | tail -25
      echo "== compute-sanitizer on gemm_tc rung 12 (SK_MIN_GAIN=0: every partial wave split) and the fused rung 10"
      timeout "$(box 60 40)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_gemm_tc_12.json" --rungs 12 \
        --knobs SK_MIN_GAIN=0 --tools memcheck,racecheck,synccheck --budget "$(box 55 45)" --child-timeout 40 | tail -6
      timeout "$(box 40 3)" python3 scripts/gemm_tc_sanitize.py "$pack/sanitize/sanitize_gemm_tc_epilogue_10.json" \
        --family gemm_tc_epilogue --rungs 10 --tools memcheck --budget "$(box 35 5)" --child-timeout 30 | tail -6
      keep_cache ;;
    hopper-sched)  # after the family's schedule (rung 12 or rung 10's tile per shape) and lab.ops's hopper path: their
                   # GPU tests with rungs 10 and 12 again, then split-K's GPU tests and rounds with its plan rule
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 180 330)" tests/test_gpu_ops.py -k "hopper" --durations=6
      gpu_tests "$(box 200 150)" tests/test_gpu_gemm_tc.py -k "12 or 10_tma_store or rung_10 or family_builds" \
        --durations=6
      keep_cache
      gpu_tests "$(box 120 60)" tests/test_gpu_split_k.py --durations=6
      echo "== split-K rounds"
      timeout "$(box 100 5)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -30
      keep_cache ;;
    split-plan)  # after a change to split-K's cluster plan (gemm_split_k._cluster_plan): its GPU tests, then the rounds
      carried; mkdir -p "$pack/study"
      gpu_tests "$(box 80 110)" tests/test_gpu_split_k.py -k "cluster or launch_notes" --durations=4
      echo "== split-K rounds"
      timeout "$(box 110 3)" python3 -m lab.studies.split_k_rounds "$pack/study" --rounds 3 2>&1 | tail -30 ;;
    hopper-sched-c)  # rungs 10 and 12's GPU tests in a longer box, then hopper-sched-b's sweep and study
      carried; mkdir -p "$pack/study" "$pack/ops"
      gpu_tests "$(box 260 250)" tests/test_gpu_gemm_tc.py -k "12 or 10_tma_store or rung_10 or family_builds" \
        --durations=6
      echo "== stream-K cluster study"
      timeout "$(box 150 90)" python3 -m lab.studies.stream_k_cluster_study "$pack/study" --rounds 3 2>&1 | tail -30
      echo "== lab.ops sweep"
      timeout "$(box 200 5)" python3 -m lab.studies.ops_sweep "$pack/ops" --rounds 3 \
        --write-table "$pack/ops/table.json" 2>&1 | tail -70
      keep_cache ;;
    hopper-sched-b)  # after hopper-sched: lab.ops's sweep with the hopper path (the table it would choose, written
                     # beside the record, not installed), the stream-K cluster study, decode's block timeline
      carried; mkdir -p "$pack/study" "$pack/ops"
      echo "== lab.ops sweep"
      timeout "$(box 260 230)" python3 -m lab.studies.ops_sweep "$pack/ops" --rounds 3 \
        --write-table "$pack/ops/table.json" 2>&1 | tail -70
      echo "== stream-K cluster study"
      timeout "$(box 180 50)" python3 -m lab.studies.stream_k_cluster_study "$pack/study" --rounds 3 2>&1 | tail -30
      echo "== decode timeline"; timeout "$(box 60 5)" python3 scripts/decode_timeline.py "$pack/study" 2>&1 | tail -4
      keep_cache ;;
    *) echo "unknown mode $mode"; exit 2 ;;
  esac
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
} 2>&1 | tee "$log"
tar -C "$OUT" -czf "$OUT/pack.tgz" pack && rm -rf "$pack"
