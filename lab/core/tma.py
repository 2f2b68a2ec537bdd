"""Tensor maps for Hopper's tensor memory accelerator (TMA), built on the host.

A TMA copy names its source by a 128-byte descriptor (CUtensorMap) that the driver encodes from the
array's address, sizes and row stride, the box one copy moves, and the shared-memory swizzle to write it
with. CuPy has no wrapper for cuTensorMapEncodeTiled, so this module calls it through NVIDIA's
cuda-bindings (`cuda.bindings.driver`) and hands the kernel the 128 bytes as a one-element NumPy array,
which CuPy passes by value (the rungs take it as a `__grid_constant__` parameter).

What TMA accepts (CUDA driver API, cuTensorMapEncodeTiled): a 16-byte-aligned base address, row strides
that are multiples of 16 bytes, boxes of at most 256 rows, and, with the 128-byte swizzle, box rows of
at most 128 bytes. `refusal` says in one sentence which of these an operand breaks; the gemm_tc family
then repacks it (lab/families/gemm_tc.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lab.core.errors import LabError

ALIGN_BYTES = 16  # base address and row stride granularity
SWIZZLE_BYTES = 128  # the 128-byte swizzle: box rows of at most this many bytes
MAX_BOX_ROWS = 256
MAP_BYTES = 128
MAP_DTYPE = np.dtype([("opaque", np.uint8, (MAP_BYTES,))])  # one element: passed by value by CuPy


@dataclass(frozen=True)
class TensorMap2D:
    """A row-major 2-D array of 2-byte elements and the box one TMA copy moves out of it."""

    address: int
    width: int  # elements per row (the contiguous dimension)
    height: int  # rows
    row_stride_bytes: int
    box_width: int  # elements
    box_height: int  # rows

    def check(self) -> None:
        """Raise on a box TMA cannot move with the 128-byte swizzle (a bug in the caller, not in the input)."""
        if self.box_width * 2 > SWIZZLE_BYTES or not 1 <= self.box_height <= MAX_BOX_ROWS:
            raise LabError(f"TMA box {self.box_width} x {self.box_height} does not fit the 128-byte swizzle "
                           f"(rows of at most {SWIZZLE_BYTES} bytes, at most {MAX_BOX_ROWS} rows).")


@dataclass(frozen=True)
class TensorMap3D:
    """A 3-D array of 2-byte elements (planes of rows, each row contiguous) and the box one TMA copy moves out of it.
    A box that runs past the rows of its plane reads zeros there, not the next plane's rows: what a tile of a
    sequence (attention's K and V, one plane per batch and head) needs at the sequence's end."""

    address: int
    width: int  # elements per row (the contiguous dimension)
    height: int  # rows per plane
    depth: int  # planes
    row_stride_bytes: int
    plane_stride_bytes: int
    box_width: int  # elements
    box_height: int  # rows (one plane a box)

    def check(self) -> None:
        TensorMap2D(self.address, self.width, self.height, self.row_stride_bytes, self.box_width,
                    self.box_height).check()
        if self.plane_stride_bytes % ALIGN_BYTES or not 0 < self.plane_stride_bytes < 2**40:
            raise LabError(f"a TMA plane stride must be a positive multiple of {ALIGN_BYTES} bytes below 2^40; got "
                           f"{self.plane_stride_bytes}.")


def refusal(address: int, ld_elements: int, element_bytes: int = 2) -> str | None:
    """Why a row-major operand at `address` with leading dimension `ld_elements` cannot be read by TMA as it
    is (one sentence), or None when it can."""
    if address % ALIGN_BYTES:
        return f"its base address is not {ALIGN_BYTES}-byte aligned"
    if (ld_elements * element_bytes) % ALIGN_BYTES:
        return (f"its row stride ({ld_elements} elements, {ld_elements * element_bytes} bytes) is not a multiple of "
                f"{ALIGN_BYTES} bytes")
    return None


def driver():
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise LabError("The Hopper rungs build TMA descriptors with NVIDIA's cuda-bindings, which is not installed "
                       "here: pip install cuda-bindings (same major version as your CUDA driver; the lab's extra "
                       "'hopper' names it).") from exc
    return driver


@lru_cache(maxsize=256)
def encode(spec: TensorMap2D | TensorMap3D) -> np.ndarray:
    """The CUtensorMap of `spec` (2-byte elements, 128-byte swizzle, zeros outside the array), as a
    one-element array of MAP_DTYPE. Cached: a benchmark launches on the same buffers many times, and the
    map depends only on these numbers."""
    spec.check()
    drv = driver()
    sizes, strides, box = [spec.width, spec.height], [spec.row_stride_bytes], [spec.box_width, spec.box_height]
    if isinstance(spec, TensorMap3D):
        sizes, strides, box = sizes + [spec.depth], strides + [spec.plane_stride_bytes], box + [1]
    err, tmap = drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT16,  # fp16 or bf16: TMA only moves the bits
        len(sizes), spec.address,
        [drv.cuuint64_t(n) for n in sizes],
        [drv.cuuint64_t(n) for n in strides],
        [drv.cuuint32_t(n) for n in box],
        [drv.cuuint32_t(1)] * len(sizes),
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,  # NONE: out-of-range elements read as 0
    )
    if err != drv.CUresult.CUDA_SUCCESS:
        raise LabError(f"cuTensorMapEncodeTiled refused {spec}: {err}.")
    return as_parameter(_map_bytes(tmap))


def _map_bytes(tmap) -> bytes:
    """The 128 bytes of a cuda-bindings CUtensorMap (its `opaque` words, or the memory at its pointer)."""
    opaque = getattr(tmap, "opaque", None)
    if opaque is not None:
        return np.array([int(w) for w in opaque], dtype=np.uint64).tobytes()
    return ctypes.string_at(int(tmap.getPtr()), MAP_BYTES)


def as_parameter(raw: bytes) -> np.ndarray:
    """128 bytes as the one-element array CuPy passes by value."""
    if len(raw) != MAP_BYTES:
        raise LabError(f"a tensor map is {MAP_BYTES} bytes, got {len(raw)}.")
    return np.frombuffer(raw, dtype=MAP_DTYPE).copy()
