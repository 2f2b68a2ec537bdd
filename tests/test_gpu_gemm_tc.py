"""GPU: every tensor-core GEMM rung against a float64 reference computed from the fp16/bf16-rounded inputs, on
the family's check cases (sizes 1, multiples of 16/64/128 +- 1, primes, K from 1 to 65536, tall-skinny and
short-wide, alpha/beta, padded and unaligned leading dimensions; each in both layouts and both types), with
guard zones and padding intact, outputs fully written, and C not read when beta = 0. The family is built
directly: it joins lab.families.families() only after these tests pass on the reference GPU."""

import dataclasses

import pytest

from lab.families import gemm_tc_tiles as tiles
from lab.families.gemm_tc import BFLOAT16, GemmTcFamily, uses_tma

pytestmark = pytest.mark.gpu

TC = GemmTcFamily()
SEEDS = (21, 22)


@pytest.mark.parametrize("rung", TC.rungs, ids=lambda r: r.key)
def test_gemm_tc_rung_correct_on_every_case(rung):
    """Every element within its bound (lab.measure.bounds.tensor_core_matmul_bound) on two seeds. Where the fp32 sum
    is far more accurate than the output type, a correct element can use up to its whole bound (its one
    rounding to fp16/bf16 is bounded exactly, with no margin to give), so the margin is tested below."""
    from lab.measure.verify import bound_margins

    row = bound_margins(TC, rung, seeds=SEEDS)
    assert not row["failed"], "\n".join(row["failed"])
    assert 0 < row["worst_ratio"] <= 1, row


@pytest.mark.parametrize("rung", TC.rungs, ids=lambda r: r.key)
def test_the_sums_stay_within_half_the_statistical_part_of_the_bound(rung):
    """The same checks with the accumulation part of the bound halved: a correct rung's fp32 sums keep a 2x
    margin to the estimate they are judged by, so the check is not flaky."""
    from lab.measure.verify import bound_margins

    row = bound_margins(GemmTcFamily(accumulation_scale=0.5), rung, seeds=SEEDS)
    assert not row["failed"], "\n".join(row["failed"])


@pytest.mark.parametrize("rung", [r for r in TC.rungs if r.key in TC.VEC_RUNGS], ids=lambda r: r.key)
def test_both_vec_variants_run_on_the_cases_that_pick_them(rung):
    """Aligned leading dimensions take VEC=8, odd ones VEC=1; both must be correct (the check cases hold both)."""
    import cupy as cp

    from lab.measure.verify import check_rung

    aligned = {"M": 128, "N": 136, "K": 72, "layout": "TN", "dtype": "float16"}
    odd = {"M": 129, "N": 131, "K": 67, "pad": 1, "layout": "NN", "dtype": BFLOAT16}
    for case, vec in ((aligned, 8), (odd, 1)):
        problem = TC.make_problem(**case)
        out = cp.empty(problem.out_shape, problem.dtype)
        assert dict(TC.variant(rung, problem, out).spec.knobs)["VEC"] == vec
    failures = [r.line() for r in check_rung(TC, rung, [aligned, odd], seed=23) if not r.passed]
    assert not failures, "\n".join(failures)


TMA_RUNGS = [r for r in TC.rungs if uses_tma(r)]


@pytest.mark.parametrize("rung", TMA_RUNGS, ids=lambda r: r.key)
def test_the_tma_rungs_read_aligned_operands_directly_and_repack_the_others(rung):
    """Leading dimensions that are multiples of 8 go straight to TMA; odd ones (and K = 4095-like shapes) are
    repacked first. Both paths must be correct, and launch_notes must say which one ran."""
    import cupy as cp

    from lab.measure.verify import check_rung

    aligned = {"M": 200, "N": 264, "K": 136, "layout": "TN", "dtype": "float16"}
    odd = {"M": 129, "N": 131, "K": 67, "pad": 0, "layout": "NN", "dtype": BFLOAT16, "beta": 0.5}
    for case, path in ((aligned, "tma"), (odd, "repack+tma")):
        problem = TC.make_problem(**case)
        assert TC.launch_notes(rung, problem, cp.empty(problem.out_shape, problem.dtype))["path"] == path
    failures = [r.line() for r in check_rung(TC, rung, [aligned, odd], seed=24) if not r.passed]
    assert not failures, "\n".join(failures)


