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


def sweep(family_name: str, rung_key: str, knob: str, values: list[int], params: dict) -> list[dict]:
    fam = get_family(family_name)
    base = fam.rung(rung_key)
    problem = fam.make_problem(seed=5, **params)
    out = cp.empty(problem.out_shape, cp.float32)
    flusher = timing.L2Flusher()
    ceiling = timing.measure(lambda i: fam.launch_ceiling(problem, out), l2="cold", flusher=flusher)
    rows = []
    for v in values:
        rung = dataclasses.replace(base, spec=base.spec.with_knobs(**{knob: v}))
        t = timing.measure(lambda i, rung=rung: fam.launch(rung, problem, out), l2="cold", flusher=flusher)
        rows.append({"family": family_name, "rung": rung_key, "knob": knob, "value": v, "params": params,
                     "median_ms": t.median_ms, "ceiling_ms": ceiling.median_ms,
                     "ratio": ceiling.median_ms / t.median_ms})
        print(f"{family_name}/{rung_key} {knob}={v}: {t.median_ms:.4f} ms, {rows[-1]['ratio']:.3f}x device copy")
    return rows


if __name__ == "__main__":
    rows = []
    rows += sweep("copy", "04", "UNROLL", [1, 2, 4, 8], {"n": 1 << 26})
    for key in ("03", "04"):
        rows += sweep("transpose", key, "BLOCK_ROWS", [4, 8, 16, 32], {"rows": 8192, "cols": 8192})
    json.dump({"provenance": provenance(), "rows": rows}, open(sys.argv[1] if len(sys.argv) > 1 else "knobs.json", "w"),
              indent=1)
