"""Epilogue chains (kernels/common/lab_epilogue.cuh) from Python: naming them, the kernel argument, and their
float64 references with error bounds.

An epilogue is up to four ops applied in order to v = alpha * acc (+ beta * C), then a conversion to the output
type: the GEMM's own ("same"), int8 or fp8 e4m3, with one quantization scale or one per row. The ops and
output codes must match the header's LAB_EPI_* numbers (a CPU test reads them from the header).

Bounds. An op maps (value v, bound b) to (f(v), L_f * b + e_f(v)): L_f is f's largest slope (how far an error
already in v can move the output) and e_f what f adds itself in fp32 (its roundings, the fast hardware
approximations of tanh and exp). Quantized outputs are checked on the grid they land on: the kernel's code must
lie between the codes of v - b and v + b (quantization is monotone), those two included and nothing else, so near
a rounding boundary either neighbour passes and everywhere else the code must be exact (quantized_reference says
how that interval becomes a reference and a bound). The quantizers themselves are checked bit for bit on chosen
values (ties, saturation, NaN, inf) by tests/test_gpu_epilogue.py through kernels/epilogue/apply.cu, and exercise
08's functor on chosen values through kernels/epilogue/plugin_numerics.cu (lab/grading/plugin_numerics.py).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from lab.core.errors import LabError
from lab.measure.bounds import half_subnormal_spacing, unit_roundoff

OPS = {"bias": 1, "row_scale": 2, "col_scale": 3, "relu": 4, "gelu_tanh": 5, "gelu_erf": 6, "silu": 7,
       "clamp": 8, "residual": 9}
OUTS = {"same": 0, "int8": 1, "e4m3": 2}
MAX_OPS = 4
E4M3_MIN_ARCH = 89  # cvt.rn.satfinite.e4m3x2.f32
U32 = unit_roundoff(np.float32)
TANH_APPROX_REL = 2.0 ** -10.987  # PTX ISA, tanh.approx.f32: maximum relative error
# Largest |f'| of each activation: GELU's derivative peaks at about 1.129 (x near 1.5), SiLU's at about 1.0998.
SLOPE = {"relu": 1.0, "gelu_tanh": 1.13, "gelu_erf": 1.13, "silu": 1.1, "clamp": 1.0}

# LabEpilogue in lab_epilogue.cuh: six pointers, two 64-bit leading dimensions, two floats (72 bytes).
PARAMS_DTYPE = np.dtype([("bias", np.uint64), ("row_scale", np.uint64), ("col_scale", np.uint64),
                         ("residual", np.uint64), ("q_scale", np.uint64), ("q_out", np.uint64),
                         ("ld_residual", np.int64), ("ld_q", np.int64), ("clamp_lo", np.float32),
                         ("clamp_hi", np.float32)])


@dataclasses.dataclass(frozen=True)
class Epilogue:
    """What a GEMM does to its results: `ops` in order, then the output type (`q_per_row`: one quantization
    scale per row instead of one for the tensor)."""

    ops: tuple[str, ...] = ()
    out: str = "same"
    q_per_row: bool = False

    def __post_init__(self):
        unknown = [op for op in self.ops if op not in OPS]
        if unknown:
            raise LabError(f"Unknown epilogue op {unknown[0]!r}; the ops are {', '.join(OPS)}.")
        if len(self.ops) > MAX_OPS:
            raise LabError(f"An epilogue chains at most {MAX_OPS} ops; got {len(self.ops)} ({'+'.join(self.ops)}).")
        if self.out not in OUTS:
            raise LabError(f"Unknown epilogue output {self.out!r}; use one of {', '.join(OUTS)}.")
        if self.q_per_row and self.out == "same":
            raise LabError("A per-row quantization scale needs a quantized output (out='int8' or 'e4m3').")

    @classmethod
    def parse(cls, text: str, out: str = "same", q_per_row: bool = False) -> Epilogue:
        """'bias+gelu_tanh' (ops joined by '+'; '' or 'none' for no op)."""
        ops = tuple(op for op in re.split(r"[+,\s]+", text.strip()) if op and op != "none")
        return cls(ops, out, q_per_row)

    @property
    def name(self) -> str:
        ops = "+".join(self.ops) or "none"
        if self.out == "same":
            return ops
        return f"{ops}->{self.out}" + ("/row" if self.q_per_row else "")

    @property
    def fused(self) -> bool:
        return bool(self.ops) or self.out != "same"

    def knobs(self) -> dict[str, int]:
        """The -D knobs of a rung that takes an epilogue (all zero: the plain GEMM)."""
        codes = [OPS[op] for op in self.ops] + [0] * (MAX_OPS - len(self.ops))
        knobs = {f"EPI_OP{i + 1}": code for i, code in enumerate(codes)}
        if self.out != "same" or self.q_per_row:
            knobs |= {"EPI_OUT": OUTS[self.out], "EPI_QROW": int(self.q_per_row)}
        return knobs

    def needs(self) -> set[str]:
        """The arrays this chain reads: bias, row_scale, col_scale, residual, q_scale."""
        arrays = {op for op in self.ops if op in ("bias", "row_scale", "col_scale", "residual")}
        return arrays | ({"q_scale"} if self.out != "same" else set())


def kernel_params(*, bias=None, row_scale=None, col_scale=None, residual=None, ld_residual: int = 0, q_scale=None,
                  q_out=None, ld_q: int = 0, clamp: tuple[float, float] = (-np.inf, np.inf)) -> np.ndarray:
    """The LabEpilogue argument (one element of PARAMS_DTYPE, passed by value) for arrays on the GPU (None: 0)."""
    def ptr(x):
        return 0 if x is None else int(x.data.ptr)

    p = np.zeros(1, dtype=PARAMS_DTYPE)
    for field, x in (("bias", bias), ("row_scale", row_scale), ("col_scale", col_scale), ("residual", residual),
                     ("q_scale", q_scale), ("q_out", q_out)):
        p[field] = ptr(x)
    p["ld_residual"], p["ld_q"] = ld_residual, ld_q
    p["clamp_lo"], p["clamp_hi"] = clamp
    return p


# --- float64 references ----------------------------------------------------------------------------------

@dataclasses.dataclass
class ChainInputs:
    """The chain's operands on the host, float64 (None where the chain does not read them)."""

    bias: np.ndarray | None = None  # (N,)
    row_scale: np.ndarray | None = None  # (M,)
    col_scale: np.ndarray | None = None  # (N,)
    residual: np.ndarray | None = None  # (M, N)
    q_scale: np.ndarray | None = None  # (1,) or (M,)
    clamp: tuple[float, float] = (-np.inf, np.inf)


