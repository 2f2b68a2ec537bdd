"""GPU: every split-K rung against the float64 reference on every check case (gemm_tc's shapes with the
launcher's own S, and forced S that do not divide K, exceed the k-tiles, or are 1), guard zones intact; the two
deterministic reductions give the same bits run after run and the same bits as each other; the atomic one stays
within the bound and leaves its workspace clean for the next launch; the cluster one gives the same bits run after run
(its own), with one cluster a tile and with several, and leaves its counters at zero."""

import numpy as np
import pytest

from lab.families.gemm_split_k import MODE_NAMES, PLAN_GROUPS, SPLIT_MODES, GemmSplitKFamily, run_to_run_bits

pytestmark = pytest.mark.gpu

FAM = GemmSplitKFamily()


@pytest.fixture(autouse=True)
def hopper():
    from lab.core import device

    if device.current().arch != 90:
        pytest.skip("the split-K rungs need sm_90a (an H100 or H200)")


@pytest.mark.parametrize("rung", FAM.rungs, ids=lambda r: r.key)
def test_split_k_rung_correct_on_every_case(rung):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(FAM, rung, seed=31) if not r.passed]
    assert not failures, "\n".join(failures)


def _run(key: str, problem) -> np.ndarray:
    import cupy as cp

    out = cp.full(problem.out_shape, np.nan, dtype=problem.dtype)
    FAM.launch(FAM.rung(key), problem, out)
    return cp.asnumpy(out).view(np.uint16)


@pytest.mark.parametrize("shape", [{"M": 256, "N": 256, "K": 65536}, {"M": 129, "N": 67, "K": 4099, "splits": 13}],
                         ids=["256x256x65536", "odd"])
def test_deterministic_reductions_repeat_bit_for_bit_and_agree(shape):
    problem = FAM.make_problem(seed=5, **shape)
    first = _run("08_split_k", problem)
    for _ in range(3):
        assert np.array_equal(_run("08_split_k", problem), first)
        assert np.array_equal(_run("08_split_k_in_kernel", problem), first)


@pytest.mark.parametrize("shape", [{"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072},
                                   {"M": 129, "N": 67, "K": 4099, "splits": 13}, {"M": 300, "N": 260, "K": 2048,
                                                                                  "splits": 4, "beta": -1.5}],
                         ids=["256x256x65536", "128x128x131072", "odd", "one-cluster-a-tile"])
def test_cluster_reduction_repeats_bit_for_bit_and_stays_correct(shape):
    """Several clusters a tile (their slices summed by the last to arrive, counters reset for the next launch) and
    one cluster a tile (C stored from DSMEM): 10 launches, the same bits each time; then the check on fresh inputs."""
    from lab.measure.verify import check_case

    problem = FAM.make_problem(seed=8, **shape)
    first = _run("08_split_k_cluster", problem)
    for _ in range(9):
        assert np.array_equal(_run("08_split_k_cluster", problem), first)
    result = check_case(FAM, FAM.rung("08_split_k_cluster"), shape, seed=9)
    assert result.passed, result.line()


def test_the_cluster_splits_fit_at_once():
    """The driver says how many clusters of each size fit (cluster_fit), and the launcher's plan at the two headline
    shapes leaves no cluster for a second wave; the build's cluster size is what the driver reports compiled in."""
    import dataclasses

    from lab.core.build import get_kernel
    from lab.core.cluster import required_cluster_width
    from lab.families.gemm_split_k import cluster_fit

    for shape, tiles in (({"M": 256, "N": 256, "K": 65536}, 4), ({"M": 128, "N": 128, "K": 131072}, 1)):
        problem = FAM.make_problem(**shape)
        rung = FAM.rung("08_split_k_cluster")
        built = FAM.variant(rung, problem)
        width = dict(built.spec.knobs)["SPLIT_CLUSTER"]
        fits = {w: cluster_fit(dataclasses.replace(built, spec=built.spec.with_knobs(SPLIT_CLUSTER=w)))
                for w in (1, 2, 4, 8)}
        assert all(fits.values()) and fits[8] <= fits[4] <= fits[2] <= fits[1], fits
        assert tiles * FAM.splits_for(rung, problem) // width <= fits[width], (width, fits)
        assert required_cluster_width(get_kernel(built.spec)) == width


def test_atomic_reduction_is_reported_and_correct_after_many_launches():
    """20 launches on one workspace: each within the bound (so the accumulator and counters were left at zero);
    the record says how many bits moved, which a lesson shows rather than a test asserts."""
    from lab.measure.verify import check_case

    problem = FAM.make_problem(seed=6, M=256, N=256, K=65536)
    report = run_to_run_bits(FAM, FAM.rung("08_split_k_atomic"), problem, runs=20)
    assert report["runs"] == 20 and len(report["differing_per_run"]) == 19 and report["splits"] == 33
    result = check_case(FAM, FAM.rung("08_split_k_atomic"), {"M": 256, "N": 256, "K": 65536}, seed=7)
    assert result.passed, result.line()


def test_launch_notes_name_the_split_and_the_reduction():
    import cupy as cp

    problem = FAM.make_problem(M=128, N=128, K=131072)
    out = cp.empty(problem.out_shape, problem.dtype)
    for key, mode in SPLIT_MODES.items():
        notes = FAM.launch_notes(FAM.rung(key), problem, out)
        if mode == 3:  # one tile: as many whole clusters as run at once (15 of 8 on an H100), at most PLAN_GROUPS
            width, fit = notes["cluster"], notes["clusters_at_once"]
            assert notes["splits"] == width * min(fit, 132 // width, PLAN_GROUPS), notes
        else:
            assert notes["splits"] == 132, notes
        assert notes["tile"] == "128x128" and notes["path"] == "tma", notes
        assert notes["reduction"] == MODE_NAMES[mode]
    assert FAM.launch_notes(FAM.rung("06_persistent"), problem, out)["tile"] == "128x128"
