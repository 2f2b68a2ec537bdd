"""GPU: the decode rung against a float64 reference computed from the fp16/bf16-rounded inputs, on the family's check
cases (every M bucket's edges up to two 128-token launches, prime N and K, K = 1 to 4099, N = 1 to 4097, padded
leading dimensions with NaN in the padding, misaligned X, W and Y; both types), with guard zones and padding
intact, every output written, and bit-identical repeats; then under every knob setting the launcher can pick,
through both load paths, and with the bound's statistical part halved (its margin). The cuBLAS baseline and the
device-copy ceiling are checked for what they compute and move. No timing is asserted: performance lives in the
records. The family is built directly: it joins lab.families.families() after these tests pass on the H200.

Run: .venv/bin/python -m pytest -q tests/test_gpu_decode.py
"""

import pytest

from lab.families.decode import BFLOAT16, SPLIT_K_RUNG, DecodeFamily

pytestmark = pytest.mark.gpu

DEC = DecodeFamily()
SEEDS = (31, 32)


def _skip_unless_runnable(rung) -> None:
    """Rung 02 (gemm_tc's split-K GEMM) is sm_90a code: elsewhere it skips, saying why."""
    from lab.core import device
    from lab.core.build import arch_refusal

    why = arch_refusal(rung.spec, device.current().arch)
    if why:
        pytest.skip(f"{rung.key} {why}")


def _failures(results) -> list[str]:
    return [r.line() for r in results if not r.passed]


@pytest.mark.parametrize("rung", DEC.rungs, ids=lambda r: r.key)
def test_decode_rung_correct_on_every_case(rung):
    """Every element within its bound (lab.measure.bounds.tensor_core_matmul_bound) on two seeds and three input
    distributions, guard zones and padding untouched, outputs identical across repeated runs."""
    from lab.measure.verify import bound_margins

    _skip_unless_runnable(rung)
    row = bound_margins(DEC, rung, seeds=SEEDS)
    assert not row["failed"], "\n".join(row["failed"])
    assert 0 < row["worst_ratio"] <= 1, row


@pytest.mark.parametrize("rung", DEC.rungs, ids=lambda r: r.key)
def test_the_sums_stay_within_half_the_statistical_part_of_the_bound(rung):
    """The same checks with the accumulation part of the bound halved: the fp32 sums (split across warps, two
    accumulator sets) keep a 2x margin to the estimate they are judged by, so the check is not flaky."""
    from lab.measure.verify import bound_margins

    _skip_unless_runnable(rung)
    row = bound_margins(DecodeFamily(accumulation_scale=0.5), rung, seeds=SEEDS)
    assert not row["failed"], "\n".join(row["failed"])


# Shapes that cross every edge the knobs move: partial k-blocks (K = 131, 4099, 77, ...), straddling chunks under
# 16-byte loads (K = 100 and 250 in rows padded to multiples of 8), element loads, offsets, partial row tiles, three
# M buckets; the types alternate (BF16 changes only the mma and the conversions, which the check cases cover in
# both types). No M = 128 here: RT = 4 at MT = 16
# would not fit its partial tiles in static shared memory (the kernel's static_assert), and no launcher picks it.
KNOB_CASES = [{"M": 1, "N": 97, "K": 131}, {"M": 16, "N": 61, "K": 4099}, {"M": 9, "N": 50, "K": 100, "pad": 4},
              {"M": 3, "N": 29, "K": 77, "x_offset": 2, "w_offset": 5}, {"M": 31, "N": 70, "K": 250, "pad": 6},
              {"M": 5, "N": 33, "K": 1024}]
KNOB_CASES = [c | {"dtype": ("float16", BFLOAT16)[i % 2]} for i, c in enumerate(KNOB_CASES)]
# WARPS = 8 is what the launcher picks for these small N already; RT = 4 with one chunk keeps to ~180 registers.
FORCED = [{"WARPS": 4}, {"WARPS": 1}, {"CHUNKS": 1}, {"CHUNKS": 3}, {"RT": 1}, {"RT": 4, "WARPS": 2, "CHUNKS": 1},
          {"L2_PREFETCH": 0}]


@pytest.mark.parametrize("force", FORCED, ids=lambda f: "-".join(f"{k}{v}" for k, v in f.items()))
def test_every_knob_setting_is_correct(force):
    """The launcher picks WARPS by the grid's size and RT, CHUNKS by the bucket; a tuning study may force others.
    Each must give the same checked results (the split of K, the reduction over warps, the k-block size and the
    partial k-block's owner all move with them)."""
    from lab.measure.verify import check_rung

    fam = DecodeFamily(force=force)
    assert all(step.knobs[k] == v for k, v in force.items()
               for step in fam.launch_plan(fam.rungs[0], 16, 4096, 4096, "float16", 8))
    failures = _failures(check_rung(fam, fam.rungs[0], KNOB_CASES, seed=33))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case, notes", [
    ({"M": 8, "N": 64, "K": 128}, {"path": "16-byte loads", "launches": 1, "warps": 8, "mt": 1}),
    ({"M": 9, "N": 50, "K": 100, "pad": 4}, {"path": "16-byte loads", "mt": 2, "rt": 2}),  # straddling chunk
    ({"M": 7, "N": 50, "K": 100, "pad": 3}, {"path": "element loads"}),  # odd leading dimensions
    ({"M": 8, "N": 64, "K": 128, "w_offset": 1}, {"path": "element loads"}),
    ({"M": 16, "N": 48, "K": 256, "y_offset": 1}, {"path": "16-byte loads"}),  # Y needs no alignment
    ({"M": 200, "N": 97, "K": 131}, {"launches": 2, "mt": 16}),
    ({"M": 2, "N": 20000, "K": 72}, {"warps": 4, "blocks": 1250}),  # more than a wave of 8-warp blocks
    ({"M": 16, "N": 4097, "K": 40}, {"warps": 8, "blocks": 129, "rt": 2}),  # a wave of them (>= 129 SMs)
], ids=["aligned", "straddle", "odd-ld", "w-misaligned", "y-misaligned", "two-launches", "many-blocks",
        "one-wave"])
