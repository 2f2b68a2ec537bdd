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
    from lab.core import device

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
    from lab.ops.tune import make_inputs, reference_and_bound

    a, b, bias, activation, residual = make_inputs(shape, seed)
    buf, out = _guarded(shape.M, shape.N, shape.dtype)
    kw = {"input_type": "bfloat16"} if shape.dtype == "bfloat16" else {}
    api.matmul(a, b, bias=bias, activation=activation, residual=residual, out=out, layout=shape.layout,
               runtime=runtime, **kw)
    decision = runtime.last_decision
    fused = runtime.last_exact
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


@pytest.mark.parametrize("path", ["decode", "split_k", "persistent", "hopper", "stream_k", "generic", "cublas"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_path_correct_on_tails(path, dtype):
    from lab.ops.paths import PATHS
    from lab.studies.serving_trace import forced_runtime

    if PATHS[path].min_arch >= 90 and not _hopper():
        pytest.skip(f"the {path} path needs sm_90a (an H100 or H200)")
    failures = []
    for i, (m, n, k) in enumerate(SHAPES):
        for layout in ("TN", "NN"):
            shape = _shape(m, n, k, dtype, layout, EPILOGUES[i % len(EPILOGUES)])
            rt = forced_runtime(path)
            bad, decision = _run_and_check(shape, rt, seed=i)
            if bad:
                failures.append(f"{shape}: {bad} elements outside the bound via {decision}")
            ldb = k if layout == "TN" else n  # fresh arrays: aligned bases, so only the row strides decide
            served = dataclasses.replace(shape, aligned=(2 * k) % 16 == 0 and (2 * ldb) % 16 == 0)
            expected = path if PATHS[path].refusal(served, rt.arch) is None else "cublas"
            assert decision.path == expected, f"{shape}: ran {decision.path}, expected {expected}"
    assert not failures, "\n".join(failures)


def test_the_hopper_path_runs_the_build_the_family_schedules(monkeypatch):
    """Pair tiles a few past the clusters that fit (rung 12 predicted ahead), 3072^3 and a ragged 3071 x 3071 x 3072
    (rung 10, 192 columns), and a fused chain (gemm_tc_epilogue's rung 10): each checked, and the launch spied on."""
    from lab.families import gemm_tc_tiles as tiles
    from lab.families.gemm_tc import cluster_slots
    from lab.ops import paths
    from lab.studies.serving_trace import forced_runtime

    if not _hopper():
        pytest.skip("the hopper path needs sm_90a (an H100 or H200)")
    tc = paths.family("gemm_tc")
    slots = cluster_slots(tc.variant(tc.rung("10_tma_store"), tc.make_problem(M=256, N=256, K=64)))
    n_tiles = slots // 5 + 1  # 5 x n_tiles pair tiles: 1-5 past a whole wave
    launched = []
    for fam in (tc, paths.family("gemm_tc_epilogue")):
        real = fam.launch
        monkeypatch.setattr(fam, "launch", lambda rung, problem, out, *a, _real=real, _fam=fam.name, **k: (
            launched.append((_fam, rung.key, dict(rung.spec.knobs).get("BN"))), _real(rung, problem, out, *a, **k)))
    cases = [((1280, 256 * n_tiles, 4096, "float16", "TN", "none"), ("gemm_tc", tiles.STREAM_K_RUNG, 256)),
             ((1280, 256 * n_tiles, 4096, "bfloat16", "NN", "none"), ("gemm_tc", tiles.STREAM_K_RUNG, 256)),
             ((3072, 3072, 3072, "float16", "TN", "none"), ("gemm_tc", "10_tma_store", 192)),
             ((3071, 3071, 3072, "float16", "TN", "none"), ("gemm_tc", "10_tma_store", 192)),
             ((1000, 1536, 2048, "bfloat16", "TN", "bias+gelu_tanh"), ("gemm_tc_epilogue", "10_tma_store", 256))]
    for (m, n, k, dtype, layout, epilogue), expected in cases:
        if epilogue == "none":  # the model's choice on this GPU, before the run
            assert tiles.schedule(m, n, k, layout, slots) == expected[1:], (m, n, k, layout, slots)
        launched.clear()
        bad, decision = _run_and_check(_shape(m, n, k, dtype, layout, epilogue), forced_runtime("hopper"))
        assert decision.path == "hopper" and launched == [expected], (m, n, k, launched)
        assert bad == 0, f"{m}x{n}x{k} {dtype} {layout} {epilogue}: {bad} elements outside the bound"


# Where cuBLAS may split K and add the slices in fp16/bf16 (PyTorch's default allows it): the library path keeps
# fp32 reductions (lab.tools.library_gemm), so these stay inside the fp32-accumulation bound, through cuBLASLt and
# GemmEx.
LONG_K_CASES = ((100, 300, 1000, "bfloat16", "TN"), (17, 64, 4099, "float16", "TN"), (17, 64, 4099, "float16", "NN"),
                (64, 64, 8192, "float16", "NN"), (16, 24, 65536, "bfloat16", "TN"))


@pytest.mark.parametrize("backend", ["cublasLt", "cublasGemmEx"])
def test_the_library_path_keeps_the_fp32_bound(backend, monkeypatch):
    from lab.studies.serving_trace import forced_runtime
    from lab.tools import library_gemm

    if backend == "cublasLt" and library_gemm.lt_unavailable():
        pytest.skip(f"cuBLASLt is not available here: {library_gemm.lt_unavailable()}")
    if backend == "cublasGemmEx":
        monkeypatch.setattr(library_gemm, "lt_unavailable", lambda: "forced off by the test")
    failures = []
    for m, n, k, dtype, layout in LONG_K_CASES:
        for epilogue in ("none", "bias+relu+residual"):
            bad, decision = _run_and_check(_shape(m, n, k, dtype, layout, epilogue), forced_runtime("cublas"))
            assert decision.path == "cublas"
            if bad:
                failures.append(f"{m}x{n}x{k} {dtype} {layout} {epilogue}: {bad} elements outside the bound")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("epilogue", ["bias", "bias+relu", "bias+gelu_tanh", "residual", "bias+residual", "silu",
                                      "bias+gelu_tanh+residual"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cublaslt_fuses_what_it_can_and_stays_in_the_bound(epilogue, dtype):
    from lab.studies.serving_trace import forced_runtime
    from lab.tools import library_gemm

    if library_gemm.lt_unavailable():
        pytest.skip(f"cuBLASLt is not available here: {library_gemm.lt_unavailable()}")
    for m, n, k in ((129, 257, 1000), (1, 4096, 4096), (2048, 1024, 512)):
        rt = forced_runtime("cublas")
        bad, decision = _run_and_check(_shape(m, n, k, dtype, "TN", epilogue), rt)
        assert bad == 0, f"{m}x{n}x{k} {dtype} {epilogue}: {bad} elements outside the bound"
        # cuBLASLt fuses every chain lt_fusable names (the bias read in the output's type), the others run after
        assert rt.last_fused == library_gemm.lt_fusable(tuple(epilogue.split("+"))), (m, n, k, epilogue)


def test_default_dispatch_serves_each_family():
    """The built-in table on one shape of each family, checked, and the family the counters saw."""
    from lab.ops import counters
    from lab.ops.dispatch import Runtime

    if not _hopper():
        pytest.skip("the table's Hopper paths need sm_90a")
    cases = [(1, 4096, 4096), (256, 256, 16384), (64, 64, 64), (2048, 2048, 512), (4096, 4096 + 128, 512),
             (1024, 1024, 16384), (300, 200, 1000)]
    for m, n, k in cases:
        rt = Runtime()
        counters.reset_stats()
        shape = _shape(m, n, k)
        bad, decision = _run_and_check(shape, rt)
        assert bad == 0, f"{m}x{n}x{k}: {bad} bad via {decision}"
        assert decision == rt.rule_decision(shape) and decision.source.startswith("rule"), (m, n, k, decision)


@pytest.mark.parametrize("path", ["table", "persistent", "hopper", "stream_k", "generic", "cublas"])
def test_unaligned_operands_on_every_path_and_their_replays(path):
    """A 2-byte-offset base and 1001-element rows (TMA refuses both): the Hopper paths repack, the generic one loads
    elements, the library reads them as they are; the recorded call replays on new values."""
    import cupy as cp

    from lab.ops import api
    from lab.ops.dispatch import Runtime
    from lab.ops.paths import PATHS
    from lab.studies.serving_trace import forced_runtime

    if path != "table" and PATHS[path].min_arch >= 90 and not _hopper():
        pytest.skip(f"the {path} path needs sm_90a (an H100 or H200)")
    rt = Runtime() if path == "table" else forced_runtime(path)
    rng = np.random.default_rng(1)
    base = cp.empty(301 * 1001 + 1, cp.float16)
    a = base[1:1 + 301 * 1001].reshape(301, 1001)
    w = cp.asarray(rng.standard_normal((515, 1001)).astype(np.float16))
    out = cp.empty((301, 515), cp.float16)
    for _ in range(2):
        a[...] = cp.asarray(rng.standard_normal((301, 1001)).astype(np.float16))
        out.fill(np.nan)
        api.matmul(a, w, layout="TN", out=out, runtime=rt)
        ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(w).astype(np.float64).T
        assert np.allclose(cp.asnumpy(out).astype(np.float64), ref, rtol=2e-2, atol=0.1), rt.last_decision
    assert path == "table" or rt.last_decision.path == path


@pytest.mark.parametrize("path", ["hopper", "cublas"])
def test_replay_sees_new_values_and_new_addresses(path):
    import cupy as cp

    from lab.ops import api, counters
    from lab.studies.serving_trace import forced_runtime

    rt = forced_runtime(("persistent" if _hopper() else "generic") if path == "hopper" else "cublas")
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

    from lab.core.errors import LabError
    from lab.ops import api

    a, b, kw = make(cp)
    with pytest.raises(LabError) as err:
        api.matmul(a, b, **kw)
    message = str(err.value)
    assert phrase in message and "\n" not in message and message.endswith(".")


def test_out_overlapping_an_input_is_refused():
    import cupy as cp

    from lab.core.errors import LabError
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

    from lab.measure.check import compare
    from lab.ops import api
    from lab.ops.paths import family

    fam = family(op)
    # The short rows take the one-block rung, the long ones the cluster rung on sm_90 (api.row_rung).
    for rows, n in ((1, 1), (3, 1000), (64, 4096), (5, 4097), (3, 16384), (2, 65536), (2, 65537)):
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
