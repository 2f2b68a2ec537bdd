"""CPU: the softmax family (lab.families.softmax): the float64 reference on hand-made rows, the per-element error
bound against NumPy models of the kernels (correct ones pass, wrong ones fail), the rungs' headers, every kernel
compiled without spills for sm_80 and sm_90 (rung 05, clusters: sm_90 only, in every shape its launcher picks), the
launcher's path by n, and the shape families."""

from __future__ import annotations

import dataclasses
import functools
import types

import numpy as np
import pytest

from lab.core import build, headers
from lab.core.errors import LabError
from lab.core.ladder import Problem
from lab.families import families, get_family
from lab.families.softmax import (
    CHECK_ROW_LENGTHS,
    CLUSTER_SIZES,
    DTYPES,
    SPECIAL_KINDS,
    STREAMED_N,
    SoftmaxFamily,
    block_threads,
    cluster_edges,
    cluster_shape,
    row_capacity,
    softmax_reference,
    warp_capacity,
)
from lab.measure.check import DISTRIBUTIONS, compare

INF, NAN = float("inf"), float("nan")


@pytest.fixture(scope="module")
def fam() -> SoftmaxFamily:
    f = SoftmaxFamily()
    f.array_module = np  # problems on the host: the reference and the bounds need no GPU
    return f


def _problem(x, lengths=None, dtype="float32") -> Problem:
    x = np.asarray(x, dtype=dtype)
    rows, n = x.shape
    params = {"rows": rows, "n": n, "dtype": dtype} | ({"mask": "lengths"} if lengths is not None else {})
    lens = None if lengths is None else np.asarray(lengths, np.int32)
    return Problem("hand", {"x": [x], "lengths": lens}, x.shape, 0, params=params, dtype=np.dtype(dtype))


# --- the reference ----------------------------------------------------------------------------------

