"""The scheduling lesson's measurements (notebook 04): tile orders against L2 and DRAM traffic, the
persistent GEMM against one block per tile, and stream-K against the wave sawtooth.

Every kernel variant is checked against the family's float64 reference on an odd shape before it is timed;
times are cold-L2 medians (lab.measure.timing) with cuBLAS timed on the same problem in the same run. Each function
returns a JSON-ready payload with provenance; `run` (`lab study orders|counters|fp32|streamk|items --out DIR`) writes
one of them under DIR, and the notebook replays them where no GPU is present.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from lab.core.errors import LabError
from lab.core.tile_order import RASTER, SK_FIXUP_COST, SK_MIN_GAIN
from lab.measure.records import write_json
from lab.tools import ncu

# A panel of tiles overflows the 60 MB L2 on the first two, not on the last two (the lesson's shapes).
ORDER_SHAPES = ({"M": 4096, "N": 32768, "K": 8192}, {"M": 16384, "N": 16384, "K": 4096},
                {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 4096, "K": 4096})
# (order, GROUP_M). Grouped with GROUP_M = 1 is the row order itself (tests/test_schedule.py), so it is left out.
ORDER_SETTINGS = (("row", 0), ("column", 0), ("grouped", 2), ("grouped", 4), ("grouped", 8), ("grouped", 16),
                  ("grouped", 32), ("snake", 8), ("snake", 16))
FP32_ORDER_SHAPES = ({"M": 4096, "N": 32768, "K": 8192}, {"M": 8192, "N": 8192, "K": 8192})
FP32_ORDER_SETTINGS = (("row", 0), ("grouped", 8))
CHECK_CASE = {"M": 131, "N": 257, "K": 203}  # 2 x 2 tiles of 128 x 256 with tails in all three sides

# Stream-K: N = K = 4096 gives 16 tiles per 128 rows of M, so M in steps of 128 walks through the waves of 132.
WAVE_N = WAVE_K = 4096
WAVE_MS = tuple(range(128, 128 * 73, 128))
# Tile counts just past a multiple of 132 (wave-quantized) and exact multiples (well-quantized), 128 x 256 tiles.
WAVE_QUANTIZED = ({"M": 1152, "N": 4096, "K": 4096}, {"M": 2176, "N": 4096, "K": 4096},
                  {"M": 3200, "N": 4096, "K": 4096}, {"M": 4352, "N": 4096, "K": 4096},
                  {"M": 2176, "N": 2176, "K": 4096})
WELL_QUANTIZED = ({"M": 1536, "N": 2816, "K": 4096}, {"M": 3072, "N": 2816, "K": 4096},
                  {"M": 4608, "N": 2816, "K": 4096}, {"M": 6144, "N": 2816, "K": 4096})
SQUARES = ({"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192})
STREAM_K_CHECKS = ({"M": 1152, "N": 4096, "K": 520}, {"M": 1153, "N": 4093, "K": 333},
                   {"M": 128, "N": 256, "K": 8195}, {"M": 2176, "N": 2176, "K": 130})


def _fp16_tn(shape: dict) -> dict:
    return dict(shape, layout="TN", dtype="float16")


def order_rung(family, rung_key: str, order: str, group_m: int):
    """`rung_key` of `family` built with the tile order `order` (RASTER knob) and GROUP_M."""
    base = family.rung(rung_key)
    return dataclasses.replace(base, spec=base.spec.with_knobs(RASTER=RASTER[order], GROUP_M=group_m))


def checked_run(family, rung, case: dict) -> None:
    from lab.measure.verify import check_case

    result = check_case(family, rung, case)
    if not result.passed:
        raise LabError(f"{rung.key} {dict(rung.spec.knobs)} failed its check on {result.case}: "
                       f"{'; '.join(result.reasons)[:400]}")


def event_timer(min_time_ms: float):
    from lab.measure import timing

    flusher = timing.L2Flusher()
    return lambda launch: timing.measure(lambda i: launch(), l2="cold", flusher=flusher, min_time_ms=min_time_ms)


def time_orders(shapes: Iterable[dict] = ORDER_SHAPES, settings: Iterable[tuple[str, int]] = ORDER_SETTINGS,
                family_name: str = "gemm_tc", rung_key: str = "06_persistent", min_time_ms: float = 20.0,
                progress: Callable[[dict], None] | None = None) -> dict:
    """TFLOP/s of `rung_key` in each tile order on each shape, cold L2, beside cuBLAS and the row order."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure.records import provenance

    fam = get_family(family_name)
    settings = tuple(settings)
    rungs = {s: order_rung(fam, rung_key, *s) for s in settings}
    for rung in rungs.values():
        checked_run(fam, rung, _case(family_name, CHECK_CASE))
    timed = event_timer(min_time_ms)
    rows = []
    for shape in shapes:
        problem = fam.make_problem(**_case(family_name, shape))
        out = cp.empty(problem.out_shape, problem.dtype)
        cublas = timed(partial(fam.launch_ceiling, problem, out))
        row_ms = None
        for (order, group), rung in rungs.items():
            t = timed(partial(fam.launch, rung, problem, out))
            row_ms = t.median_ms if order == "row" else row_ms
            rows.append({**shape, "order": order, "group_m": group, "median_ms": t.median_ms,
                         "p10_ms": t.p10_ms, "p90_ms": t.p90_ms, "tflops": fam.throughput(problem, t.median_ms),
                         "cublas_ms": cublas.median_ms, "x_cublas": cublas.median_ms / t.median_ms,
                         "x_row": (row_ms / t.median_ms) if row_ms else None})
            if progress:
                progress(rows[-1])
    return {"provenance": provenance(), "family": family_name, "rung": rung_key, "l2": "cold", "rows": rows}