CEILING_CASES = [
    {"M": 256, "N": 192, "K": 4096, "layout": "TN", "dtype": "float16"},  # the library (cuBLASLt where installed)
    {"M": 256, "N": 192, "K": 4096, "layout": "NN", "dtype": "float16"},
    {"M": 256, "N": 192, "K": 4096, "layout": "TN", "dtype": BFLOAT16},
    {"M": 17, "N": 64, "K": 4099, "layout": "TN", "dtype": "float16"},  # long K: fp32 reductions only
    {"M": 129, "N": 131, "K": 67, "layout": "NN", "dtype": "float16", "pad": 3},  # padded rows, odd sizes
    {"M": 130, "N": 140, "K": 150, "layout": "NN", "dtype": BFLOAT16, "alpha": 0.5, "beta": -1.5, "pad": 3},  # GemmEx
    {"M": 130, "N": 140, "K": 150, "layout": "TN", "dtype": "float16", "alpha": -2.0, "beta": 1.0, "pad": 5},
]


@pytest.mark.parametrize("case", CEILING_CASES,
                         ids=lambda c: f"{c['M']}-{c['layout']}-{c['dtype']}" + ("-alpha-beta" if "beta" in c else ""))
def test_the_cublas_ceiling_computes_the_same_product(case):
    """The ceiling accumulates in fp32 like the rungs (fp16 accumulation would fail this bound 10x over), in
    the same layout, so the ratio against it compares like with like."""
    import cupy as cp

    from lab.measure.verify import compare_output

    problem = TC.make_problem(seed=3, **case)
    out = cp.full(problem.out_shape, 0x7FC1, dtype=cp.uint16).view(problem.dtype)
    if problem.out_init is not None:
        out[...] = problem.out_init
    TC.launch_ceiling(problem, out)
    cp.cuda.get_current_stream().synchronize()
    cmp = compare_output(TC, problem, out)
    assert cmp.passed, cmp.describe()


def test_gemm_tc_bench_reports_tflops_against_cublas():
    from lab.core import device
    from lab.core.ladder import runnable_rungs
    from lab.measure import bench

    rs = bench.run(TC, bench.BenchPlan(kinds=("headline",), quick=True, min_time_ms=2))
    recs = [r for r in rs.records if r.kind == "headline"]
    here = runnable_rungs(TC.rungs, device.current().arch)[0]
    peers = {"cublas_gemm"} | set(TC.baselines())  # torch_mm where PyTorch is installed
    assert {r.rung for r in recs} == peers | {r.key for r in here}
    assert all(r.extra.get("path") for r in recs if r.rung not in peers)  # which path each rung took
    best = max((r for r in recs if r.rung in peers), key=lambda r: r.value)
    for r in recs:
        assert r.metric == "TFLOP/s" and 0 < r.value < 2000 and r.ceiling == best.rung  # the faster library call
        assert r.params["dtype"] == "float16" and r.params["layout"] == "TN" and r.params["M"] == 4096
    assert next(r for r in recs if r.rung == "cublas_gemm").value > 100  # tensor cores, not a fallback