def test_reference_on_hand_rows(fam):
    x = [[1.0, 2.0, 3.0],
         [-INF, -INF, -INF],  # all -inf: zeros, not NaN
         [0.0, -INF, 0.0],  # one -inf: exactly 0 there
         [1e30, -1e30, 0.0],  # huge: one-hot, no overflow
         [5.0, 5.0, 5.0],
         [1.0, NAN, 2.0],  # NaN: the whole row
         [1.0, INF, 2.0],  # +inf: NaN, as exp(inf - inf)
         [NAN, -INF, -INF]]  # NaN among -inf: still a NaN row
    ref = fam.reference(_problem(x))
    e = np.exp([-2.0, -1.0, 0.0])
    np.testing.assert_allclose(ref[0], e / e.sum(), rtol=1e-15)
    assert np.array_equal(ref[1], [0.0, 0.0, 0.0]) and not np.signbit(ref[1]).any()
    assert np.array_equal(ref[2], [0.5, 0.0, 0.5])
    assert np.array_equal(ref[3], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(ref[4], [1 / 3] * 3, rtol=1e-15)
    assert np.isnan(ref[5:]).all()


def test_reference_n1_is_one_and_masks_give_exact_zeros(fam):
    assert fam.reference(_problem([[-7.0], [3e30], [-1e30]])).tolist() == [[1.0], [1.0], [1.0]]
    x = [[1.0, 2.0, 3.0, 4.0]] * 5 + [[NAN, 1.0, INF, 2.0]]
    ref = fam.reference(_problem(x, lengths=[4, 2, 0, -3, 99, 2]))
    assert ref[0].sum() == pytest.approx(1.0) and ref[4].tolist() == ref[0].tolist()  # 99 clamps to n
    np.testing.assert_allclose(ref[1], [1 / (1 + np.e), np.e / (1 + np.e), 0, 0], rtol=1e-15)
    assert ref[2].tolist() == [0.0] * 4 and ref[3].tolist() == [0.0] * 4  # length 0, and -3 clamped to 0
    assert np.isnan(ref[5, :2]).all() and ref[5, 2:].tolist() == [0.0, 0.0]  # NaN stays inside the length


def test_reference_agrees_with_a_plain_softmax_on_ordinary_rows(fam):
    p = fam.make_problem(seed=3, rows=5, n=300, dtype="float16", dist="wide")
    x = p.inputs["x"][0].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(fam.reference(p), e / e.sum(axis=1, keepdims=True), rtol=1e-14, atol=2.0**-200)


def test_special_rows_are_what_their_names_say(fam):
    for dtype in DTYPES:
        p = fam.make_problem(seed=1, rows=len(SPECIAL_KINDS) + 2, n=64, dtype=dtype, special=1)
        x, ref = p.inputs["x"][0].astype(np.float64), fam.reference(p)
        kind = dict(zip(SPECIAL_KINDS, range(len(SPECIAL_KINDS)), strict=True))
        assert np.isneginf(x[kind["all -inf"]]).all() and (ref[kind["all -inf"]] == 0).all()
        assert np.isneginf(x[kind["one -inf"]]).sum() == 1 and ref[kind["one -inf"]].sum() == pytest.approx(1)
        assert np.abs(x[kind["huge"]]).max() >= (65504 if dtype == "float16" else 1e29)
        for k in ("one NaN", "one +inf", "NaN, rest -inf", "all +inf"):
            assert np.isnan(ref[kind[k]]).all(), k
        assert ref[kind["one finite, rest -inf"]][-1] == 1.0
        np.testing.assert_allclose(ref[kind["constant"]], 1 / 64, rtol=1e-15)
        np.testing.assert_allclose(ref[kind["all huge negative"]], 1 / 64, rtol=1e-15)
        assert np.isfinite(ref[len(SPECIAL_KINDS):]).all()  # the rows below the special ones are random


def test_masked_problems_have_empty_full_and_clamped_rows(fam):
    p = fam.make_problem(seed=2, rows=67, n=33, mask="lengths")
    lengths = p.inputs["lengths"]
    assert lengths.dtype == np.int32 and lengths.shape == (67,)
    assert {0, 33}.issubset(set(lengths.tolist())) and (lengths < 0).any() and (lengths > 33).any()
    assert fam.error_bound(p, fam.reference(p))[1].tolist() == [0.0] * 33  # a masked element must be exactly 0


# --- NumPy models of the kernels, to test the bound -----------------------------------------------------

F32 = np.float32
LOG2E = F32(1.4426950408889634)


def _ex2_approx(t, rng):
    """ex2.approx.ftz.f32: 2^t within 2^-22 relative (the bound's 4u), subnormal results flushed to 0."""
    with np.errstate(invalid="ignore", over="ignore"):  # np.where below evaluates both branches
        r = (np.exp2(t.astype(np.float64)) * (1 + rng.uniform(-1, 1, t.shape) * 2.0**-22)).astype(F32)
    return np.where(np.abs(r) < F32(2.0**-126), F32(0), r)


def _exp_shifted(v, shift, rng):
    with np.errstate(invalid="ignore"):
        return _ex2_approx((v - shift) * LOG2E, rng)


def _tree_sum(parts):
    """Per-thread partial sums (rows x threads, fp32) added as the block reductions do: halving, in fp32."""
    while parts.shape[1] > 1:
        half = parts.shape[1] // 2
        parts = parts[:, :half] + parts[:, half:2 * half] if parts.shape[1] % 2 == 0 else np.concatenate(
            [parts[:, :half] + parts[:, half:2 * half], parts[:, 2 * half:]], axis=1)
    return parts[:, 0]


def _strided(a, threads, fill):
    """rows x n -> rows x steps x threads: thread t's elements t, t + threads, ... in order."""
    rows, n = a.shape
    steps = -(-n // threads)
    padded = np.full((rows, steps * threads), fill, dtype=a.dtype)
    padded[:, :n] = a
    return padded.reshape(rows, steps, threads)


def model_kernel(problem: Problem, seed: int = 0, online: bool = False, threads: int = 256, defect: str = ""):
    """What a rung computes, in NumPy fp32 with the SFU's errors drawn at random (as large as the bound assumes):
    rung 03's max-then-sum (online=False) or rung 02's online sum, then y = exp(x - shift) * rcp(sum), rounded to
    the output type. `defect` breaks it on purpose: "missing term" (row 0's largest exponential left out of its
    sum), "shift off by an ulp" (element (0, 0) uses a max one ulp too large)."""
    rng = np.random.default_rng(seed)
    x = problem.inputs["x"][0].astype(F32)
    rows, n = x.shape
    lengths = problem.inputs.get("lengths")
    valid = np.ones(x.shape, bool) if lengths is None else np.arange(n)[None, :] < np.clip(lengths, 0, n)[:, None]
    xv = np.where(valid, x, F32(-INF))
    cols = _strided(xv, threads, F32(-INF))
    with np.errstate(invalid="ignore", over="ignore"):
        if not online:
            m = np.fmax.reduce(np.fmax.reduce(cols, axis=1), axis=1)  # fmaxf: NaN ignored
            shift = np.where(m == -INF, F32(0), m).astype(F32)
            e = _exp_shifted(cols, shift[:, None, None], rng)
            parts = np.zeros((rows, threads), F32)
            for k in range(cols.shape[1]):
                parts = parts + e[:, k, :]
        else:
            mt, d = np.full((rows, threads), -INF, F32), np.zeros((rows, threads), F32)
            for k in range(cols.shape[1]):
                v = cols[:, k, :]
                up = v > mt
                d = np.where(up, d * _exp_shifted(mt, v, rng) + F32(1),
                             d + _exp_shifted(v, np.where(mt == -INF, F32(0), mt), rng)).astype(F32)
                mt = np.where(up, v, mt)
            m = np.fmax.reduce(mt, axis=1)
            shift = np.where(m == -INF, F32(0), m).astype(F32)
            parts = (d * _exp_shifted(mt, shift[:, None], rng)).astype(F32)
        s = _tree_sum(parts)
        if defect == "missing term":  # row 0's largest exponential left out of its sum
            s[0] = s[0] - F32(1)
        safe = np.where(s == 0, 1.0, s.astype(np.float64))
        inv = np.where(s == 0, F32(0), (1 / safe * (1 + rng.uniform(-1, 1, s.shape) * 2.0**-23)).astype(F32))
        shifts = np.broadcast_to(shift[:, None], x.shape).copy()
        if defect == "shift off by an ulp":  # one element computes x - m with m one ulp too large
            shifts[0, 0] = np.nextafter(shifts[0, 0], F32(INF))
        y = (_exp_shifted(xv, shifts, rng) * inv[:, None]).astype(F32)
    y = np.where(valid, y, F32(0))
    out = y.astype(problem.dtype)
    return out


def _margin(fam, problem, out) -> float:
    ref = fam.reference(problem)
    cmp = compare(out, ref, fam.error_bound(problem, ref))
    assert cmp.passed, cmp.describe()
    return cmp.worst_ratio


MODEL_CASES = [c for c in SoftmaxFamily().check_cases() if c["rows"] * c["n"] <= 70_000]


@pytest.mark.parametrize("online", [False, True], ids=["max_then_sum", "online"])
def test_models_of_correct_kernels_pass_at_half_the_bound(online):
    """Every small check case and distribution, on a model of the kernels whose SFU errors are as large as the
    bound assumes, passes with half the bound's statistical part (statistical_scale = 0.5): a 2x margin, so the
    GPU check is not flaky. (The flush and fp16-rounding terms are single roundings a correct kernel may use in
    full; see error_bound.)"""
    half = SoftmaxFamily(statistical_scale=0.5)
    half.array_module = np
    for case in MODEL_CASES:
        for d_index, dist in enumerate(DISTRIBUTIONS):
            p = half.make_problem(seed=d_index, dist=dist, **case)
            _margin(half, p, model_kernel(p, seed=d_index, online=online))


def test_long_rows_pass_the_model_too(fam):
    for dtype in DTYPES:
        for mask in ("none", "lengths"):
            p = fam.make_problem(seed=5, rows=3, n=32769, dtype=dtype, mask=mask)
            _margin(fam, p, model_kernel(p, seed=5, online=True, threads=1024))


def _fails(fam, problem, out) -> bool:
    ref = fam.reference(problem)
    return not compare(out, ref, fam.error_bound(problem, ref)).passed


def test_bound_catches_a_term_missing_from_the_sum(fam):
    p = fam.make_problem(seed=4, rows=3, n=7)
    assert not _fails(fam, p, model_kernel(p)) and _fails(fam, p, model_kernel(p, defect="missing term"))


def test_bound_catches_a_shift_one_ulp_off_for_a_large_max(fam):
    x = np.full((2, 8), -3.0, F32)
    x[0, 0] = x[1, 0] = 1000.0  # the max: ulp(1000) = 2^-14, far above a few ulps of exp near 0
    x[0, 1:] = 999.75
    p = _problem(x)
    assert not _fails(fam, p, model_kernel(p)) and _fails(fam, p, model_kernel(p, defect="shift off by an ulp"))


def _ulps_away(out, ref, r, c, ulps):
    """A copy of `out` with element (r, c) moved `ulps` steps of its type further from the reference."""
    bad = out.copy()
    away = np.array(INF if float(bad[r, c]) >= ref[r, c] else -INF, dtype=bad.dtype)
    for _ in range(ulps):
        bad[r, c] = np.nextafter(bad[r, c], away)
    return bad


def test_bound_catches_an_fp16_output_one_ulp_off(fam):
    """fp16: one ulp further from the reference than the rounded value fails (the bound's half-ulp term sits at
    half of it), for values away from the top of their binade; two ulps fail everywhere."""
    p = fam.make_problem(seed=6, rows=4, n=1000, dtype="float16")
    out, ref = model_kernel(p), fam.reference(p)
    assert not _fails(fam, p, out)
    mantissa = np.frexp(ref)[0]  # in [0.5, 1): 0.5 is a binade's bottom
    r, c = np.unravel_index(np.argmin(np.where(ref > 2.0**-14, mantissa, 1.0)), ref.shape)
    assert mantissa[r, c] < 0.75 and _fails(fam, p, _ulps_away(out, ref, r, c, 1))
    for r, c in ((0, 0), (1, 500), (3, 999)):
        assert _fails(fam, p, _ulps_away(out, ref, r, c, 2)), (r, c)


def test_fp32_bound_is_a_few_hundred_ulps_at_n_1000(fam):
    """fp32: the bound is relative, ~(8 sqrt(n) + ~40) u at n = 1000 (the sum's rounding dominates, lab.measure.bounds'
    SAFETY * sqrt(n)): one ulp passes, 0.02% (~1700 ulps) fails."""
    p = fam.make_problem(seed=6, rows=4, n=1000)
    out, ref = model_kernel(p), fam.reference(p)
    ratio = fam.error_bound(p, ref)[1, 2] / (ref[1, 2] * 2.0**-24)
    assert 250 < ratio < 400, ratio
    assert not _fails(fam, p, _ulps_away(out, ref, 1, 2, 1))
    assert _fails(fam, p, _ulps_away(out, ref, 1, 2, 1700))


def test_bound_catches_exponentials_summed_in_fp16(fam):
    p = fam.make_problem(seed=7, rows=8, n=4096)
    x = p.inputs["x"][0].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True)).astype(np.float16).astype(F32)  # fp16 exponentials
    out = (e / e.sum(axis=1, keepdims=True, dtype=F32)).astype(F32)
    assert _fails(fam, p, out) and not _fails(fam, p, model_kernel(p))


