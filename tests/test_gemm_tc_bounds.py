"""CPU: the tensor-core GEMM's error bound (lab.measure.bounds.tensor_core_matmul_bound) and the bf16 helpers.

The bound must be loose enough for any correct way of accumulating fp16/bf16 products in fp32 on a
tensor core (not flaky) and tight enough to reject fp16 accumulation and one wrong element. The "kernels"
here are NumPy models: exact sums rounded once; fp32 accumulators that truncate (round toward zero) after
every product, every 8 or every 16 (the behaviour Fasi et al. measured on tensor cores, and the H200's
errors fit); and an fp16 accumulator. `needed_scale` is the share of the statistical part E of the bound
an output uses: <= 1 passes, and correct models must stay below 0.5 (the margin the GPU tests ask for).
"""

import numpy as np
import pytest

from lab.families.gemm_tc import (
    bfloat16_bits_to_float32,
    input_scale,
    round_to_bfloat16_bits,
    to_float32,
    to_storage,
)
from lab.measure.bounds import BFLOAT16, half_subnormal_spacing, tensor_core_matmul_bound, unit_roundoff
from lab.measure.check import random_array

OUT = {"float16": np.float16, BFLOAT16: BFLOAT16}


def _operands(M, N, K, dist, dtype, seed):
    s = np.float32(input_scale(dist, K))
    a = to_storage(random_array((M, K), np.float32, seed, dist, xp=np) * s, dtype)
    b = to_storage(random_array((K, N), np.float32, seed + 1, dist, xp=np) * s, dtype)
    return to_float32(a, dtype).astype(np.float64), to_float32(b, dtype).astype(np.float64)


def _round_toward_zero_f32(x):
    y = x.astype(np.float32)
    over = np.abs(y.astype(np.float64)) > np.abs(x)
    y[over] = np.nextafter(y[over], np.float32(0))
    return y


