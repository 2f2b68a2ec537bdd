"""The kernels a dispatch rule can name, each behind one small interface: whether it serves a shape (and why
not), whether it fuses the epilogue, and how to launch it on one call's arrays. The launch reuses the families'
launchers (lab/families), which do the host work once per call: lab.ops.dispatch records the launches they make
and replays them on later calls with the same shape and addresses.

    path          kernel                                         serves                      epilogue
    decode        decode rung 01, the tensor-core GEMV           TN, M <= 64, 16-byte rows   after
    split_k       gemm_split_k rung 08 (slices + reduction)      aligned (TMA)               after
    persistent    gemm_tc rung 06 (TMA, wgmma, one block/SM)     sm_90; repacks unaligned    fused into stores
    hopper        gemm_tc rung 10 with the tile for the shape,   sm_90; repacks unaligned    fused before the
                  or rung 12 where its split is predicted                                    TMA store (rung 10)
                  ahead (GemmTcFamily.scheduled)
    stream_k      gemm_tc rung 07                                sm_90; repacks unaligned    after
    generic       gemm_tc rung 03 (cp.async, mma.sync)           any shape, sm_80+           after
    cublas        cuBLASLt (nvmath-python) / cublasGemmEx        every shape                 bias (+ ReLU or
                                                                                             GELU tanh), or a
                                                                                             residual alone,
                                                                                             fused; else after

"After": the whole chain in one pass over the output, in place (kernels/epilogue/in_place.cu, lab_epilogue.cuh's
ops, 16-byte accesses): the generic fallback for epilogues.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from lab.core.errors import LabError
from lab.ops.shapes import GemmShape

BF16 = "bfloat16"
DECODE_MAX_M = 64
SPLIT_K_MAX_OUTPUT = 1 << 30  # the split workspace's slices: M x N below 2^31 floats, with room


@dataclass
class Call:
    """One matmul call: its arrays (b as stored: K x N for NN, N x K for TN) and its shape."""

    a: object
    b: object
    out: object
    shape: GemmShape
    lda: int
    ldb: int
    ldc: int
    bias: object = None  # float32 (N,)
    activation: str | None = None
    residual: object = None  # (M, N), the output's type and row stride

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(op for op, on in (("bias", self.bias is not None), (self.activation, self.activation),
                                       ("residual", self.residual is not None)) if on)


_FAMILIES: dict = {}


def family(name: str):
    """One instance per family for the process: the families keep per-shape plans (split-K's, decode's) that a
    fresh instance per call would rebuild (lab.families.get_family makes new ones every time)."""
    if name not in _FAMILIES:
        from lab.families import get_family

        _FAMILIES[name] = get_family(name)
    return _FAMILIES[name]


def _gemm_problem(call: Call, **extra):
    from lab.core.ladder import Problem

    s = call.shape
    params = {"M": s.M, "N": s.N, "K": s.K, "layout": s.layout, "dtype": s.dtype, "alpha": 1.0, "beta": 0.0,
              "pad": 0, "lda": call.lda, "ldb": call.ldb, "ldc": call.ldc} | extra
    return Problem(f"ops {s.M}x{s.N}x{s.K}", {"A": [call.a], "B": [call.b]}, (s.M, call.ldc), 0, params=params,
                   dtype=call.out.dtype, flops=s.flops)


class Path:
    name = ""
    fuses_epilogue = False
    min_arch = 80

    def fuses(self, call: Call) -> bool:
        """Whether this path applies the call's whole epilogue itself (else one pass over the output follows it)."""
        return self.fuses_epilogue or not call.ops

    def exact_epilogue(self, call: Call) -> bool:
        """Whether the epilogue reads the fp32 product itself (the tighter bound holds), rather than the product
        rounded to the output type first (one more rounding: the bound lab.ops.tune's rounded_product gives)."""
        return self.fuses_epilogue or not call.ops

    def refusal(self, shape: GemmShape, arch: int) -> str | None:
        """Why this path cannot serve `shape` on a GPU of `arch` (one phrase), or None when it can."""
        if arch < self.min_arch:
            return f"needs sm_{self.min_arch} or newer"
        return None

    def launch(self, call: Call, config: dict) -> None:
        raise NotImplementedError