def test_bound_rejects_a_wrong_element_and_nan_disagreements(fam):
    p = fam.make_problem(seed=8, rows=13, n=33, special=1)
    out = model_kernel(p)
    assert not _fails(fam, p, out)
    for r, c, value in ((12, 5, None), (0, 3, NAN), (4, 3, 0.0)):  # 0.01% off; NaN in an all -inf row; 0 for NaN
        bad = out.copy()
        bad[r, c] = bad[r, c] * F32(1.0001) if value is None else value
        assert _fails(fam, p, bad), (r, c, value)
    masked = fam.make_problem(seed=8, rows=4, n=33, mask="lengths")  # row 1 has length 0
    out = model_kernel(masked)
    assert not _fails(fam, masked, out) and (out[1] == 0).all() and not np.signbit(out[1]).any()
    for value in (-0.0, 1e-30, NAN):  # a masked output must be exactly +0
        bad = out.copy()
        bad[1, 7] = value
        assert _fails(fam, masked, bad), value


# --- headers, compiles, launch plans --------------------------------------------------------------------

def test_family_is_registered_after_gemm_tc():
    names = list(families())
    assert isinstance(get_family("softmax"), SoftmaxFamily)
    assert names.index("softmax") > names.index("gemm_tc")


def test_headers_state_the_knobs_the_family_runs(fam):
    problems = headers.knob_mismatches(fam)
    assert not problems, "\n".join(problems)
    for rung in fam.rungs:
        stated = headers.stated_knobs((build.KERNELS_DIR / rung.spec.source).read_text())
        assert stated.get("HALF") == 0 and set(dict(rung.spec.knobs)) <= set(stated), (rung.key, stated)


