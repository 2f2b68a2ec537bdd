"""GPU (sm_90a): the grouped GEMM rung against a float64 reference per group on every check case (empty groups
first, in the middle and last; one expert with every token; K % 64 != 0 and K % 8 != 0; N = 1; M = 1; mixed odd
shapes; more tiles than SMs; the named cases at small sizes; both types), also with 1 and 5 blocks so each block
walks many tiles across groups; the loop ceiling and the batched baseline computing the same products; a table
rebuilt after re-routing; a user's unaligned operands packed and run; the real tensor-map encoder on a case; the
headline bench. The family is built directly: it joins lab.families.families() once these pass on the H200.

Run: python -m pytest -m gpu -q tests/test_gpu_grouped_gemm.py"""

import numpy as np
import pytest

from lab.families.grouped_gemm import BFLOAT16, GroupedGemmFamily, groups_of, route_tokens, table_build_cost

pytestmark = pytest.mark.gpu

FAMILY = GroupedGemmFamily()
RUNG = FAMILY.rungs[0]
SEEDS = (31, 32)


@pytest.fixture(autouse=True)
def hopper():
    from lab.core import device

    if device.current().arch != 90:
        pytest.skip("the grouped rung needs sm_90a (an H100 or H200)")


def run_guarded(family: GroupedGemmFamily, problem, launch=None) -> tuple[list[str], object]:
    """One launch into a poisoned output with guard zones: (memory problems, comparison with the reference)."""
    import cupy as cp

    from lab.measure.check import GuardedBuffer
    from lab.measure.verify import compare_output

    buf = GuardedBuffer(problem.out_shape, problem.dtype)
    buf.poison()
    (launch or (lambda p, out: family.launch(RUNG, p, out)))(problem, buf.out)
    cp.cuda.get_current_stream().synchronize()
    return buf.problems(), compare_output(family, problem, buf.out)


def test_every_check_case_is_within_its_bound_on_two_seeds():
    from lab.measure.verify import bound_margins

    row = bound_margins(FAMILY, RUNG, seeds=SEEDS)
    assert not row["failed"], "\n".join(row["failed"])
    assert 0 < row["worst_ratio"] <= 1, row


@pytest.mark.parametrize("blocks", (1, 5))
def test_a_few_blocks_walk_many_tiles_across_groups(blocks):
    """One block runs every tile of every group in turn (the pipeline's k-tile count crossing every group
    boundary and K change); five interleave them. Both must give the same answers as the full grid."""
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(GroupedGemmFamily(max_blocks=blocks), RUNG, seed=33) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", ("float16", BFLOAT16))
def test_a_mid_size_moe_step_is_within_its_bound(dtype):
    """Realistic depth: K = 1024 (16 k-tiles per tile), 32 experts over 4096 tokens, several tiles per block."""
    from lab.measure.verify import check_case

    result = check_case(FAMILY, RUNG, {"case": "moe", "experts": 32, "tokens": 4096, "N": 1024, "K": 1024,
                                       "dtype": dtype}, seed=34, repeats=2)
    assert result.passed, result.reasons


LOOP_CASES = [
    {"case": "moe", "experts": 16, "tokens": 1024, "N": 192, "K": 136, "dtype": "float16"},  # cupy.matmul
    {"case": "moe", "experts": 16, "tokens": 1024, "N": 192, "K": 136, "dtype": BFLOAT16},  # cublasGemmEx
    {"groups": [(33, 40, 7), (0, 8, 8), (70, 300, 13), (1, 1, 1)], "dtype": "float16"},  # ld != K: cublasGemmEx
]


@pytest.mark.parametrize("case", LOOP_CASES, ids=("fp16-matmul", "bf16-gemmEx", "fp16-odd-K"))
def test_the_loop_ceiling_computes_every_group(case):
    """The ceiling accumulates in fp32 like the rung (fp16 accumulation would fail the bound), writes every
    group's slice and nothing else."""
    problem = FAMILY.make_problem(seed=3, **case)
    issues, cmp = run_guarded(FAMILY, problem, lambda p, out: FAMILY.launch_ceiling(p, out))
    assert not issues, issues
    assert cmp.passed, cmp.describe()


BATCHED_CASES = [
    {"case": "uniform", "experts": 8, "tokens": 1024, "N": 256, "K": 192, "dtype": "float16"},  # cupy.matmul 3-D
    {"case": "uniform", "experts": 8, "tokens": 1024, "N": 256, "K": 192, "dtype": BFLOAT16},  # strided-batched Ex
    {"case": "uniform", "experts": 5, "tokens": 165, "N": 31, "K": 100, "dtype": "float16"},  # ld = 104 != K
    {"groups": [(17, 9, 7)] * 3, "dtype": BFLOAT16},
]


