#!/usr/bin/env python3
"""A few knob settings of one gemm_tc rung at one size, cold L2, beside cuBLAS in the same run: each setting is
checked on a small odd shape first (the family's bound), then timed. JSON with provenance.

    python3 scripts/gemm_tc_knobs.py OUT.json [RUNG] [SIDE]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SETTINGS = {  # per rung: the settings tried, the default first
    "03": ({}, {"STAGES": 3}, {"STAGES": 2}, {"BN": 256, "THREADS": 256}),
    "05": ({}, {"GROUP_M": 8}, {"GROUP_M": 16}, {"STAGES": 3}, {"STAGES": 3, "GROUP_M": 8}),
    "06": ({}, {"GROUP_M": 16}, {"GROUP_M": 4}),
}


def main(out_path: str, rung_key: str = "03", side: int = 4096) -> None:
    import cupy as cp

    from lab.core.errors import LabError
    from lab.families.gemm_tc import GemmTcFamily
    from lab.measure import records, timing
    from lab.measure.verify import check_case

    fam = GemmTcFamily()
    base = fam.rung(rung_key)
    problem = fam.make_problem(M=side, N=side, K=side, layout="TN", dtype="float16")
    out = cp.empty(problem.out_shape, problem.dtype)
    flusher = timing.L2Flusher()
    ceiling = timing.measure(lambda i: fam.launch_ceiling(problem, out), l2="cold", flusher=flusher)
    rows = [{"setting": "cublas", "median_ms": ceiling.median_ms, "tflops": fam.throughput(problem, ceiling.median_ms)}]
    for knobs in SETTINGS[rung_key]:
        rung = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs)) if knobs else base
        try:
            check = check_case(fam, rung, {"M": 131, "N": 257, "K": 203, "layout": "TN", "dtype": "float16"})
        except LabError as exc:  # a knob set the kernel's static_asserts refuse
            rows.append({"setting": knobs, "error": str(exc).splitlines()[0]})
            print(rows[-1], flush=True)
            continue
        row = {"setting": knobs or "default", "checked": check.passed}
        if check.passed:
            t = timing.measure(lambda i, r=rung: fam.launch(r, problem, out), l2="cold", flusher=flusher)
            row |= {"median_ms": t.median_ms, "tflops": fam.throughput(problem, t.median_ms),
                    "x_cublas": ceiling.median_ms / t.median_ms}
        rows.append(row)
        print(row, flush=True)
    Path(out_path).write_text(json.dumps({"provenance": records.provenance(), "rung": base.key, "side": side,
                                          "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:2], *sys.argv[2:3], *[int(a) for a in sys.argv[3:4]])