ARCHS = (80, 90)
# Row lengths whose rung-05 shapes (cluster_shape) take every cluster size, the fewest and the most threads of each,
# odd thread counts, and slices past the registers (read twice).
CLUSTER_SHAPE_N = (1, 1000, 4096, 8192, 8193, 16384, 16385, 32768, 32769, 65536, 65537, 131072, 131073, 200000,
                   262144, 524288, STREAMED_N)


def _cluster_variants() -> list:
    """Rung 05 as its launcher builds it: each (CLUSTER, THREADS) cluster_shape picks over CLUSTER_SHAPE_N, both
    dtypes, both exchanges."""
    fam = SoftmaxFamily()
    rung = fam.rung("05")
    k = dict(rung.spec.knobs)
    out = []
    for dtype in DTYPES:
        for cluster, threads in sorted({cluster_shape(n, dtype, k["VECS"], k["BLOCK"]) for n in CLUSTER_SHAPE_N}):
            for exchange in (1, 0):
                plan = fam.launch_plan(rung, 1, 1, dtype)  # HALF set as the launcher sets it
                out.append(plan["spec"].with_knobs(CLUSTER=cluster, THREADS=threads, EXCHANGE=exchange))
    return out


def _entries() -> list:
    """Every kernel the launcher can run, in both dtypes: rungs 01-04's, rung 04's other two paths, and rung 05 in
    the cluster shapes its launcher picks."""
    fam = SoftmaxFamily()
    specs = [r.spec for r in fam.rungs if r.launch != "cluster"]
    specs += [dataclasses.replace(fam.rung("04").spec, entry=e) for e in SoftmaxFamily.SPECIALIZED_ENTRIES.values()]
    specs = list(dict.fromkeys(specs))
    return [s.with_knobs(HALF=h) for s in specs for h in (0, 1)] + _cluster_variants()


