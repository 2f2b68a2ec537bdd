"""GPU: every RMSNorm and LayerNorm rung against its float64 reference on every check case (both types, every
kind of row, the tails, the fallbacks past the registers), guard zones intact and repeat runs identical; the
CuPy-composed baselines on the same bounds; and a launch that reports the path it took."""

import numpy as np
import pytest

from lab.families import get_family

pytestmark = pytest.mark.gpu

RMS = get_family("rmsnorm")
LAYER = get_family("layernorm")
RUNGS = [(fam, rung) for fam in (RMS, LAYER) for rung in fam.rungs]


def _skip_unless_the_gpu_runs(rung):
    from lab.core import build, device

    why = build.arch_refusal(rung.spec, device.current().arch)
    if why:
        pytest.skip(f"{rung.key} {why}")


@pytest.mark.parametrize("fam, rung", RUNGS, ids=[f"{f.name}/{r.key}" for f, r in RUNGS])
def test_every_rung_is_correct_on_every_case(fam, rung):
    from lab.measure.verify import check_rung

    _skip_unless_the_gpu_runs(rung)
    failures = [r.line() for r in check_rung(fam, rung, seed=21) if not r.passed]
    assert not failures, "\n".join(failures)


# A subset of the cases for the baselines: every kind of row, both types, the long rows.
BASELINE_CASES = [c for c in RMS.check_cases()
                  if c.get("values") or c["n"] in (1, 33, 1025, 32769) or c.get("eps")]


@pytest.mark.parametrize("fam", [RMS, LAYER], ids=lambda f: f.name)
def test_the_composed_cupy_baseline_is_correct(fam):
    import cupy as cp

    from lab.measure.check import GuardedBuffer
    from lab.measure.verify import compare_output

    composed = fam.baselines()["cupy_composed"]
    failures = []
    for case in BASELINE_CASES:
        problem = fam.make_problem(seed=22, **case)
        buf = GuardedBuffer(problem.out_shape, problem.dtype, offset=problem.out_offset)
        buf.poison()
        composed(problem, buf.out)
        cp.cuda.get_current_stream().synchronize()
        cmp = compare_output(fam, problem, buf.out)
        if buf.problems() or not cmp.passed:
            failures.append(f"{problem.label}: {buf.problems()} {cmp.describe()}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("n, path", [(1024, "warp per row, one read, 16-byte"), (4096, "block per row, one read, 16"),
                                     (40000, "block per row, two reads, 16")])
def test_rung_03_runs_the_path_its_notes_report(n, path):
    import cupy as cp

    from lab.measure.check import GuardedBuffer
    from lab.measure.verify import compare_output

    problem = LAYER.make_problem(seed=23, rows=300, n=n)
    buf = GuardedBuffer(problem.out_shape, problem.dtype)
    buf.poison()
    LAYER.launch(LAYER.rung("03"), problem, buf.out)
    cp.cuda.get_current_stream().synchronize()
    assert LAYER.launch_notes(LAYER.rung("03"), problem, buf.out)["path"].startswith(path)
    assert not buf.problems() and compare_output(LAYER, problem, buf.out).passed


def test_the_ceiling_copies_x_and_records_carry_the_path(tmp_path):
    from lab.measure import bench

    plan = bench.BenchPlan(kinds=("headline",), quick=True, min_time_ms=2)
    rs = bench.run(RMS, plan)
    names = {r.rung for r in rs.records}
    assert {"cupy_device_copy", "cupy_composed", *[r.key for r in RMS.rungs]} <= names
    for r in rs.records:
        assert r.median_ms > 0 and np.isfinite(r.value) and r.ceiling_value > 0
        if r.rung in {k.key for k in RMS.rungs}:
            assert r.extra.get("path"), r


# Rung 04 built with cluster shapes the launcher would not pick: more blocks than packs (empty slices), one warp per
# block, slices past the registers (streamed) and the largest block; on short, odd and long rows.
FORCED_SHAPES = [(8, 32), (8, 64), (2, 1024), (4, 32), (1, 32)]
FORCED_CASES = [{"rows": 5, "n": 40}, {"rows": 3, "n": 1001}, {"rows": 3, "n": 1001, "values": "offset"},
                {"rows": 2, "n": 32768}, {"rows": 2, "n": 65544, "values": "offset"}]


# (family, EXCHANGE, STATS): either exchange for both norms; LayerNorm's statistics in one exchange or in two.
RUNG_04_BUILDS = [(RMS, 1, None), (RMS, 0, None), (LAYER, 1, 1), (LAYER, 0, 1), (LAYER, 1, 2), (LAYER, 0, 2)]


@pytest.mark.parametrize("fam, exchange, stats", RUNG_04_BUILDS,
                         ids=[f"{f.name}-exchange{e}" + (f"-stats{s}" if s else "") for f, e, s in RUNG_04_BUILDS])
def test_rung_04_is_correct_on_any_cluster_shape_with_either_exchange(fam, exchange, stats, monkeypatch):
    import dataclasses

    from lab.families import norms
    from lab.measure.verify import check_case

    rung = fam.rung("04")
    _skip_unless_the_gpu_runs(rung)
    knobs = {"EXCHANGE": exchange} | ({"STATS": stats} if stats else {})
    rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs))
    failures = []
    for cluster, threads in FORCED_SHAPES:
        monkeypatch.setattr(norms, "cluster_shape", lambda *_, c=cluster, t=threads: (c, t))
        for case in FORCED_CASES:
            for dtype in norms.DTYPES:
                result = check_case(fam, rung, case | {"dtype": dtype}, seed=24, repeats=3)
                if not result.passed:
                    failures.append(f"CLUSTER={cluster} THREADS={threads}: {result.line()}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("n, path", [(4096, "block per row, one read, 16"), (32768, "cluster of 4 blocks per row, one"),
                                     (65536, "cluster of 8 blocks per row, one"),
                                     (300000, "cluster of 8 blocks per row, 3 reads")])
def test_rung_04_runs_the_path_its_notes_report(n, path):
    import cupy as cp

    from lab.measure.check import GuardedBuffer
    from lab.measure.verify import compare_output

    rung = LAYER.rung("04")
    _skip_unless_the_gpu_runs(rung)
    problem = LAYER.make_problem(seed=25, rows=40, n=n)
    buf = GuardedBuffer(problem.out_shape, problem.dtype)
    buf.poison()
    LAYER.launch(rung, problem, buf.out)
    cp.cuda.get_current_stream().synchronize()
    assert LAYER.launch_notes(rung, problem, buf.out)["path"].startswith(path)
    assert not buf.problems() and compare_output(LAYER, problem, buf.out).passed
