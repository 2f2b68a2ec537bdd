"""GPU: every FP32 GEMM rung against a float64 reference on the ladder's shape families (powers of two,
multiples +- 1, primes, M/N/K = 1, tall-skinny, short-wide, K >> M, N, alpha/beta, padded leading
dimensions), guard zones and padding intact, outputs fully written, C not read when beta = 0."""

import pytest

from lab.families import get_family

pytestmark = pytest.mark.gpu

GEMM = get_family("gemm_fp32")


@pytest.mark.parametrize("rung", GEMM.rungs, ids=lambda r: r.key)
def test_gemm_rung_correct_on_every_case(rung):
    """Every element within its error bound (lab.measure.bounds) on two seeds, with room to spare: an element
    past half its bound on a correct rung would make the check flaky."""
    from lab.measure.verify import bound_margins

    row = bound_margins(GEMM, rung, seeds=(21, 22))
    assert not row["failed"], "\n".join(row["failed"])
    assert 0 < row["worst_ratio"] < 0.5, row


@pytest.mark.parametrize("rung", [r for r in GEMM.rungs if r.key in GEMM.VEC_RUNGS], ids=lambda r: r.key)
def test_vectorized_rungs_are_correct_on_the_scalar_path_too(rung):
    """Odd leading dimensions force VEC=1: the same rung must stay correct there."""
    from lab.measure.verify import check_rung

    cases = [{"M": 129, "N": 131, "K": 67, "pad": 1}, {"M": 64, "N": 63, "K": 65}, {"M": 5, "N": 7, "K": 3}]
    failures = [r.line() for r in check_rung(GEMM, rung, cases, seed=22) if not r.passed]
    assert not failures, "\n".join(failures)


def test_gemm_bench_reports_tflops_against_cublas():
    from lab.measure import bench

    rs = bench.run(GEMM, bench.BenchPlan(kinds=("headline",), quick=True, min_time_ms=2))
    recs = [r for r in rs.records if r.kind == "headline"]
    assert {r.rung for r in recs} >= {"cublas_sgemm", "08_multistage"}
    for r in recs:
        assert r.metric == "TFLOP/s" and 0 < r.value < 200 and r.ceiling == "cublas_sgemm"
