"""Time a few knob settings of the memory-bound rungs at their headline sizes (cold L2), beside the
device-copy ceiling of the same run. Used to choose the default knobs; prints a table and writes JSON."""

from __future__ import annotations

import dataclasses
import json
import sys

import cupy as cp

from lab import timing
from lab.ladder import get_family
from lab.records import provenance


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
    rows += sweep("copy", "04", [{"UNROLL": u} for u in (1, 2, 4, 8)], {"n": 1 << 26})
    grid = [{"TILE": t, "BLOCK_ROWS": b} for t in (32, 64) for b in (2, 4, 8)]
    for key in ("03", "04"):
        rows += sweep("transpose", key, grid, {"rows": 8192, "cols": 8192})
    json.dump({"provenance": provenance(), "rows": rows}, open(sys.argv[1] if len(sys.argv) > 1 else "knobs.json", "w"),
              indent=1)
