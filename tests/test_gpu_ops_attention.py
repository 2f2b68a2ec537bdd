"""GPU: lab.ops.attention against the float64 reference (fresh random inputs, NaN-poisoned outputs inside guard
zones) on odd shapes (S 1, 17, 1000; D 64, 80, 96, 128, 256; GQA; causal, S_q > S_k with rows that see no key; fp16
and bf16), the path each takes (a flash rung for D 64 and 128, rung 01 otherwise and for misaligned views, counted
as a fallback), the counters moving as predicted, a second call replaying the prepared launch, the warm-up
manifest, a CUDA graph of attention calls, and PyTorch SDPA where torch is installed."""

from __future__ import annotations

import numpy as np
import pytest

from lab.core.errors import LabError
from lab.families import get_family
from lab.families.attention import MMA_HEAD_DIMS
from lab.ops import attn, counters
from lab.ops.dispatch import Runtime

pytestmark = pytest.mark.gpu

ATT = get_family("attention")
FLASH = [key for key in attn.FLASH_ORDER if key in {r.key for r in ATT.rungs}]


def problem(seed, B=1, H=2, H_kv=None, S_q=17, S_k=None, D=64, dtype="float16", causal=0):
    return ATT.make_problem(seed, B=B, H=H, H_kv=H_kv, S_q=S_q, S_k=S_k, D=D, dtype=dtype, causal=causal)


def on_sm90() -> bool:
    import cupy as cp

    return cp.cuda.Device().compute_capability == "90"


def qkv(p):
    return tuple(p.inputs[n][0] for n in ("Q", "K", "V"))


def run(p, rt, *, out=None, inputs=None, **kwargs):
    """ops.attention on the problem's inputs (or `inputs`) into a fresh poisoned, guarded output (or `out`)."""
    import cupy as cp

    from lab.measure.check import GuardedBuffer

    buf = None
    if out is None:
        buf = GuardedBuffer(p.out_shape, p.dtype)
        buf.poison()
        out = buf.out
    q, k, v = inputs or qkv(p)
    result = attn.attention(q, k, v, causal=bool(p.params["causal"]), out=out, runtime=rt,
                            input_type="bfloat16" if p.params["dtype"] == "bfloat16" else None, **kwargs)
    cp.cuda.get_current_stream().synchronize()
    assert result is out
    if buf is not None:
        assert not buf.problems()
    return out


def assert_correct(p, out):
    from lab.measure.check import compare

    ref = ATT.reference(p)
    cmp = compare(ATT.output_values(out), ref, ATT.error_bound(p, ref))
    assert cmp.passed, f"{p.label}: {cmp.describe()}"


def fresh_runtime() -> Runtime:
    return Runtime(None, None)


CASES = [  # (B, H, H_kv, S_q, S_k, D, causal)
    (1, 2, 2, 1, 1, 64, 0), (2, 4, 2, 17, 17, 64, 1), (1, 2, 1, 1000, 1000, 128, 1), (1, 8, 2, 1, 1000, 128, 0),
    (2, 4, 4, 17, 17, 80, 0), (1, 4, 2, 1, 333, 96, 1), (1, 2, 2, 1000, 1000, 96, 0), (1, 2, 1, 17, 129, 256, 1),
    (1, 2, 2, 200, 129, 128, 1), (1, 2, 1, 128, 17, 80, 1), (2, 6, 3, 31, 97, 128, 0), (1, 4, 1, 16, 1024, 64, 1),
    (1, 4, 2, 1, 300, 256, 0), (2, 2, 2, 257, 193, 256, 0),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}H{}/{}Sq{}Sk{}D{}c{}".format(*c))