ENTRIES = _entries()


def _spec_id(spec) -> str:
    return f"{spec.source[8:10]}-{spec.entry[8:]}-" + "-".join(f"{k}{v}" for k, v in spec.knobs)


@functools.cache
def _report(spec, arch):
    return build.compile_report(spec, arch)


@pytest.mark.parametrize("spec, arch", [(s, a) for s in ENTRIES for a in ARCHS if a >= s.min_arch],
                         ids=lambda v: f"sm_{v}" if isinstance(v, int) else _spec_id(v))
def test_every_kernel_compiles_without_spills(spec, arch):
    rep = _report(spec, arch)
    assert rep.registers > 0 and rep.entry == spec.entry
    assert not rep.spills and rep.stack_frame_bytes == 0, f"{spec.entry} {dict(spec.knobs)}: {rep}"
    k = dict(spec.knobs)
    if "CLUSTER" in k:  # the 32-float scratch, and the exchange: 2 rounds of CLUSTER floats and 2 mbarriers
        assert rep.smem_static_bytes <= 128 + 8 * k["CLUSTER"] + 16, rep
        assert rep.registers * k["THREADS"] <= 65536, "the block would not fit one SM's registers"


def test_rung_05_needs_sm_90_and_the_others_do_not(fam):
    assert [r.spec.min_arch for r in fam.rungs] == [75, 75, 75, 75, 90]
    assert build.arch_refusal(fam.rung("05").spec, 80) and build.arch_refusal(fam.rung("05").spec, 90) is None


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
def test_register_paths_use_16_byte_accesses_and_rungs_01_02_do_not():
    for spec in ENTRIES:
        mix = _report(spec, 90).instructions
        vector = mix.get("LDG.128", 0) > 0 and mix.get("STG.128", 0) > 0
        assert vector == (spec.source.startswith(("softmax/03", "softmax/04", "softmax/05"))), (spec.entry, mix)


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
def test_rung_05_exchanges_through_an_mbarrier_without_a_fence_or_through_a_cluster_barrier(fam):
    """EXCHANGE = 1 (the default): st.async counted on an mbarrier (SYNCS), no memory barrier; EXCHANGE = 0: the
    cluster barrier's arrive and wait, no mbarrier; CLUSTER = 1 exchanges nothing."""
    spec = fam.rung("05").spec.with_knobs(CLUSTER=4)
    for half in (0, 1):
        mbarrier = _report(spec.with_knobs(HALF=half), 90).instructions
        assert any(op.startswith("SYNCS") for op in mbarrier) and not any(op.startswith("MEMBAR") for op in mbarrier)
        barrier = _report(spec.with_knobs(HALF=half, EXCHANGE=0), 90).instructions
        assert not any(op.startswith("SYNCS") for op in barrier)
        alone = _report(spec.with_knobs(HALF=half, CLUSTER=1), 90).instructions
        assert not any(op.startswith(("SYNCS", "MEMBAR")) for op in alone)


