"""Thread-block clusters on the host: how many clusters of a kernel fit on the GPU at once, and the cluster size a
compiled kernel requires.

A kernel compiled with __cluster_dims__ launches in clusters through an ordinary launch (CuPy's), so the lab needs
the driver only to ask questions: cuOccupancyMaxActiveClusters (a persistent grid should hold no more clusters than
run at once: the rest would start a second, nearly empty wave) and cuFuncGetAttribute for the required cluster
width (a check that the size was compiled in). CuPy has neither, so both go through cuda-bindings, as the tensor
maps do (lab/core/tma.py).
"""

from __future__ import annotations

from functools import lru_cache

from lab.core import tma
from lab.core.errors import LabError


def _function_ptr(kernel) -> int | None:
    """The address of a built kernel's CUfunction, or None: lab.core.build.Kernel wraps a cupy.RawKernel, whose
    `kernel` (a cupy.cuda.function.Function, loaded on the current device) holds it as `ptr`."""
    ptr = getattr(getattr(kernel, "kernel", None), "ptr", None)
    return ptr if isinstance(ptr, int) and ptr else None


def max_active_clusters(kernel, threads: int, smem_bytes: int) -> int | None:
    """Clusters of `kernel` (its cluster size compiled in) that fit on the current GPU at once with blocks of
    `threads` threads and `smem_bytes` of dynamic shared memory (opted in beforehand); None where the driver cannot
    say (no cuda-bindings, no GPU, a stand-in kernel)."""
    ptr = _function_ptr(kernel)
    return _max_active_clusters(ptr, threads, smem_bytes) if ptr else None


@lru_cache(maxsize=64)
def _max_active_clusters(ptr: int, threads: int, smem_bytes: int) -> int | None:
    try:
        drv = tma.driver()
    except LabError:  # no cuda-bindings: the caller falls back
        return None
    config = drv.CUlaunchConfig()
    # A multiple of the cluster size, which the driver requires (with 2, it answered nothing for clusters of 4 or 8):
    # 16 is one for every size up to the non-portable limit.
    config.gridDimX, config.gridDimY, config.gridDimZ = 16, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes = smem_bytes
    config.numAttrs = 0  # the cluster size comes from the kernel
    err, count = drv.cuOccupancyMaxActiveClusters(drv.CUfunction(ptr), config)
    return int(count) if err == drv.CUresult.CUDA_SUCCESS and count > 0 else None


def required_cluster_width(kernel) -> int | None:
    """The cluster width `kernel` was compiled with (__cluster_dims__), 0 if none; None where the driver cannot say."""
    ptr = _function_ptr(kernel)
    try:
        drv = tma.driver()
    except LabError:
        return None
    if ptr is None:
        return None
    err, width = drv.cuFuncGetAttribute(drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                                        drv.CUfunction(ptr))
    return int(width) if err == drv.CUresult.CUDA_SUCCESS else None
