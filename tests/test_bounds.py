"""CPU: the per-element GEMM error bound (lab.measure.bounds) is tight enough to catch one wrong element, a TF32
product and fp16 accumulation, and loose enough that correct float32 sums never fail it (not flaky).

The "kernels" here are NumPy stand-ins that sum products the ways GPU kernels do: sequentially with
rounding after every multiply and add, sequentially with a fused multiply-add, and NumPy's blocked SGEMM.
"""

import numpy as np
import pytest

from lab.measure.bounds import SAFETY, matmul_bound, unit_roundoff
from lab.measure.check import DISTRIBUTIONS, compare, random_array


def _operands(M, N, K, dist="normal", seed=0):
    a = random_array((M, K), np.float32, seed, dist, xp=np)
    b = random_array((K, N), np.float32, seed + 1, dist, xp=np)
    return a, b


def _check(got, a, b, *, alpha=1.0, beta=0.0, c0=None):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64) + (beta * c0.astype(np.float64) if beta else 0.0)
    bound = matmul_bound(a64, b64, ref, alpha=alpha, beta=beta, c0=None if c0 is None else c0.astype(np.float64))
    return compare(got, ref, bound)


def _sequential(a, b, fma: bool):
    """One accumulator per output, k = 0 .. K-1 in order (the naive rung's order)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        if fma:  # the product of two float32 is exact in float64: one rounding per step, as an FFMA
            acc = (acc + np.outer(a[:, k].astype(np.float64), b[k].astype(np.float64))).astype(np.float32)
        else:
            acc = acc + np.outer(a[:, k], b[k])
    return acc


def _round_to_tf32(x):
    """float32 -> TF32 (10 explicit mantissa bits), round to nearest, ties to even."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    keep = (bits >> 13) & 1
    bits = ((bits + 0xFFF + keep) >> 13) << 13
    return bits.astype(np.uint32).view(np.float32)


def _fp16_accumulated(a, b):
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k in range(a.shape[1]):
        acc = (acc.astype(np.float32) + np.outer(a[:, k], b[k])).astype(np.float16)
    return acc.astype(np.float32)


def test_unit_roundoff():
    assert unit_roundoff(np.float32) == 2.0 ** -24
    assert unit_roundoff(np.float16) == 2.0 ** -11
    assert unit_roundoff(np.float64) == 2.0 ** -53


@pytest.mark.parametrize("n, error", [(128, 0.1), (1024, 1.0), (2048, 3.0), (2048, 0.1), (2048, 0.01)])
def test_one_corner_element_off_fails_at_any_size(n, error):
    """The normwise check let 1.0 through at 1024^3 and 3.0 at 2048^3 (about 8% of that element)."""
    a, b = _operands(n, n, n, seed=n)
    c = a @ b
    assert _check(c, a, b).passed  # the honest product passes
    c[n - 1, n - 1] += error
    cmp = _check(c, a, b)
    assert not cmp.passed and cmp.worst_index == (n - 1, n - 1), cmp.describe()
    assert cmp.max_rel_error < 1e-3  # what the old normwise criterion saw


@pytest.mark.parametrize("K", [16, 256, 4096, 65536])
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_a_tf32_rounded_product_fails_the_fp32_check(K, dist):
    M = N = 64 if K <= 4096 else 16
    a, b = _operands(M, N, K, dist, seed=K)
    tf32 = (_round_to_tf32(a).astype(np.float64) @ _round_to_tf32(b).astype(np.float64)).astype(np.float32)
    assert _check(a @ b, a, b).passed
    cmp = _check(tf32, a, b)
    assert not cmp.passed and cmp.worst_ratio > 2, cmp.describe()


@pytest.mark.parametrize("K", [16, 1024, 8192])
@pytest.mark.parametrize("dist", ["normal", "uniform"])  # "wide" overflows fp16: that fails trivially
def test_an_fp16_accumulated_product_fails_a_check_that_promises_fp32_accumulation(K, dist):
    a, b = _operands(32, 32, K, dist, seed=K + 1)
    cmp = _check(_fp16_accumulated(a, b), a, b)
    assert not cmp.passed and cmp.worst_ratio > 10, cmp.describe()


def test_alpha_and_beta_are_in_the_bound():
    a, b = _operands(96, 80, 300, seed=5)
    c0 = random_array((96, 80), np.float32, 9, xp=np)
    got = np.float32(-2.0) * (a @ b) + np.float32(1.5) * c0
    assert _check(got, a, b, alpha=-2.0, beta=1.5, c0=c0).passed
    got[10, 20] += np.spacing(np.float32(abs(got[10, 20]))) * 4096  # ~4096 ulps of the output
    assert not _check(got, a, b, alpha=-2.0, beta=1.5, c0=c0).passed


def test_correct_float32_sums_stay_far_below_the_bound():
    """Not flaky: every summation order a float32 kernel may use, on every input distribution the checks
    draw (and all-positive inputs, whose partial sums drift), many seeds, K from 1 to 16384. The largest
    error/bound ratio seen must leave a wide margin (lab.measure.bounds says ~0.15 is typical of the worst)."""
    worst = 0.0
    for K in (1, 2, 7, 64, 257, 1000, 4099, 16384):
        M = N = 48 if K <= 4099 else 12
        for seed in range(3 if K <= 1000 else 1):
            for dist in (*DISTRIBUTIONS, "positive"):
                a, b = _operands(M, N, K, "uniform" if dist == "positive" else dist, seed=100 * K + seed)
                if dist == "positive":
                    a, b = np.abs(a), np.abs(b)
                for got in (_sequential(a, b, fma=True), _sequential(a, b, fma=False), a @ b):
                    cmp = _check(got, a, b)
                    assert cmp.passed, f"K={K} {dist}: {cmp.describe()}"
                    worst = max(worst, cmp.worst_ratio)
    assert 0 < worst < 0.3, worst
    assert SAFETY == 8.0  # the docstring's derivation and this test's margin assume it


@pytest.mark.parametrize("K", [8, 512, 4096])
def test_half_precision_output_with_fp32_accumulation(K):
    """The tensor-core contract: fp16 inputs, fp32 accumulation, the result rounded once to fp16. That
    passes; the same product accumulated in fp16 fails, though both are stored as fp16."""
    a = random_array((64, K), np.float16, K, xp=np)
    b = random_array((K, 64), np.float16, K + 1, xp=np)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    bound = matmul_bound(a64, b64, ref, acc_dtype=np.float32, out_dtype=np.float16)
    fp32_accumulated = _sequential(a.astype(np.float32), b.astype(np.float32), fma=True).astype(np.float16)
    assert compare(fp32_accumulated, ref, bound).passed
    cmp = compare(_fp16_accumulated(a.astype(np.float32), b.astype(np.float32)).astype(np.float16), ref, bound)
    assert not cmp.passed, cmp.describe()