def gelu_tanh(v):
    return 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v ** 3)))


def _gelu_erf(v):
    from math import erf

    return 0.5 * v * (1.0 + np.vectorize(erf, otypes=[np.float64])(v / np.sqrt(2.0)))


def _silu(v):
    with np.errstate(over="ignore"):
        return v / (1.0 + np.exp(-v))


def apply_op(op: str, v: np.ndarray, b: np.ndarray, x: ChainInputs) -> tuple[np.ndarray, np.ndarray]:
    """One op on (values, bounds), both float64 arrays of the output's shape."""
    with np.errstate(invalid="ignore", over="ignore"):
        if op == "bias":
            v = v + x.bias[None, :]
            return v, b + U32 * np.abs(v)
        if op in ("row_scale", "col_scale"):
            s = x.row_scale[:, None] if op == "row_scale" else x.col_scale[None, :]
            v = v * s
            return v, np.abs(s) * b + U32 * np.abs(v)
        if op == "residual":
            v = v + x.residual
            return v, b + U32 * np.abs(v)
        if op == "relu":
            return np.where(v < 0, 0.0, v), b
        if op == "clamp":
            lo, hi = x.clamp
            return np.where(v < lo, lo, np.where(v > hi, hi, v)), b
        if op == "gelu_tanh":  # tanh.approx's relative error, carried by 0.5 |v|, plus a few fp32 roundings
            return gelu_tanh(v), SLOPE[op] * b + np.abs(v) * (0.5 * TANH_APPROX_REL + 8 * U32)
        if op == "gelu_erf":  # erff is within 2 ulp
            return _gelu_erf(v), SLOPE[op] * b + 8 * U32 * np.abs(v)
        if op == "silu":  # __expf: 2 + 1.173 |v| ulp (CUDA C Programming Guide, intrinsic functions)
            y = _silu(v)
            return y, SLOPE[op] * b + (6 + 1.2 * np.abs(v)) * U32 * np.abs(y)
    raise LabError(f"Unknown epilogue op {op!r}.")


