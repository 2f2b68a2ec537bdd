"""Per-element error bounds: how far a correct kernel's output may sit from the float64 reference.

A normwise test (||out - ref|| / ||ref|| below a tolerance) dilutes one wrong element over the whole
output: at 2048^3 a GEMM with one element 8% off passes it. So every element is judged on its own,
against a bound built from that element's own inputs. The check passes only if

    |out_ij - ref_ij| <= bound_ij   for every i, j.

The matrix product (C = alpha * A @ B + beta * C0, K products per element, summed in an accumulator
type with unit roundoff u_acc, stored in an output type with unit roundoff u_out):

    bound_ij = SAFETY * u_acc * sqrt(K) * |alpha| * (|P_ij| + S_ij)        the K-term sum
             + 2 * u_acc * (|alpha * P_ij| + |beta * C0_ij|)                 scaling by alpha, adding beta*C0
             + u_out * |ref_ij|                                              rounding to the output type

with P = A @ B (exact, float64) and S_ij = sqrt(sum_k (A_ik * B_kj)^2), i.e. sqrt((A*A) @ (B*B)). One more
term, K * |alpha| * (the accumulator's smallest normal number), allows products that underflow to be
flushed to zero.

Why this shape. Summing K terms, step k rounds its partial sum s_k with a relative error of at most
u_acc; the total error is sum_k delta_k * s_k. Deterministically that is <= K * u_acc * sum_k |a_k b_k|
(Higham's gamma_K), far too loose to catch anything at large K. Rounding errors behave like independent
random variables (Higham & Mary, "A new approach to probabilistic rounding error analysis", SISC 2019),
so the error grows like sqrt(K) * u_acc * max_k |s_k|. The partial sums drift towards the final sum and
wander like a random walk whose step is the size of a product: max_k |s_k| is about |P_ij| + S_ij (the
drift, and the walk's reach after K steps, sqrt(K) * rms(a_k b_k) = S_ij). That estimate holds for any
summation order the kernel picks (sequential, blocked, split), with or without FMA, for inputs of any
sign pattern and magnitude spread, because it uses only the element's own products.

How SAFETY was chosen. tests/test_bounds.py sums products the ways kernels do (sequentially with and
without FMA, NumPy's blocked SGEMM) on the lab's three input distributions plus all-positive inputs, K
from 1 to 16384: the largest error seen, divided by u_acc * sqrt(K) * (|P| + S), was about 1.2 (at
SAFETY = 8 the worst element sat at 0.15 of its bound). That margin keeps the check from being flaky,
while a TF32-rounded product (each term off by up to 2^-11 instead of 2^-24) lands at ~5x (K = 65536) to
~1000x (K = 2) its bound on the lab's random-sign inputs, and a product accumulated in fp16 at >10x:
both fail, as does one element off by 0.01 at 2048^3.

What it does not cover: on all-positive inputs at large K the |P| term dominates and a TF32 product can
pass (the lab's check distributions all have random signs for that reason). Hardware that accumulates
with truncation instead of round-to-nearest (some tensor-core accumulators) has a drift that grows like
K rather than sqrt(K); a family that uses such an accumulator must say so and widen its bound, and test
that the wider bound still rejects TF32 and fp16 accumulation.
"""

from __future__ import annotations

import math

import numpy as np

SAFETY = 8.0


BFLOAT16 = "bfloat16"  # NumPy has no bfloat16 dtype: the lab names it by this string


def unit_roundoff(dtype) -> float:
    """Half the distance from 1 to the next representable number: round-to-nearest's relative error bound.
    `dtype` is a NumPy dtype, or "bfloat16" (8 significand bits: 2^-8)."""
    if _is_bfloat16(dtype):
        return 2.0 ** -8
    return float(np.finfo(np.dtype(dtype)).eps) / 2


def _is_bfloat16(dtype) -> bool:
    return (isinstance(dtype, str) and dtype == BFLOAT16) or getattr(dtype, "name", None) == BFLOAT16


def half_subnormal_spacing(dtype) -> float:
    """Half the spacing of the subnormal numbers: the absolute error of rounding a value that small to `dtype`
    (2^-25 for float16, 2^-134 for bfloat16, whose exponent range is float32's)."""
    if _is_bfloat16(dtype):
        return 2.0 ** -134
    info = np.finfo(np.dtype(dtype))
    return float(info.smallest_subnormal) / 2