def test_results_within_the_bound_on_the_path_the_head_dim_picks(case, dtype):
    B, H, H_kv, S_q, S_k, D, causal = case
    p = problem(101 + sum(case), B, H, H_kv, S_q, S_k, D, dtype, causal)
    rt = fresh_runtime()
    assert_correct(p, run(p, rt))
    path = rt.last_decision.path
    if D in MMA_HEAD_DIMS and S_q <= attn.DECODE_MAX_S_Q:
        assert path == attn.DECODE_PATH, path  # the split-KV decode kernel (D 64 and 128)
    elif D in MMA_HEAD_DIMS or (D in attn.SPECIALIZED_HEAD_DIMS and on_sm90()):  # D = 256: rung 05, sm_90 only
        assert path in FLASH and not rt.last_decision.source.startswith("fallback")
    else:
        assert path == "01_naive" and rt.last_decision.source.startswith("fallback")


@pytest.mark.parametrize("S", [256, 1024])
def test_a_flash_call_takes_the_fastest_flash_rung_the_family_has(S):
    """The first rung of FLASH_ORDER that serves the call, at a short and a longer key count."""
    p = problem(7, B=2, H=4, H_kv=2, S_q=S, S_k=S, D=128)
    rt = fresh_runtime()
    run(p, rt)
    order = attn.flash_rungs({r.key for r in ATT.rungs})
    first = next(key for key in order if ATT.refusal(ATT.rung(key), p, p.inputs["Q"][0]) is None)
    assert rt.last_decision.path == first


def test_rows_that_see_no_key_are_plus_zero():
    import cupy as cp

    p = problem(8, H=2, H_kv=1, S_q=200, S_k=129, D=128, causal=1)
    out = cp.asnumpy(ATT.output_values(run(p, fresh_runtime()))).astype(np.float64)
    assert (out[:, :, :71] == 0).all() and not np.signbit(out[:, :, :71]).any()


def misaligned(x):
    """A C-contiguous copy of x that starts 2 bytes past a 16-byte boundary."""
    import cupy as cp

    flat = cp.empty(x.size + 8, dtype=x.dtype)
    view = flat[1:1 + x.size].reshape(x.shape)
    view[...] = x
    assert view.flags.c_contiguous and view.data.ptr % 16
    return view


@pytest.mark.parametrize("which", ["q", "k", "v", "out"])
def test_misaligned_views_fall_back_to_rung_01_counted_once_per_shape(which):
    from lab.measure.check import GuardedBuffer

    p = problem(9, B=1, H=4, H_kv=2, S_q=33, S_k=65, D=128, causal=1)
    inputs = [misaligned(x) if name == which else x for name, x in zip("qkv", qkv(p), strict=True)]
    buf = GuardedBuffer(p.out_shape, p.dtype, offset=1 if which == "out" else 0)
    buf.poison()
    counters.reset_stats()
    rt = fresh_runtime()
    run(p, rt, out=buf.out, inputs=inputs)
    assert not buf.problems()
    assert_correct(p, buf.out)
    assert rt.last_decision.path == "01_naive"
    reason = "attention: operands not 16-byte aligned"
    assert counters.stats()["fallbacks"] == {reason: 1}
    run(p, rt, out=buf.out, inputs=inputs)  # the same call again: decided once, so counted once
    assert counters.stats()["fallbacks"] == {reason: 1}
    assert counters.stats()["paths"] == {"attention:01_naive": 2}


