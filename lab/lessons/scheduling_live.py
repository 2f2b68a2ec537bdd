"""The scheduling lesson's LIVE plan (notebook 04 on a GPU): a short version of each study of lab.studies.scheduling,
checked before it is timed, in the layout of the recorded payloads so that lab.lessons.scheduling's summaries and
lab.lessons.plots.scheduling's figures read both. `lab study orders|counters|fp32|streamk|items` runs the full studies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from lab.core.errors import LabError
from lab.lessons.plots.scheduling import setting_label
from lab.lessons.scheduling import (
    DP_RUNG,
    HEADLINE_SHAPE,
    SK_RUNG,
    TC_FAMILY,
    TC_RUNG,
    WS_RUNG,
    Gpu,
    Tile,
    named_kinds,
    shape_label,
    source,
)
from lab.measure import records
from lab.studies import scheduling

if TYPE_CHECKING:
    from lab.lessons.mode import Mode

# A short plan (minutes on an H200, compiling included).
LIVE_ORDER_SETTINGS = (("row", 0), ("column", 0), ("grouped", 8), ("grouped", 16))
LIVE_FP32_SETTINGS = (("row", 0), ("grouped", 8))
LIVE_MIN_TIME_MS = 10.0
LIVE_ITEM_SIZES = (256, 4096, 65536)
LIVE_ITEMS = 2000
LIVE_WAVES = 3  # the stream-K sweep: the M just below and just above the first LIVE_WAVES wave boundaries


def live_plan(gpu: Gpu, tile: Tile) -> str:
    ms = live_sweep_ms(gpu.sm_count, tile)
    return "\n".join([
        "LIVE plan (`lab study orders|counters|fp32|streamk|items` run the full studies):",
        f"  tile orders: rung {TC_RUNG} on {shape_label(HEADLINE_SHAPE)} only, "
        f"{', '.join(setting_label(*s) for s in LIVE_ORDER_SETTINGS)}, {LIVE_MIN_TIME_MS:g} ms of timing each",
        "  FP32 contrast: gemm_fp32 rung 08 on the same shape, "
        f"{', '.join(setting_label(*s) for s in LIVE_FP32_SETTINGS)}",
        "  Nsight Compute counters: NOT measured live (they need one ncu process per study); replayed only",
        f"  small items: lengths {', '.join(map(str, LIVE_ITEM_SIZES))}, {LIVE_ITEMS} items each",
        f"  persistent GEMM: rungs 05 and 06 on {', '.join(map(shape_label, scheduling.SQUARES))}, 3 rounds",
        f"  stream-K: rungs 06 and 07 at N = K = {scheduling.WAVE_N}, M in {', '.join(map(str, ms))}; two "
        "wave-quantized and two well-quantized shapes, one round; rung 07 run three times for determinism",
    ])


def live_sweep_ms(sm_count: int, tile: Tile, waves: int = LIVE_WAVES) -> list[int]:
    """The M (multiples of bm) just below and just above each of the first `waves` wave boundaries."""
    per_row = tile.grid({"M": 1, "N": scheduling.WAVE_N})[1]
    out = []
    for j in range(1, waves + 1):
        below = (j * sm_count // per_row) * tile.bm
        out += [m for m in (below, below + tile.bm) if m > 0]
    return sorted(set(out))


def hopper_refusal(current: Mode) -> str | None:
    """Why this GPU cannot run the Hopper rungs (None when it can, or in REPLAY)."""
    if not current.live:
        return None
    from lab.core import device
    from lab.families import get_family
    from lab.lessons.mode import runs_on

    arch = device.current().arch
    rung = get_family(TC_FAMILY).rung(TC_RUNG)
    if runs_on(rung, arch):
        return None
    return (f"this GPU is sm_{arch} and rungs 05-07 need sm_{rung.spec.min_arch}{rung.spec.arch_suffix}: the GEMM "
            "parts of the live plan are skipped; the replayed records below still show them.")


def _timed(what: str, fn: Callable[[], dict]) -> dict:
    start = time.perf_counter()
    out = fn()
    print(f"LIVE: {what} measured in {time.perf_counter() - start:.0f} s (compiling included)")
    return out


def live_orders(current: Mode) -> dict | None:
    """LIVE (a Hopper GPU): rung 06 in LIVE_ORDER_SETTINGS on HEADLINE_SHAPE, each order checked first."""
    if not current.live or hopper_refusal(current):
        return None
    return _timed("tile orders", lambda: scheduling.time_orders([HEADLINE_SHAPE], LIVE_ORDER_SETTINGS,
                                                                 min_time_ms=LIVE_MIN_TIME_MS))


def live_fp32(current: Mode) -> dict | None:
    if not current.live:
        return None
    return _timed("FP32 orders", lambda: scheduling.time_orders([HEADLINE_SHAPE], LIVE_FP32_SETTINGS, "gemm_fp32",
                                                                 "08_multistage", min_time_ms=LIVE_MIN_TIME_MS))


def live_small_items(current: Mode) -> dict | None:
    if not current.live:
        return None
    from lab.families import work_queue

    rows = _timed("small items", lambda: {"rows": work_queue.measure(LIVE_ITEM_SIZES, LIVE_ITEMS)})["rows"]
    return work_queue.make_payload(rows, records.provenance())


def _check_rungs(keys: Iterable[str], cases: Iterable[dict]) -> None:
    """lab.measure.verify.check_rung on fp16 TN cases; stops the notebook on a failure (correct before timed)."""
    from lab.families import get_family
    from lab.measure.verify import check_rung

    fam = get_family(TC_FAMILY)
    cases = [dict(c, layout="TN", dtype="float16") for c in cases]
    for key in keys:
        results = check_rung(fam, fam.rung(key), cases)
        failed = [r.line() for r in results if not r.passed]
        if failed:
            raise LabError(f"{key} failed its checks; fix it before timing it:\n" + "\n".join(failed[:5]))
        print(f"checked {key}: {len(results)} cases passed")


def _stream_k_payload(named: list[dict], gpu: Gpu, tile: Tile, **extra) -> dict:
    """Live rows in schedule_stream_k.json's layout, so the same summaries and plots read them."""
    return {"provenance": records.provenance(), "l2": "cold", "sm_count": gpu.sm_count, "tile": [tile.bm, tile.bn],
            "named": named, **extra}


