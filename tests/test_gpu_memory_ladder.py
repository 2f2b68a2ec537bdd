"""GPU: every memory-bound rung against its reference on random and tail shapes, guard zones intact."""

import numpy as np
import pytest

from lab.families import get_family

pytestmark = pytest.mark.gpu

COPY = get_family("copy")
TRANSPOSE = get_family("transpose")


@pytest.mark.parametrize("rung", COPY.rungs, ids=lambda r: r.key)
def test_copy_rung_correct_on_every_case(rung):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(COPY, rung, seed=11) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung", TRANSPOSE.rungs, ids=lambda r: r.key)
def test_transpose_rung_correct_on_every_case(rung):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(TRANSPOSE, rung, seed=12) if not r.passed]
    assert not failures, "\n".join(failures)


def test_checker_catches_a_kernel_that_writes_out_of_bounds(monkeypatch):
    """The harness must fail a rung that writes one element past the end (guard zone)."""
    from lab.measure.verify import check_case

    rung = COPY.rung("03")

    def bad_launch(r, problem, out, set_index=0):
        x = problem.inputs["x"][0]
        out[...] = x
        full = out.base if out.base is not None else out
        start = (out.data.ptr - full.data.ptr) // 4
        full[start + out.size] = 1.0  # one past the end

    monkeypatch.setattr(COPY, "launch", bad_launch)
    result = check_case(COPY, rung, {"n": 1000})
    assert not result.passed and any("AFTER" in r for r in result.reasons)


def test_checker_catches_unwritten_output(monkeypatch):
    from lab.measure.verify import check_case

    def lazy_launch(r, problem, out, set_index=0):
        out[:-1] = problem.inputs["x"][0][:-1]  # forgets the last element

    monkeypatch.setattr(COPY, "launch", lazy_launch)
    result = check_case(COPY, COPY.rung("01"), {"n": 257})
    assert not result.passed and any("unwritten" in r for r in result.reasons)


def test_checker_catches_a_wrong_value(monkeypatch):
    from lab.measure.verify import check_case

    def wrong_launch(r, problem, out, set_index=0):
        out[...] = problem.inputs["x"][0]
        out[7] += 1

    monkeypatch.setattr(COPY, "launch", wrong_launch)
    result = check_case(COPY, COPY.rung("01"), {"n": 100})
    assert not result.passed and any("wrong result" in r for r in result.reasons)


def test_bench_produces_records_with_a_same_run_ceiling(tmp_path):
    from lab.measure import bench, records

    plan = bench.BenchPlan(kinds=("headline",), quick=True, min_time_ms=2)
    rs = bench.run(COPY, plan)
    path = records.save(tmp_path / "copy.json", rs)
    loaded = records.load(path)
    assert loaded.provenance["device"] and loaded.provenance["arch"].startswith("sm_")
    rungs = {r.rung for r in loaded.records}
    assert {"cupy_device_copy", *[r.key for r in COPY.rungs]} <= rungs
    for r in loaded.records:
        assert r.median_ms > 0 and np.isfinite(r.value) and r.ceiling_value > 0


def test_timing_cold_is_not_faster_than_warm_for_an_l2_resident_copy():
    """A 8 MB copy fits in L2: flushing must make it slower, or the flush does nothing."""
    from lab.measure import timing

    problem = COPY.make_problem(n=1 << 20)
    import cupy as cp

    out = cp.empty(problem.out_shape, cp.float32)
    launch = lambda i: COPY.launch(COPY.rung("04"), problem, out)  # noqa: E731
    warm = timing.measure(launch, l2="warm", min_time_ms=5)
    cold = timing.measure(launch, l2="cold", min_time_ms=5)
    assert cold.median_ms > warm.median_ms