def test_counters_move_as_predicted_and_a_second_call_replays_the_prepared_launch():
    import cupy as cp

    from lab.core.build import get_kernel

    p = problem(10, B=2, H=8, H_kv=2, S_q=1, S_k=1000, D=128)
    rt = fresh_runtime()
    get_kernel.cache_clear()  # the first call then loads or builds its kernel, whatever ran before
    counters.reset_stats()
    out = cp.empty(p.out_shape, p.dtype)
    run(p, rt, out=out)
    first = out.copy()
    s = counters.stats()
    path = "attention:" + rt.last_decision.path
    assert rt.last_decision.path == attn.DECODE_PATH
    assert s["counts"] == {"calls": 1, "decision_misses": 1, "recordings": 1}
    assert s["paths"] == {path: 1} and s["fallbacks"] == {}
    assert s["families"] == {"attention:decode S_q<=1 S_k<=1024": 1}
    assert s["compiles_by_path"].get(path + " compiled", 0) + s["compiles_by_path"].get(path + " from_disk", 0) == 1
    assert len(rt.fast) == 1
    run(p, rt, out=out)  # the fast path: the recorded launch, nothing decided or recorded
    s = counters.stats()
    assert s["counts"] == {"calls": 2, "decision_misses": 1, "recordings": 1, "replays": 1}
    assert s["paths"] == {path: 2}
    assert cp.array_equal(out.view(cp.uint16), first.view(cp.uint16))
    other = cp.empty(p.out_shape, p.dtype)
    run(p, rt, out=other)  # a new address: recorded, not decided again
    s = counters.stats()
    assert s["counts"]["decision_misses"] == 1 and s["counts"]["recordings"] == 2
    assert cp.array_equal(other.view(cp.uint16), first.view(cp.uint16))
    assert s["compiles_by_path"].get(path + " compiled", 0) + s["compiles_by_path"].get(path + " from_disk", 0) == 1


def test_rung_01_replays_stay_valid_after_a_smaller_opt_in_was_recorded():
    """Rung 01 opts its kernel in to the shared memory of the call it launches; a replay of a longer S_k recorded
    before a shorter one must still get its shared memory."""
    import cupy as cp

    rt = fresh_runtime()
    long_p, short_p = problem(18, H=2, S_q=1, S_k=20000, D=80), problem(19, H=2, S_q=1, S_k=13000, D=80)
    long_out, short_out = cp.empty(long_p.out_shape, long_p.dtype), cp.empty(short_p.out_shape, short_p.dtype)
    run(long_p, rt, out=long_out)
    run(short_p, rt, out=short_out)
    assert rt.last_decision.path == "01_naive"
    long_out.fill(cp.nan)
    run(long_p, rt, out=long_out)  # the fast path's replay of the first recording
    assert_correct(long_p, long_out)


def test_prefill_and_decode_are_counted_as_their_own_classes():
    counters.reset_stats()
    rt = fresh_runtime()
    run(problem(11, S_q=16, S_k=300, D=64), rt)
    run(problem(12, S_q=17, S_k=300, D=64), rt)
    run(problem(13, S_q=3000, S_k=3000, D=64, H=1), rt)
    assert counters.stats()["families"] == {"attention:decode S_q<=16 S_k<=512": 1,
                                            "attention:prefill S_q<=32 S_k<=512": 1,
                                            "attention:prefill S_q<=4096 S_k<=4096": 1}


def test_out_none_allocates_and_the_default_scale_is_accepted():
    p = problem(14, H=4, H_kv=2, S_q=17, S_k=40, D=64)
    q, k, v = qkv(p)
    out = attn.attention(q, k, v, scale=1 / 8, runtime=fresh_runtime())
    assert out.shape == q.shape and out.dtype == q.dtype
    assert_correct(p, out)


def test_misuse_on_the_gpu_is_one_sentence():
    import cupy as cp

    p = problem(15, H=2, S_q=17, D=64)
    q, k, v = qkv(p)
    rt = fresh_runtime()
    with pytest.raises(LabError, match="out overlaps"):
        attn.attention(q, k, v, out=q, runtime=rt)
    with pytest.raises(LabError, match="C-contiguous"):
        attn.attention(q, k[:, :, ::2], v[:, :, ::2], runtime=rt)
    with pytest.raises(LabError, match="must have one type"):
        attn.attention(q, k, v.astype(cp.float32), runtime=rt)
    with pytest.raises(LabError, match="CuPy array|convert with cupy.asarray"):
        attn.attention(q, cp.asnumpy(k), v, runtime=rt)


