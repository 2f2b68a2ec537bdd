"""GPU: every softmax rung against the float64 reference on every check case (both dtypes, masked and not, the
special rows, each side of the launch paths' capacities, x misaligned against y), guard zones intact; the same
checks at half the bound's statistical part (its margin); rung 05 (sm_90: skipped with the reason on older GPUs) in
cluster shapes its launcher would not pick, with either exchange, and on the paths its notes name; the CuPy baseline;
a timing smoke test."""

import numpy as np
import pytest

from lab.families import get_family
from lab.families.softmax import SoftmaxFamily

pytestmark = pytest.mark.gpu

SOFTMAX = get_family("softmax")
SMALL_CASES = [c for c in SOFTMAX.check_cases() if c["rows"] * c["n"] <= 20_000]  # every path but the longest


def _skip_unless_the_gpu_runs(rung):
    from lab.core import build, device

    why = build.arch_refusal(rung.spec, device.current().arch)
    if why:
        pytest.skip(f"{rung.key} {why}")


@pytest.mark.parametrize("rung", SOFTMAX.rungs, ids=lambda r: r.key)
def test_softmax_rung_correct_on_every_case(rung):
    from lab.measure.verify import check_rung

    _skip_unless_the_gpu_runs(rung)
    failures = [r.line() for r in check_rung(SOFTMAX, rung, seed=21) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung", SOFTMAX.rungs, ids=lambda r: r.key)
def test_softmax_rung_within_half_the_bound(rung):
    """The bound's statistical part has a 2x margin on the GPU too (flush and fp16 rounding terms in full)."""
    from lab.measure.verify import check_rung

    _skip_unless_the_gpu_runs(rung)
    half = SoftmaxFamily(statistical_scale=0.5)
    failures = [r.line() for r in check_rung(half, half.rung(rung.key), SMALL_CASES, seed=22) if not r.passed]
    assert not failures, "\n".join(failures)


def test_every_launch_path_was_taken_by_the_cases():
    """The check cases reach each of rung 04's kernels and rung 03's fallback, and each of rung 05's cluster sizes
    held in registers, its largest read twice, and its scalar path (as the records will name them)."""
    import cupy as cp

    paths, cluster_paths = set(), set()
    for case in SOFTMAX.check_cases():
        problem = SOFTMAX.make_problem(**case)
        out = cp.empty(problem.out_shape, problem.dtype)
        for key in ("03", "04"):
            paths.add((key, SOFTMAX.launch_notes(SOFTMAX.rung(key), problem, out)["kernel"]))
        cluster_paths.add(SOFTMAX.launch_notes(SOFTMAX.rung("05"), problem, out)["path"])
        del problem, out
        cp.get_default_memory_pool().free_all_blocks()
    assert paths == {("03", "softmax_single_pass"), ("03", "softmax_online_two_pass"),
                     ("04", "softmax_specialized_warp"), ("04", "softmax_specialized_block"),
                     ("04", "softmax_specialized_long")}, paths
    assert {"block per row, registers", "cluster of 2 blocks per row, registers",
            "cluster of 4 blocks per row, registers", "cluster of 8 blocks per row, registers",
            "cluster of 8 blocks per row, re-read", "block per row, re-read (x and y differ mod 16)",
            "cluster of 8 blocks per row, re-read (x and y differ mod 16)"} <= cluster_paths, cluster_paths


# Rung 05 built with cluster shapes its launcher would not pick: more blocks than vectors (empty slices, a head and a
# tail on different blocks), one warp per block (long rows read twice), the largest block, one block of one warp; on
# short, odd, masked, special and long rows, x misaligned against y.
FORCED_SHAPES = [(8, 32), (8, 64), (2, 1024), (4, 32), (1, 32)]
FORCED_CASES = [{"rows": 5, "n": 40}, {"rows": 5, "n": 13, "mask": "lengths"}, {"rows": 3, "n": 1001},
                {"rows": 13, "n": 1001, "special": 1}, {"rows": 13, "n": 4099, "mask": "lengths", "special": 1},
                {"rows": 2, "n": 32768}, {"rows": 3, "n": 65544, "mask": "lengths"},
                {"rows": 3, "n": 1003, "x_offset": 1}]


@pytest.mark.parametrize("exchange", [1, 0], ids=["mbarrier", "cluster_barrier"])
def test_rung_05_is_correct_on_any_cluster_shape_with_either_exchange(exchange, monkeypatch):
    import dataclasses

    from lab.families import softmax
    from lab.measure.verify import check_case

    rung = SOFTMAX.rung("05")
    _skip_unless_the_gpu_runs(rung)
    rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(EXCHANGE=exchange))
    failures = []
    for cluster, threads in FORCED_SHAPES:
        monkeypatch.setattr(softmax, "cluster_shape", lambda *_, c=cluster, t=threads: (c, t))
        for case in FORCED_CASES:
            for dtype in softmax.DTYPES:
                result = check_case(SOFTMAX, rung, case | {"dtype": dtype}, seed=24, repeats=3)
                if not result.passed:
                    failures.append(f"CLUSTER={cluster} THREADS={threads}: {result.line()}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype, n, path", [
    ("float32", 4096, "block per row, registers"), ("float16", 32768, "cluster of 2 blocks per row, registers"),
    ("float16", 65536, "cluster of 4 blocks per row, registers"),
    ("float32", 65536, "cluster of 8 blocks per row, registers"),
    ("float32", 300000, "cluster of 8 blocks per row, re-read")])
def test_rung_05_runs_the_path_its_notes_report(dtype, n, path):
    import cupy as cp

    from lab.measure.check import GuardedBuffer
    from lab.measure.verify import compare_output

    rung = SOFTMAX.rung("05")
    _skip_unless_the_gpu_runs(rung)
    problem = SOFTMAX.make_problem(seed=25, rows=40, n=n, dtype=dtype, mask="lengths")
    buf = GuardedBuffer(problem.out_shape, problem.dtype)
    buf.poison()
    SOFTMAX.launch(rung, problem, buf.out)
    cp.cuda.get_current_stream().synchronize()
    assert SOFTMAX.launch_notes(rung, problem, buf.out)["path"] == path
    assert not buf.problems() and compare_output(SOFTMAX, problem, buf.out).passed


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