class _TcRungPath(Path):
    family_name = "gemm_tc"
    rung_key = ""

    def _family(self):
        return family(self.family_name)

    def _rung(self, config: dict):
        rung = self._family().rung(self.rung_key)
        knobs = {k: v for k, v in config.items() if k.isupper()}
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs)) if knobs else rung

    def launch(self, call: Call, config: dict) -> None:
        self._family().launch(self._rung(config), _gemm_problem(call), call.out)


class Persistent(_TcRungPath):
    name = "persistent"
    fuses_epilogue = True
    min_arch = 90
    rung_key = "06_persistent"

    def launch(self, call: Call, config: dict) -> None:
        if not call.ops:
            return super().launch(call, config)
        _launch_fused(call, "06_persistent", config)


def _launch_fused(call: Call, rung_key: str, config: dict) -> None:
    """The call with its epilogue chain fused, on gemm_tc_epilogue's rung `rung_key` (its knobs from config)."""
    fused = family("gemm_tc_epilogue")
    rung = fused.rung(rung_key)
    knobs = {k: v for k, v in config.items() if k.isupper()}
    rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs)) if knobs else rung
    problem = _gemm_problem(call, epilogue="+".join(call.ops), out="same", q_per_row=False, clamp=(-np.inf, np.inf))
    problem.inputs["epilogue"] = {k: v for k, v in (("bias", call.bias), ("residual", call.residual)) if v is not None}
    fused.launch(rung, problem, call.out)


class Hopper(_TcRungPath):
    """The fastest main loop the family has (clusters of two, B multicast, the epilogue through a TMA store), with
    the build the family picks for the shape: rung 10 with its tile, or rung 12 where its stream-K split is predicted
    ahead (lab.families.gemm_tc_tiles.schedule). A call with an epilogue runs gemm_tc_epilogue's rung 10 (128 x 256
    tiles, the chain applied in registers before the store)."""

    name = "hopper"
    fuses_epilogue = True
    min_arch = 90

    def launch(self, call: Call, config: dict) -> None:
        if call.ops:
            return _launch_fused(call, "10_tma_store", config)
        fam = self._family()
        problem = _gemm_problem(call)
        fam.launch(fam.scheduled(problem), problem, call.out)


class StreamK(_TcRungPath):
    name = "stream_k"
    min_arch = 90
    rung_key = "07_stream_k"


class Generic(_TcRungPath):
    name = "generic"
    rung_key = "03_swizzled_multistage"