@pytest.mark.parametrize("case", BATCHED_CASES, ids=("fp16-matmul", "bf16", "fp16-ld", "bf16-odd"))
def test_the_batched_baseline_computes_every_group(case):
    problem = FAMILY.make_problem(seed=4, **case)
    assert "cublas_batched" in FAMILY.baselines_for(problem.params)
    issues, cmp = run_guarded(FAMILY, problem, FAMILY.launch_batched)
    assert not issues, issues
    assert cmp.passed, cmp.describe()


def test_the_batched_baseline_refuses_groups_of_different_shapes():
    import cupy as cp

    from lab.core.errors import LabError

    problem = FAMILY.make_problem(groups=[(8, 8, 8), (9, 8, 8)])
    with pytest.raises(LabError, match="only groups of one shape"):
        FAMILY.launch_batched(problem, cp.empty(problem.out_shape, problem.dtype))


@pytest.mark.parametrize("dtype", ("float16", BFLOAT16))
def test_a_table_rebuilt_after_re_routing_gives_the_right_answer(dtype):
    """The router's next step: the same experts and A buffer, new token counts. The re-routed problem builds its
    own table (new A offsets, new prefix sums) and gets every group right; the first problem still does too."""
    problem = FAMILY.make_problem(seed=5, case="moe", experts=16, tokens=2048, N=256, K=192, dtype=dtype)
    issues, cmp = run_guarded(FAMILY, problem)
    assert not issues and cmp.passed, (issues, cmp.describe())
    counts = route_tokens(2048, 16, seed=9)
    rerouted = FAMILY.reroute(problem, counts)
    assert [m for m, _, _ in groups_of(rerouted.params)] == counts != [m for m, _, _ in groups_of(problem.params)]
    issues, cmp = run_guarded(FAMILY, rerouted)
    assert not issues and cmp.passed, (issues, cmp.describe())
    old = FAMILY.table(problem, FAMILY.variant(RUNG, problem))[1]
    new = FAMILY.table(rerouted, FAMILY.variant(RUNG, rerouted))[1]
    assert not np.array_equal(old["first_tile"], new["first_tile"]) and not np.array_equal(old["map_a"], new["map_a"])
    issues, cmp = run_guarded(FAMILY, problem)  # the first table is still the first problem's
    assert not issues and cmp.passed, (issues, cmp.describe())


def test_a_users_unaligned_operands_are_packed_and_run():
    """Operands at odd addresses with odd strides (TMA reads neither) go through one copy into the layout."""
    import cupy as cp

    rng = cp.random.default_rng(6)
    raw_a = rng.standard_normal(1 + 40 * 101, dtype=cp.float32).astype(cp.float16)
    raw_b = rng.standard_normal(1 + 70 * 101, dtype=cp.float32).astype(cp.float16)
    a0 = raw_a[1:].reshape(40, 101)[:, :99]  # 2 bytes past an aligned base, row stride 101 elements
    b0 = raw_b[1:].reshape(70, 101)[:, :99]
    a1, b1 = cp.ones((0, 33), cp.float16), cp.ones((5, 33), cp.float16)
    problem = FAMILY.pack_operands([a0, a1], [b0, b1])
    issues, cmp = run_guarded(FAMILY, problem)
    assert not issues and cmp.passed, (issues, cmp.describe())


def test_the_driver_encodes_a_moe_table_on_the_host():
    """The real cuTensorMapEncodeTiled on the moe case (stand-in addresses): 2 maps per expert with tokens, and
    the host time a per-step re-route would pay (printed for the lesson, not asserted beyond being measured)."""
    cost = table_build_cost("moe", repeats=3)
    assert cost["maps"] == 2 * (64 - cost["empty_groups"]) and cost["empty_groups"] >= 4
    assert 0 < cost["best_ms"] <= cost["median_ms"]
    print(f"moe table on the host: {cost}")


def test_grouped_gemm_bench_reports_tflops_against_the_loop():
    from lab.measure import bench

    rs = bench.run(FAMILY, bench.BenchPlan(kinds=("headline",), quick=True, min_time_ms=2))
    recs = [r for r in rs.records if r.kind == "headline"]
    assert {r.rung for r in recs} == {"cupy_loop", RUNG.key}  # moe: no batched baseline
    rung = next(r for r in recs if r.rung == RUNG.key)
    assert rung.extra["groups"] == 64 and rung.extra["empty_groups"] >= 4 and rung.extra["tiles"] > 132
    for r in recs:
        assert r.metric == "TFLOP/s" and 0 < r.value < 2000 and r.ceiling == "cupy_loop"
        assert r.params["case"] == "moe" and r.params["dtype"] == "float16"
    assert next(r for r in recs if r.rung == "cupy_loop").value > 20  # cuBLAS on tensor cores, not a fallback