def apply_chain(epi: Epilogue, v: np.ndarray, b: np.ndarray, x: ChainInputs) -> tuple[np.ndarray, np.ndarray]:
    """The chain's ops on (values, bounds), before the output conversion."""
    for op in epi.ops:
        v, b = apply_op(op, v, b, x)
    return v, b


def quantize_int8(v: np.ndarray, q_scale) -> np.ndarray:
    """The int8 codes of `v` (float32 values) as the kernels make them: one fp32 multiply by the scale, round to
    nearest even, saturate to [-128, 127], NaN -> 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = (np.asarray(v, np.float32) * np.asarray(q_scale, np.float32)).astype(np.float64)
        q = np.clip(np.rint(np.nan_to_num(scaled, nan=0.0, posinf=np.inf, neginf=-np.inf)), -128, 127)
    return q.astype(np.int8)


def _e4m3_magnitudes() -> np.ndarray:
    """The value of every non-negative e4m3 code 0x00 .. 0x7E (0x7F is NaN): 4 exponent bits (bias 7), 3
    mantissa bits, subnormals below 2^-6, no infinity, largest 448."""
    codes = np.arange(0x7F)
    exp, man = codes >> 3, codes & 7
    return np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8) * 2.0 ** (exp - 7))


E4M3_VALUES = _e4m3_magnitudes()
E4M3_MAX = float(E4M3_VALUES[-1])


def quantize_e4m3(v: np.ndarray, q_scale) -> np.ndarray:
    """e4m3 codes (uint8) as cvt.rn.satfinite.e4m3x2.f32 makes them after one fp32 multiply by the scale: nearest,
    ties to the even code, magnitudes past 448 (infinity too) -> 448, NaN -> 0x7F."""
    with np.errstate(invalid="ignore", over="ignore"):
        x = (np.asarray(v, np.float32) * np.asarray(q_scale, np.float32)).astype(np.float64)
    mag = np.minimum(np.abs(x), E4M3_MAX)
    hi = np.clip(np.searchsorted(E4M3_VALUES, np.nan_to_num(mag), side="left"), 0, len(E4M3_VALUES) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = mag - E4M3_VALUES[lo], E4M3_VALUES[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), code).astype(np.uint8)


def decode_e4m3(codes) -> np.ndarray:
    """float64 values of e4m3 codes (0x7F and 0xFF are NaN)."""
    codes = np.asarray(codes, dtype=np.uint8)
    mag = codes & 0x7F
    values = np.where(mag == 0x7F, np.nan, E4M3_VALUES[np.minimum(mag, 0x7E)])
    return np.where(codes & 0x80, -values, values)


def quantized_reference(epi: Epilogue, v: np.ndarray, b: np.ndarray,
                        q_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reference values, bounds) of a quantized output, on its grid, such that |out - ref| <= bound accepts exactly
    the codes between the codes of v - b and v + b, both included (quantization is monotone; a negative scale only
    turns the two round). Where v * q_scale sits near a rounding boundary both neighbouring codes pass, elsewhere
    only the code of v: the interval is asymmetric around the code of v, so at a tie (code(v) = 10, code(v + b) =
    11) 10 and 11 pass and 9 does not. `ref` is the interval's middle (10.5 there: not a code itself, yet what a
    failed comparison prints as 'reference') and `bound` its half-width. Where v is NaN or infinite the code of v is the
    only one (int8: NaN -> 0, +-inf -> 127 / -128; e4m3: NaN, +-448), bound 0. e4m3 works the same way on the
    decoded values; where the interval holds only the two zeros, -0.0 and +0.0 both pass."""
    qs = q_scale.reshape(-1, 1) if epi.q_per_row else q_scale.reshape(1, 1)
    b = b + U32 * np.abs(v)  # the kernel's v * q_scale is one more fp32 rounding

    def grid(x):
        if epi.out == "int8":
            return quantize_int8(x, qs).astype(np.float64)
        return decode_e4m3(quantize_e4m3(x, qs))

    with np.errstate(invalid="ignore", over="ignore"):
        code, below, above = grid(v), grid(v - b), grid(v + b)
        exact = ~np.isfinite(v)
        lo = np.where(exact, code, np.minimum(below, above))
        hi = np.where(exact, code, np.maximum(below, above))
        ref = (lo + hi) / 2  # exact: the sum of two codes (or e4m3 values) and its half are exact in float64
        bound = np.nan_to_num((hi - lo) / 2, nan=0.0)
        # -0.0 and +0.0 (e4m3 codes 0x80 and 0x00) at the two ends: a bound of 0 would demand one sign of zero.
        both_zeros = (lo == 0) & (hi == 0) & (np.signbit(below) != np.signbit(above)) & ~exact
        bound = np.where(both_zeros, np.finfo(np.float64).tiny, bound)
    return ref, bound