def _case(family_name: str, shape: dict) -> dict:
    return _fp16_tn(shape) if family_name == "gemm_tc" else dict(shape)


def _gemm_tc():
    from lab.families import get_family

    return get_family("gemm_tc")


# --- Nsight Compute: L2 hit rate and DRAM bytes per order -----------------------------------------

NCU_METRICS = {"l2_hit_rate_pct": "lts__t_sector_hit_rate.pct", "dram_read_bytes": "dram__bytes_read.sum",
               "dram_write_bytes": "dram__bytes_write.sum"}


def order_counters(shapes: Iterable[dict] = ORDER_SHAPES, settings: Iterable[tuple[str, int]] = ORDER_SETTINGS,
                   family_name: str = "gemm_tc", rung_key: str = "06_persistent", timeout_s: int = 500) -> dict:
    """ncu's L2 hit rate and DRAM bytes for one launch of each (shape, order), in one ncu process (caches flushed
    before each launch: --cache-control all; clocks left alone: --clock-control none; both lab.tools.ncu's defaults)."""
    from lab.families import get_family
    from lab.measure.records import provenance

    binary = ncu.find_ncu()
    if binary is None:
        raise ncu.missing("replay the reference GPU's results/h200/schedule_orders_ncu.json")
    jobs = [{"shape": s, "order": o, "group_m": g} for s in shapes for o, g in settings]
    entry = get_family(family_name).rung(rung_key).spec.entry
    target = [sys.executable, "-m", "lab.studies.scheduling", "ncu-target",
              json.dumps({"family": family_name, "rung": rung_key, "jobs": jobs})]
    text = ncu.run(ncu.command(target, NCU_METRICS.values(), binary=binary, kernel_name=entry), timeout_s)
    per_launch = parse_ncu_launches(text)
    if len(per_launch) != len(jobs):
        raise LabError(f"ncu reported {len(per_launch)} launches for {len(jobs)} jobs; its output ended with:\n"
                       f"{text[-600:]}")
    rows = [{**job["shape"], "order": job["order"], "group_m": job["group_m"], **counters}
            for job, counters in zip(jobs, per_launch, strict=True)]
    return {"provenance": provenance(), "family": family_name, "rung": rung_key, "rows": rows,
            "ncu": {"clock_control": "none", "cache_control": "all (flushed before each launch)"}}


