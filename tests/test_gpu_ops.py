"""GPU: lab.ops on every path and through its own dispatch, against float64 (lab.ops.tune's reference and bound),
outputs poisoned with NaN and guard zones around them; replays see new values and new addresses; every misuse is
one LabError sentence; tuning stores a checked winner that a second runtime serves; the row operations match their
families' references and bounds; the fallbacks are counted."""

import dataclasses

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

GUARD = 257  # elements of sentinel on each side of an output
SENTINEL = 0x5A5A


def _hopper() -> bool:
    from lab import device

    return device.current().arch == 90


def _guarded(m: int, n: int, dtype):
    """An (m, n) C-contiguous output inside a buffer whose guards hold a sentinel and whose body holds NaN."""
    import cupy as cp

    buf = cp.full(m * n + 2 * GUARD, SENTINEL, dtype=cp.uint16)
    buf[GUARD:GUARD + m * n] = 0x7E00 if dtype == "float16" else 0x7FC0
    body = buf[GUARD:GUARD + m * n].reshape(m, n)
    return buf, body.view(cp.float16) if dtype == "float16" else body


def _guards_intact(buf) -> bool:
    import cupy as cp

    return bool(cp.all(buf[:GUARD] == SENTINEL)) and bool(cp.all(buf[-GUARD:] == SENTINEL))


def _run_and_check(shape, runtime, seed=5, nn_from_tn=False):
    """lab.ops.matmul on fresh random inputs for `shape`, compared with float64; returns (bad elements, path)."""
    import cupy as cp

    from lab.families.gemm_tc import to_float32
    from lab.ops import api
    from lab.ops.paths import PATHS
    from lab.ops.tune import make_inputs, reference_and_bound

    a, b, bias, activation, residual = make_inputs(shape, seed)
    buf, out = _guarded(shape.M, shape.N, shape.dtype)
    kw = {"input_type": "bfloat16"} if shape.dtype == "bfloat16" else {}
    api.matmul(a, b, bias=bias, activation=activation, residual=residual, out=out, layout=shape.layout,
               runtime=runtime, **kw)
    decision = runtime.last_decision
    fused = PATHS[decision.path].fuses_epilogue
    ref, bound = reference_and_bound(shape, a, b, bias, activation, residual, rounded_product=not fused)
    got = to_float32(out, shape.dtype, cp).astype(cp.float64)
    bad = int((~(cp.abs(got - ref) <= bound)).sum())
    assert _guards_intact(buf), f"{shape}: a write outside the output"
    return bad, decision


SHAPES = [(1, 1, 1), (1, 300, 77), (7, 129, 64), (17, 64, 4099), (129, 131, 67), (97, 101, 103), (300, 1, 77),
          (256, 512, 1024), (64, 64, 8192)]
EPILOGUES = ("none", "bias+gelu_tanh", "silu+residual", "bias+relu+residual")


def _shape(m, n, k, dtype="float16", layout="TN", epilogue="none"):
    from lab.ops.shapes import GemmShape

    return GemmShape(m, n, k, dtype, layout, True, epilogue)


