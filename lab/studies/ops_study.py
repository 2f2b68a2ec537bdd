"""lab.ops measured, each study one record under results/<gpu>/:

    ops_tune.json       autotune of every bucket the serving trace touches (lab.ops.tune), with each candidate's
                        check and time
    ops_trace.json      the trace: total GPU time of lab.ops against cuBLAS alone, one generic kernel and one tuned
                        kernel; per step kind; lab.ops's decisions and counters; every shape's check; the hot shape's
                        specialization forced onto cold shapes; the decode/GEMM boundary swept in M
    ops_overhead.json   host time per call: lab.ops against replaying the same launches raw, and cupy.matmul
    ops_latency.json    first-request latency from a fresh process: empty caches, warm caches, and a warm-up manifest
    ops_trace_gemms.json  the trace's GEMMs alone (no RMSNorms): lab.ops against cuBLAS

    lab study ops-tune|ops-trace|ops-trace-gemms|ops-overhead|ops-latency --out DIR     one of them
    python -m lab.studies.ops_study DIR [tune|trace|trace-gemms|overhead|latency ...]   several, one runtime shared
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from lab.core.errors import LabError
from lab.measure.records import write_json
from lab.studies import serving_trace as st

TRACE_SEED, TRACE_STEPS, TRACE_PREFILL_SHARE, TRACE_SKEW = 2026, 1000, 0.05, 1.2
BOUNDARY_M = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)
BOUNDARY_GEMM = ("qkv", st.QKV, st.HIDDEN)
OVERHEAD_CALLS, OVERHEAD_TRIALS = 2000, 7
LATENCY_REQUESTS = 200
LATENCY_MAX_M = 512  # the stream's steps: the trace's, up to 512 tokens (a first request is a decode or short prefill)


def _write(directory: Path, name: str, payload: dict) -> Path:
    from lab.measure.records import provenance

    path = Path(directory) / name
    write_json(path, {"provenance": provenance(), **payload})
    return path


def trace() -> list[st.Step]:
    return st.make_trace(TRACE_SEED, TRACE_STEPS, TRACE_PREFILL_SHARE, TRACE_SKEW)


def shapes_of(steps) -> list:
    from lab.core import device
    from lab.ops.shapes import GemmShape, bucket

    sms = device.current().sm_count
    seen, out = set(), []
    for m in sorted({s.M for s in steps}):
        for _, n, k, epi in st.GEMMS:
            shape = GemmShape(m, n, k, "float16", "TN", True, epi, sms)
            if bucket(shape) not in seen:
                seen.add(bucket(shape))
                out.append(shape)
    return out


# --- autotune -------------------------------------------------------------------------------------------

def study_tune(directory: Path, runtime, progress=print) -> Path:
    """Tune every bucket of the trace into the runtime's store; the record holds each bucket's candidates."""
    from lab.ops.shapes import bucket
    from lab.ops.tune import tune_shape

    rows = []
    started = time.perf_counter()
    for shape in shapes_of(trace()):
        progress(f"tuning {bucket(shape)}")
        entry = tune_shape(runtime, shape)
        rows.append({"bucket": bucket(shape), "M": shape.M, "N": shape.N, "K": shape.K, "epilogue": shape.epilogue,
                     **entry})
    wins = Counter(r["path"] for r in rows)
    return _write(directory, "ops_tune.json", {"buckets": rows, "wins": dict(wins),
                                               "seconds": round(time.perf_counter() - started, 1),
                                               "environment": runtime.env})


# --- the trace ---------------------------------------------------------------------------------------------

def _counted_replay(steps, layer, runtime) -> dict:
    """lab.ops's counters over the whole trace in order (one layer per step), on a fresh runtime with the same table
    and tune cache, so every shape is decided (and counted) in this run."""
    import cupy as cp

    from lab.ops import counters
    from lab.ops.dispatch import Runtime

    counters.reset_stats()
    run = st.runner("lab_ops", layer, Runtime(runtime.table, runtime.store))
    for s in steps:
        run(s.M)
    cp.cuda.get_current_stream().synchronize()
    return counters.stats()


def study_trace(directory: Path, runtime, progress=print) -> Path:
    from lab.ops.dispatch import Runtime

    steps = trace()
    layer = st.Layer(max(s.M for s in steps))
    progress("checking every shape of the trace through lab.ops")
    checks = st.check_every_shape(steps, runtime)
    progress("timing the trace: lab.ops (tuned), its table alone, cuBLAS, rung 03, rung 06")
    times = st.time_steps(steps, st.METHODS, layer, runtime)
    table_only = Runtime(runtime.table)
    times["lab_ops_table"] = st.time_steps(steps, ("lab_ops",), layer, table_only)["lab_ops"]
    totals = st.totals(steps, times)
    decisions = st.decisions_table(runtime, steps)
    counts = _counted_replay(steps, layer, runtime)

    # The hot shape's choice forced onto every shape: the bucket that takes most calls, its tuned decision.
    hot_m = Counter(s.M for s in steps).most_common(1)[0][0]
    hot_rows = [d for d in decisions if d["M"] == hot_m]
    hot_choice = Counter((d["path"], json.dumps(d["config"], sort_keys=True)) for d in hot_rows).most_common(1)[0][0]
    progress(f"forcing the hot shape's choice ({hot_choice[0]} {hot_choice[1]}) onto every shape")
    forced = st.forced_runtime(hot_choice[0], json.loads(hot_choice[1]))
    times["hot_forced"] = st.time_steps(steps, ("lab_ops",), layer, forced)["lab_ops"]
    totals["hot_forced"] = st.totals(steps, {"hot_forced": times["hot_forced"]})["hot_forced"]
    boundary = study_boundary(layer)

    per_step = [{"kind": k, "M": m, **{meth: round(times[meth][(k, m)], 3) for meth in times}}
                for (k, m) in sorted(times["lab_ops"])]
    base = totals["lab_ops"]["total_us"]
    ratios = {meth: round(t["total_us"] / base, 4) for meth, t in totals.items()}
    return _write(directory, "ops_trace.json", {
        "trace": {"seed": TRACE_SEED, "prefill_share": TRACE_PREFILL_SHARE, "skew": TRACE_SKEW,
                  **st.summarize(steps)},
        "step_counts": [{"kind": k, "M": m, "steps": n} for (k, m), n in sorted(Counter((s.kind, s.M)
                                                                                         for s in steps).items())],
        "model": {"hidden": st.HIDDEN,
                                                                         "intermediate": st.INTERMEDIATE,
                                                                         "qkv": st.QKV, "gemms": st.GEMMS},
        "methods": {"lab_ops": "lab.ops, tuned (its tune cache)", "lab_ops_table": "lab.ops, its table alone",
                    "cublas": "cuBLAS + one CuPy elementwise kernel per epilogue, CuPy rmsnorm",
                    "generic": "gemm_tc rung 03 for every GEMM, epilogue after",
                    "persistent": "gemm_tc rung 06 (128x256) for every GEMM, epilogue fused",
                    "hot_forced": f"the hot shape's choice everywhere: {hot_choice[0]} {hot_choice[1]}"},
        "totals_us": totals, "time_over_lab_ops": ratios, "per_step_us": per_step, "decisions": decisions,
        "counters": counts, "checks": checks, "checks_failed": sum(1 for c in checks if c["bad"]),
        "hot_M": hot_m, "hot_choice": {"path": hot_choice[0], "config": json.loads(hot_choice[1])},
        "boundary": boundary})


def study_trace_gemms(directory: Path, runtime, progress=print) -> Path:
    """The trace's GEMMs alone (with their epilogues, without the RMSNorms): lab.ops against cuBLAS with one CuPy
    elementwise kernel per epilogue, so the GEMM part of the whole-layer ratio is on record by itself."""
    steps = trace()
    layer = st.Layer(max(s.M for s in steps))
    progress("timing the trace's GEMMs alone: lab.ops (tuned) and cuBLAS")
    times = st.time_steps(steps, ("lab_ops", "cublas"), layer, runtime, norms=False)
    totals = st.totals(steps, times)
    per_step = [{"kind": k, "M": m, **{meth: round(times[meth][(k, m)], 3) for meth in times}}
                for (k, m) in sorted(times["lab_ops"])]
    return _write(directory, "ops_trace_gemms.json", {
        "trace": {"seed": TRACE_SEED, "prefill_share": TRACE_PREFILL_SHARE, "skew": TRACE_SKEW,
                  **st.summarize(steps)},
        "methods": {"lab_ops": "lab.ops, tuned (its tune cache), GEMMs and epilogues only",
                    "cublas": "cuBLAS + one CuPy elementwise kernel per epilogue, GEMMs only"},
        "totals_us": totals, "cublas_over_lab_ops": round(totals["cublas"]["total_us"] / totals["lab_ops"]["total_us"],
                                                          4),
        "per_step_us": per_step})


def study_boundary(layer) -> dict:
    """Decode GEMV, rung 06, split-K and cuBLAS on one GEMM as M grows: where the specialization stops paying."""
    from lab.measure.timing import measure
    from lab.ops import api

    name, n, k = BOUNDARY_GEMM
    out = {"gemm": name, "N": n, "K": k, "M": list(BOUNDARY_M), "us": {}}
    for path in ("decode", "persistent", "split_k", "cublas"):
        rt = st.forced_runtime(path)
        row = []
        for m in BOUNDARY_M:
            a, w, c, _ = layer.operands(name, m)
            api.matmul(a, w, layout="TN", out=c, runtime=rt)
            served = rt.last_decision.path
            t = measure(lambda _i, a=a, w=w, c=c, rt=rt: api.matmul(a, w, layout="TN", out=c, runtime=rt),
                        l2="cold", min_time_ms=5.0)
            row.append(round(1e3 * t.median_ms, 3) if served == path else None)
            rt.forget()
        out["us"][path] = row
    return out


# --- dispatch overhead -------------------------------------------------------------------------------------

def study_overhead(directory: Path) -> Path:
    """Host microseconds per call, GPU work kept tiny so the host is the bottleneck: lab.ops.matmul (decision
    cached, launches replayed) against the same recorded launches replayed raw, and cupy.matmul."""
    import cupy as cp

    from lab.ops import api
    from lab.ops.shapes import GemmShape
    from lab.ops.tune import make_inputs

    results = {}
    for path, (m, n, k) in (("generic", (64, 64, 64)), ("persistent", (128, 256, 64)), ("decode", (1, 1024, 1024))):
        rt = st.forced_runtime(path)
        a, b, *_ = make_inputs(GemmShape(m, n, k, "float16", "TN", True, "none"), 3)
        c = cp.empty((m, n), cp.float16)
        api.matmul(a, b, layout="TN", out=c, runtime=rt)
        launches = next(iter(rt.recordings.values())).launches

        def raw(launches=launches):
            for kern, grid, block, args, smem in launches:
                kern(grid, block, args, shared_mem=smem)

        def ops(a=a, b=b, c=c, rt=rt):
            api.matmul(a, b, layout="TN", out=c, runtime=rt)

        def ops_alloc(a=a, b=b, rt=rt):
            api.matmul(a, b, layout="TN", runtime=rt)

        def library(a=a, b=b, c=c):
            cp.matmul(a, b.T, out=c)

        per = {name: _host_us(fn) for name, fn in (("raw_replay", raw), ("lab_ops", ops), ("lab_ops_alloc", ops_alloc),
                                                   ("cupy_matmul", library))}
        per["overhead_us"] = round(per["lab_ops"]["median"] - per["raw_replay"]["median"], 3)
        per["shape"] = {"M": m, "N": n, "K": k}
        per["launches_per_call"] = len(launches)
        results[path] = per
    return _write(directory, "ops_overhead.json", {"calls_per_trial": OVERHEAD_CALLS, "trials": OVERHEAD_TRIALS,
                                                   "paths": results})


def _host_us(fn) -> dict:
    from lab.measure.timing import host_us_per_call

    per = host_us_per_call(fn, calls=OVERHEAD_CALLS, trials=OVERHEAD_TRIALS, warmup=200)
    return {k: per[k] for k in ("median", "min", "max")}


# --- first-request latency ---------------------------------------------------------------------------------

def latency_child(requests: int, manifest: str | None) -> dict:
    """In a fresh process: import, make the layer, optionally warm up from a manifest, then serve `requests`
    requests (one layer each, M from the trace), each timed from its first call to its result on the host."""
    t_process = float(os.environ.get("LAB_PROCESS_START", time.time()))
    import cupy as cp

    from lab.core.build import COMPILES
    from lab.ops import manifest as manifests

    steps = [s for s in trace() if s.M <= LATENCY_MAX_M][:requests]
    layer = st.Layer(max(s.M for s in steps))
    cp.cuda.get_current_stream().synchronize()
    ready = time.time()
    warm = None
    if manifest:
        warm = manifests.warmup(manifests.load(manifest))
    run = st.runner("lab_ops", layer)
    lat = []
    before = dict(COMPILES)
    first_compiles = None
    profile = None
    for i, s in enumerate(steps):
        if i == 0:  # where the first request's time goes (the profiler's own cost is in first_ms too: small)
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        t0 = time.perf_counter()
        run(s.M)
        cp.cuda.get_current_stream().synchronize()
        lat.append(1e3 * (time.perf_counter() - t0))
        if i == 0:  # what the first request itself compiled (not the warm-up's)
            profile.disable()
            first_compiles = {k: round(v - before.get(k, 0), 3) for k, v in COMPILES.items()}
    return {"requests": len(lat), "first_ms": round(lat[0], 3), "p50_ms": round(float(np.percentile(lat, 50)), 3),
            "p99_ms": round(float(np.percentile(lat, 99)), 3), "max_ms": round(max(lat), 3),
            "process_start_to_first_result_s": round(ready - t_process + (warm or {}).get("seconds", 0)
                                                     + lat[0] / 1e3, 3),
            "first_request_profile": _top_functions(profile),
            "compiles_total": dict(COMPILES), "compiles_before_requests": before,
            "compiles_by_first_request": first_compiles, "warmup": warm, "max_M": LATENCY_MAX_M,
            "first_request_M": steps[0].M}


def _top_functions(profile, count: int = 12) -> list[dict]:
    """The functions the first request spent most time in (cumulative ms), from cProfile."""
    import pstats

    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:count]
    return [{"function": f"{Path(file).name}:{line} {name}", "cumulative_ms": round(1e3 * cum, 2), "calls": calls}
            for (file, line, name), (_, calls, _, cum, _) in rows]


def study_latency(directory: Path, runtime_store_path: Path | None = None) -> Path:
    """Four fresh processes over one request stream: empty compile caches, the same caches warm, empty caches with a
    warm-up manifest of the stream's shapes run first, and warm caches with that manifest (what the lab recommends:
    a process that starts on a warm cache and warms up before it takes requests). The tune cache is the machine's
    (tuned decisions are not the point here; compiles and first-call costs are)."""
    steps = [s for s in trace() if s.M <= LATENCY_MAX_M][:LATENCY_REQUESTS]
    shapes = sorted({(s.M, n, k, epi) for s in steps for _, n, k, epi in st.GEMMS})
    scenarios = {}
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "manifest.json"
        rows = sorted({s.M for s in steps})
        manifest.write_text(json.dumps({"shapes": [{"M": m, "N": n, "K": k, "epilogue": epi, "layout": "TN"}
                                                   for m, n, k, epi in shapes]
                                        + [{"op": "rmsnorm", "rows": m, "n": st.HIDDEN} for m in rows]}))
        caches = Path(tmp) / "caches"
        scenarios_run = (("empty_caches", True, False), ("warm_caches", False, False),
                         ("empty_caches_with_manifest", True, True), ("warm_caches_with_manifest", False, True))
        for name, fresh, warm in scenarios_run:
            if fresh and caches.exists():
                import shutil

                shutil.rmtree(caches)
            env = dict(os.environ, LAB_CACHE_DIR=str(caches / "lab"), CUPY_CACHE_DIR=str(caches / "cupy"),
                       LAB_PROCESS_START=repr(time.time()))
            if runtime_store_path:
                env["LAB_OPS_TUNE_FILE"] = str(runtime_store_path)
            cmd = [sys.executable, "-m", "lab.studies.ops_study", "--latency-child", str(LATENCY_REQUESTS)]
            if warm:
                cmd += ["--manifest", str(manifest)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            if proc.returncode != 0:
                scenarios[name] = {"error": proc.stderr[-2000:]}
                continue
            scenarios[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _write(directory, "ops_latency.json", {"requests": LATENCY_REQUESTS, "max_M": LATENCY_MAX_M,
                                                  "manifest_shapes": len(shapes),
                                                  "scenarios": scenarios})


STUDIES = ("tune", "trace", "trace-gemms", "overhead", "latency")


def run(out_dir: Path, study: str, *, runtime=None, progress=print) -> Path:
    """One study (STUDIES), its record written under out_dir; returns its path. `runtime` is lab.ops's default
    runtime unless given (main shares one across studies): the tune study fills its store, then forgets its
    decisions so that a study after it decides afresh."""
    if study not in STUDIES:
        raise LabError(f"no study {study!r} in lab.studies.ops_study; its studies are {', '.join(STUDIES)}.")
    from lab.ops import api

    runtime = runtime or api.default_runtime()
    directory = Path(out_dir)
    if study == "tune":
        path = study_tune(directory, runtime, progress)
        runtime.forget()
        return path
    if study == "trace":
        return study_trace(directory, runtime, progress)
    if study == "trace-gemms":
        return study_trace_gemms(directory, runtime, progress)
    if study == "overhead":
        return study_overhead(directory)
    return study_latency(directory, runtime.store.path if runtime.store else None)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--latency-child":
        manifest = argv[argv.index("--manifest") + 1] if "--manifest" in argv else None
        print(json.dumps(latency_child(int(argv[1]), manifest)))
        return 0
    from lab.ops import api

    directory = Path(argv[0]) if argv else Path("results")
    wanted = argv[1:] or ["tune", "trace", "overhead", "latency"]
    runtime = api.default_runtime()
    for name in wanted:
        started = time.perf_counter()
        if name not in STUDIES:
            print(f"unknown study {name!r}; the studies are {', '.join(STUDIES)}", file=sys.stderr)
            return 2
        path = run(directory, name, runtime=runtime)
        print(f"{name}: {path} in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