class SplitK(_TcRungPath):
    name = "split_k"
    min_arch = 90
    family_name = "gemm_split_k"
    rung_key = "08_split_k"

    def refusal(self, shape: GemmShape, arch: int) -> str | None:
        if not shape.aligned:
            return "reads A and B through TMA without a repack only when they are aligned"
        if shape.M * (-(-shape.N // 4) * 4) >= SPLIT_K_MAX_OUTPUT:
            return "keeps its fp32 slices for outputs below 2^30 elements"
        return super().refusal(shape, arch)

    def launch(self, call: Call, config: dict) -> None:
        self._family().launch(self._rung({}), _gemm_problem(call, splits=config.get("splits", 0)), call.out)


class Decode(Path):
    name = "decode"

    def refusal(self, shape: GemmShape, arch: int) -> str | None:
        if shape.layout != "TN":
            return "reads the weight as N x K rows (layout TN)"
        if shape.M > DECODE_MAX_M:
            return f"is a GEMV for M <= {DECODE_MAX_M}"
        return super().refusal(shape, arch)

    def launch(self, call: Call, config: dict) -> None:
        from lab.core.ladder import Problem

        s = call.shape
        params = {"M": s.M, "N": s.N, "K": s.K, "dtype": s.dtype, "ldx": call.lda, "ldw": call.ldb, "ldy": call.ldc}
        problem = Problem(f"ops decode {s.M}x{s.N}x{s.K}", {"X": [call.a], "W": [call.b]}, (s.M, call.ldc), 0,
                          params=params, dtype=call.out.dtype, flops=s.flops)
        decode = family("decode")
        decode.launch(decode.rung("01_mma_gemv"), problem, call.out)


class Cublas(Path):
    """The library: cuBLASLt with a workspace, its heuristic's algorithm and the epilogue it can fuse, where
    nvmath-python is installed; cublasGemmEx otherwise (lab.tools.library_gemm). Both keep fp32 accumulation end to end
    (no split-K slices added in fp16/bf16). The call is bound to the call's addresses and recorded like a kernel
    launch, so lab.ops replays it on its fast path."""

    name = "cublas"
    min_arch = 0

    def fuses(self, call: Call) -> bool:
        """cuBLASLt fuses bias, ReLU, GELU (tanh) and a residual without an activation, where it has an algorithm
        for them on this shape (known once the shape has run; until then assumed)."""
        from lab.tools.library_gemm import lt_fusable, lt_unavailable

        if not call.ops:
            return True
        return lt_unavailable() is None and lt_fusable(call.ops) and _LIBRARY_FUSED.get(_fuse_key(call), True)

    def exact_epilogue(self, call: Call) -> bool:
        """A residual added through C (beta = 1) is summed with the fp32 product; cuBLASLt's bias and activation
        epilogues left the tighter bound on the H200 (tests/test_gpu_ops.py: a few percent of the elements at
        129 x 257 x 1000), as a product rounded before its epilogue would, so they are held to that bound."""
        return not call.ops or (self.fuses(call) and set(call.ops) == {"residual"})

    def launch(self, call: Call, config: dict) -> None:
        from lab.core.build import record_launch
        from lab.tools.library_gemm import library_call

        s = call.shape
        lib, fused = library_call(s.M, s.N, s.K, s.dtype, s.layout, call.a.data.ptr, call.lda, call.b.data.ptr,
                                  call.ldb, call.out.data.ptr, call.ldc, bias_ptr=_address(call.bias), ops=call.ops,
                                  residual_ptr=_address(call.residual))
        if call.ops:
            _LIBRARY_FUSED[_fuse_key(call)] = fused
        record_launch(lib)
        lib()


def _address(x) -> int:
    return 0 if x is None else x.data.ptr


_LIBRARY_FUSED: dict = {}  # (shape, ldc) -> whether cuBLASLt had a fused algorithm for its epilogue


def _fuse_key(call: Call):
    return call.shape, call.ldc


PATHS: dict[str, Path] = {p.name: p for p in (Decode(), SplitK(), Persistent(), Hopper(), StreamK(), Generic(),
                                               Cublas())}


# --- the epilogue after the product (paths that do not fuse it) ------------------------------------------------

IN_PLACE_THREADS, IN_PLACE_COLS, MAX_GRID_Y = 128, 8, 65535


def epilogue_spec(ops: tuple[str, ...], dtype: str):
    """kernels/epilogue/in_place.cu built for one chain and type: the epilogue as one pass over the output."""
    from lab.core.build import KernelSpec
    from lab.families.epilogue import Epilogue

    knobs = {"BF16": int(dtype == BF16), **Epilogue(tuple(ops)).knobs()}
    return KernelSpec("epilogue/in_place.cu", "lab_epilogue_in_place", tuple(sorted(knobs.items())), min_arch=80)


def apply_epilogue(call: Call) -> None:
    """The call's epilogue in place on its output, one launch (recorded and replayed like the GEMM's own)."""
    if not call.ops:
        return
    from lab.core.build import get_kernel
    from lab.families.epilogue import kernel_params

    s, res = call.shape, call.residual
    params = kernel_params(bias=call.bias, residual=res, ld_residual=0 if res is None else res.strides[0] // 2)
    grid = (-(-s.N // (IN_PLACE_THREADS * IN_PLACE_COLS)), min(s.M, MAX_GRID_Y))
    get_kernel(epilogue_spec(call.ops, s.dtype))(grid, (IN_PLACE_THREADS,), (call.out, np.int32(s.M), np.int32(s.N),
                                                                           np.int64(call.ldc), params))


def path(name: str) -> Path:
    try:
        return PATHS[name]
    except KeyError:
        raise LabError(f"lab.ops has no path {name!r}; the paths are {', '.join(PATHS)}.") from None
