"""CPU: compare() and tolerance() on numpy arrays (GuardedBuffer and random_array are GPU-tested)."""

import numpy as np
import pytest

from lab.check import CheckResult, compare, tolerance


def _ref(n=1000, seed=0):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return x, x.astype(np.float64)


def test_exact_mode_passes_on_equal_arrays():
    out, ref = _ref()
    cmp = compare(out, ref, 0.0)
    assert cmp.passed and cmp.max_abs_error == 0.0 and cmp.nonfinite == 0


def test_exact_mode_fails_on_a_one_ulp_difference():
    out, ref = _ref()
    bumped = out.copy()
    bumped[123] = np.nextafter(bumped[123], np.float32(np.inf))
    assert np.abs(bumped.astype(np.float64) - ref).max() == np.spacing(np.abs(out[123]))  # exactly 1 ulp
    cmp = compare(bumped, ref, 0.0)
    assert not cmp.passed
    assert cmp.worst_index == (123,)
    assert cmp.max_abs_error > 0
    assert "(123,)" in cmp.describe()


def test_tolerant_mode_accepts_rounding_but_not_a_wrong_element():
    out, ref = _ref()
    bumped = out.copy()
    bumped[5] = np.nextafter(bumped[5], np.float32(np.inf))
    assert compare(bumped, ref, tolerance(np.float32, 64)).passed
    wrong = out.copy()
    wrong[5] += 1.0
    cmp = compare(wrong, ref, tolerance(np.float32, 64))
    assert not cmp.passed and cmp.worst_index == (5,)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the norm of an inf error
@pytest.mark.parametrize("rtol", [0.0, 1e-3])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_output_fails(rtol, bad):
    out, ref = _ref()
    out = out.copy()
    out[7] = bad
    cmp = compare(out, ref, rtol)
    assert not cmp.passed
    assert cmp.nonfinite == 1
    assert "NaN/Inf" in cmp.describe()


def test_nan_where_the_reference_is_nan_is_not_counted():
    out, ref = _ref(10)
    out, ref = out.copy(), ref.copy()
    out[2], ref[2] = np.nan, np.nan
    cmp = compare(out, ref, 0.0)
    assert cmp.passed and cmp.nonfinite == 0


def test_compare_handles_2d_and_reports_the_worst_index():
    ref = np.arange(12, dtype=np.float64).reshape(3, 4) + 1
    out = ref.astype(np.float32).copy()
    out[2, 1] += 0.5
    out[0, 3] += 0.25
    cmp = compare(out, ref, 0.0)
    assert not cmp.passed and cmp.worst_index == (2, 1) and cmp.max_abs_error == 0.5


def test_shape_mismatch_is_refused():
    out, ref = _ref(10)
    with pytest.raises(ValueError, match="shape"):
        compare(out[:9], ref, 0.0)


def test_tolerance_is_zero_for_data_movement():
    assert tolerance(np.float32, 0) == 0.0
    assert tolerance(np.float16, 0) == 0.0
    assert tolerance(np.float64, -1) == 0.0


def test_tolerance_grows_with_length_and_with_a_coarser_dtype():
    lengths = [1, 16, 256, 4096, 65536]
    tols = [tolerance(np.float32, n) for n in lengths]
    assert all(a < b for a, b in zip(tols, tols[1:], strict=False))
    assert tols[0] > 0
    assert tolerance(np.float32, 4096) == pytest.approx(64 * tolerance(np.float32, 1))  # ~sqrt(length)
    assert tolerance(np.float16, 100) > tolerance(np.float32, 100) > tolerance(np.float64, 100)


def test_check_result_line():
    ok = CheckResult("copy", "03_vectorized", "n=5", True)
    bad = CheckResult("copy", "03_vectorized", "n=5", False, ["left 1 of 5 output element(s) unwritten"])
    assert ok.line() == "PASS copy/03_vectorized [n=5]"
    assert bad.line() == "FAIL copy/03_vectorized [n=5]: left 1 of 5 output element(s) unwritten"