def _truncating_sum(a, b, block):
    """fp32 accumulator; each block of products is added exactly, then the sum truncated to fp32."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], block):
        acc = _round_toward_zero_f32(acc.astype(np.float64) + a[:, k0:k0 + block] @ b[k0:k0 + block])
    return acc


def _fp16_accumulated(a, b):
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k in range(a.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(a[:, k], b[k])).astype(np.float16)
    return acc.astype(np.float32)


def _stored(x32, dtype):
    """An fp32 result rounded once to the output type, as float64 values."""
    return to_float32(to_storage(np.asarray(x32, np.float32), dtype), dtype).astype(np.float64)


def needed_scale(out, ref, a, b, dtype):
    """The smallest accumulation_scale at which `out` passes (<= 0 when rounding alone explains it)."""
    full = tensor_core_matmul_bound(a, b, ref, out_dtype=OUT[dtype])
    rounding = tensor_core_matmul_bound(a, b, ref, out_dtype=OUT[dtype], accumulation_scale=0.0)
    return float(np.max((np.abs(out - ref) - rounding) / (full - rounding)))


def test_unit_roundoff_knows_bfloat16():
    assert unit_roundoff(BFLOAT16) == 2.0 ** -8 and unit_roundoff(np.float16) == 2.0 ** -11
    assert unit_roundoff(np.float32) == 2.0 ** -24  # unchanged for NumPy types
    assert half_subnormal_spacing(np.float16) == 2.0 ** -25 and half_subnormal_spacing(BFLOAT16) == 2.0 ** -134


CASES = [(8, 48), (256, 48), (4096, 32), (65536, 8)]


@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
@pytest.mark.parametrize("K, MN", CASES)
@pytest.mark.parametrize("dist", ["normal", "uniform", "wide"])
def test_correct_tensor_core_accumulations_use_less_than_half_the_bound(dtype, K, MN, dist):
    a, b = _operands(MN, MN, K, dist, dtype, seed=K + len(dist))
    ref = a @ b
    assert needed_scale(_stored(ref, dtype), ref, a, b, dtype) < 0.05  # exact, rounded once
    for block in (16, 8):  # a truncation per mma k-step (16), or per half-step (8): what the bound is built for
        assert needed_scale(_stored(_truncating_sum(a, b, block), dtype), ref, a, b, dtype) < 0.5


@pytest.mark.parametrize("K", [4096, 65536])
@pytest.mark.parametrize("dist", ["normal", "uniform", "wide"])
def test_a_truncation_after_every_product_is_too_much_at_large_K(K, dist):
    """The bound counts one truncation per 16 products, as the H200's tensor cores measured
    (results/h200/gemm_tc_margin.json); an accumulator that truncated after every product drifts ~16x
    further and fails in fp16, whose output rounding no longer hides it."""
    MN = 32 if K == 4096 else 8
    a, b = _operands(MN, MN, K, dist, "float16", seed=K + len(dist))
    ref = a @ b
    assert needed_scale(_stored(_truncating_sum(a, b, 1), "float16"), ref, a, b, "float16") > 1


@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
@pytest.mark.parametrize("K", [8, 256, 4096])
@pytest.mark.parametrize("dist", ["normal", "wide"])
def test_fp16_accumulation_fails_by_a_wide_margin(dtype, K, dist):
    a, b = _operands(48, 48, K, dist, dtype, seed=K)
    ref = a @ b
    assert needed_scale(_fp16_accumulated(a, b).astype(np.float64), ref, a, b, dtype) > 5


@pytest.mark.parametrize("dtype", ["float16", BFLOAT16])
@pytest.mark.parametrize("K", [64, 4096])
def test_one_element_two_output_ulps_off_fails(dtype, K):
    a, b = _operands(32, 32, K, "normal", dtype, seed=K + 1)
    ref = a @ b
    out = _stored(ref, dtype)
    bound = tensor_core_matmul_bound(a, b, ref, out_dtype=OUT[dtype])
    assert (np.abs(out - ref) <= bound).all()
    i, j = 7, 19
    bits = to_storage(out.astype(np.float32), dtype).copy()
    bits.view(np.uint16)[i, j] += 2  # two ulps of the output type away from the correctly rounded value
    wrong = to_float32(bits, dtype).astype(np.float64)
    bad = np.abs(wrong - ref) > bound
    assert bad[i, j] and bad.sum() == 1


def test_alpha_beta_and_c0_are_in_the_bound():
    a, b = _operands(16, 16, 64, "uniform", "float16", seed=3)
    c0 = _stored(random_array((16, 16), np.float32, 9, "normal", xp=np), "float16")
    ref = -2.0 * (a @ b) + 0.5 * c0
    out = _stored((-2.0 * (a @ b) + 0.5 * c0).astype(np.float32), "float16")
    bound = tensor_core_matmul_bound(a, b, ref, alpha=-2.0, beta=0.5, c0=c0, out_dtype=np.float16)
    assert (np.abs(out - ref) <= bound).all()
    assert not (np.abs(_stored(ref + 0.5 * c0, "float16") - ref) <= bound).all()  # C0 added twice fails


# --- bf16 helpers -----------------------------------------------------------------------------

def _bf16_nearest_even(x: np.float32) -> int:
    """The independent way: both bf16 neighbours of x in float64, the nearer one, the even one on a tie."""
    bits = int(np.float32(x).view(np.uint32))
    lo = bits >> 16
    hi = lo + 1
    lo_v = float(np.uint32(lo << 16).view(np.float32))
    hi_v = float(np.uint32((hi << 16) & 0xFFFFFFFF).view(np.float32)) if hi <= 0xFFFF else np.inf
    d_lo, d_hi = abs(float(x) - lo_v), abs(hi_v - float(x))
    if d_lo < d_hi or (d_lo == d_hi and lo % 2 == 0):
        return lo
    return hi


def test_bf16_rounding_matches_nearest_even_on_random_values():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) < np.float32(3.38e38))]  # away from the overflow edge (tested below)
    got = round_to_bfloat16_bits(x)
    want = np.array([_bf16_nearest_even(v) for v in x], dtype=np.uint16)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("bits, expected", [
    (0x3F808000, 0x3F80),  # 1 + 2^-8: a tie between 0x3F80 and 0x3F81; 0x3F80 is even
    (0x3F818000, 0x3F82),  # a tie between 0x3F81 and 0x3F82: up to the even one
    (0x3F808001, 0x3F81),  # just past the tie
    (0x3F807FFF, 0x3F80),  # just before it
    (0xBF808000, 0xBF80),  # the same tie, negative
    (0x00008000, 0x0000),  # subnormal tie to even (zero)
    (0x00018000, 0x0002),  # subnormal tie, odd neighbour below
    (0x00017FFF, 0x0001),
    (0x007FFFFF, 0x0080),  # the largest subnormal rounds up to the smallest normal
    (0x7F7FFFFF, 0x7F80),  # float32's largest finite value is past bf16's: +inf
    (0x7F7F7FFF, 0x7F7F),  # bf16's largest finite value
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
    (0x80000000, 0x8000),  # -0
])
def test_bf16_rounding_edge_cases(bits, expected):
    x = np.array([bits], np.uint32).view(np.float32)
    assert int(round_to_bfloat16_bits(x)[0]) == expected


def test_bf16_rounding_keeps_nans_nan():
    x = np.array([0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7FFFFFFF], np.uint32).view(np.float32)
    back = bfloat16_bits_to_float32(round_to_bfloat16_bits(x))
    assert np.isnan(back).all()


def test_bf16_widening_is_exact():
    bits = np.arange(0, 2 ** 16, dtype=np.uint32).astype(np.uint16)
    wide = bfloat16_bits_to_float32(bits)
    finite = np.isfinite(wide)
    assert np.array_equal(round_to_bfloat16_bits(wide[finite]), bits[finite])  # a round trip changes nothing
