"""GPU: the packed (varlen) attention kernel against the float64 reference on every check case (empty and single-token
sequences, lengths across the 128-row blocks, more and fewer keys than queries, a sequence with no keys, GQA, causal,
large logits; NaN-poisoned outputs, guard zones and repeat runs through lab.measure.verify.check_rung); the same at
half the bound's model part; each sequence's rows the same bits as the dense rung 05 on that sequence alone; the
padded PyTorch baseline computes the same attention; a timing smoke test."""

import pytest

from lab.families.attention_varlen import AttentionVarlenFamily, cu_seqlens, serving_lengths

pytestmark = pytest.mark.gpu

VARLEN = AttentionVarlenFamily()
RUNG = VARLEN.rungs[0]


def test_varlen_rung_correct_on_every_case():
    from lab.measure.verify import check_rung

    failures = [r.line() for r in check_rung(VARLEN, RUNG, seed=51) if not r.passed]
    assert not failures, "\n".join(failures)


def test_varlen_rung_within_half_the_bound():
    from lab.measure.verify import check_rung

    half = AttentionVarlenFamily(statistical_scale=0.5)
    cases = [c for c in half.check_cases() if max(c["seq_lens"]) <= 333]
    failures = [r.line() for r in check_rung(half, half.rungs[0], cases, seed=52) if not r.passed]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_each_sequence_gets_the_bits_of_the_dense_kernel_on_it_alone(causal, dtype):
    """The packed build does each sequence's arithmetic in the dense build's order (its key tiles start at the
    sequence's first key): the same bits, sequence by sequence, GQA 4:1 and a sequence with more keys than queries."""
    import cupy as cp

    from lab.families import get_family

    dense = get_family("attention")
    lens_q, lens_k = [300, 1, 129, 0, 64], [300, 700, 129, 5, 64]
    problem = VARLEN.make_problem(seed=53, H=8, H_kv=2, seq_lens=lens_q, seq_lens_k=lens_k, D=128, dtype=dtype,
                                  causal=causal)
    out = cp.empty(problem.out_shape, problem.dtype)
    VARLEN.launch(RUNG, problem, out)
    starts_q, starts_k = cu_seqlens(lens_q), cu_seqlens(lens_k)
    for b, (n_q, n_k) in enumerate(zip(lens_q, lens_k, strict=True)):
        if n_q == 0:
            continue
        one = dense.make_problem(seed=0, B=1, H=8, H_kv=2, S_q=n_q, S_k=n_k, D=128, dtype=dtype, causal=causal)
        for name, start, n in (("Q", starts_q[b], n_q), ("K", starts_k[b], n_k), ("V", starts_k[b], n_k)):
            one.inputs[name] = [cp.ascontiguousarray(problem.inputs[name][0][start:start + n].transpose(1, 0, 2)[None])]
        ref = cp.empty(one.out_shape, one.dtype)
        dense.launch(dense.rung("05"), one, ref)
        got = out[starts_q[b]:starts_q[b] + n_q].transpose(1, 0, 2)[None]
        assert cp.array_equal(got.view(cp.uint16), ref.view(cp.uint16)), f"sequence {b}"


def _torch_ready() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _torch_ready(), reason="PyTorch with CUDA is not installed")
def test_the_padded_pytorch_baseline_computes_the_same_attention():
    import cupy as cp

    from lab.measure.check import compare

    for case in VARLEN.check_cases()[::5]:
        problem = VARLEN.make_problem(seed=54, **case)
        out = cp.empty(problem.out_shape, problem.dtype)
        VARLEN.launch_ceiling(problem, out)
        ref = VARLEN.reference(problem)
        cmp = compare(VARLEN.output_values(out), ref, 4 * VARLEN.error_bound(problem, ref))
        assert cmp.passed, (case, cmp.describe())


def test_a_packed_serving_batch_is_faster_than_the_dense_kernel_on_it_padded():
    """A smoke test of the timing path (16 prompts up to 4096, 9% of the padded work real), not a record."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure import timing

    dense = get_family("attention")
    lens = serving_lengths(16, 4096)
    problem = VARLEN.make_problem(seed=55, H=16, H_kv=4, seq_lens=lens, D=128, causal=1)
    out = cp.empty(problem.out_shape, problem.dtype)
    padded = VARLEN.padded(problem)
    one = dense.make_problem(seed=0, B=len(lens), H=16, H_kv=4, S_q=max(lens), S_k=max(lens), D=128, causal=1)
    one.inputs = {name: [padded[name]] for name in ("Q", "K", "V")}
    dense_out = cp.empty(one.out_shape, one.dtype)
    packed_ms = timing.measure(lambda i: VARLEN.launch(RUNG, problem, out), l2="cold", min_time_ms=20).median_ms
    padded_ms = timing.measure(lambda i: dense.launch(dense.rung("05"), one, dense_out), l2="cold",
                               min_time_ms=20).median_ms
    assert packed_ms < padded_ms, (packed_ms, padded_ms)
