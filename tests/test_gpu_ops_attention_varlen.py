"""GPU: lab.ops.attention_varlen against the float64 reference (the varlen family's, sequence by sequence) on packed
batches with empty and single-token sequences, GQA, causal and not, both types; the packed kernel's path on sm_90
and the per-sequence fallback (a head dim with no packed kernel, a forced refusal) with its counted reason, the two
paths the same bits; offsets that do not fit the arrays refused in one sentence before any kernel runs."""

import numpy as np
import pytest

from lab.families.attention_varlen import AttentionVarlenFamily, cu_seqlens

pytestmark = pytest.mark.gpu

FAM = AttentionVarlenFamily()
CASES = [{"H": 4, "H_kv": 2, "seq_lens": [1, 17, 0, 129, 300], "D": 128, "causal": 1, "dtype": "float16"},
         {"H": 2, "seq_lens": [5, 200], "seq_lens_k": [40, 200], "D": 64, "causal": 0, "dtype": "bfloat16"},
         {"H": 2, "H_kv": 1, "seq_lens": [64, 3], "seq_lens_k": [17, 0], "D": 128, "causal": 1, "dtype": "bfloat16"}]


def _call(problem, runtime=None, **extra):
    import lab.ops as ops

    p = problem.params
    q, k, v = (problem.inputs[n][0] for n in ("Q", "K", "V"))
    return ops.attention_varlen(q, k, v, problem.inputs["cu_seqlens_q"][0], problem.inputs["cu_seqlens_k"][0],
                                causal=bool(p["causal"]), input_type="bfloat16" if p["dtype"] == "bfloat16" else None,
                                runtime=runtime, **extra)


def _fresh():
    from lab.ops.dispatch import Runtime

    return Runtime(None, None)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['dtype']}-D{c['D']}-c{c['causal']}")
def test_a_packed_batch_matches_the_reference_on_the_packed_kernel(case):
    from lab.core import device
    from lab.measure.check import compare

    problem = FAM.make_problem(seed=71, **case)
    rt = _fresh()
    out = _call(problem, rt)
    ref = FAM.reference(problem)
    cmp = compare(FAM.output_values(out), ref, FAM.error_bound(problem, ref))
    assert cmp.passed, cmp.describe()
    if device.current().arch == 90:
        assert rt.last_decision.path == "attention_varlen:05_pingpong"


def test_the_fallback_serves_other_head_dims_and_counts_why():
    from lab.measure.check import compare
    from lab.ops import counters

    problem = FAM.make_problem(seed=72, H=2, seq_lens=[33, 0, 7], seq_lens_k=[50, 4, 7], D=80, causal=1)
    rt = _fresh()
    mine = lambda: sum(n for reason, n in counters.FALLBACKS.items()  # noqa: E731 - this call's, not its sequences'
                       if reason.startswith("attention_varlen:") and "D=80" in reason)
    before = mine()
    out = _call(problem, rt)
    ref = FAM.reference(problem)
    cmp = compare(FAM.output_values(out), ref, FAM.error_bound(problem, ref))
    assert cmp.passed, cmp.describe()
    assert rt.last_decision.path == "attention_varlen:per_sequence"
    assert mine() == before + 1


def test_the_packed_path_and_the_per_sequence_path_give_the_same_bits(monkeypatch):
    """The fallback's per-sequence calls take rung 05 on sm_90 (lab.ops.attention's first flash rung): the same
    arithmetic as the packed build, so the same bits."""
    import cupy as cp

    from lab.core import device
    from lab.ops import attn_varlen

    if device.current().arch != 90:
        pytest.skip(f"the packed kernel runs on sm_90 only; this GPU is sm_{device.current().arch}")
    # Every sequence a prefill (more than 16 query rows): lab.ops.attention sends a shorter one to its decode kernel,
    # whose split arithmetic rounds differently.
    problem = FAM.make_problem(seed=73, H=8, H_kv=2, seq_lens=[300, 17, 129, 0], seq_lens_k=[300, 700, 129, 5],
                               D=128, causal=1)
    packed = _call(problem, _fresh()).copy()
    monkeypatch.setattr(attn_varlen, "_refusal", lambda fam, problem, out: "forced for the test")
    rt = _fresh()
    per_sequence = _call(problem, rt)
    assert rt.last_decision.path == "attention_varlen:per_sequence"
    assert cp.array_equal(packed.view(cp.uint16), per_sequence.view(cp.uint16))


def test_offsets_that_do_not_fit_the_arrays_are_one_sentence():
    import cupy as cp

    import lab.ops as ops
    from lab.core.errors import LabError

    problem = FAM.make_problem(seed=74, H=2, seq_lens=[5, 7], D=64)
    q, k, v = (problem.inputs[n][0] for n in ("Q", "K", "V"))
    bad = cp.asarray(cu_seqlens([5, 8]))  # ends past the 12 rows
    with pytest.raises(LabError, match="end at the packed array's 12 rows"):
        ops.attention_varlen(q, k, v, bad, problem.inputs["cu_seqlens_k"][0])
    with pytest.raises(LabError, match="int32"):
        ops.attention_varlen(q, k, v, cp.asarray(cu_seqlens([5, 7]).astype(np.int64)),
                             problem.inputs["cu_seqlens_k"][0])


def test_the_kernel_reads_the_offsets_that_were_checked():
    """A strided view of offsets: the check reads its values (0, 5, 12), the kernel must get those same values, not
    the memory under the view's start (0, 99, 5, 99, 12)."""
    import cupy as cp

    from lab.measure.check import compare

    problem = FAM.make_problem(seed=75, H=2, seq_lens=[5, 7], D=64, causal=1)
    q, k, v = (problem.inputs[n][0] for n in ("Q", "K", "V"))
    strided = cp.asarray(np.array([0, 99, 5, 99, 12], np.int32))[::2]
    import lab.ops as ops

    out = ops.attention_varlen(q, k, v, strided, strided, causal=True, runtime=_fresh())
    ref = FAM.reference(problem)
    cmp = compare(FAM.output_values(out), ref, FAM.error_bound(problem, ref))
    assert cmp.passed, cmp.describe()