@pytest.mark.parametrize("case", [c for c in CEILING_CASES if "beta" not in c])  # torch.mm has no alpha and beta
def test_the_torch_peer_computes_the_same_product(case, monkeypatch):
    """The peer's layout and memory are ours. PyTorch lets cuBLAS add split-K slices in fp16 by default
    (allow_fp16_reduced_precision_reduction), which left the bound at 17 x 64 x 4099 on the H200; with it off the
    product must be inside the bound. The timed peer keeps PyTorch's default, and the sweep's records say where it
    leaves the bound."""
    import cupy as cp

    from lab.measure.verify import compare_output

    if "torch_mm" not in TC.baselines():
        pytest.skip("PyTorch with CUDA is not installed here")
    import torch

    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", False)
    problem = TC.make_problem(seed=4, **case)
    out = cp.full(problem.out_shape, 0x7FC1, dtype=cp.uint16).view(problem.dtype)
    TC.baselines()["torch_mm"](problem, out)
    cp.cuda.get_current_stream().synchronize()
    cmp = compare_output(TC, problem, out)
    assert cmp.passed, cmp.describe()


@pytest.fixture
def hopper():
    from lab.core import device

    if device.current().arch < 90:
        pytest.skip("the Hopper rungs need sm_90a (an H100 or H200)")


HOPPER = pytest.mark.usefixtures("hopper")
STREAM_K = TC.rung("07_stream_k")
# SK_MIN_GAIN = 0 splits every partial wave, so the fix-up runs on these short-K shapes (the default model keeps
# most of them data-parallel: there the fix-up would cost more than the wave it saves).
FORCED_SPLIT = dataclasses.replace(STREAM_K, spec=STREAM_K.spec.with_knobs(SK_MIN_GAIN=0))
# Rung 07's old, serialized k-loop (its header): still checked, as the scheduling study times it for contrast.
WHILE_LOOP = dataclasses.replace(FORCED_SPLIT, spec=FORCED_SPLIT.spec.with_knobs(KLOOP_DO_WHILE=0))
# Rung 12: stream-K over clusters of two on rung 10's loop, as launched and splitting every partial wave.
STREAM_K_CLUSTER = TC.rung("12_stream_k_cluster")
FORCED_CLUSTER_SPLIT = dataclasses.replace(STREAM_K_CLUSTER, spec=STREAM_K_CLUSTER.spec.with_knobs(SK_MIN_GAIN=0))
# Shapes that cut tiles across blocks on a GPU with 132 SMs (and on any other SM count, differently): a wave plus
# 12 tiles with a short K, odd sides, one tile with a K of 129 k-tiles spread over every SM, fewer tiles than SMs,
# and a whole number of waves (no stream-K region: rung 06's schedule).
STREAM_K_CASES = [{"M": 1152, "N": 4096, "K": 520, "layout": "TN", "dtype": "float16"},
                  {"M": 1153, "N": 4093, "K": 333, "layout": "NN", "dtype": BFLOAT16},
                  {"M": 128, "N": 256, "K": 8195, "layout": "TN", "dtype": BFLOAT16},
                  {"M": 300, "N": 700, "K": 1000, "layout": "NN", "dtype": "float16", "alpha": 0.5, "beta": -1.0},
                  {"M": 1536, "N": 2816, "K": 256, "layout": "TN", "dtype": "float16"}]


@HOPPER
@pytest.mark.parametrize("rungs", [(STREAM_K, FORCED_SPLIT, WHILE_LOOP), (STREAM_K_CLUSTER, FORCED_CLUSTER_SPLIT)],
                         ids=["07", "12"])
def test_stream_k_is_correct_where_tiles_are_cut_across_blocks(rungs):
    """The family's checks (float64 reference, guard zones, NaN poison, two runs compared bit for bit) on shapes
    whose tiles are split between blocks (rung 12: between clusters), so the fix-up's waits and sums are
    exercised."""
    from lab.measure.verify import check_rung

    failures = [r.line() for rung in rungs for r in check_rung(TC, rung, STREAM_K_CASES, seed=31) if not r.passed]
    assert not failures, "\n".join(failures)


