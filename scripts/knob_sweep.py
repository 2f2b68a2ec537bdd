"""Time a few knob settings of the memory-bound rungs at their headline sizes (cold L2), beside the
device-copy ceiling of the same run. Used to choose the default knobs; prints a table and writes JSON."""

from __future__ import annotations

import dataclasses
import json
import sys

import cupy as cp

from lab.families import get_family
from lab.measure import timing
from lab.measure.records import provenance


def sweep(family_name: str, rung_key: str, settings: list[dict], params: dict) -> list[dict]:
    fam = get_family(family_name)
    base = fam.rung(rung_key)
    problem = fam.make_problem(seed=5, **params)
    out = cp.empty(problem.out_shape, cp.float32)
    flusher = timing.L2Flusher()
    ceiling = timing.measure(lambda i: fam.launch_ceiling(problem, out), l2="cold", flusher=flusher)
    rows = []
    for knobs in settings:
        rung = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs))
        t = timing.measure(lambda i, rung=rung: fam.launch(rung, problem, out), l2="cold", flusher=flusher)
        rows.append({"family": family_name, "rung": rung_key, "knobs": knobs, "params": params,
                     "median_ms": t.median_ms, "ceiling_ms": ceiling.median_ms,
                     "ratio": ceiling.median_ms / t.median_ms})
        print(f"{family_name}/{rung_key} {knobs}: {t.median_ms:.4f} ms, {rows[-1]['ratio']:.3f}x device copy")
    return rows


if __name__ == "__main__":
    rows = []
    copy_grid = [{"UNROLL": u, "BLOCK": b, "STREAMING": s} for u in (1, 2, 4) for b in (128, 256, 512) for s in (0, 1)]
    for n in (1 << 26, 1 << 28):
        rows += sweep("copy", "04", copy_grid, {"n": n})
    grid = [{"TILE": t, "BLOCK_ROWS": b} for t, b in ((32, 4), (32, 8), (64, 2), (64, 4), (64, 8), (64, 16))]
    for key in ("03", "04"):
        rows += sweep("transpose", key, grid, {"rows": 8192, "cols": 8192})
    json.dump({"provenance": provenance(), "rows": rows}, open(sys.argv[1] if len(sys.argv) > 1 else "knobs.json", "w"),
              indent=1)
