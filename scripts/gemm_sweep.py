"""Tune the top FP32 GEMM rungs on the GPU: for each knob setting, compile (registers, spills), check
it against the float64 reference on tail shapes, then time it at the headline sizes (cold L2) beside
cuBLAS SGEMM timed on the same problems in the same run. Writes JSON after every setting, so a run cut
short still returns what it measured.

    python scripts/gemm_sweep.py OUT.json [--round=N] [--quick]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import cupy as cp

from lab.core import device
from lab.core.build import compile_report
from lab.families import get_family
from lab.measure import timing
from lab.measure.records import provenance
from lab.measure.verify import check_rung

FAMILY = get_family("gemm_fp32")
SIZES = (4096, 8192, 4095, 4097)
CHECK_CASES = [{"M": 129, "N": 131, "K": 67}, {"M": 300, "N": 520, "K": 301, "alpha": 0.5, "beta": -1.5},
               {"M": 64, "N": 63, "K": 65, "pad": 1}, {"M": 1, "N": 257, "K": 33}, {"M": 33, "N": 65, "K": 4099},
               {"M": 300, "N": 77, "K": 1}, {"M": 257, "N": 255, "K": 24}]


def threads(k: dict) -> int:
    return 32 * (k["BM"] // k["WM"]) * (k["BN"] // k["WN"])


BASE = dict(BM=128, BN=128, BK=16, WM=32, WN=64, TM=8, TN=8, STAGES=3, MINB=2)
CUBLAS_LIKE = {"BM": 256, "WM": 64, "WN": 64, "TM": 16, "MINB": 1}  # the tiling of cuBLAS's 256x128x8 FFMA kernel
WIDE = {"BN": 256, "WM": 64, "WN": 64, "TN": 16, "MINB": 1}
# Rung-08 knob changes from BASE, one list per tuning round (results/h200/gemm_tuning.json). GROUP
# (grouped block order) and REPACK (aligned copies of misaligned operands) were launcher/kernel knobs
# at the commits those rounds ran at; both were removed for giving nothing, so they are inert now.
ROUNDS = {
    1: [{}, {"STAGES": 2}, {"STAGES": 4}, {"BK": 8}, {"BK": 8, "STAGES": 4}, {"BK": 32, "STAGES": 2}, {"BK": 32},
        {"WM": 64, "WN": 32}, {"MINB": 1}, {"GROUP": 8}, {"GROUP": 16}, dict(WIDE), dict(WIDE, BK=8),
        dict(WIDE, BK=8, STAGES=4), dict(WIDE, WM=32, WN=128), dict(WIDE, GROUP=8), dict(CUBLAS_LIKE),
        dict(CUBLAS_LIKE, BK=8), {"BM": 256, "WM": 64, "WN": 32, "MINB": 1}, {"BM": 64, "MINB": 3},
        {"BM": 64, "MINB": 4, "BK": 8}],
    2: [{}, {"MINB": 1}, {"BK": 32, "MINB": 1}, {"BK": 32, "STAGES": 2, "MINB": 1}, dict(WIDE, STAGES=2),
        dict(WIDE, STAGES=4), dict(WIDE, BK=32, STAGES=2), dict(CUBLAS_LIKE, STAGES=2), dict(CUBLAS_LIKE, STAGES=4),
        {"BM": 64, "MINB": 3, "STAGES": 4}, {"BM": 64, "WM": 16, "WN": 64, "TM": 4, "TN": 8, "MINB": 2}],
    3: [dict(v, FRAG_DB=f) for v in (
        {}, {"BK": 8, "MINB": 1}, {"BK": 8, "STAGES": 4, "MINB": 1}, dict(CUBLAS_LIKE, BK=8),
        dict(CUBLAS_LIKE, BK=8, STAGES=4), dict(CUBLAS_LIKE), dict(WIDE), dict(WIDE, STAGES=4), dict(WIDE, BK=8),
        {"BM": 64, "MINB": 3, "STAGES": 4}) for f in (1, 0)],
    4: [dict(v, FRAG_DB=1, ORDER=o) for v in (
        {"BM": 64, "MINB": 3, "STAGES": 4}, dict(CUBLAS_LIKE, BK=8), dict(CUBLAS_LIKE), {"BM": 64, "MINB": 3},
        {"BM": 64, "MINB": 3, "STAGES": 5}, {"MINB": 1}) for o in (1, 0)] + [
        {"BM": 64, "MINB": 3, "STAGES": 4, "FRAG_DB": 1, "ORDER": 1, "REPACK": 1},
        {"BM": 64, "MINB": 3, "STAGES": 4, "FRAG_DB": 1, "ORDER": 0, "REPACK": 1},
        dict(CUBLAS_LIKE, FRAG_DB=1, ORDER=1, REPACK=1)],
    # After shared memory moved to 32-bit per-thread addresses (fewer integer instructions per k-tile).
    5: [dict(v, FRAG_DB=1, ORDER=1) for v in (
        {"BM": 64, "MINB": 3, "STAGES": 4}, {"BM": 64, "MINB": 3, "STAGES": 3}, dict(CUBLAS_LIKE, BK=8),
        dict(CUBLAS_LIKE), dict(WIDE), {"MINB": 2})],
}


def settings(round_: int) -> list[tuple[str, dict]]:
    out = [("07_warp_tiled", {}), ("07_warp_tiled", {"BK": 8})] if round_ == 1 else []
    for v in ROUNDS[round_]:
        k = dict(BASE, **v)
        k["THREADS"] = threads(k)
        out.append(("08_multistage", k))
    return out


def main(path: str, round_: int, quick: bool = False) -> None:
    flusher = timing.L2Flusher()
    problems = {n: FAMILY.make_problem(seed=3, M=n, N=n, K=n) for n in SIZES}
    outs = {n: cp.empty(p.out_shape, cp.float32) for n, p in problems.items()}
    min_ms = 40 if quick else 120

    def time_all(launch) -> dict:
        return {n: timing.measure(lambda i, n=n: launch(problems[n], outs[n]), l2="cold", flusher=flusher,
                                  min_time_ms=min_ms, warmup=2).median_ms for n in SIZES}

    def tflops(ms: dict) -> dict:
        return {n: 2 * n ** 3 / (t * 1e-3) / 1e12 for n, t in ms.items()}

    result = {"provenance": provenance(), "round": round_, "sizes": SIZES, "cublas": [], "rows": []}

    def save():
        json.dump(result, open(path, "w"), indent=1)

    cublas = time_all(lambda p, o: FAMILY.launch_ceiling(p, o))
    result["cublas"].append(tflops(cublas))
    print("cublas TFLOP/s", {n: round(v, 2) for n, v in tflops(cublas).items()}, flush=True)
    save()
    arch = device.current().arch
    for key, knobs in settings(round_):
        base = FAMILY.rung(key)
        rung = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs)) if knobs else base
        row = {"rung": key, "knobs": knobs}
        t0 = time.time()
        try:
            rep = compile_report(rung.spec.with_knobs(VEC=4), arch)
            row["compile"] = {"registers": rep.registers, "spills": rep.spills, "smem_static": rep.smem_static_bytes}
            fails = [r.line() for r in check_rung(FAMILY, rung, CHECK_CASES, seed=9) if not r.passed]
            row["check_failures"] = fails
            if not fails:
                ms = time_all(lambda p, o, rung=rung: FAMILY.launch(rung, p, o))
                row["tflops"] = tflops(ms)
                row["ratio"] = {n: cublas[n] / ms[n] for n in SIZES}
        except Exception as exc:  # a setting that fails to build or launch is a finding, not the end of the sweep
            row["error"] = f"{type(exc).__name__}: {exc}"[:600]
        row["seconds"] = time.time() - t0
        result["rows"].append(row)
        save()
        shown = {n: f"{v:.1f} ({row['ratio'][n]:.3f}x)" for n, v in row["tflops"].items()} if "tflops" in row else \
            row.get("error") or row.get("check_failures")
        print(key, knobs, row.get("compile"), shown, flush=True)
    cublas_end = time_all(lambda p, o: FAMILY.launch_ceiling(p, o))
    result["cublas"].append(tflops(cublas_end))
    print("cublas TFLOP/s (end)", {n: round(v, 2) for n, v in tflops(cublas_end).items()}, flush=True)
    save()


if __name__ == "__main__":
    rounds = [int(a.split("=")[1]) for a in sys.argv if a.startswith("--round=")]
    main(sys.argv[1], rounds[0] if rounds else 1, quick="--quick" in sys.argv)
