"""The Hopper GEMM rungs beside the library, in interleaved rounds: gemm_tc rung 06 (persistent), rung 09 (clusters of
two with B multicast), rung 10 (its epilogue through a TMA store) and rung 11 (ping-pong consumers) against torch.mm
and cuBLASLt on the same operands.

Every method runs once a round on each shape, in an order rotated from round to round, on cold L2; the figure is
TFLOP/s (2 M N K over the median time) and the ratio to the faster library call's time in the same round. The
methods:

    torch_mm              torch.mm on the same memory (cuBLASLt with PyTorch's workspace and heuristic)
    cublaslt              the family's ceiling (lab.tools.library_gemm: cuBLASLt with its heuristic's algorithm)
    06_persistent         rung 06 as the family launches it
    09_cluster_multicast  rung 09 as the family launches it
    10_tma_store          rung 10 as the family launches it
    11_pingpong           rung 11 as the family launches it
    (KNOB_SETTINGS)       a rung with other knobs, named "NN KNOB=value ..." (none at present; results/h200's older
                          records hold "10 C_PARTS=1 STAGES=3", rung 10 staging a whole tile with one stage fewer)

Every rung setting passes a check on a small odd case first; one that fails gets a row saying so and is not timed.
Nothing here asserts a speed.

A second table times each rung at M = N = 4096 over K = 512 .. 4096 and fits time = fixed + per_k_tile * K / 64
(least squares over the medians): `fixed` is what a launch costs whatever K is (the epilogue's stores, each tile's
pipeline fill, the launch), the part an overlapped epilogue could hide.

    python -m lab.studies.hopper_gemm_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import sys
from pathlib import Path

from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.rounds import interleaved_rows, same_round_summary

SQUARE = [dict(M=n, N=n, K=n, layout="TN", dtype=t) for n in (4096, 6144, 8192) for t in ("float16", "bfloat16")]
SHAPES = SQUARE + [dict(M=4096, N=4096, K=4096, layout="NN", dtype="float16")]
SHAPES += [dict(M=n, N=n, K=n, layout="TN", dtype="float16") for n in (2048, 3072)]
SHAPES += [dict(M=m, N=n, K=4096, layout="TN", dtype="float16") for m, n in ((2176, 2176), (3200, 4096), (4352, 4096))]
QUICK_SHAPES = SHAPES[:1]
CORE_SHAPES = [SHAPES[i] for i in (0, 1, 4, 6, 7, 11)]  # 4096^3 fp16 and bf16, 8192^3 fp16, NN, 2048^3, 4352
RUNGS = ("06_persistent", "09_cluster_multicast", "10_tma_store", "11_pingpong")
KNOB_SETTINGS: dict[str, tuple[dict, ...]] = {}
FIXED_COST_KS = (512, 1024, 2048, 4096)
CHECK_CASE = {"M": 4097, "N": 1000, "K": 200, "layout": "TN", "alpha": 1.0}


def _checked(fam, rung, name: str, shape: dict, failed: list) -> bool:
    from lab.measure.verify import check_case

    result = check_case(fam, rung, CHECK_CASE | {"dtype": shape["dtype"], "layout": shape["layout"]}, seed=14)
    if not result.passed:
        failed.append({"shape": shape, "method": name, "failed": result.reasons})
    return result.passed


def knob_name(key: str, knobs: dict) -> str:
    """A rung with other knobs, as the records name it: "10 BN=192 STAGES=4"."""
    return key[:2] + " " + " ".join(f"{k}={v}" for k, v in knobs.items())


def study_methods(fam, shape: dict, failed: list, rung_keys=RUNGS, settings=None) -> tuple[dict, object]:
    """name -> launch(i) for one shape, and its problem (for the FLOPs). settings(key, shape): the other knob
    settings of rung `key` to time on this shape (default: KNOB_SETTINGS's)."""
    import cupy as cp

    settings = settings or (lambda key, shape: KNOB_SETTINGS.get(key, ()))
    problem = fam.make_problem(seed=3, **shape)
    out = cp.empty(problem.out_shape, problem.dtype)
    methods = {"cublaslt": lambda i: fam.launch_ceiling(problem, out)}
    torch_mm = fam.baselines().get("torch_mm")
    if torch_mm is not None:
        methods["torch_mm"] = lambda i: torch_mm(problem, out)
    rungs = {}
    for key in rung_keys:
        base = fam.rung(key)
        rungs[key] = base
        for knobs in settings(key, shape):
            rungs[knob_name(key, knobs)] = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs))
    for name, rung in rungs.items():
        if _checked(fam, rung, name, shape, failed):
            methods[name] = lambda i, rung=rung: fam.launch(rung, problem, out)
    return methods, problem


def timed_rows(methods_for, shapes, rounds: int, flusher, min_time_ms: float) -> list[dict]:
    """Every method of methods_for(shape) -> (name -> launch, problem) once a round on each shape, in an order
    rotated from round to round, on cold L2: one row per shape, method and round (lab.studies.rounds)."""
    return interleaved_rows(shapes, methods_for, rounds, flusher, min_time_ms,
                            lambda problem, ms: {"TFLOP/s": problem.flops / ms / 1e9})


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 20.0, rungs=RUNGS) -> dict:
    from lab.families.gemm_tc import cluster_slots
    from lab.measure import timing

    fam = get_family("gemm_tc")
    flusher = timing.L2Flusher()
    failed = []
    rows = timed_rows(lambda shape: study_methods(fam, shape, failed, rungs), shapes, rounds, flusher, min_time_ms)
    built = fam.variant(fam.rung("09_cluster_multicast"), fam.make_problem(M=256, N=256, K=64))
    fixed = fixed_cost(fam, flusher, rounds, min_time_ms, rungs)
    return {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "rounds": rounds,
            "cluster_slots": cluster_slots(built), "rows": rows, "summary": summarize(rows), "failed": failed,
            "fixed_cost": fixed}