@HOPPER
@pytest.mark.parametrize("rung", [FORCED_SPLIT, FORCED_CLUSTER_SPLIT], ids=["07", "12"])
def test_stream_k_gives_the_same_bits_every_run_and_leaves_every_flag_clear(rung):
    """The fix-up adds contributions in block (rung 12: cluster) order, so five runs give identical bits; each owner
    clears the flags it consumed, so the workspace is ready for the next launch with no host-side reset."""
    import cupy as cp
    import numpy as np

    from lab.families.gemm_tc import _WORKSPACES

    problem = TC.make_problem(seed=5, **STREAM_K_CASES[0])
    outs = []
    for _ in range(5):
        out = cp.full(problem.out_shape, np.nan, dtype=problem.dtype)
        TC.launch(rung, problem, out)
        outs.append(cp.asnumpy(out).view(np.uint16))
    assert all(np.array_equal(o, outs[0]) for o in outs[1:])
    _, flags = _WORKSPACES[(cp.cuda.Device().id, cp.cuda.get_current_stream().ptr)]
    assert int(cp.count_nonzero(flags)) == 0


@HOPPER
@pytest.mark.parametrize("order,group_m", [("row", 0), ("column", 0), ("grouped", 3), ("snake", 2), ("snake", 16)])
@pytest.mark.parametrize("key", ["06_persistent", "07_stream_k", "09_cluster_multicast", "10_tma_store",
                                 "11_pingpong", "12_stream_k_cluster"])
def test_every_tile_order_computes_every_tile(key, order, group_m):
    """The RASTER knob (lab_tile_order.cuh) on grids whose tile-rows are not a multiple of the group: a tile the
    order skipped would keep its NaN poison."""
    from lab.measure.verify import check_rung
    from lab.studies.scheduling import order_rung

    cases = [{"M": 128 * 5 + 1, "N": 256 * 3 - 7, "K": 200, "layout": "TN", "dtype": "float16"},
             {"M": 128 * 17, "N": 256 * 2, "K": 72, "layout": "NN", "dtype": BFLOAT16}]
    rung = order_rung(TC, key, order, group_m)
    if rung.launch in ("stream_k", "cluster_stream_k"):
        rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(SK_MIN_GAIN=0))
    failures = [r.line() for r in check_rung(TC, rung, cases, seed=32) if not r.passed]
    assert not failures, "\n".join(failures)


CLUSTER_RUNG = TC.rung("09_cluster_multicast")
# Pair tiles (2 x 128 rows) with the second block past M, more pair tiles than clusters fit (each cluster walks
# several, its pipeline running across them), a single pair tile, K tails inside a k-tile, both layouts and types.
CLUSTER_CASES = [{"M": 128 * 3 + 1, "N": 256 * 2 - 3, "K": 300, "layout": "TN", "dtype": "float16"},
                 {"M": 4096 + 129, "N": 4096, "K": 136, "layout": "NN", "dtype": BFLOAT16},
                 {"M": 4097, "N": 4095, "K": 72, "layout": "TN", "dtype": BFLOAT16},
                 {"M": 100, "N": 100, "K": 1000, "layout": "NN", "dtype": "float16", "alpha": 0.5, "beta": -1.0}]


