"""GPU: every attention rung against the float64 reference on every check case (both types, causal and not, GQA,
decode-like and S_q != S_k, rows with no key, large logits; NaN-poisoned outputs and guard zones, repeat runs for
races, through lab.measure.verify.check_rung); the same at half the bound's model part; large logits stay finite;
the flash rungs' rescales exactly 1 while the max stays (equal scores over 256 tiles), their refusal of
misaligned operands; the PyTorch baseline where PyTorch is installed; a timing smoke test."""

import numpy as np
import pytest

from lab.families import get_family
from lab.families.attention import AttentionFamily

pytestmark = pytest.mark.gpu

ATTENTION = get_family("attention")
SMALL_CASES = [c for c in ATTENTION.check_cases() if max(c["S_q"], c["S_k"]) <= 333]


@pytest.mark.parametrize("rung", ATTENTION.rungs, ids=lambda r: r.key)
def test_attention_rung_correct_on_every_case(rung):
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(ATTENTION, rung, seed=31) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung", ATTENTION.rungs, ids=lambda r: r.key)
def test_attention_rung_within_half_the_bound(rung):
    """The bound's model part (E) has a 2x margin on the GPU too (the output's rounding in full)."""
    from lab.measure.verify import check_rung

    half = AttentionFamily(statistical_scale=0.5)
    failures = [r.line() for r in check_rung(half, half.rung(rung.key), SMALL_CASES, seed=32) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rung", ATTENTION.rungs, ids=lambda r: r.key)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_large_logits_stay_finite_and_rows_without_keys_are_zero(rung, dtype):
    import cupy as cp

    from lab.measure.check import GuardedBuffer, compare

    problem = ATTENTION.make_problem(seed=33, dist="large_logits", B=1, H=4, H_kv=2, S_q=300, S_k=200, D=128,
                                     dtype=dtype, causal=1)
    buf = GuardedBuffer(problem.out_shape, problem.dtype)
    buf.poison()
    ATTENTION.launch(rung, problem, buf.out)
    cp.cuda.get_current_stream().synchronize()
    assert not buf.problems()
    values = cp.asnumpy(ATTENTION.output_values(buf.out)).astype(np.float64)
    assert np.isfinite(values).all()
    assert (values[:, :, :100] == 0).all() and not np.signbit(values[:, :, :100]).any()  # rows 0..99 see no key
    ref = ATTENTION.reference(problem)
    cmp = compare(ATTENTION.output_values(buf.out), ref, ATTENTION.error_bound(problem, ref))
    assert cmp.passed, cmp.describe()


FLASH_RUNGS = [r for r in ATTENTION.rungs if r.number >= 2]


@pytest.mark.parametrize("knobs", [{"PEELED": 0}, {"LONGEST_FIRST": 1}, {"SOFTMAX_OVERLAP": 0}, {"SOFTMAX_OVERLAP": 2},
                                   {"PERSISTENT": 0}],
                         ids=["unpeeled", "longest_first", "no_softmax_overlap", "overlap_first_build",
                              "one_block_a_query_block"])
def test_rung_05_other_builds_are_correct_on_every_case(knobs):
    """The builds the study times beside the default: PEELED = 0 (the first build, its products under conditions),
    LONGEST_FIRST = 1 (causal query blocks in reverse launch order), SOFTMAX_OVERLAP = 0 (the exponentials after
    the P V products, as before the knob) and 2 (its first build), PERSISTENT = 0 where the default is persistent
    (D = 128, causal D = 64): every check case, as the rungs themselves."""
    import dataclasses

    from lab.measure.verify import check_rung

    base = ATTENTION.rung("05")
    build = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs))
    failures = [r.line() for r in check_rung(ATTENTION, build, seed=38) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("blocks, heads", [(7, None), (5, 1), (3, 3)],
                         ids=["7_blocks", "5_blocks_1_head_sections", "3_blocks_3_head_sections"])
def test_rung_05_persistent_is_correct_on_every_case(monkeypatch, blocks, heads):
    """PERSISTENT = 1 on every check case with a few blocks, each looping over many items (the study times the grid
    the launcher plans, one block an SM, after its own check): the K/V stages and Q's barrier run on from item to
    item; sections of one head, of three (the last one short) and as L2 sizes them. Then a causal case whose query
    blocks see 2, 2, 1 and 0 key tiles per head (S_q = 400 on S_k = 200): items with no key tile between others,
    and the ring's stage parity odd at an item's start."""
    import dataclasses

    from lab.families import attention as attention_module
    from lab.measure.verify import check_rung

    monkeypatch.setattr(attention_module, "_sm_count", lambda: blocks)
    if heads is not None:
        monkeypatch.setattr(attention_module, "section_heads", lambda params, l2_bytes: heads)
    base = ATTENTION.rung("05")
    build = dataclasses.replace(base, spec=base.spec.with_knobs(PERSISTENT=1))
    failures = [r.line() for r in check_rung(ATTENTION, build, seed=39 + blocks) if not r.passed]
    no_key = {"B": 1, "H": 2, "S_q": 400, "S_k": 200, "D": 128, "dtype": "bfloat16", "causal": 1}
    failures += [r.line() for r in check_rung(ATTENTION, build, [no_key], seed=40 + blocks) if not r.passed]
    assert not failures, "\n".join(failures)
    assert int(attention_module.work_counter()[0]) == 0  # each launch's last fetch left the counter for the next


def test_rung_05_persistent_repeats_bit_for_bit_with_its_counter(monkeypatch):
    """Which block takes an item depends on timing (the counter), but an item's result does not: ten launches of a
    causal GQA problem with a few blocks give the same bits."""
    import dataclasses

    import cupy as cp

    from lab.families import attention as attention_module

    monkeypatch.setattr(attention_module, "_sm_count", lambda: 5)
    problem = ATTENTION.make_problem(seed=40, B=2, H=8, H_kv=2, S_q=700, S_k=900, D=128, causal=1)
    base = ATTENTION.rung("05")
    persistent = dataclasses.replace(base, spec=base.spec.with_knobs(PERSISTENT=1))
    out = cp.empty(problem.out_shape, problem.dtype)
    ATTENTION.launch(persistent, problem, out)
    expected = out.copy()
    for _ in range(10):
        out.fill(0)
        ATTENTION.launch(persistent, problem, out)
        assert cp.array_equal(out.view(cp.uint16), expected.view(cp.uint16))
    assert int(attention_module.work_counter()[0]) == 0


@pytest.mark.parametrize("rung", FLASH_RUNGS, ids=lambda r: r.key)
def test_flash_rungs_weigh_equal_scores_equally_over_256_tiles(rung):
    """Every query row scores every one of S_k = 16384 keys the same (Q = K = 24 everywhere, D = 64: raw score
    36864, exact in fp32; m c = 6647.94 rounds by 0.375 of its ulp), V is +1 on the first half of the keys and -1
    on the second: O is exactly 0. A rescale that is not exactly 1 when the max stays (2^(m c - RN(m c)), the first
    draft's) tilts the first tiles' weights against the last ones' by one rounding of m c per tile: here ~1e-2."""
    import cupy as cp

    problem = ATTENTION.make_problem(seed=37, B=1, H=1, S_q=64, S_k=16384, D=64, dtype="float16")
    problem.inputs["Q"] = [cp.full((1, 1, 64, 64), 24, dtype=cp.float16)]
    problem.inputs["K"] = [cp.full((1, 1, 16384, 64), 24, dtype=cp.float16)]
    v = cp.ones((1, 1, 16384, 64), dtype=cp.float16)
    v[:, :, 8192:] = -1
    problem.inputs["V"] = [v]
    out = cp.empty(problem.out_shape, problem.dtype)
    ATTENTION.launch(rung, problem, out)
    got = cp.asnumpy(out).astype(np.float64)
    assert np.abs(got).max() < 1e-3, np.abs(got).max()


@pytest.mark.parametrize("rung", FLASH_RUNGS, ids=lambda r: r.key)
def test_flash_rungs_refuse_a_misaligned_output_and_rung_01_takes_it(rung):
    import cupy as cp

    from lab.core.errors import LabError
    from lab.measure.check import compare

    problem = ATTENTION.make_problem(seed=34, B=1, H=2, S_q=17, S_k=33, D=64)
    raw = cp.empty(int(np.prod(problem.out_shape)) + 8, dtype=problem.dtype)
    out = raw[1:1 + int(np.prod(problem.out_shape))].reshape(problem.out_shape)  # 2 bytes past a boundary
    with pytest.raises(LabError, match="16-byte"):
        ATTENTION.launch(rung, problem, out)
    ATTENTION.launch(ATTENTION.rung("01"), problem, out)
    ref = ATTENTION.reference(problem)
    assert compare(out, ref, ATTENTION.error_bound(problem, ref)).passed


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

    for case in [c for c in SMALL_CASES if c["S_q"] <= c["S_k"]][::5]:
        problem = ATTENTION.make_problem(seed=35, **case)
        out = cp.empty(problem.out_shape, problem.dtype)
        ATTENTION.launch_ceiling(problem, out)
        ref = ATTENTION.reference(problem)
        bound = 4 * ATTENTION.error_bound(problem, ref)  # another library's rounding: a looser check of the same values
        cmp = compare(ATTENTION.output_values(out), ref, bound)
        assert cmp.passed, (case, cmp.describe())


def test_rung_02_is_faster_than_rung_01():
    """A smoke test of the timing path, not a measurement for the record."""
    import cupy as cp

    from lab.measure import timing

    problem = ATTENTION.make_problem(seed=36, B=1, H=8, S_q=1024, S_k=1024, D=128)
    out = cp.empty(problem.out_shape, problem.dtype)
    times = {}
    for key in ("01", "02"):
        rung = ATTENTION.rung(key)
        ATTENTION.launch(rung, problem, out)  # compile and warm up outside the timing
        times[key] = timing.measure(lambda i, rung=rung: ATTENTION.launch(rung, problem, out), l2="warm",
                                    min_time_ms=20).median_ms
    assert times["02"] < times["01"], times
