"""The split-K lesson's study: TFLOP/s against the split factor S for each way of summing the partial tiles
(lab.families.gemm_split_k), beside rung 06 (S = 1, data-parallel) and cuBLAS in the same run, and how many bits
of the atomic variant's output change from run to run. `run` (`lab study splitk --out DIR`) writes it to
DIR/split_k_factors.json (results/<gpu>/ for the reference GPU); notebook 05 plots it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path

STUDY_FILE = "split_k_factors.json"
SHAPES = ({"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072})
FACTORS = (1, 2, 4, 8, 16, 33, 48, 66, 99, 132, 198, 264)
MODES = ("08_split_k", "08_split_k_in_kernel", "08_split_k_atomic")
CHECKS = ({"M": 129, "N": 67, "K": 4099, "splits": 13}, {"M": 256, "N": 256, "K": 1000, "splits": 7},
          {"M": 1, "N": 1, "K": 8191, "splits": 9})
DETERMINISM_RUNS = 20
PAD = 64


def knob_variants(fam) -> dict:
    """The workspace mode with SPLIT_INTERLEAVE = 1 (split s takes every S-th k-tile), with 128 x 128 tiles, and with
    those tiles in 6 stages instead of 4 (more bytes in flight), and the in-kernel mode interleaved, by name."""
    def variant(key: str, **knobs):
        return dataclasses.replace(fam.rung(key), spec=fam.rung(key).spec.with_knobs(**knobs))

    return {"08_split_k_interleaved": variant("08_split_k", SPLIT_INTERLEAVE=1),
            "08_split_k_in_kernel_interleaved": variant("08_split_k_in_kernel", SPLIT_INTERLEAVE=1),
            "08_split_k_bn128": variant("08_split_k", BN=128),
            "08_split_k_bn128_6stages": variant("08_split_k", BN=128, STAGES=6)}


def _tflops(flops: int, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12


def _auto_row(fam, variants: dict, problem, out, timed) -> dict:
    """cuBLAS, rung 06 and every variant at the launcher's own S on one problem."""
    p = problem.params
    row = {k: p[k] for k in ("M", "N", "K", "pad")}
    row["cublas_ms"] = timed(partial(fam.launch_ceiling, problem, out)).median_ms
    row["06_persistent_ms"] = timed(partial(fam.launch, fam.rung("06_persistent"), problem, out)).median_ms
    for key, rung in variants.items():
        row[f"{key}_ms"] = timed(partial(fam.launch, rung, problem, out)).median_ms
        row[f"{key}_splits"] = fam.splits_for(rung, problem)
    row["tflops"] = {k.removesuffix("_ms"): _tflops(problem.flops, v) for k, v in row.items() if k.endswith("_ms")}
    return row


def split_factor_study(min_time_ms: float = 10.0, progress: Callable[[dict], None] | None = None) -> dict:
    """Every mode checked on odd shapes first; then, per shape (fp16 TN, cold L2): cuBLAS, rung 06 and each mode at
    the launcher's own S (also with rows PAD elements longer than K), then each mode at every S in FACTORS that the
    shape's k-tiles allow (the deterministic modes also with interleaved splits, and with 128 x 128 tiles); then each
    mode run DETERMINISM_RUNS times at its own S, bit for bit against its first run."""
    import cupy as cp

    from lab.core import device
    from lab.families.gemm_split_k import GemmSplitKFamily, run_to_run_bits
    from lab.measure.records import provenance
    from lab.studies.scheduling import checked_run, event_timer

    fam = GemmSplitKFamily()
    variants = {key: fam.rung(key) for key in MODES} | knob_variants(fam)
    for rung in variants.values():
        for case in CHECKS:
            for dtype in ("float16", "bfloat16"):
                checked_run(fam, rung, case | {"layout": "TN", "dtype": dtype})
    timed = event_timer(min_time_ms)
    rows, determinism = [], []
    for shape in SHAPES:
        problem = fam.make_problem(**shape, layout="TN", dtype="float16")
        out = cp.empty(problem.out_shape, problem.dtype)
        tflops = partial(_tflops, problem.flops)

        rows.append(_auto_row(fam, variants, problem, out, timed) | {"kind": "auto"})
        if progress:
            progress(rows[-1])
        # The same shape with rows 64 elements longer than K: a pitch that is not a power of two (K = 65536 makes
        # every row of A and B start 128 KB after the last), in case DRAM channels see the power-of-two stride.
        padded = fam.make_problem(**shape, layout="TN", dtype="float16", pad=PAD)
        padded_out = cp.empty(padded.out_shape, padded.dtype)
        rows.append(_auto_row(fam, variants, padded, padded_out, timed) | {"kind": "auto", "pad": PAD})
        del padded, padded_out
        if progress:
            progress(rows[-1])
        k_tiles = -(-shape["K"] // 64)
        for s in (f for f in FACTORS if f <= k_tiles):
            problem.params["splits"] = s
            row = {**shape, "kind": "factor", "splits": s}
            for key, rung in variants.items():
                row[f"{key}_ms"] = timed(partial(fam.launch, rung, problem, out)).median_ms
            row["tflops"] = {k.removesuffix("_ms"): tflops(v) for k, v in row.items() if k.endswith("_ms")}
            rows.append(row)
            if progress:
                progress(row)
        problem.params["splits"] = 0
        for key in MODES:
            determinism.append({**shape} | run_to_run_bits(fam, fam.rung(key), problem, DETERMINISM_RUNS))
        del problem, out
        cp.get_default_memory_pool().free_all_blocks()
    return {"provenance": provenance(), "l2": "cold", "dtype": "float16", "layout": "TN",
            "sm_count": device.current().sm_count, "checked": list(CHECKS), "rows": rows, "determinism": determinism}


def run(out_dir: Path, *, min_time_ms: float = 10.0, progress: Callable[[dict], None] | None = None) -> Path:
    """The split-factor study (split_factor_study), written to out_dir/STUDY_FILE; returns the path."""
    from lab.measure.records import write_json

    return write_json(Path(out_dir) / STUDY_FILE, split_factor_study(min_time_ms=min_time_ms, progress=progress))