def test_rung_04_picks_its_path_by_n(fam):
    r04 = fam.rung("04")
    for dtype, warp_max, block_max in (("float32", 1024, 32768), ("float16", 2048, 65536)):
        assert warp_capacity(r04, dtype) == warp_max and row_capacity(r04, dtype) == block_max
        for n, path, entry in ((1, "warp per row", "warp"), (warp_max, "warp per row", "warp"),
                               (warp_max + 1, "block per row, registers", "block"),
                               (block_max, "block per row, registers", "block"),
                               (block_max + 1, "block per row, two reads", "long")):
            plan = fam.launch_plan(r04, 100, n, dtype)
            assert plan["path"] == path and plan["spec"].entry == SoftmaxFamily.SPECIALIZED_ENTRIES[entry], (dtype, n)
            assert dict(plan["spec"].knobs)["HALF"] == (dtype == "float16")
        warp = fam.launch_plan(r04, 100, 1000, dtype)
        assert warp["grid"] == (13,) and warp["block"] == (256,)  # 8 rows per block, one per warp
        misaligned = fam.launch_plan(r04, 100, 1000, dtype, together=False)
        assert misaligned["spec"].entry == "softmax_specialized_long" and "differ mod 16" in misaligned["path"]


def test_rung_04_block_sizes_hold_every_vector(fam):
    r04 = fam.rung("04")
    for dtype in DTYPES:
        vec = 4 if dtype == "float32" else 8
        for n in range(warp_capacity(r04, dtype) + 1, row_capacity(r04, dtype) + 1, 97):
            threads = block_threads(n, dtype, 8)
            assert threads % 32 == 0 and 32 <= threads <= 1024 and threads * 8 * vec >= n, (dtype, n, threads)
            assert fam.launch_plan(r04, 5, n, dtype)["block"] == (threads,)
            assert threads == 32 or (threads - 32) * 8 * vec < n  # the fewest warps that hold the row
    assert block_threads(4096, "float32", 8) == 128 and block_threads(32768, "float32", 8) == 1024
    assert block_threads(32768, "float16", 8) == 512


@pytest.mark.parametrize("dtype, n, cluster, threads, path", [
    ("float32", 1, 1, 32, "block per row, registers"), ("float32", 1024, 1, 32, "block per row, registers"),
    ("float32", 4096, 1, 128, "block per row, registers"), ("float32", 8192, 1, 256, "block per row, registers"),
    ("float32", 8193, 2, 160, "cluster of 2 blocks per row, registers"),
    ("float32", 16384, 2, 256, "cluster of 2 blocks per row, registers"),
    ("float32", 16385, 4, 160, "cluster of 4 blocks per row, registers"),
    ("float32", 32768, 4, 256, "cluster of 4 blocks per row, registers"),
    ("float32", 32769, 8, 160, "cluster of 8 blocks per row, registers"),
    ("float32", 65536, 8, 256, "cluster of 8 blocks per row, registers"),
    ("float32", 65537, 8, 288, "cluster of 8 blocks per row, registers"),
    ("float32", 131072, 8, 512, "cluster of 8 blocks per row, registers"),
    ("float32", 262144, 8, 1024, "cluster of 8 blocks per row, registers"),
    ("float32", 262145, 8, 1024, "cluster of 8 blocks per row, re-read"),
    ("float16", 2048, 1, 32, "block per row, registers"), ("float16", 16384, 1, 256, "block per row, registers"),
    ("float16", 16385, 2, 160, "cluster of 2 blocks per row, registers"),
    ("float16", 32768, 2, 256, "cluster of 2 blocks per row, registers"),
    ("float16", 65536, 4, 256, "cluster of 4 blocks per row, registers"),
    ("float16", 65537, 8, 160, "cluster of 8 blocks per row, registers"),
    ("float16", 131072, 8, 256, "cluster of 8 blocks per row, registers"),
    ("float16", 524288, 8, 1024, "cluster of 8 blocks per row, registers"),
    ("float16", 524289, 8, 1024, "cluster of 8 blocks per row, re-read"),
])
def test_rung_05_splits_a_row_over_the_fewest_cluster_blocks_that_hold_it(fam, dtype, n, cluster, threads, path):
    r05 = fam.rung("05")
    plan = fam.launch_plan(r05, 3, n, dtype)
    k = dict(plan["spec"].knobs)
    assert (k["CLUSTER"], k["THREADS"], k["HALF"]) == (cluster, threads, int(dtype == "float16"))
    assert plan["spec"].entry == "softmax_cluster" and plan["spec"].min_arch == 90
    assert plan["grid"] == (3 * cluster,) and plan["block"] == (threads,) and plan["path"] == path
    apart = fam.launch_plan(r05, 3, n, dtype, together=False)  # x and y differ mod 16: scalars, read twice
    assert apart["spec"] == plan["spec"] and apart["grid"] == plan["grid"]
    shape = path.split(", ")[0]
    assert apart["path"] == f"{shape}, re-read (x and y differ mod 16)"


