"""CPU: compare() on numpy arrays (GuardedBuffer and random_array are GPU-tested); the bounds themselves are
tested in test_bounds.py."""

import numpy as np
import pytest

from lab.measure.check import CheckResult, compare


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


def test_bounded_mode_judges_each_element_against_its_own_bound():
    out, ref = _ref()
    bound = np.full(ref.shape, 1e-6)
    bound[5] = 2.0  # element 5 may be far off; every other element must stay within 1e-6
    bumped = out.copy()
    bumped[5] += 1.5
    assert compare(bumped, ref, bound).passed
    bumped[6] += 1e-5
    cmp = compare(bumped, ref, bound)
    assert not cmp.passed and cmp.worst_index == (6,) and cmp.worst_ratio > 1
    assert cmp.worst_bound == 1e-6 and cmp.worst_value == pytest.approx(float(bumped[6]))
    assert "(6,)" in cmp.describe() and "exceeds its bound" in cmp.describe()


def test_one_bad_element_fails_however_large_the_output():
    """The normwise error of one element off by 1% in a million is ~1e-5: reported, never the criterion."""
    out, ref = _ref(1_000_000)
    bad = out.copy()
    bad[-1] *= 1.01
    cmp = compare(bad, ref, np.abs(ref) * 1e-4)
    assert not cmp.passed and cmp.worst_index == (999_999,) and cmp.max_rel_error < 1e-4


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the norm of an inf error
@pytest.mark.parametrize("rtol", [0.0, 1e-3])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_output_fails(rtol, bad):
    out, ref = _ref()
    out = out.copy()
    out[7] = bad
    cmp = compare(out, ref, np.full(ref.shape, rtol))
    assert not cmp.passed and cmp.worst_index == (7,)
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


def test_a_zero_bound_means_bit_exact_elementwise():
    out, ref = _ref()
    bound = np.zeros(ref.shape)
    assert compare(out, ref, bound).passed
    nudged = out.copy()
    nudged[9] = np.nextafter(nudged[9], np.float32(-np.inf))
    cmp = compare(nudged, ref, bound)
    assert not cmp.passed and cmp.worst_index == (9,) and "bit-exact" in cmp.describe()


def test_check_result_line():
    ok = CheckResult("copy", "03_vectorized", "n=5", True)
    bad = CheckResult("copy", "03_vectorized", "n=5", False, ["left 1 of 5 output element(s) unwritten"])
    assert ok.line() == "PASS copy/03_vectorized [n=5]"
    assert bad.line() == "FAIL copy/03_vectorized [n=5]: left 1 of 5 output element(s) unwritten"


def test_two_byte_poison_and_guard_are_nan_as_fp16_and_as_bf16():
    """A kernel that reads C when beta == 0 must get NaN from the poison in either 16-bit type."""
    from lab.measure.check import _GUARD, _POISON

    for bits in (*_POISON[2], _GUARD[2]):
        assert np.isnan(np.array([bits], np.uint16).view(np.float16))[0]
        assert (bits >> 7) & 0xFF == 0xFF and bits & 0x7F  # bf16: exponent all ones, mantissa not zero
        assert bits not in (0x7E00, 0x7FC0)  # not the canonical NaN either type's arithmetic produces


@pytest.mark.parametrize("ref_value, got_value, ok", [
    (np.inf, np.inf, True), (-np.inf, -np.inf, True), (np.nan, np.nan, True),
    (np.inf, 0.0, False), (np.inf, np.nan, False), (np.inf, -np.inf, False), (np.nan, 5.0, False),
    (np.nan, np.inf, False),
])
def test_a_nonfinite_reference_must_be_matched_exactly(ref_value, got_value, ok):
    """A reference of NaN or +-inf is not a free pass: the output must hold the same special value."""
    out, ref = _ref(10)
    out, ref = out.copy(), ref.copy()
    ref[4], out[4] = ref_value, got_value
    cmp = compare(out, ref, np.full(ref.shape, 1e-3))
    assert cmp.passed is ok
    if not ok:
        assert cmp.worst_index == (4,) and "NaN/Inf" in cmp.describe()


def test_bit_exact_includes_the_sign_of_zero():
    ref = np.array([1.0, 0.0, -2.0])
    assert compare(np.array([1.0, 0.0, -2.0], np.float32), ref, 0.0).passed
    cmp = compare(np.array([1.0, -0.0, -2.0], np.float32), ref, 0.0)
    assert not cmp.passed and cmp.worst_index == (1,)


def test_empty_arrays_compare_equal():
    assert compare(np.zeros((0, 3), np.float32), np.zeros((0, 3)), 0.0).passed