def test_the_launcher_takes_the_path_its_notes_name_and_it_is_correct(case, notes):
    import cupy as cp

    from lab.measure.verify import check_rung

    for dtype in ("float16", BFLOAT16):
        problem = DEC.make_problem(seed=4, dtype=dtype, **case)
        out = cp.empty(problem.out_shape, problem.dtype)
        got = DEC.launch_notes(DEC.rungs[0], problem, out)
        assert {k: got[k] for k in notes} == notes, got
    failures = _failures(check_rung(DEC, DEC.rungs[0], [case | {"dtype": d} for d in ("float16", BFLOAT16)], seed=34))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", [
    {"M": 16, "N": 192, "K": 4096, "dtype": "float16"},  # cupy.matmul
    {"M": 1, "N": 192, "K": 4096, "dtype": BFLOAT16},  # cublasGemmEx
    {"M": 9, "N": 50, "K": 100, "pad": 4, "dtype": "float16"},  # cublasGemmEx with leading dimensions
    {"M": 130, "N": 40, "K": 72, "pad": 3, "dtype": BFLOAT16},
], ids=["fp16-matmul", "bf16-gemmex", "fp16-padded", "bf16-padded-M130"])
def test_the_cublas_baseline_computes_the_same_product(case):
    """The baseline accumulates in fp32 like the rung, in the same layout (W as the TN operand), and leaves the
    padding alone: the ratio against it compares like with like."""
    import cupy as cp

    from lab.measure.verify import compare_output

    problem = DEC.make_problem(seed=3, **case)
    out = cp.full(problem.out_shape, 0x7FC1, dtype=cp.uint16).view(problem.dtype)
    DEC.launch_cublas(problem, out)
    cp.cuda.get_current_stream().synchronize()
    assert compare_output(DEC, problem, out).passed, compare_output(DEC, problem, out).describe()
    if problem.params.get("pad"):
        assert bool((out.view(cp.uint16)[:, problem.params["N"]:] == 0x7FC1).all()), "cuBLAS wrote the padding"


def test_the_ceiling_copies_half_the_minimum_bytes_out_of_w():
    """bytes_moved / 2 bytes read from W's buffer and written to a scratch buffer: the same DRAM traffic as the
    problem's minimum. A W smaller than that (tiny N, many tokens) is replaced by a scratch source of that size."""
    import cupy as cp

    problem = DEC.make_problem(seed=5, M=16, N=1024, K=1024, sets=2)
    half = problem.bytes_moved // 2
    assert half == 1024 * 1024 + 16 * 1024 + 16 * 1024
    for s in range(2):
        DEC.launch_ceiling(problem, None, set_index=s)
        cp.cuda.get_current_stream().synchronize()
        dst, spare = problem._copy_buffers
        assert spare is None and dst.nbytes == half
        w_bytes = problem.inputs["W"][s].reshape(-1).view(cp.uint8)[:half]
        assert bool((dst == w_bytes).all()), f"the copy did not move W set {s}'s first {half} bytes"
    tiny = DEC.make_problem(seed=6, M=128, N=1, K=64)
    DEC.launch_ceiling(tiny, None)
    cp.cuda.get_current_stream().synchronize()
    dst, spare = tiny._copy_buffers
    assert spare is not None and dst.nbytes == spare.nbytes == tiny.bytes_moved // 2 > tiny.inputs["W"][0].nbytes


def test_decode_bench_records_gb_s_against_the_copy_with_the_path_taken():
    """A quick headline run: the copy, cuBLAS and every rung measured on the same problem, in GB/s of the minimum
    bytes, each rung's record naming its path and knobs. Values are only checked to be measurements, not fast."""
    from lab.measure import bench

    rs = bench.run(DEC, bench.BenchPlan(kinds=("headline",), quick=True, min_time_ms=2))
    recs = [r for r in rs.records if r.kind == "headline"]
    from lab.core import device
    from lab.core.ladder import runnable_rungs

    runnable = runnable_rungs(DEC.rungs, device.current().arch)[0]
    assert {r.rung for r in recs} == {"cupy_device_copy", "cublas"} | {r.key for r in runnable}
    for r in recs:
        assert r.metric == "GB/s" and r.ceiling == "cupy_device_copy" and 0 < r.value < 20000, r
        assert r.bytes_moved == DEC.min_dram_bytes(r.params) and r.params["M"] == 1 and r.params["N"] == 4096
    gemv = [r for r in recs if r.rung == DEC.rungs[0].key]
    assert all(r.extra.get("path") == "16-byte loads" and r.extra.get("mt") == 1 for r in gemv), gemv
    split = [r for r in recs if r.rung == SPLIT_K_RUNG]
    assert all(r.extra.get("path") == "tma" and r.extra.get("splits", 0) >= 1 for r in split), split