def parse_ncu_launches(text: str) -> list[dict[str, float]]:
    """ncu --csv rows -> one dict of NCU_METRICS (lab names, base units) per profiled launch, in launch order."""
    return [counters for launch in ncu.parse(text) if (counters := launch.named(NCU_METRICS))]


def _ncu_target(spec: dict) -> None:
    """Launch each job once (what ncu profiles): the kernels are compiled before the first launch."""
    import cupy as cp

    from lab.families import get_family

    fam = get_family(spec["family"])
    for job in spec["jobs"]:
        rung = order_rung(fam, spec["rung"], job["order"], job["group_m"])
        problem = fam.make_problem(**_case(spec["family"], job["shape"]))
        fam.launch(rung, problem, cp.empty(problem.out_shape, problem.dtype))
        cp.cuda.get_current_stream().synchronize()


# --- persistent and stream-K against the waves ---------------------------------------------------

def time_rungs(shapes: Iterable[dict], rung_keys: Iterable[str], rounds: int = 1, min_time_ms: float = 10.0,
               progress: Callable[[dict], None] | None = None, extra: dict | None = None) -> list[dict]:
    """gemm_tc rungs (fp16 TN) and cuBLAS on each shape, cold L2; `rounds` > 1 repeats the whole set in turn
    (rung after rung), so a clock that drifts under load touches every rung alike. `extra`: more variants to
    time, by name (a rung with other knobs)."""
    import cupy as cp

    fam = _gemm_tc()
    rungs = {k: fam.rung(k) for k in rung_keys} | (extra or {})
    timed = event_timer(min_time_ms)
    rows = []
    for shape in shapes:
        problem = fam.make_problem(**_fp16_tn(shape))
        out = cp.empty(problem.out_shape, problem.dtype)
        for round_ in range(rounds):
            row = {**shape, "round": round_, "tiles": _tiles(shape)}
            row["cublas_ms"] = timed(partial(fam.launch_ceiling, problem, out)).median_ms
            for name, rung in rungs.items():
                row[f"{name}_ms"] = timed(partial(fam.launch, rung, problem, out)).median_ms
            row["tflops"] = {k.removesuffix("_ms"): problem.flops / (v * 1e-3) / 1e12
                             for k, v in row.items() if k.endswith("_ms")}
            rows.append(row)
            if progress:
                progress(row)
    return rows


