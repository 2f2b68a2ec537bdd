"""GPU: both decode-attention rungs against the float64 reference on every check case they serve (contiguous and paged
caches, per-sequence lengths, GQA packings of 1 to 32 rows, forced splits that end inside a tile, causal rows with no
key, large logits; NaN-poisoned outputs, guard zones and repeat runs through lab.measure.verify.check_rung); the same
at half the bound's model part; the split combine's bits the same whichever split finishes last (many launches);
a paged cache gives the bits of the contiguous one; the PyTorch baseline where PyTorch is installed."""

import numpy as np
import pytest

from lab.families import get_family
from lab.families.attention_decode import AttentionDecodeFamily

pytestmark = pytest.mark.gpu

FAMILY = get_family("attention_decode")


@pytest.mark.parametrize("rung", FAMILY.rungs, ids=lambda r: r.key)
def test_decode_rung_correct_on_every_case_it_serves(rung):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(FAMILY, rung, FAMILY.cases_for(rung), seed=41) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung", FAMILY.rungs, ids=lambda r: r.key)
def test_decode_rung_within_half_the_bound(rung):
    from lab.measure.verify import check_rung

    half = AttentionDecodeFamily(statistical_scale=0.5)
    cases = [c for c in half.cases_for(half.rung(rung.key)) if c["S_k"] <= 1000][::3]
    failures = [r.line() for r in check_rung(half, half.rung(rung.key), cases, seed=42) if not r.passed]
    assert not failures, "\n".join(failures)


def test_split_combine_is_the_same_bits_on_every_launch():
    """64 splits of 64 keys: the last block to arrive differs from launch to launch; the result may not."""
    import cupy as cp

    problem = FAMILY.make_problem(seed=43, B=1, H=32, H_kv=8, S_q=1, S_k=4096, D=128, split_keys=64)
    rung = FAMILY.rung("02")
    out = cp.empty(problem.out_shape, problem.dtype)
    FAMILY.launch(rung, problem, out)
    first = out.copy()
    for _ in range(50):
        out.fill(0)
        FAMILY.launch(rung, problem, out)
        assert cp.array_equal(out.view(cp.uint16), first.view(cp.uint16))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_paged_cache_gives_the_bits_of_the_contiguous_one(dtype):
    import cupy as cp

    common = {"B": 3, "H": 16, "H_kv": 4, "S_q": 2, "S_k": 3000, "D": 128, "dtype": dtype, "causal": 1,
              "split_keys": 512}
    rung = FAMILY.rung("02")
    outs = []
    for page_size in (0, 16, 256):
        problem = FAMILY.make_problem(seed=44, page_size=page_size, **common)
        out = cp.empty(problem.out_shape, problem.dtype)
        FAMILY.launch(rung, problem, out)
        outs.append(out.view(cp.uint16))
    assert cp.array_equal(outs[0], outs[1]) and cp.array_equal(outs[0], outs[2])


def _torch_ready() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _torch_ready(), reason="PyTorch with CUDA is not installed")
def test_the_pytorch_baseline_computes_the_same_attention():
    import cupy as cp

    from lab.measure.check import compare

    cases = [c for c in FAMILY.check_cases() if not c["causal"] or c["S_q"] == 1][::7]
    for case in cases:
        problem = FAMILY.make_problem(seed=45, **case)
        out = cp.empty(problem.out_shape, problem.dtype)
        FAMILY.launch_ceiling(problem, out)
        ref = FAMILY.reference(problem)
        cmp = compare(FAMILY.output_values(out), ref, 4 * FAMILY.error_bound(problem, ref))
        assert cmp.passed, (case, cmp.describe())


def test_rung_02_is_faster_than_rung_01_on_one_sequence():
    """A smoke test of the timing path, not a measurement for the record."""
    import cupy as cp

    from lab.measure import timing

    problem = FAMILY.make_problem(seed=46, B=1, H=32, H_kv=8, S_q=1, S_k=16384, D=128)
    out = cp.empty(problem.out_shape, problem.dtype)
    times = {}
    for key in ("01", "02"):
        rung = FAMILY.rung(key)
        FAMILY.launch(rung, problem, out)
        times[key] = timing.measure(lambda i, rung=rung: FAMILY.launch(rung, problem, out), l2="cold",
                                    min_time_ms=20).median_ms
    assert times["02"] < times["01"], times
    assert np.isfinite(list(times.values())).all()