@HOPPER
def test_the_cluster_rung_is_compiled_in_pairs_and_fills_no_more_clusters_than_fit():
    """__cluster_dims__(2, 1, 1) reaches the cubin (the driver reports a required cluster width of 2), and the grid
    is two blocks per pair tile, up to the clusters the driver says fit at once."""
    from lab.core.build import get_kernel
    from lab.core.cluster import required_cluster_width
    from lab.families.gemm_tc import CLUSTER, cluster_slots

    problem = TC.make_problem(seed=6, **CLUSTER_CASES[1])
    built = TC.variant(CLUSTER_RUNG, problem)
    assert required_cluster_width(get_kernel(built.spec)) == CLUSTER
    slots = cluster_slots(built)
    assert 0 < slots <= 132 // CLUSTER
    pair_tiles = 16 * -(-(4096 + 129) // 256)
    assert TC.grid(built, problem.params) == (CLUSTER * min(pair_tiles, slots),)


@HOPPER
def test_the_stream_k_cluster_rung_runs_a_cluster_per_slot_or_per_k_tile_and_a_flag_per_block():
    """Rung 12's grid: two blocks for each of pair tiles x k-tiles, up to the clusters that fit; its workspace holds
    a slot and a flag for every block of the grid."""
    import cupy as cp

    from lab.core.build import get_kernel
    from lab.core.cluster import required_cluster_width
    from lab.families.gemm_tc import _WORKSPACES, CLUSTER, stream_k_cluster_slots

    for case, work in (({"M": 128, "N": 256, "K": 64 * 3}, 3), ({"M": 4096, "N": 4096, "K": 64}, 256)):
        problem = TC.make_problem(seed=6, layout="TN", dtype="float16", **case)
        built = TC.variant(STREAM_K_CLUSTER, problem)
        assert required_cluster_width(get_kernel(built.spec)) == CLUSTER
        grid = TC.grid(built, problem.params)
        assert grid == (CLUSTER * min(work, stream_k_cluster_slots(built)),)
        TC.launch(built, problem, cp.empty(problem.out_shape, problem.dtype))
        slots, flags = _WORKSPACES[(cp.cuda.Device().id, cp.cuda.get_current_stream().ptr)]
        assert flags.size >= grid[0] and slots.size >= grid[0] * 128 * 256


@HOPPER
@pytest.mark.parametrize("key", ["09_cluster_multicast", "10_tma_store", "11_pingpong", "12_stream_k_cluster"])
def test_the_cluster_rungs_are_correct_where_pairs_run_past_m_and_clusters_walk_many_tiles(key):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(TC, TC.rung(key), CLUSTER_CASES, seed=33) if not r.passed]
    assert not failures, "\n".join(failures)


@HOPPER
@pytest.mark.parametrize("case,store", [
    ({"M": 4097, "N": 1000, "K": 136, "layout": "TN", "dtype": "float16"}, "tma"),
    ({"M": 300, "N": 520, "K": 72, "layout": "NN", "dtype": BFLOAT16, "pad": 8}, "tma"),
    ({"M": 300, "N": 521, "K": 72, "layout": "TN", "dtype": "float16"}, "row stride"),  # ldc = 521: not 16-byte
    ({"M": 257, "N": 512, "K": 200, "layout": "TN", "dtype": BFLOAT16, "alpha": -2.0, "beta": 0.5}, "beta"),
    ({"M": 129, "N": 131, "K": 67, "layout": "TN", "dtype": BFLOAT16, "pad": 5}, "multiple of 8"),  # ldc = 136
])
@pytest.mark.parametrize("key", ["10_tma_store", "11_pingpong", "12_stream_k_cluster"])
def test_the_tma_store_rungs_store_through_tma_where_they_can_and_from_registers_elsewhere(case, store, key):
    """Rungs 10-12's two epilogues, each on the shapes that pick it: the launch notes name the path, and the
    float64 check (poisoned output, guard zones) passes on both."""
    import cupy as cp

    from lab.measure.verify import check_case

    rung = TC.rung(key)
    problem = TC.make_problem(seed=7, **case)
    notes = TC.launch_notes(rung, problem, cp.empty(problem.out_shape, problem.dtype))
    assert store in notes["store"], notes
    result = check_case(TC, rung, case, seed=34)
    assert result.passed, result.line()


# Ping-pong's turns: a cluster with one tile (the second consumer never runs), an odd count of tiles per cluster (the
# first consumer takes the last), k-tiles fewer than the stages and not a multiple of them (each consumer skips the
# other's ring positions, so its parity waits lean on the turn order), K = 1.
PINGPONG_CASES = [{"M": 64, "N": 256, "K": 64 * 5, "layout": "TN", "dtype": "float16"},
                  {"M": 128 * 67 + 1, "N": 256, "K": 64 * 3 + 1, "layout": "TN", "dtype": BFLOAT16},
                  {"M": 4096 + 65, "N": 4096 - 1, "K": 64 * 7 - 3, "layout": "NN", "dtype": "float16"},
                  {"M": 1000, "N": 1000, "K": 1, "layout": "TN", "dtype": "float16"},
                  {"M": 130, "N": 520, "K": 64 * 2, "layout": "NN", "dtype": BFLOAT16, "alpha": -0.5}]


