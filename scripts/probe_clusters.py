#!/usr/bin/env python3
"""Probe: what the driver says about rung 09's clusters, and rung 09's time at 4096^3 with the grid forced to
several cluster counts (a persistent grid with more clusters than fit runs its last ones in a second wave)."""
import sys

import cupy as cp

import lab.families.gemm_tc as tc
from lab.core import tma
from lab.core.build import get_kernel
from lab.families import get_family
from lab.measure import timing

fam = get_family("gemm_tc")
problem = fam.make_problem(seed=1, M=4096, N=4096, K=4096)
rung = fam.variant(fam.rung("09"), problem)
kernel = get_kernel(rung.spec)
kernel.max_dynamic_shared_size_bytes = tc.dynamic_smem_bytes(rung)
ptr = kernel.kernel.ptr
print("ptr", type(ptr), ptr)
drv = tma.driver()
try:
    print("cuInit", drv.cuInit(0))
    f = drv.CUfunction(ptr)
    for attr in ("CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH", "CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET",
                 "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED"):
        print(attr, drv.cuFuncGetAttribute(getattr(drv.CUfunction_attribute, attr), f))
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 2, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 384, 1, 1
    cfg.sharedMemBytes = tc.dynamic_smem_bytes(rung)
    cfg.numAttrs = 0
    print("max active clusters (no attr)", drv.cuOccupancyMaxActiveClusters(f, cfg))
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 2, 1, 1
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    print("max active clusters (attr)", drv.cuOccupancyMaxActiveClusters(f, cfg))
except Exception as exc:  # a probe: print and go on
    print("driver probe failed:", repr(exc))
print("cluster_slots", tc.cluster_slots(rung))
out = cp.empty(problem.out_shape, problem.dtype)
flusher = timing.L2Flusher()
for n in [int(a) for a in sys.argv[1:]] or (66, 64, 60, 56, 33):
    tc.cluster_slots = lambda r, n=n: n
    t = timing.measure(lambda i: fam.launch(fam.rung("09"), problem, out), l2="cold", flusher=flusher, min_time_ms=20)
    t6 = timing.measure(lambda i: fam.launch(fam.rung("06"), problem, out), l2="cold", flusher=flusher, min_time_ms=20)
    rate = lambda t: problem.flops / t.median_ms / 1e9  # noqa: E731
    print(f"clusters {n}: rung 09 {rate(t):.1f} TFLOP/s, rung 06 {rate(t6):.1f}")