def fixed_cost(fam, flusher, rounds: int, min_time_ms: float, rungs=RUNGS) -> list[dict]:
    """Per rung: the medians over rounds at each K of FIXED_COST_KS (M = N = 4096, fp16 TN), and the least-squares
    line through them (fixed microseconds, microseconds per k-tile)."""
    import cupy as cp
    import numpy as np

    from lab.measure import timing

    out = []
    for key in rungs:
        times, rung = [], fam.rung(key)
        for k in FIXED_COST_KS:
            problem = fam.make_problem(seed=3, M=4096, N=4096, K=k)
            c = cp.empty(problem.out_shape, problem.dtype)
            launch = lambda i, rung=rung, problem=problem, c=c: fam.launch(rung, problem, c)  # noqa: E731
            runs = [timing.measure(launch, l2="cold", flusher=flusher, min_time_ms=min_time_ms).median_ms
                    for _ in range(rounds)]
            times.append(statistics.median(runs))
        slope, intercept = np.polyfit([k / 64 for k in FIXED_COST_KS], [t * 1e3 for t in times], 1)
        out.append({"rung": key, "M": 4096, "N": 4096, "K": list(FIXED_COST_KS), "median_ms": times,
                    "fixed_us": float(intercept), "us_per_k_tile": float(slope)})
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Per shape and method: the median TFLOP/s over rounds, its spread, and the medians over rounds of the same-round
    ratios to the faster library call (torch_mm or cublaslt; x_library, its lowest round x_library_min) and to rung
    06 (x_06)."""
    return same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", "06_persistent", "x_06")


_SUMMARY_LINE = re.compile(r"^(\d+)x(\d+)x(\d+) (TN|NN) (\w+)\s+(\S+(?: \S+=\S+)*)\s+([\d.]+) TFLOP/s\s+spread ([\d.]+)"
                           r"\s+x library ([\d.]+|-) \(min ([\d.]+|-)\)\s+x 06 ([\d.]+|-)$")
_FIT_LINE = re.compile(r"^(\S+): time = ([\d.-]+) us \+ ([\d.-]+) us per k-tile \(M = N = 4096, K = \[([\d, ]+)\]\)$")


def record_from_log(text: str, provenance: dict, source: str) -> dict:
    """A record rebuilt from what main() printed (a device run's console log, `source`), for a run whose JSON was
    lost: the summary and the fit as printed (rounded as printed), no per-round rows. `provenance` says where and
    when it ran."""
    number = lambda x: None if x == "-" else float(x)  # noqa: E731
    summary, fixed = [], []
    for line in text.splitlines():
        if m := _SUMMARY_LINE.match(line.strip()):
            shape = {"M": int(m[1]), "N": int(m[2]), "K": int(m[3]), "layout": m[4], "dtype": m[5]}
            summary.append({"shape": shape, "method": m[6].strip(), "TFLOP/s": float(m[7]), "spread": float(m[8]),
                            "x_library": number(m[9]), "x_library_min": number(m[10]), "x_06": number(m[11])})
        elif m := _FIT_LINE.match(line.strip()):
            fixed.append({"rung": m[1], "M": 4096, "N": 4096, "K": [int(k) for k in m[4].split(",")],
                          "fixed_us": float(m[2]), "us_per_k_tile": float(m[3])})
    slots = re.search(r"^clusters that fit: (\d+)$", text, re.MULTILINE)
    rounds = re.search(r"--rounds (\d+)", text)
    return {"provenance": provenance, "about": __doc__.split("\n\n")[0], "rounds": int(rounds[1]) if rounds else 3,
            "cluster_slots": int(slots[1]) if slots else None, "rows": [], "summary": summary, "failed": [],
            "fixed_cost": fixed, "rebuilt_from": source,
            "note": "rebuilt by lab.studies.hopper_gemm_study.record_from_log from the run's console log: the figures "
                    "as printed (rounded), without the per-round rows, which were lost with the run's JSON"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one shape, for a smoke run")
    parser.add_argument("--core", action="store_true", help="six shapes (CORE_SHAPES) and the fixed-cost fit")
    parser.add_argument("--rungs", default=",".join(RUNGS), help="the rungs to time (default: %(default)s)")
    args = parser.parse_args(argv)
    rungs = tuple(key.strip() for key in args.rungs.split(",") if key.strip())
    record = study(args.rounds, QUICK_SHAPES if args.quick else CORE_SHAPES if args.core else SHAPES, rungs=rungs)
    path = write_json(Path(args.out_dir) / "hopper_gemm_study.json", record)
    ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    print(f"clusters that fit: {record['cluster_slots']}")
    for s in record["summary"]:
        sh = s["shape"]
        print(f"{sh['M']}x{sh['N']}x{sh['K']} {sh['layout']} {sh['dtype']:<9} {s['method']:<22} "
              f"{s['TFLOP/s']:6.1f} TFLOP/s  spread {s['spread']:.3f}  x library {ratio(s['x_library'])} "
              f"(min {ratio(s['x_library_min'])})  x 06 {ratio(s['x_06'])}")
    for f in record["fixed_cost"]:
        print(f"{f['rung']}: time = {f['fixed_us']:.1f} us + {f['us_per_k_tile']:.3f} us per k-tile "
              f"(M = N = 4096, K = {f['K']})")
    for f in record["failed"]:
        print("not timed:", f)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
