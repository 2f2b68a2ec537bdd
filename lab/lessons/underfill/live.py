"""Notebook 05's LIVE plan (a GPU here): a short split-K factor study, `lab bench`'s headline measurement on a few
decode and grouped problems, and the host cost of the grouped tables, each checked first. REPLAY measures nothing:
every function here returns None without a GPU."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from lab.lessons.underfill.records import (
    GROUPED_FAMILY,
    LIVE_DECODE,
    LIVE_DETERMINISM_RUNS,
    LIVE_FACTORS,
    LIVE_GROUPED,
    LIVE_MIN_TIME_MS,
    LIVE_SPLIT_SHAPE,
    PLAIN_RUNG,
    SPLIT_FAMILY,
    SPLIT_MODES,
    ladder,
    shape_label,
    source,
)
from lab.measure import records

if TYPE_CHECKING:
    from lab.core.ladder import Family
    from lab.lessons.mode import Mode
    from lab.measure.records import RecordSet

def live_plan_text() -> str:
    return "\n".join([
        "LIVE plan (`lab study splitk`, `lab bench FAMILY` and scripts/split_k_ncu.py record the full studies):",
        f"  split-K: {shape_label(LIVE_SPLIT_SHAPE)} only; cuBLAS, rung 06 and the three modes at the launcher's S, "
        f"then the modes at S in {', '.join(map(str, LIVE_FACTORS))}; each mode run {LIVE_DETERMINISM_RUNS} times "
        "for its bits; every mode checked on odd shapes first",
        "  decode: checked on a spread of its check cases, then fp16 at "
        + ", ".join(f"M={p['M']} N=K={p['N']}" for p in LIVE_DECODE),
        "  grouped: checked on a spread of its check cases, then fp16 " + ", ".join(p["case"] for p in LIVE_GROUPED)
        + "; the host cost of each case's table",
        "  Nsight Compute: NOT measured live; replayed only",
        f"  at least {LIVE_MIN_TIME_MS:g} ms of timing per target, cold L2",
    ])


def live_refusal(current: Mode, name: str) -> str | None:
    """Why family `name` is not measured live here (None when it is; REPLAY measures nothing)."""
    if not current.live:
        return None
    fam = ladder(name)
    if fam is None:
        return f"{name} is not in this checkout"
    from lab.core import device
    from lab.lessons.mode import runs_on

    arch = device.current().arch
    if any(runs_on(r, arch) for r in fam.rungs):
        return None  # lab.measure.bench and the checks skip, and name, the rungs this GPU cannot run
    spec = fam.rungs[0].spec
    return f"this GPU is sm_{arch} and {name}'s rungs need sm_{spec.min_arch}{spec.arch_suffix}"


def live_note(item: dict | RecordSet | None, current: Mode, name: str) -> str:
    if item is not None:
        return f"LIVE: {source(item, name)}"
    if not current.live:
        return "(REPLAY: nothing is measured here; the reference GPU's records follow.)"
    return f"(LIVE: {name} not measured here: {live_refusal(current, name) or 'see above'})"


def _timed(what: str, fn: Callable[[], object]):
    start = time.perf_counter()
    out = fn()
    print(f"LIVE: {what} checked and measured in {time.perf_counter() - start:.0f} s (compiling included)")
    return out


def live_split_k(current: Mode) -> dict | None:
    """LIVE (Hopper): the factor study cut down to LIVE_SPLIT_SHAPE and LIVE_FACTORS, in split_k_factors.json's
    layout so the same tables and figure read it."""
    if not current.live or live_refusal(current, SPLIT_FAMILY):
        return None

    def run() -> dict:
        import cupy as cp

        from lab.core import device
        from lab.families.gemm_split_k import run_to_run_bits
        from lab.studies.scheduling import checked_run, event_timer
        from lab.studies.split_k import CHECKS

        fam = ladder(SPLIT_FAMILY)
        rungs = {key: fam.rung(key) for key in SPLIT_MODES}
        for rung in rungs.values():
            for case in CHECKS:
                checked_run(fam, rung, case | {"layout": "TN", "dtype": "float16"})
        timed = event_timer(LIVE_MIN_TIME_MS)
        problem = fam.make_problem(**LIVE_SPLIT_SHAPE, layout="TN", dtype="float16")
        out = cp.empty(problem.out_shape, problem.dtype)
        flops = problem.flops

        def tflops(ms: float) -> float:
            return flops / (ms * 1e-3) / 1e12

        auto = {**LIVE_SPLIT_SHAPE, "kind": "auto", "pad": 0,
                "cublas_ms": timed(lambda: fam.launch_ceiling(problem, out)).median_ms,
                f"{PLAIN_RUNG}_ms": timed(lambda: fam.launch(fam.rung(PLAIN_RUNG), problem, out)).median_ms}
        for key, rung in rungs.items():
            auto[f"{key}_ms"] = timed(lambda rung=rung: fam.launch(rung, problem, out)).median_ms
            auto[f"{key}_splits"] = fam.splits_for(rung, problem)
        auto["tflops"] = {k.removesuffix("_ms"): tflops(v) for k, v in auto.items() if k.endswith("_ms")}
        rows = [auto]
        for s in LIVE_FACTORS:
            problem.params["splits"] = s
            row = {**LIVE_SPLIT_SHAPE, "kind": "factor", "splits": s}
            for key, rung in rungs.items():
                row[f"{key}_ms"] = timed(lambda rung=rung: fam.launch(rung, problem, out)).median_ms
            row["tflops"] = {k.removesuffix("_ms"): tflops(v) for k, v in row.items() if k.endswith("_ms")}
            rows.append(row)
        problem.params["splits"] = 0
        bits = [{**LIVE_SPLIT_SHAPE} | run_to_run_bits(fam, rung, problem, LIVE_DETERMINISM_RUNS)
                for rung in rungs.values()]
        return {"provenance": records.provenance(), "l2": "cold", "dtype": "float16", "layout": "TN",
                "sm_count": device.current().sm_count, "checked": list(CHECKS), "rows": rows, "determinism": bits}

    return _timed("split-K", run)


def with_headlines(fam: Family, params: Iterable[dict]) -> Family:
    """The family with its headline problems replaced by `params` (this instance only): lab.measure.bench times exactly
    the live plan's problems, each beside the ceiling and baselines in the same run."""
    chosen = [dict(p) for p in params]
    fam.headline_params = lambda: [dict(p) for p in chosen]
    return fam


def live_bench(current: Mode, name: str, params: Iterable[dict]) -> RecordSet | None:
    """LIVE: the family checked on a spread of its check cases (a failure stops the notebook), then `lab bench`'s
    headline measurement on `params` only."""
    if not current.live or live_refusal(current, name):
        return None
    from lab.lessons.demos import check_ladder, few_cases
    from lab.measure import bench

    def run() -> RecordSet:
        fam = ladder(name)
        results = check_ladder(fam, few_cases(fam, 6))
        print(f"LIVE: {name}: " + ", ".join(f"{k} passed {len(v)} cases" for k, v in results.items()))
        return bench.run(with_headlines(fam, params), bench.BenchPlan(kinds=("headline",),
                                                                        min_time_ms=LIVE_MIN_TIME_MS))

    return _timed(name, run)


def live_table_costs(current: Mode) -> dict | None:
    if not current.live or live_refusal(current, GROUPED_FAMILY):
        return None
    from lab.studies import grouped_table_cost

    return _timed("table costs", lambda: grouped_table_cost.measure(repeats=3))
