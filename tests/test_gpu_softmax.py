"""GPU: every softmax rung against the float64 reference on every check case (both dtypes, masked and not, the
special rows, each side of the launch paths' capacities, x misaligned against y), guard zones intact; the same
checks at half the bound's statistical part (its margin); the CuPy baseline; a timing smoke test."""

import numpy as np
import pytest

from lab.families import get_family
from lab.families.softmax import SoftmaxFamily

pytestmark = pytest.mark.gpu

SOFTMAX = get_family("softmax")
SMALL_CASES = [c for c in SOFTMAX.check_cases() if c["rows"] * c["n"] <= 20_000]  # every path but the longest


@pytest.mark.parametrize("rung", SOFTMAX.rungs, ids=lambda r: r.key)
def test_softmax_rung_correct_on_every_case(rung):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(SOFTMAX, rung, seed=21) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung", SOFTMAX.rungs, ids=lambda r: r.key)
def test_softmax_rung_within_half_the_bound(rung):
    """The bound's statistical part has a 2x margin on the GPU too (flush and fp16 rounding terms in full)."""
    from lab.measure.verify import check_rung

    half = SoftmaxFamily(statistical_scale=0.5)
    failures = [r.line() for r in check_rung(half, half.rung(rung.key), SMALL_CASES, seed=22) if not r.passed]
    assert not failures, "\n".join(failures)


def test_every_launch_path_was_taken_by_the_cases():
    """The check cases reach each of rung 04's kernels and rung 03's fallback (as the records will name them)."""
    import cupy as cp

    paths = set()
    for case in SOFTMAX.check_cases():
        problem = SOFTMAX.make_problem(**case)
        out = cp.empty(problem.out_shape, problem.dtype)
        for key in ("03", "04"):
            paths.add((key, SOFTMAX.launch_notes(SOFTMAX.rung(key), problem, out)["kernel"]))
    assert paths == {("03", "softmax_single_pass"), ("03", "softmax_online_two_pass"),
                     ("04", "softmax_specialized_warp"), ("04", "softmax_specialized_block"),
                     ("04", "softmax_specialized_long")}, paths


def test_cupy_composed_baseline_is_correct(monkeypatch):
    from lab.measure.verify import check_case

    baseline = SOFTMAX.baselines()["cupy_composed"]
    monkeypatch.setattr(SOFTMAX, "launch", lambda rung, problem, out, set_index=0: baseline(problem, out, set_index))
    failures = [r.line() for r in (check_case(SOFTMAX, SOFTMAX.rung("01"), c, seed=23) for c in SMALL_CASES)
                if not r.passed]
    assert not failures, "\n".join(failures)


def test_ceiling_copies_the_input_bytes():
    import cupy as cp

    problem = SOFTMAX.make_problem(rows=5, n=1000, dtype="float16")
    out = cp.empty(problem.out_shape, problem.dtype)
    SOFTMAX.launch_ceiling(problem, out)
    assert cp.array_equal(out, problem.inputs["x"][0])


def test_rung_04_is_not_slower_than_rung_01_at_n_4096_fp16():
    """A smoke test of the timing path, not a measurement for the record."""
    import cupy as cp

    from lab.measure import timing

    problem = SOFTMAX.make_problem(rows=16384, n=4096, dtype="float16")
    out = cp.empty(problem.out_shape, problem.dtype)
    times = {}
    for key in ("01", "04"):
        rung = SOFTMAX.rung(key)
        SOFTMAX.launch(rung, problem, out)  # compile and warm up outside the timing
        times[key] = timing.measure(lambda i, rung=rung: SOFTMAX.launch(rung, problem, out), l2="cold",
                                    min_time_ms=20).median_ms
    assert times["04"] <= times["01"], times
    assert np.isfinite(list(times.values())).all()