def live_persistent(current: Mode, gpu: Gpu, tile: Tile) -> dict | None:
    """LIVE (a Hopper GPU): rungs 05 and 06 on the squares, three rounds, after their checks."""
    if not current.live or hopper_refusal(current):
        return None

    def run():
        _check_rungs((WS_RUNG, DP_RUNG), scheduling.STREAM_K_CHECKS[:2])
        rows = scheduling.time_rungs(scheduling.SQUARES, (WS_RUNG, DP_RUNG), rounds=3, min_time_ms=LIVE_MIN_TIME_MS)
        return _stream_k_payload([r | {"kind": "square"} for r in rows], gpu, tile)

    return _timed("persistent GEMM", run)


def stream_k_bits(shape: dict, runs: int = 3) -> int:
    """Rung 07 run `runs` times on one shape (outputs NaN-poisoned first): how many output elements differ."""
    import cupy as cp
    import numpy as np

    from lab.families import get_family

    fam = get_family(TC_FAMILY)
    problem = fam.make_problem(layout="TN", dtype="float16", **shape)
    outs = []
    for _ in range(runs):
        out = cp.full(problem.out_shape, np.nan, dtype=problem.dtype)
        fam.launch(fam.rung(SK_RUNG), problem, out)
        outs.append(cp.asnumpy(out).view(np.uint16))
    return int(max(np.count_nonzero(o != outs[0]) for o in outs[1:]))


def live_stream_k(current: Mode, gpu: Gpu, tile: Tile) -> dict | None:
    """LIVE (a Hopper GPU): rungs 06 and 07 on a few M around the first wave boundaries and four named shapes,
    after rung 07's checks on shapes that cut tiles across blocks; and rung 07's determinism."""
    if not current.live or hopper_refusal(current):
        return None

    def run():
        _check_rungs((SK_RUNG,), scheduling.STREAM_K_CHECKS)
        shape = scheduling.WAVE_QUANTIZED[0]
        bits = {"shape": shape, "runs": 3, "differing_elements": stream_k_bits(shape)}
        named = scheduling.time_rungs(scheduling.WAVE_QUANTIZED[:2] + scheduling.WELL_QUANTIZED[:2],
                                      (DP_RUNG, SK_RUNG), min_time_ms=LIVE_MIN_TIME_MS)
        kinds = named_kinds()
        named = [r | {"kind": kinds[shape_label(r)]} for r in named]
        sweep = scheduling.time_rungs([{"M": m, "N": scheduling.WAVE_N, "K": scheduling.WAVE_K}
                                       for m in live_sweep_ms(gpu.sm_count, tile)], (DP_RUNG, SK_RUNG),
                                      min_time_ms=LIVE_MIN_TIME_MS)
        return _stream_k_payload(named, gpu, tile, determinism=bits, sweep=sweep)

    return _timed("stream-K", run)


def live_note(payload: dict | None, current: Mode, name: str) -> str:
    """What the live cell did: measured (its source line), skipped on this GPU, or nothing (REPLAY)."""
    if payload is not None:
        return f"LIVE: {source(payload, name)}"
    if not current.live:
        return "(REPLAY: nothing is measured here; the reference GPU's records follow.)"
    return f"(LIVE: not measured here: {hopper_refusal(current) or 'see above'})"
