#!/usr/bin/env python3
"""How much of the statistical part E of the tensor-core error bound (lab.measure.bounds.tensor_core_matmul_bound)
each gemm_tc rung actually uses, per check case: max over the elements of (|err| - R) / E, where R is the
bound's rounding part (the bound at accumulation_scale 0) and E what scale 1 adds to it. Below 1 passes;
the smaller the worst figure, the more the truncation term could be tightened. One seed, three input
distributions; JSON with provenance.

    python3 scripts/gemm_tc_margin.py OUT.json [RUNG_PREFIX ...]    (default: every rung)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(out_path: str, prefixes: tuple[str, ...] = ()) -> None:
    import cupy as cp

    from lab.families.gemm_tc import GemmTcFamily
    from lab.measure import records
    from lab.measure.check import DISTRIBUTIONS, to_numpy

    full, none = GemmTcFamily(1.0), GemmTcFamily(0.0)
    rows = []
    for rung in [r for r in full.rungs if not prefixes or r.key.startswith(prefixes)]:
        worst = {"used": -np.inf, "case": ""}
        for case in full.check_cases():
            for d, dist in enumerate(DISTRIBUTIONS):
                problem = full.make_problem(seed=500 + d, dist=dist, **case)
                out = cp.empty(problem.out_shape, problem.dtype)
                if problem.out_init is not None:
                    out[...] = problem.out_init
                full.launch(rung, problem, out)
                cp.cuda.get_current_stream().synchronize()
                n = problem.params["N"]
                got = to_numpy(full.output_values(out))[:, :n].astype(np.float64)
                ref = full.reference(problem)
                e_full, e_none = full.error_bound(problem, ref)[:, :n], none.error_bound(problem, ref)[:, :n]
                used = float(np.max((np.abs(got - ref[:, :n]) - e_none) / (e_full - e_none)))
                if used > worst["used"]:
                    worst = {"used": used, "case": f"{problem.label} ({dist})"}
        rows.append({"rung": rung.key, "worst_share_of_E": worst["used"], "worst_case": worst["case"]})
        print(f"{rung.key}: at most {worst['used']:.3g} of E used ({worst['case']})", flush=True)
        # Written after every rung, so a run cut short keeps what it measured.
        Path(out_path).write_text(json.dumps({"provenance": records.provenance(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], tuple(sys.argv[2:]))