@HOPPER
def test_pingpong_is_correct_however_the_tiles_fall_to_its_two_consumers():
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(TC, TC.rung("11_pingpong"), PINGPONG_CASES, seed=35) if not r.passed]
    assert not failures, "\n".join(failures)


@HOPPER
def test_pingpong_gives_the_same_bits_every_run():
    """The two consumers' turns and the ring they share, run again and again on many tiles per cluster: every run's
    output bit for bit the same (a turn taken early would read a stage before it landed, and differ)."""
    import cupy as cp
    import numpy as np

    problem = TC.make_problem(seed=8, **PINGPONG_CASES[2])
    outs = []
    for _ in range(8):
        out = cp.full(problem.out_shape, np.nan, dtype=problem.dtype)
        TC.launch(TC.rung("11_pingpong"), problem, out)
        outs.append(cp.asnumpy(out).view(np.uint16))
    assert all(np.array_equal(o, outs[0]) for o in outs[1:])


# Rung 10 with each tile the family can choose for a shape (lab.families.gemm_tc_tiles): BN = 192 in the TN layout
# only (B multicast in halves of 64-column boxes in NN), 128 in both.
TILED = TC.rung("10_tma_store")
TILE_BUILDS = [(bn, layout) for bn in (192, 128) for layout in ("TN", "NN") if bn in tiles.candidates(layout)]


def _tile_build(bn: int):
    return dataclasses.replace(TILED, spec=TILED.spec.with_knobs(**tiles.TILE_KNOBS[bn]))


@HOPPER
@pytest.mark.parametrize("bn,layout", TILE_BUILDS)
def test_rung_10_is_correct_with_every_tile_the_family_can_choose(bn, layout):
    """The family's check cases of that layout (both types) and the cluster cases: every element within its bound."""
    from lab.measure.verify import bound_margins

    cases = [c for c in TC.check_cases() + CLUSTER_CASES if c["layout"] == layout]
    row = bound_margins(TC, _tile_build(bn), seeds=SEEDS[:1], cases=cases)
    assert not row["failed"], "\n".join(row["failed"])
    assert 0 < row["worst_ratio"] <= 1, row


# Shapes whose last wave of 128 x 256 pair tiles leaves most clusters idle (K cut short: only M and N decide the
# tile), the BN the model predicts for each (66 clusters), and one it keeps at 256.
SHAPED_CASES = [({"M": 3072, "N": 3072, "K": 136, "layout": "TN", "dtype": "float16"}, 192),
                ({"M": 3072, "N": 3072 - 1, "K": 72, "layout": "NN", "dtype": BFLOAT16}, 128),
                ({"M": 3200, "N": 4096, "K": 200, "layout": "TN", "dtype": BFLOAT16}, 128),
                ({"M": 2176 + 1, "N": 2176, "K": 65, "layout": "TN", "dtype": "float16"}, 192),
                ({"M": 4096, "N": 4096, "K": 64, "layout": "TN", "dtype": "float16"}, 256)]


@HOPPER
@pytest.mark.parametrize("case,bn", SHAPED_CASES)
def test_the_family_builds_rung_10_with_the_tile_the_wave_model_picks_and_it_is_correct(case, bn):
    from lab.families.gemm_tc import cluster_slots
    from lab.measure.verify import check_case

    problem = TC.make_problem(seed=9, **case)
    slots = cluster_slots(TC.variant(TILED, problem))
    built = TC.shaped(TILED, problem)
    assert dict(built.spec.knobs)["BN"] == tiles.choose(case["M"], case["N"], case["layout"], slots)
    if slots == 66:  # the H200's: the predictions in gemm_tc_tiles's docstring
        assert dict(built.spec.knobs)["BN"] == bn
    result = check_case(TC, built, case, seed=36)
    assert result.passed, result.line()