def matmul_bound(a: np.ndarray, b: np.ndarray, reference: np.ndarray, *, alpha: float = 1.0, beta: float = 0.0,
                 c0: np.ndarray | None = None, acc_dtype=np.float32, out_dtype=np.float32) -> np.ndarray:
    """The bound above for C = alpha * a @ b + beta * c0, elementwise, as float64 of the reference's shape.

    `a` (M x K) and `b` (K x N) are the inputs exactly as the kernel saw them (already rounded to their
    storage type), in float64; `reference` is alpha * a @ b + beta * c0 computed from them in float64.
    """
    K = a.shape[1]
    scaled_c0 = abs(beta) * np.abs(c0) if (beta and c0 is not None) else 0.0
    alpha_p = np.abs(reference - (beta * c0 if (beta and c0 is not None) else 0.0))  # |alpha * P|
    spread = np.sqrt(np.square(a) @ np.square(b))  # S
    u_acc, u_out = unit_roundoff(acc_dtype), unit_roundoff(out_dtype)
    bound = SAFETY * u_acc * math.sqrt(K) * (alpha_p + abs(alpha) * spread)
    bound += 2 * u_acc * (alpha_p + scaled_c0) + u_out * np.abs(reference)
    # Products below the accumulator's smallest normal number may be flushed to zero: allow K of them.
    return bound + K * abs(alpha) * float(np.finfo(np.dtype(acc_dtype)).tiny)


# Tensor cores accumulate differently from an FFMA chain: they add a block of exact products to the
# accumulator with the operands aligned to the largest exponent, the bits shifted out dropped, and the sum
# normalized by truncation (round toward zero): Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of
# NVIDIA tensor cores", PeerJ Computer Science 7:e330 (2021), measured on V100, T4 and A100. A truncation
# always errs towards zero, so its errors do not cancel like round-to-nearest's: along K they drift with the
# sign of the partial sum, growing like K rather than sqrt(K) (the module docstring's caveat).
TRUNCATION = 2.0  # at most one ulp (2 * u) per rounding
# One truncation per k-step of MMA_K products (one mma.m16n8k16): the products of a step are summed exactly
# and added to the accumulator once. The H200's errors fit this per-step model, not one truncation per
# product: scripts/gemm_tc_margin.py measures the share of E each rung uses under either term
# (results/h200/gemm_tc_margin_per_product.json, then results/h200/gemm_tc_margin.json for this one).
MMA_K = 16


def tensor_core_accumulation_bound(a: np.ndarray, b: np.ndarray, reference: np.ndarray, *, alpha: float = 1.0,
                                   beta: float = 0.0, c0: np.ndarray | None = None) -> np.ndarray:
    """E_ij of tensor_core_matmul_bound below: the fp32 accumulator's error on tensor cores before any rounding
    to an output type (what an epilogue receives, lab/families/epilogue.py)."""
    K = a.shape[1]
    alpha_p = np.abs(reference - (beta * c0 if (beta and c0 is not None) else 0.0))  # |alpha * P|
    spread = np.sqrt(np.square(a) @ np.square(b))  # S
    acc = matmul_bound(a, b, reference, alpha=alpha, beta=beta, c0=c0, acc_dtype=np.float32, out_dtype=np.float32)
    return acc + TRUNCATION * unit_roundoff(np.float32) * math.ceil(K / MMA_K) * (alpha_p + abs(alpha) * spread)


def tensor_core_matmul_bound(a: np.ndarray, b: np.ndarray, reference: np.ndarray, *, alpha: float = 1.0,
                             beta: float = 0.0, c0: np.ndarray | None = None, out_dtype=np.float16,
                             accumulation_scale: float = 1.0) -> np.ndarray:
    """The bound for fp16/bf16 products accumulated in fp32 on tensor cores and rounded once to `out_dtype`
    (np.float16 or "bfloat16"). Two parts, because they are of different kinds:

    E_ij = matmul_bound(acc_dtype=float32, out_dtype=float32)            the fp32 sum, as for an FFMA chain
         + TRUNCATION * u_32 * ceil(K / MMA_K) * (|alpha * P_ij| + |alpha| * S_ij)
                                                                          one truncation per k-step of the
                                                                          mma, each at most an ulp of a partial
                                                                          sum of size about |P| + S (as above)
    bound_ij = accumulation_scale * E_ij
             + u_out * (|ref_ij| + E_ij) + half the output's subnormal spacing

    E is statistical: an estimate with the SAFETY margin in it. The second line is not: rounding an fp32
    value x to the nearest fp16/bf16 errs by at most u_out * |x| (or half a subnormal spacing), and |x| <=
    |ref| + E. A correct kernel's output is its fp32 sum rounded once, so a single rounding can use that
    whole term: where the sum is far more accurate than the output type (small K), errors reach ~1.0 of
    this bound by construction and no margin can be asked of them. The margin is asked of E instead: the
    GPU tests check every rung again with accumulation_scale = 0.5 (the sums use at most half of E), and
    tests/test_gemm_tc_bounds.py shows the same for a NumPy model that truncates once per k-step, and that
    fp16 accumulation, one truncation per product at large K, and one wrong element fail.
    """
    acc = tensor_core_accumulation_bound(a, b, reference, alpha=alpha, beta=beta, c0=c0)
    rounding = unit_roundoff(out_dtype) * (np.abs(reference) + acc) + half_subnormal_spacing(out_dtype)
    return accumulation_scale * acc + rounding