def output_reference(epi: Epilogue, v: np.ndarray, b: np.ndarray, x: ChainInputs,
                     out_dtype) -> tuple[np.ndarray, np.ndarray]:
    """(reference, bound) of the stored output, from the chain's input values v and their bounds b: the chain,
    then the output type's rounding (same type) or grid (quantized)."""
    v, b = apply_chain(epi, v, b, x)
    if epi.out != "same":
        return quantized_reference(epi, v, b, x.q_scale)
    with np.errstate(invalid="ignore"):
        rounding = unit_roundoff(out_dtype) * (np.abs(v) + b) + half_subnormal_spacing(out_dtype)
    return v, b + rounding


def storage_dtype(epi: Epilogue, same: np.dtype) -> np.dtype:
    """The output array's dtype: `same` (the GEMM's storage type), int8, or uint8 codes of e4m3."""
    return {"same": np.dtype(same), "int8": np.dtype(np.int8), "e4m3": np.dtype(np.uint8)}[epi.out]


# --- the chain alone on the GPU (kernels/epilogue/apply.cu) ------------------------------------------------------

APPLY_THREADS = 128


def apply_spec(epi: Epilogue, bf16: bool = False, source: str = "epilogue/apply.cu"):
    """The apply kernel built for `epi` (`source`: another file with the same entry, e.g. a student's)."""
    from lab.core.build import KernelSpec

    knobs = {"BF16": int(bf16), **epi.knobs()}
    return KernelSpec(source, "lab_epilogue_apply", tuple(sorted(knobs.items())), min_arch=80)


def apply(z, epi: Epilogue, *, out, bf16: bool = False, bias=None, row_scale=None, col_scale=None, residual=None,
          q_scale=None, clamp: tuple[float, float] = (-np.inf, np.inf), spec=None) -> None:
    """Run the chain on an fp32 matrix `z` (M x N, rows ldz apart) into `out` (M x ldc: fp16 / bf16 bits for
    out='same', int8 or uint8 e4m3 codes otherwise), exactly as the fused GEMMs store it."""
    from lab.core import device
    from lab.core.build import get_kernel

    if epi.out == "e4m3" and device.current().arch < E4M3_MIN_ARCH:
        raise LabError(f"fp8 e4m3 outputs need sm_{E4M3_MIN_ARCH}+ (cvt.rn.satfinite.e4m3x2); this GPU is "
                       f"sm_{device.current().arch}: use out='int8' or 'same'.")
    M, N = z.shape
    quantized = epi.out != "same"
    params = kernel_params(bias=bias, row_scale=row_scale, col_scale=col_scale, residual=residual,
                           ld_residual=residual.strides[0] // residual.itemsize if residual is not None else 0,
                           q_scale=q_scale, q_out=out if quantized else None, ld_q=out.strides[0], clamp=clamp)
    ldc = out.strides[0] // out.itemsize
    pairs = (N + 1) // 2
    grid = (max(1, (pairs + APPLY_THREADS - 1) // APPLY_THREADS), M)
    get_kernel(spec or apply_spec(epi, bf16))(grid, (APPLY_THREADS,), (
        z, np.int32(M), np.int32(N), np.int64(z.strides[0] // 4), out, np.int32(ldc), params))