def test_warmup_compiles_and_prepares_the_attention_entries():
    from lab.core.build import get_kernel
    from lab.ops import manifest

    rt = fresh_runtime()
    get_kernel.cache_clear()
    entries = [{"op": "attention", "H": 8, "H_kv": 2, "S_q": 1, "S_k": 2048, "D": 128, "causal": 1},
               {"op": "attention", "H": 4, "S_q": 300, "S_k": 300, "D": 80, "dtype": "bfloat16"}]
    report = manifest.warmup(entries, runtime=rt)
    assert report["shapes"] == 2 and report["compiled"] + report["from_disk"] >= 2
    paths = sorted(d.path for key, d in rt.decisions.items() if key[0] == "attention")
    assert len(paths) == 2 and paths[0] == "01_naive" and paths[1] == attn.DECODE_PATH  # S_q = 1: the decode kernel


def test_a_cuda_graph_of_attention_calls_replays_them():
    import cupy as cp

    import lab.ops as ops

    p = problem(16, B=1, H=4, H_kv=1, S_q=64, S_k=500, D=128, causal=1)
    q, k, v = qkv(p)
    out = cp.empty(p.out_shape, p.dtype)
    graph = ops.capture(lambda: ops.attention(q, k, v, causal=True, out=out))
    out.fill(0)
    graph.launch()
    graph.synchronize()
    assert_correct(p, out)


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _torch_cuda(), reason="PyTorch with CUDA is not installed")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", [(2, 8, 2, 1, 1000, 128, 0), (1, 4, 4, 333, 333, 64, 1), (1, 4, 2, 17, 300, 96, 1),
                                  (1, 2, 2, 256, 256, 256, 0)], ids=lambda c: "B{}H{}/{}Sq{}Sk{}D{}c{}".format(*c))
def test_matches_pytorch_sdpa(case, dtype):
    """lab.ops within the bound of the float64 reference, SDPA within 4x of it (another library's rounding, as
    tests/test_gpu_attention.py checks it), so the two within 5x the bound of each other."""
    import cupy as cp

    from lab.measure.check import compare

    B, H, H_kv, S_q, S_k, D, causal = case
    p = problem(17 + D, B, H, H_kv, S_q, S_k, D, dtype, causal)
    ours = run(p, fresh_runtime())
    theirs = cp.empty(p.out_shape, p.dtype)
    ATT.launch_ceiling(p, theirs)
    cp.cuda.get_current_stream().synchronize()
    ref = ATT.reference(p)
    bound = ATT.error_bound(p, ref)
    for out, allowed in ((ours, bound), (theirs, 4 * bound)):
        cmp = compare(ATT.output_values(out), ref, allowed)
        assert cmp.passed, f"{p.label}: {cmp.describe()}"
    cmp = compare(ATT.output_values(ours), cp.asnumpy(ATT.output_values(theirs)).astype(np.float64), 5 * bound)
    assert cmp.passed, f"{p.label} against SDPA: {cmp.describe()}"

def test_autotune_checks_and_times_every_serving_rung_and_stores_the_winner(tmp_path):
    from lab.ops.store import TuneStore

    store = TuneStore(tmp_path / "tune.json")
    rt = Runtime(None, store, autotune=True)
    counters.reset_stats()
    p = problem(20, B=1, H=4, H_kv=2, S_q=100, S_k=100, D=64)
    assert_correct(p, run(p, rt))
    assert rt.last_decision.source == "tuned" and counters.stats()["counts"]["tuned"] == 1
    (key, entry), = store.entries(rt.env).items()
    assert key == attn.bucket(attn.AttentionShape(1, 4, 2, 100, 100, 64, "float16", 0, True))
    rows = {row["path"]: row for row in entry["candidates"]}
    assert {"01_naive", *FLASH} <= set(rows) and entry["path"] == rt.last_decision.path  # other rungs may serve too
    assert all("us" in rows[key] for key in ("01_naive", *FLASH)), entry["candidates"]
    again = Runtime(None, store, autotune=True)
    run(problem(21, B=1, H=4, H_kv=2, S_q=120, S_k=90, D=64), again)  # the same bucket: served, not tuned again
    assert again.last_decision.source == "tuned" and counters.stats()["counts"]["tuned"] == 1
