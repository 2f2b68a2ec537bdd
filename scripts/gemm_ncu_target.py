"""A target program for Nsight Compute: one launch each of cuBLAS SGEMM and of the given rung-08
knob settings at n^3 (compiled before any launch, so ncu sees only the kernels we mean).

    ncu --clock-control none --set detailed -k regex:gemm python scripts/gemm_ncu_target.py 4096 ['[{"BK": 8}, ...]']
"""

from __future__ import annotations

import dataclasses
import json
import sys

import cupy as cp
from gemm_sweep import BASE, threads  # the same knob base as the tuning rounds (scripts/ is on sys.path)

from lab.core.build import get_kernel
from lab.families import get_family

FAMILY = get_family("gemm_fp32")
SETTINGS = [{}, {"BN": 256, "WM": 64, "WN": 64, "TN": 16, "MINB": 1}]


def main(n: int, settings: list[dict]) -> None:
    problem = FAMILY.make_problem(seed=1, M=n, N=n, K=n)
    out = cp.empty(problem.out_shape, cp.float32)
    base = FAMILY.rung("08_multistage")
    rungs = []
    for knobs in settings:
        k = dict(BASE, **knobs)
        k["THREADS"] = threads(k)
        rung = dataclasses.replace(base, spec=base.spec.with_knobs(**k, VEC=4))
        get_kernel(rung.spec)  # compile and load before ncu's first profiled launch
        rungs.append(rung)
    FAMILY.launch_ceiling(problem, out)
    for rung in rungs:
        FAMILY.launch(rung, problem, out)
    cp.cuda.runtime.deviceSynchronize()
    print(json.dumps([dict(r.spec.knobs) for r in rungs]))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096, json.loads(sys.argv[2]) if len(sys.argv) > 2 else SETTINGS)