def _tiles(shape: dict, bm: int = 128, bn: int = 256) -> int:
    return -(-shape["M"] // bm) * -(-shape["N"] // bn)


def stream_k_study(min_time_ms: float = 10.0, progress: Callable[[dict], None] | None = None) -> dict:
    """Rung 06 (data-parallel, persistent) against rung 07 (stream-K) and cuBLAS: the named wave-quantized and
    well-quantized shapes and the squares (three rounds), then M stepping through the waves at N = K = 4096.
    Rung 07 is checked first on odd shapes that cut tiles across blocks, and run three times on a
    wave-quantized shape to show its results are the same bits every time."""
    import cupy as cp
    import numpy as np

    from lab.core import device
    from lab.measure.records import provenance

    fam = _gemm_tc()
    sk = fam.rung("07_stream_k")
    forced = dataclasses.replace(sk, spec=sk.spec.with_knobs(SK_MIN_GAIN=0))  # splits every partial wave
    while_loop = dataclasses.replace(sk, spec=sk.spec.with_knobs(KLOOP_DO_WHILE=0))  # the old, serialized k-loop
    for case in STREAM_K_CHECKS:
        checked_run(fam, sk, _fp16_tn(case))
        checked_run(fam, forced, _fp16_tn(case))
        checked_run(fam, while_loop, _fp16_tn(case))
    problem = fam.make_problem(**_fp16_tn(WAVE_QUANTIZED[0]))
    outs = []
    for _ in range(3):
        out = cp.full(problem.out_shape, np.nan, dtype=problem.dtype)
        fam.launch(forced, problem, out)
        outs.append(cp.asnumpy(out).view(np.uint16))
    differing = int(max(np.count_nonzero(o != outs[0]) for o in outs[1:]))
    keys = ("05_warp_specialized", "06_persistent", "07_stream_k")
    named = time_rungs(WAVE_QUANTIZED + WELL_QUANTIZED + SQUARES, keys, rounds=3, min_time_ms=min_time_ms,
                       progress=progress, extra={"07_forced_split": forced, "07_while_loop": while_loop})
    for row in named:
        row["kind"] = ("wave-quantized" if _shape_in(row, WAVE_QUANTIZED) else
                       "well-quantized" if _shape_in(row, WELL_QUANTIZED) else "square")
    sweep = time_rungs([{"M": m, "N": WAVE_N, "K": WAVE_K} for m in WAVE_MS], keys[1:], min_time_ms=min_time_ms,
                       progress=progress, extra={"07_forced_split": forced, "07_while_loop": while_loop})
    return {"provenance": provenance(), "l2": "cold", "sm_count": device.current().sm_count, "tile": [128, 256],
            "determinism": {"shape": WAVE_QUANTIZED[0], "runs": 3, "differing_elements": differing},
            "model": {"sk_fixup_cost": SK_FIXUP_COST, "sk_min_gain": SK_MIN_GAIN,
                      "split": "07_stream_k splits where the model predicts a gain; 07_forced_split (SK_MIN_GAIN=0) "
                               "splits every partial wave"},
            "checked": list(STREAM_K_CHECKS), "named": named, "sweep": sweep}


def _shape_in(row: dict, shapes: Iterable[dict]) -> bool:
    return any(all(row[k] == s[k] for k in ("M", "N", "K")) for s in shapes)


# Each study's record file (under results/<gpu>/) and how to make it. "items" is lab.families.work_queue's.
STUDY_FILES = {"orders": "schedule_orders.json", "counters": "schedule_orders_ncu.json",
               "fp32": "schedule_orders_fp32.json", "streamk": "schedule_stream_k.json", "items": "small_items.json"}


def run_study(name: str, progress: Callable[[dict | str], None] | None = None, **options) -> dict:
    """One study's payload, by name (STUDY_FILES). `options` go to the small-items study (quick, n_items,
    blocks_per_sm: lab.families.work_queue.study); the others take none."""
    if name not in STUDY_FILES:
        raise LabError(f"no study {name!r}; the studies are {', '.join(STUDY_FILES)}.")
    if options and name != "items":
        raise LabError(f"the {name} study takes no options (given: {', '.join(options)}).")
    if name == "orders":
        return time_orders(progress=progress)
    if name == "counters":
        return order_counters()
    if name == "fp32":
        return (time_orders(FP32_ORDER_SHAPES, FP32_ORDER_SETTINGS, "gemm_fp32", "08_multistage", progress=progress)
                | {"counters": order_counters(FP32_ORDER_SHAPES, FP32_ORDER_SETTINGS, "gemm_fp32", "08_multistage")})
    if name == "streamk":
        return stream_k_study(progress=progress)
    from lab.families import work_queue

    return work_queue.study(progress=progress, **options)


def run(out_dir: Path, study: str, *, progress: Callable[[dict | str], None] | None = None, **options) -> Path:
    """Measure one study (run_study) and write its payload to out_dir/STUDY_FILES[study]; return the path. The
    small-items study also reports its table (and the empty kernel's launch cost) through `progress`."""
    payload = run_study(study, progress=progress, **options)
    path = Path(out_dir) / STUDY_FILES[study]
    write_json(path, payload)
    if study == "items" and progress:
        from lab.families import work_queue

        empty = payload["empty_kernel"]
        progress(work_queue.summary(payload["rows"]))
        progress(f"empty kernel: {empty['events_us']:.2f} us between two events, {empty['graph_us']:.2f} us per "
                 "graph node")
    return path


def main(argv: list[str]) -> None:
    if argv[:1] == ["ncu-target"]:
        _ncu_target(json.loads(argv[1]))
        return
    raise SystemExit("usage: python -m lab.studies.scheduling ncu-target JSON (`lab study orders|counters|fp32|streamk|"
                     "items --out DIR` runs the studies)")


if __name__ == "__main__":
    main(sys.argv[1:])