@pytest.mark.parametrize("path", ["decode", "split_k", "persistent", "stream_k", "generic", "cublas"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_path_correct_on_tails(path, dtype):
    from lab.ops.paths import PATHS
    from lab.serving_trace import forced_runtime

    if PATHS[path].min_arch >= 90 and not _hopper():
        pytest.skip(f"the {path} path needs sm_90a (an H100 or H200)")
    failures = []
    for i, (m, n, k) in enumerate(SHAPES):
        for layout in ("TN", "NN"):
            shape = _shape(m, n, k, dtype, layout, EPILOGUES[i % len(EPILOGUES)])
            rt = forced_runtime(path)
            bad, decision = _run_and_check(shape, rt, seed=i)
            if bad and not _cublas_long_k_fp16(decision, shape):
                failures.append(f"{shape}: {bad} elements outside the bound via {decision}")
            ldb = k if layout == "TN" else n  # fresh arrays: aligned bases, so only the row strides decide
            served = dataclasses.replace(shape, aligned=(2 * k) % 16 == 0 and (2 * ldb) % 16 == 0)
            expected = path if PATHS[path].refusal(served, rt.arch) is None else "cublas"
            assert decision.path == expected, f"{shape}: ran {decision.path}, expected {expected}"
    assert not failures, "\n".join(failures)


CUBLAS_FP16_CHECKED_MAX_K = 2048


def _cublas_long_k_fp16(decision, shape) -> bool:
    """cuBLAS's own fp16 GEMM on a long K: outside lab.ops's fp32-accumulation bound on the H200 (2d9f309: 61, 48
    and 463 elements at 17 x 64 x 4099 TN/NN and 64 x 64 x 8192 NN, with cublasGemmEx and CUBLAS_COMPUTE_32F as
    with cupy.matmul; bf16 inside). The library is not ours to fix: a forced cuBLAS runtime is excused there, and
    test_the_table_keeps_long_k_away_from_cublas holds lab.ops's own table to the bound on those shapes."""
    return decision.path == "cublas" and shape.dtype == "float16" and shape.K > CUBLAS_FP16_CHECKED_MAX_K


def test_the_table_keeps_long_k_away_from_cublas():
    from lab.ops.dispatch import Runtime

    if not _hopper():
        pytest.skip("the table's split-K path needs sm_90a")
    for m, n, k, layout in ((17, 64, 4099, "TN"), (17, 64, 4099, "NN"), (64, 64, 8192, "NN"), (64, 64, 8192, "TN")):
        bad, decision = _run_and_check(_shape(m, n, k, "float16", layout, "bias+relu+residual"), Runtime())
        assert decision.path != "cublas" and bad == 0, (m, n, k, layout, decision, bad)


def test_default_dispatch_serves_each_family():
    """The built-in table on one shape of each family, checked, and the family the counters saw."""
    from lab.ops import counters
    from lab.ops.dispatch import Runtime

    if not _hopper():
        pytest.skip("the table's Hopper paths need sm_90a")
    cases = [((1, 4096, 4096), "decode"), ((256, 256, 16384), "split_k"), ((64, 64, 64), "cublas"),
             ((2048, 2048, 512), "persistent"), ((4096, 4096 + 128, 512), "stream_k")]
    for (m, n, k), path in cases:
        rt = Runtime()
        counters.reset_stats()
        bad, decision = _run_and_check(_shape(m, n, k), rt)
        assert bad == 0, f"{m}x{n}x{k}: {bad} bad via {decision}"
        assert decision.path == path and decision.source.startswith("rule"), (m, n, k, decision)


def test_unaligned_operands_take_the_generic_path():
    import cupy as cp

    from lab.ops import api
    from lab.ops.dispatch import Runtime

    rt = Runtime()
    base = cp.asarray(np.random.default_rng(1).standard_normal((301 * 1001 + 1,)).astype(np.float16))
    a = base[1:1 + 301 * 1001].reshape(301, 1001)  # a 2-byte-offset base and 1001-element rows: TMA refuses it
    w = cp.asarray(np.random.default_rng(2).standard_normal((515, 1001)).astype(np.float16))
    out = api.matmul(a, w, layout="TN", runtime=rt)
    d = next(iter(rt.decisions.values()))
    assert d.path == "generic"
    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(w).astype(np.float64).T
    assert np.allclose(cp.asnumpy(out).astype(np.float64), ref, rtol=2e-2, atol=0.1)


def test_replay_sees_new_values_and_new_addresses():
    import cupy as cp

    from lab.ops import api, counters
    from lab.serving_trace import forced_runtime

    rt = forced_runtime("persistent" if _hopper() else "generic")  # recorded paths (cuBLAS records nothing)
    counters.reset_stats()
    rng = np.random.default_rng(3)
    a = cp.asarray(rng.standard_normal((64, 512)).astype(np.float16))
    w = cp.asarray(rng.standard_normal((384, 512)).astype(np.float16))
    out = cp.empty((64, 384), cp.float16)
    for _ in range(3):
        a[...] = cp.asarray(rng.standard_normal((64, 512)).astype(np.float16))
        api.matmul(a, w, layout="TN", out=out, runtime=rt)
        ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(w).astype(np.float64).T
        assert np.allclose(cp.asnumpy(out).astype(np.float64), ref, rtol=1e-2, atol=0.05)
    counts = counters.stats()["counts"]
    assert counts["recordings"] == 1 and counts["replays"] == 2
    a2 = a.copy()  # a new address: a new recording
    out2 = api.matmul(a2, w, layout="TN", runtime=rt)
    assert counters.stats()["counts"]["recordings"] == 2
    assert cp.array_equal(out2, out)


def test_transposed_view_and_batched_input():
    import cupy as cp

    from lab.ops import api

    rng = np.random.default_rng(4)
    x = cp.asarray(rng.standard_normal((2, 3, 256)).astype(np.float16))
    w_t = cp.asarray(rng.standard_normal((256, 320)).astype(np.float16)).T  # a (320 x 256) weight given as a view
    y = api.matmul(x, w_t, layout="TN")
    assert y.shape == (2, 3, 320)
    ref = cp.asnumpy(x).astype(np.float64) @ cp.asnumpy(w_t).astype(np.float64).T
    assert np.allclose(cp.asnumpy(y).astype(np.float64), ref, rtol=1e-2, atol=0.05)


@pytest.mark.parametrize("make, phrase", [
    (lambda cp: (cp.ones((4, 8), cp.float16), cp.ones((9, 5), cp.float16), {}), "K ="),
    (lambda cp: (cp.ones((4, 8), cp.int32), cp.ones((8, 5), cp.int32), {}), "float16"),
    (lambda cp: (cp.ones((4, 8), cp.float16), cp.ones((8, 5), cp.float32), {}), "one type"),
    (lambda cp: (cp.ones((4, 8), cp.uint16), cp.ones((8, 5), cp.uint16), {}), "input_type"),
    (lambda cp: (cp.ones((8, 4), cp.float16).T, cp.ones((8, 5), cp.float16), {}), "contiguous"),
    (lambda cp: (cp.ones((4, 8), cp.float16), cp.ones((8, 5), cp.float16), {"bias": cp.ones(5, cp.float16)}),
     "float32"),
    (lambda cp: (cp.ones((4, 8), cp.float16), cp.ones((8, 5), cp.float16), {"activation": "tanh"}), "activation"),
    (lambda cp: (cp.ones((4, 8), cp.float16), cp.ones((8, 5), cp.float16), {"layout": "NT"}), "layout"),
    (lambda cp: (cp.ones((4, 8), cp.float16), cp.ones((8, 5), cp.float16), {"out": cp.ones((4, 6), cp.float16)}),
     "out must be"),
    (lambda cp: (np.ones((4, 8), np.float16), np.ones((8, 5), np.float16), {}), "CuPy arrays"),
])
def test_misuse_is_one_sentence(make, phrase):
    import cupy as cp

    from lab.errors import LabError
    from lab.ops import api

    a, b, kw = make(cp)
    with pytest.raises(LabError) as err:
        api.matmul(a, b, **kw)
    message = str(err.value)
    assert phrase in message and "\n" not in message and message.endswith(".")


def test_out_overlapping_an_input_is_refused():
    import cupy as cp

    from lab.errors import LabError
    from lab.ops import api

    a = cp.ones((16, 16), cp.float16)
    with pytest.raises(LabError, match="overlaps"):
        api.matmul(a, cp.ones((16, 16), cp.float16), out=a)


def test_fallbacks_are_counted():
    import cupy as cp

    from lab.ops import api, counters

    counters.reset_stats()
    y = api.matmul(cp.ones((3, 4), cp.float32), cp.ones((4, 5), cp.float32))
    assert y.dtype == cp.float32 and float(y[0, 0]) == 4.0
    z = api.matmul(cp.ones((0, 4), cp.float16), cp.ones((4, 5), cp.float16))
    assert z.shape == (0, 5)
    assert counters.FALLBACKS["dtype"] == 1 and counters.FALLBACKS["empty"] == 1


def test_tuning_stores_a_checked_winner_a_second_runtime_serves(tmp_path):
    from lab.ops.dispatch import Runtime
    from lab.ops.shapes import bucket
    from lab.ops.store import TuneStore

    store = TuneStore(tmp_path / "tune.json")
    rt = Runtime(store=store, autotune=True)
    shape = _shape(24, 1024, 2048, epilogue="silu")
    bad, decision = _run_and_check(shape, rt)
    assert bad == 0 and decision.source == "tuned"
    entry = store.get(rt.env, bucket(shape))
    assert entry["tuned_M"] == 32 and entry["path"] in {r["path"] for r in entry["candidates"] if "us" in r}
    assert all(("us" in r) != ("rejected" in r) for r in entry["candidates"])
    second = Runtime(store=TuneStore(tmp_path / "tune.json"))
    assert second.decide(shape).source == "tuned"


@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "layernorm"])
def test_row_ops_match_their_families(op):
    import cupy as cp

    from lab.check import compare
    from lab.ops import api
    from lab.ops.paths import family

    fam = family(op)
    for rows, n in ((1, 1), (3, 1000), (64, 4096), (5, 4097)):
        dtype = "float16"
        problem = fam.make_problem(seed=rows + n, rows=rows, n=n, dtype=dtype)
        x = problem.inputs["x"][0]
        out = cp.full(x.shape, np.nan, dtype=x.dtype)
        if op == "softmax":
            api.softmax(x, out=out)
        elif op == "rmsnorm":
            api.rmsnorm(x, problem.inputs["w"], out=out)
        else:
            api.layernorm(x, problem.inputs["w"], problem.inputs["b"], out=out)
        ref = fam.reference(problem)
        result = compare(fam.output_values(out), ref, fam.error_bound(problem, ref))
        assert result.passed, f"{op} {rows}x{n}: {result}"