def test_rung_05_shapes_hold_every_vector_in_the_fewest_blocks_and_warps(fam):
    """Over row lengths up to past the largest cluster's registers: a slice of ceil(n / vector) vectors fits
    CLUSTER blocks of THREADS threads of VECS vectors, no smaller cluster fits BLOCK threads, and a warp fewer
    would not hold it; past 8 blocks of 1024 threads the slices are read twice."""
    k = dict(fam.rung("05").spec.knobs)
    vecs, block = k["VECS"], k["BLOCK"]
    for dtype in DTYPES:
        vec = 4 if dtype == "float32" else 8
        for n in list(range(1, 600_000, 997)) + [c + d for c in cluster_edges(fam.rung("05"), dtype) for d in (0, 1)]:
            cluster, threads = cluster_shape(n, dtype, vecs, block)
            vectors = -(-n // vec)
            per = -(-vectors // cluster)
            assert cluster in CLUSTER_SIZES and threads % 32 == 0 and 32 <= threads <= 1024, (dtype, n)
            assert cluster == 1 or -(-vectors // (cluster // 2)) > block * vecs, (dtype, n, cluster)
            held = per <= threads * vecs
            assert held == (n <= row_capacity(fam.rung("05"), dtype)), (dtype, n)
            assert threads == 32 or not held or (threads - 32) * vecs < per, (dtype, n, threads)
            notes_path = fam.launch_plan(fam.rung("05"), 1, n, dtype)["path"]
            assert notes_path.endswith("registers" if held else "re-read"), (dtype, n, notes_path)


def test_rung_05_refuses_a_grid_past_two_to_the_31_blocks_in_one_sentence(fam):
    with pytest.raises(LabError, match="split the rows"):
        fam.launch_plan(fam.rung("05"), 2**28, 65536, "float32")
    assert fam.launch_plan(fam.rung("05"), 2**28, 8192, "float32")["grid"] == (2**28,)  # one block a row


def _at(address: int):
    """An array stand-in with a device address (what the launcher reads to compare x's and y's alignment)."""
    return types.SimpleNamespace(data=types.SimpleNamespace(ptr=address))


def test_rung_05_notes_name_the_cluster(fam):
    p = fam.make_problem(rows=2, n=32768, dtype="float16")
    p.inputs["x"] = [_at(1 << 20)]
    notes = fam.launch_notes(fam.rung("05"), p, _at(2 << 20))
    assert notes == {"path": "cluster of 2 blocks per row, registers", "kernel": "softmax_cluster", "threads": 256,
                     "cluster": 2}
    apart = fam.launch_notes(fam.rung("05"), p, _at((2 << 20) + 2))
    assert apart["path"] == "cluster of 2 blocks per row, re-read (x and y differ mod 16)"
    assert "cluster" not in fam.launch_notes(fam.rung("04"), p, _at(2 << 20))


def test_rung_03_falls_back_to_rung_02_past_its_registers(fam):
    r03 = fam.rung("03")
    for dtype, cap in (("float32", 8192), ("float16", 16384)):
        assert row_capacity(r03, dtype) == cap
        assert fam.launch_plan(r03, 9, cap, dtype)["spec"].entry == "softmax_single_pass"
        long = fam.launch_plan(r03, 9, cap + 1, dtype)
        assert long["spec"].entry == "softmax_online_two_pass" and long["spec"].source.startswith("softmax/02")
        assert long["grid"] == (9,) and dict(long["spec"].knobs)["HALF"] == (dtype == "float16")
        assert fam.launch_plan(r03, 9, 64, dtype, together=False)["spec"].entry == "softmax_online_two_pass"


# --- shape families -------------------------------------------------------------------------------------

def test_check_cases_cover_the_required_shapes(fam):
    cases = fam.check_cases()
    required = {1, 2, 7, 31, 32, 33, 127, 128, 129, 1000, 1023, 1024, 1025, 4095, 4096, 4097, 32767, 32768, 32769}
    assert required <= set(CHECK_ROW_LENGTHS)
    for dtype in DTYPES:
        for mask in ("none", "lengths"):
            mine = [c for c in cases if c["dtype"] == dtype and c.get("mask", "none") == mask]
            assert required <= {c["n"] for c in mine}, (dtype, mask)
            assert {1, 3, 67} <= {c["rows"] for c in mine}
            assert any(c.get("special") and c["rows"] >= len(SPECIAL_KINDS) for c in mine)
        mine = [c for c in cases if c["dtype"] == dtype]
        r03, r04, r05 = fam.rung("03"), fam.rung("04"), fam.rung("05")
        for edge in (row_capacity(r03, dtype), warp_capacity(r04, dtype), row_capacity(r04, dtype)):
            assert {edge, edge + 1} <= {c["n"] for c in mine}, (dtype, edge)
        assert any(c.get("x_offset") for c in mine)
        # Rung 05: each side of every cluster size and of its registers, with and without a mask; special rows on a
        # row split over its largest cluster (masked too) and on one read twice; x misaligned on a long row.
        for mask in ("none", "lengths"):
            ns = {c["n"] for c in mine if c.get("mask", "none") == mask}
            assert {65536, 65537, 131072} <= ns, (dtype, mask)
            for edge in cluster_edges(r05, dtype):
                assert {edge, edge + 1} <= ns, (dtype, mask, edge)
        assert row_capacity(r05, dtype) < STREAMED_N and STREAMED_N % 8
        plan = {c["n"]: fam.launch_plan(r05, 1, c["n"], dtype) for c in mine}
        assert {dict(p["spec"].knobs)["CLUSTER"] for p in plan.values()} == set(CLUSTER_SIZES)
        special = [c for c in mine if c.get("special") and c["rows"] >= len(SPECIAL_KINDS)]
        assert any(dict(plan[c["n"]]["spec"].knobs)["CLUSTER"] == 8 and c.get("mask") == "lengths" for c in special)
        assert any(plan[c["n"]]["path"].endswith("re-read") for c in special)
        assert any(c.get("x_offset") and dict(plan[c["n"]]["spec"].knobs)["CLUSTER"] > 1 for c in mine)
    assert len(cases) == len({tuple(sorted(c.items())) for c in cases})  # no case twice


def test_measured_sizes(fam):
    heads = fam.headline_params()
    assert {(p["n"], p["dtype"]) for p in heads} == {(n, d) for n in (128, 512, 1024, 4096, 16384, 32768, 65536)
                                                     for d in ("float16", "float32")}
    for p in heads:
        array = p["rows"] * p["n"] * np.dtype(p["dtype"]).itemsize
        assert array == 256 << 20 and fam.min_dram_bytes(p) == 2 * array
    assert [p["n"] for p in heads if fam.in_readme(p)] == [4096, 4096, 1024, 1024, 32768, 32768]
    tail = fam.tail_params()
    ns = [p["n"] for p in tail]
    for base in (1024, 2048, 4096):
        assert set(range(base - 8, base + 9)) <= set(ns)
    assert all(abs(p["rows"] * p["n"] * 2 - (256 << 20)) < p["n"] * 2 for p in tail)
    sweep = fam.sweep_params(1 << 32)
    assert len({(p["n"], p["dtype"]) for p in sweep}) == 1  # one line per rung in the bandwidth plot
    assert [p["rows"] for p in sweep] == sorted({p["rows"] for p in sweep}) and sweep[0]["rows"] == 1
    assert fam.min_dram_bytes({"rows": 3, "n": 5, "dtype": "float16", "mask": "lengths"}) == 2 * 15 * 2 + 12


def test_problems_refuse_bad_parameters(fam):
    from lab.core.errors import LabError

    for bad in ({"n": 0}, {"rows": 0}, {"dtype": "bfloat16"}, {"mask": "causal"}):
        with pytest.raises(LabError):
            fam.make_problem(**({"rows": 2, "n": 4} | bad))


def test_x_offset_misaligns_x_against_a_16_byte_boundary(fam):
    p = fam.make_problem(rows=2, n=7, x_offset=1)
    x = p.inputs["x"][0]
    assert x.shape == (2, 7) and x.ctypes.data % 16 == 4 and p.params["x_offset"] == 1


def test_the_baseline_and_ceiling_are_named(fam):
    assert set(fam.baselines()) == {"cupy_composed"} and fam.ceiling_name == "cupy_device_copy"
    assert fam.block_resources(fam.rung("01")) == (256, 0) and fam.block_resources(fam.rung("04")) is None
    assert fam.block_resources(fam.rung("05")) is None  # its block follows n (cluster_shape)


def test_reference_function_is_the_family_reference(fam):
    p = fam.make_problem(seed=9, rows=4, n=50, mask="lengths", special=1)
    from lab.families.softmax import _row_view

    assert np.array_equal(softmax_reference(*_row_view(p)), fam.reference(p), equal_nan=True)
