"""CPU: the attention family (lab.families.attention): the float64 reference against a direct softmax formula, the
causal masks (bottom-right aligned, rows with no key), the GQA head mapping, the per-element error bound (positive,
scaling with the type, a NumPy model of rung 02 inside half of it, wrong models outside it), every rung compiled for
sm_80 and sm_90 without spills (rung 02 at its other block shapes too), the launcher's refusals and grid, the check
cases, a lane-level desk-check of rung 02's fragment arithmetic, and its online-softmax rescales in fp32."""

from __future__ import annotations

import functools
import math
import sys
import types

import numpy as np
import pytest

from lab.core import build, headers
from lab.core.errors import CompileError, LabError
from lab.families import families, get_family
from lab.families.attention import (
    DTYPES,
    LARGE_LOGIT_FACTOR,
    LOG2E,
    AttentionFamily,
    head_dims,
    section_heads,
    visible_keys,
    visible_mask,
)
from lab.families.gemm_tc import bfloat16_bits_to_float32, round_to_bfloat16_bits
from lab.measure.check import compare


def _family(scale: float = 1.0) -> AttentionFamily:
    f = AttentionFamily(statistical_scale=scale)
    f.array_module = np  # problems on the host: the reference and the bounds need no GPU
    return f


@pytest.fixture(scope="module")
def fam() -> AttentionFamily:
    return _family()


def _values(problem, name: str) -> np.ndarray:
    x = problem.inputs[name][0]
    return (bfloat16_bits_to_float32(x) if problem.params["dtype"] == "bfloat16" else x.astype(np.float32)).astype(
        np.float64)


def _direct(problem) -> np.ndarray:
    """The definition written out, element by element: for each (b, h, i), the visible keys j, e^(scale q.k_j)
    normalized (no max subtracted: tiny cases only), times v_j; 0 with no visible key."""
    p = problem.params
    q, k, v = (_values(problem, n) for n in ("Q", "K", "V"))
    out = np.zeros((p["B"], p["H"], p["S_q"], p["D"]))
    for b in range(p["B"]):
        for h in range(p["H"]):
            kv = h // (p["H"] // p["H_kv"])
            for i in range(p["S_q"]):
                keys = [j for j in range(p["S_k"]) if not p["causal"] or j <= i + p["S_k"] - p["S_q"]]
                if not keys:
                    continue
                w = [math.exp(float(q[b, h, i] @ k[b, kv, j]) / math.sqrt(p["D"])) for j in keys]
                out[b, h, i] = sum(wj * v[b, kv, j] for wj, j in zip(w, keys, strict=True)) / sum(w)
    return out


# --- the reference ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    {"B": 2, "H": 2, "H_kv": 1, "S_q": 3, "S_k": 5, "D": 4, "causal": 0},
    {"B": 1, "H": 4, "H_kv": 2, "S_q": 5, "S_k": 5, "D": 8, "causal": 1},
    {"B": 1, "H": 2, "H_kv": 2, "S_q": 3, "S_k": 7, "D": 4, "causal": 1},  # bottom-right: row 0 sees keys 0..4
    {"B": 1, "H": 3, "H_kv": 1, "S_q": 6, "S_k": 2, "D": 4, "causal": 1},  # rows 0..3 see no key
    {"B": 1, "H": 1, "H_kv": 1, "S_q": 1, "S_k": 1, "D": 64, "causal": 1},
], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_matches_the_direct_formula(fam, case, dtype):
    p = fam.make_problem(seed=5, dtype=dtype, **case)
    np.testing.assert_allclose(fam.reference(p), _direct(p), rtol=1e-12, atol=1e-14)


def test_bottom_right_causal_masks():
    assert visible_keys(4, 4, 1).tolist() == [1, 2, 3, 4]  # square: the usual lower triangle
    assert visible_keys(3, 7, 1).tolist() == [5, 6, 7]  # S_q < S_k: the last query row sees every key
    assert visible_keys(1, 1000, 1).tolist() == [1000]  # decode: causal is full attention
    assert visible_keys(6, 2, 1).tolist() == [0, 0, 0, 0, 1, 2]  # S_q > S_k: the first S_q - S_k rows see none
    assert visible_keys(6, 2, 0).tolist() == [2] * 6
    mask = visible_mask(3, 5, 1)
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]


def test_rows_with_no_key_are_exact_zeros_with_a_zero_bound(fam):
    p = fam.make_problem(seed=2, B=1, H=2, H_kv=1, S_q=128, S_k=17, D=64, causal=1)
    ref, bound = fam.reference(p), fam.error_bound(p, fam.reference(p))
    empty = visible_keys(128, 17, 1) == 0
    assert empty.sum() == 111
    assert (ref[:, :, empty] == 0).all() and not np.signbit(ref[:, :, empty]).any()
    assert (bound[:, :, empty] == 0).all() and (bound[:, :, ~empty] > 0).all()


def test_gqa_maps_query_head_h_to_kv_head_h_over_the_group(fam):
    p = fam.make_problem(seed=3, B=1, H=8, H_kv=2, S_q=9, S_k=33, D=64, causal=0)
    ref = fam.reference(p)
    # The same problem with K and V repeated per query head (H_kv = H): head h must read kv head h // 4.
    full = fam.make_problem(seed=3, B=1, H=8, H_kv=8, S_q=9, S_k=33, D=64, causal=0)
    full.inputs["Q"] = p.inputs["Q"]
    full.inputs["K"] = [np.repeat(p.inputs["K"][0], 4, axis=1)]
    full.inputs["V"] = [np.repeat(p.inputs["V"][0], 4, axis=1)]
    np.testing.assert_array_equal(ref, fam.reference(full))
    wrong = [np.concatenate([p.inputs[n][0]] * 4, axis=1) for n in ("K", "V")]  # head h -> h % 2
    full.inputs["K"], full.inputs["V"] = [wrong[0]], [wrong[1]]
    full.derived.clear()
    assert not np.allclose(ref[0, 1], fam.reference(full)[0, 1])


def test_large_logits_reach_60_and_the_reference_stays_finite(fam):
    p = fam.make_problem(seed=4, B=1, H=2, H_kv=2, S_q=128, S_k=128, D=128, large_logits=1)
    q, k = _values(p, "Q"), _values(p, "K")
    logits = np.einsum("hid,hjd->hij", q[0], k[0]) / math.sqrt(128)
    assert 45 < np.abs(logits).max() < 120 and 10 < logits.std() < 20
    assert np.exp(np.abs(logits).max()) > 65504  # an fp16 exp without the max subtracted overflows
    ref = fam.reference(p)
    assert np.isfinite(ref).all() and np.isfinite(fam.error_bound(p, ref)).all()
    alias = fam.make_problem(seed=4, dist="large_logits", B=1, H=2, H_kv=2, S_q=128, S_k=128, D=128)
    assert alias.params["large_logits"] == 1 and np.array_equal(alias.inputs["Q"][0], p.inputs["Q"][0])
    assert LARGE_LOGIT_FACTOR == pytest.approx(math.sqrt(15))


# --- NumPy models of the kernels, to test the bound --------------------------------------------------------

F32 = np.float32


def _round_p(p32: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return bfloat16_bits_to_float32(round_to_bfloat16_bits(p32))
    return p32.astype(np.float16).astype(F32)


def _ex2(t: np.ndarray, rng) -> np.ndarray:
    """ex2.approx.ftz.f32: 2^t within 2 ulps (relative 2^-22), results below 2^-126 flushed to 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        r = (np.exp2(t.astype(np.float64)) * (1 + rng.uniform(-1, 1, t.shape) * 2.0**-22)).astype(F32)
    return np.where(np.abs(r) < F32(2.0**-126), F32(0), r)


def _fma(a, b, c) -> np.ndarray:
    """fmaf on fp32 arrays: a * b is exact in float64 (24 + 24 bits) and so, for the kernel's operands (c within a
    few binades of -a b), is the sum; one rounding to fp32 then."""
    with np.errstate(invalid="ignore"):
        return (np.asarray(a, np.float64) * np.float64(b) + np.asarray(c, np.float64)).astype(F32)


def model_flash(problem, block_n: int = 64, seed: int = 0, defect: str = "") -> np.ndarray:
    """What rung 02 computes, in NumPy fp32 (the SFU's error drawn at random, as large as the bound assumes): key
    tiles of block_n, the online max and sum with the O rescale, P rounded to the input type (l sums the rounded
    values), O / l rounded once. `defect` breaks it on purpose: "drop last key", "causal off by one" (each row sees
    one key too many), "top-left causal" (PyTorch's is_causal alignment), "gqa modulo" (kv head h % H_kv),
    "no rescale" (O not rescaled when the max rises), "fp16 scores" (Q K^T rounded to fp16 before the softmax)."""
    rng = np.random.default_rng(seed)
    p = problem.params
    S_q, S_k, D, dtype = p["S_q"], p["S_k"], p["D"], p["dtype"]
    c = F32(LOG2E / math.sqrt(D))
    q_all, k_all, v_all = (_values(problem, n).astype(F32) for n in ("Q", "K", "V"))
    rows, keys = np.arange(S_q)[:, None], np.arange(S_k)[None, :]
    if not p["causal"]:
        mask = np.ones((S_q, S_k), bool)
    elif defect == "top-left causal":
        mask = keys <= rows
    else:
        mask = keys <= rows + S_k - S_q + (1 if defect == "causal off by one" else 0)
    if defect == "drop last key":
        mask = mask & (keys < S_k - 1)
    out = np.zeros((p["B"], p["H"], S_q, D), F32)
    group = p["H"] // p["H_kv"]
    for b in range(p["B"]):
        for h in range(p["H"]):
            kv = h % p["H_kv"] if defect == "gqa modulo" else h // group
            q, k, v = q_all[b, h], k_all[b, kv], v_all[b, kv]
            m = np.full(S_q, -np.inf, F32)  # the running max in log2 units, (max s) c in fp32, as the kernel keeps it
            l_sum = np.zeros(S_q, F32)
            o = np.zeros((S_q, D), F32)
            for n0 in range(0, S_k, block_n):
                s = (q @ k[n0:n0 + block_n].T).astype(F32)
                if defect == "fp16 scores":
                    s = s.astype(np.float16).astype(F32)
                s = np.where(mask[:, n0:n0 + block_n], s, F32(-np.inf))
                m_new = np.maximum(m, (s.max(axis=1) * c).astype(F32))
                shift = np.where(np.isneginf(m_new), F32(0), m_new)
                with np.errstate(invalid="ignore"):
                    alpha = np.where(m_new == m, F32(1), _ex2((m - shift).astype(F32), rng))
                    w = _round_p(_ex2(_fma(s, c, -shift[:, None]), rng), dtype)
                l_sum = (l_sum * alpha + w.sum(axis=1, dtype=F32)).astype(F32)
                o = ((o if defect == "no rescale" else o * alpha[:, None]) + w @ v[n0:n0 + block_n]).astype(F32)
                m = m_new
            inv = np.where(l_sum > 0, F32(1) / np.where(l_sum > 0, l_sum, F32(1)), F32(0))
            out[b, h] = o * inv[:, None]
    return _round_p(out, dtype).astype(np.float64)


MODEL_CASES = [
    {"B": 1, "H": 2, "H_kv": 2, "S_q": 1000, "S_k": 1000, "D": 64, "causal": 0},
    {"B": 1, "H": 2, "H_kv": 2, "S_q": 128, "S_k": 1000, "D": 128, "causal": 1},
    {"B": 2, "H": 4, "H_kv": 2, "S_q": 17, "S_k": 17, "D": 64, "causal": 1},
    {"B": 1, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 1000, "D": 128, "causal": 0},
    {"B": 1, "H": 2, "H_kv": 1, "S_q": 200, "S_k": 129, "D": 64, "causal": 1},
    {"B": 1, "H": 2, "H_kv": 2, "S_q": 65, "S_k": 333, "D": 128, "causal": 1, "large_logits": 1},
]


@pytest.mark.parametrize("case", MODEL_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_model_of_rung_02_passes_at_half_the_bound(case, dtype):
    half = _family(0.5)
    for d_index, dist in enumerate(("normal", "uniform", "wide")):
        p = half.make_problem(seed=11 + d_index, dist=dist, dtype=dtype, **case)
        ref = half.reference(p)
        cmp = compare(model_flash(p, seed=d_index), ref, half.error_bound(p, ref))
        assert cmp.passed, (dist, cmp.describe())


@pytest.mark.parametrize("defect, case", [
    ("drop last key", {"B": 2, "H": 4, "H_kv": 2, "S_q": 128, "S_k": 128, "D": 64, "causal": 0}),
    ("causal off by one", {"B": 2, "H": 4, "H_kv": 2, "S_q": 128, "S_k": 128, "D": 64, "causal": 1}),
    ("top-left causal", {"B": 2, "H": 4, "H_kv": 2, "S_q": 17, "S_k": 128, "D": 64, "causal": 1}),
    ("gqa modulo", {"B": 1, "H": 8, "H_kv": 2, "S_q": 17, "S_k": 300, "D": 64, "causal": 0}),
    ("no rescale", {"B": 2, "H": 4, "H_kv": 2, "S_q": 128, "S_k": 128, "D": 64, "causal": 0}),
    ("fp16 scores", {"B": 1, "H": 2, "H_kv": 2, "S_q": 128, "S_k": 128, "D": 128, "causal": 0, "large_logits": 1}),
], ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_bound_catches_wrong_kernels(fam, defect, case, dtype):
    p = fam.make_problem(seed=7, dtype=dtype, **case)
    ref = fam.reference(p)
    assert compare(model_flash(p), ref, fam.error_bound(p, ref)).passed  # the same case, done right
    assert not compare(model_flash(p, defect=defect), ref, fam.error_bound(p, ref)).passed, defect


def test_the_bound_scales_with_the_input_type_and_the_statistical_share(fam):
    case = {"B": 1, "H": 2, "H_kv": 2, "S_q": 128, "S_k": 1000, "D": 64, "causal": 0}
    p16 = fam.make_problem(seed=8, dtype="float16", **case)
    p_bf = fam.make_problem(seed=8, dtype="bfloat16", **case)
    p_bf.inputs = {n: [round_to_bfloat16_bits(_values(p16, n))] for n in ("Q", "K", "V")}  # nearly the same values
    b16, b_bf = fam.error_bound(p16, fam.reference(p16)), fam.error_bound(p_bf, fam.reference(p_bf))
    assert (b16 > 0).all() and np.isfinite(b16).all()
    ratio = np.median(b_bf / b16)
    assert 4 < ratio <= 8.5, ratio  # u_in: 2^-8 against 2^-11 (the fp32 terms do not scale)
    half = _family(0.5)
    assert (half.error_bound(p16, fam.reference(p16)) < b16).all()
    # The bound is a small multiple of the output's own rounding on a spread-out row (S_k = 1000, fp16).
    ref = fam.reference(p16)
    u16 = 2.0**-11
    assert np.median(b16 / (u16 * np.abs(ref) + 2.0**-25)) < 60
    assert np.median(b16) < 4 * u16


def test_a_one_hot_row_gets_about_the_output_rounding(fam):
    """Huge logits make each row pick one value of V: the weights' part of the bound vanishes (a_j is 0 but for the
    winner, whose v_j - o is 0), leaving the output's rounding and the fp32 sums."""
    p = fam.make_problem(seed=9, dist="wide", B=1, H=1, S_q=64, S_k=64, D=64, causal=0, large_logits=1)
    ref = fam.reference(p)
    bound = fam.error_bound(p, ref)
    u16 = 2.0**-11
    assert np.median(bound / (np.abs(ref) * u16 + 2.0**-25)) < 3


# --- headers, compiles, launches --------------------------------------------------------------------------

def test_family_is_registered(fam):
    assert isinstance(get_family("attention"), AttentionFamily) and "attention" in families()
    assert "PyTorch SDPA" in fam.ceiling_title and "not a hardware ceiling" in fam.ceiling_title
    assert fam.metric == "TFLOP/s" and fam.ceiling_name == "torch_sdpa"


def test_headers_state_the_knobs_the_family_runs(fam):
    from lab.lessons.predictions import prediction

    problems = headers.knob_mismatches(fam)
    assert not problems, "\n".join(problems)
    for rung in fam.rungs:
        text = (build.KERNELS_DIR / rung.spec.source).read_text()
        head = headers.header(text)
        for field in ("What", "Prediction", "Requires:", "Knobs:"):
            assert field in head, (rung.key, field)
        assert set(dict(rung.spec.knobs)) <= set(headers.stated_knobs(text))
        assert prediction(fam, rung.key).startswith("(H200")
    assert "arXiv:2307.08691" in headers.header((build.KERNELS_DIR / fam.rung("02").spec.source).read_text())


def _variants(fam) -> list:
    """Every build the family launches: each type, causal flag and head dim a rung compiles in (rung 05's D = 256
    with its 64-key tiles), as variant_for builds it."""
    specs = []
    for rung in fam.rungs:
        dims = head_dims(rung) or (64,)
        specs += [fam.variant_for(rung, {"dtype": t, "causal": c, "D": d}).spec
                  for t in ("float16", "bfloat16") for c in (0, 1) for d in dims]
    return list(dict.fromkeys(specs))


@functools.cache
def _report(spec, arch):
    return build.compile_report(spec, arch)


@pytest.mark.parametrize("arch", [80, 90])
def test_every_variant_compiles_without_spills(fam, arch):
    """Every variant builds for every arch it runs on (rung 04: sm_90a alone) without spills or a stack frame."""
    for spec in _variants(fam):
        if build.arch_refusal(spec, arch):
            continue
        rep = _report(spec, arch)
        assert rep.registers > 0 and rep.entry == spec.entry
        assert not rep.spills and rep.stack_frame_bytes == 0, f"{spec.entry} {dict(spec.knobs)} sm_{arch}: {rep}"
        if spec.entry == "attention_flash_mma":
            d = dict(spec.knobs)["HEAD_DIM"]
            assert rep.smem_static_bytes == 2 * 64 * (d + 8) * 2  # K and V tiles (Q's reuses them)


def test_rung_02_other_block_shapes_build_as_the_header_says():
    """The knobs the header offers (and the desk-check below runs): BLOCK_M = 128 on THREADS = 256, key tiles of 32
    and 128, build without spills and with max(BLOCK_M, 2 BLOCK_N) (HEAD_DIM + PAD) * 2 bytes of static shared
    memory; BLOCK_N = 128 at D = 128 (68 KiB static) does not build."""
    base = get_family("attention").rung("02").spec
    for knobs in ({"BLOCK_M": 128, "THREADS": 256, "BLOCK_N": 32}, {"BLOCK_N": 128}, {"BLOCK_N": 32, "HEAD_DIM": 128}):
        spec = base.with_knobs(**knobs)
        k = dict(spec.knobs)
        rep = _report(spec, 80)
        assert not rep.spills and rep.stack_frame_bytes == 0, (knobs, rep)
        assert rep.smem_static_bytes == max(k["BLOCK_M"], 2 * k["BLOCK_N"]) * (k["HEAD_DIM"] + k["PAD"]) * 2, knobs
    with pytest.raises(CompileError, match="shared data"):
        build.compile_report(base.with_knobs(BLOCK_N=128, HEAD_DIM=128), 80)


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
def test_flash_rungs_run_on_tensor_cores_and_rung_01_does_not(fam):
    """Rungs 02-03 multiply on tensor cores from ldmatrix fragments; rung 03 copies every tile by cp.async (LDGSTS)
    and loads nothing from global memory through registers, rung 02 the other way round. Rungs 04-05 issue warpgroup
    MMAs (HGMMA: D / 16 for S = Q K^T, BLOCK_N / 16 for O += P V a tile) on tensor-copied tiles (UTMALDG), no
    mma.sync, no ldmatrix, no cp.async and no register loads; rung 05 takes turns through named barriers."""
    for spec in _variants(fam):
        mix = _report(spec, 90).instructions
        def count(prefix: str, mix=mix) -> int:
            return sum(v for k, v in mix.items() if k.startswith(prefix))

        if spec.entry == "attention_naive":
            assert count("HMMA") == 0, mix
            continue
        if spec.entry in ("attention_wgmma_ws", "attention_pingpong"):
            k = dict(spec.knobs)
            assert count("HGMMA") >= k["HEAD_DIM"] // 16 + k["BLOCK_N"] // 16, mix
            assert spec.entry != "attention_pingpong" or count("BAR") >= 2, mix  # the turns: bar.sync, bar.arrive
            assert count("UTMALDG") > 0 and count("HMMA") + count("LDSM") + count("LDGSTS") + count("LDG.") == 0, mix
            continue
        assert count("HMMA") > 0 and count("LDSM") > 0, mix
        if spec.entry == "attention_flash_pipelined":
            assert count("LDGSTS") > 0 and count("LDG.") == 0, mix
        else:
            assert count("LDGSTS") == 0 and count("LDG.") > 0, mix


class _Ptr:
    """A device array as the launcher sees it: an address."""

    def __init__(self, ptr: int):
        self.data = types.SimpleNamespace(ptr=ptr)


def _recorded_launch(fam, monkeypatch, rung, problem, out):
    calls = []

    class Kernel:
        def __call__(self, grid, block, args, shared_mem=0):
            calls.append((grid, block, args, shared_mem, getattr(self, "optin", None)))

        def __setattr__(self, name, value):
            object.__setattr__(self, "optin", value)

    specs = []
    monkeypatch.setattr(build, "get_kernel", lambda spec, cooperative=False: specs.append(spec) or Kernel())
    fam.launch(rung, problem, out)
    return specs[0], calls[0]


def test_launches_pass_the_problem_and_pick_the_variant(fam, monkeypatch):
    p = fam.make_problem(seed=1, B=3, H=8, H_kv=2, S_q=130, S_k=5000, D=128, dtype="bfloat16", causal=1)
    p.inputs = {n: [_Ptr(1 << 20)] for n in ("Q", "K", "V")}
    out = _Ptr(2 << 20)
    spec, (grid, block, args, smem, optin) = _recorded_launch(fam, monkeypatch, fam.rung("02"), p, out)
    assert dict(spec.knobs) | {} == {"BF16": 1, "CAUSAL": 1, "HEAD_DIM": 128, "BLOCK_M": 64, "BLOCK_N": 64,
                                     "THREADS": 128, "PAD": 8}
    assert grid == (3, 8, 3) and block == (128,) and smem == 0 and optin is None
    assert [int(a) for a in args[4:8]] == [8, 2, 130, 5000] and len(args) == 9
    assert args[8] == np.float32(LOG2E / math.sqrt(128)) and args[8].dtype == np.float32
    spec, (grid, block, args, smem, optin) = _recorded_launch(fam, monkeypatch, fam.rung("01"), p, out)
    assert dict(spec.knobs)["BF16"] == 1 and dict(spec.knobs)["CAUSAL"] == 1 and "HEAD_DIM" not in dict(spec.knobs)
    assert grid == (9, 8, 3) and smem == 4 * 5000 and optin is None  # 20000 bytes: no opt-in
    assert [int(a) for a in args[4:9]] == [8, 2, 130, 5000, 128]
    p.params["S_k"] = 20000  # 80000 bytes of scores: opted in
    _, (_, _, _, smem, optin) = _recorded_launch(fam, monkeypatch, fam.rung("01"), p, out)
    assert smem == optin == 80000


def test_the_persistent_build_plans_a_block_an_sm_and_sections_that_fit_l2(fam, monkeypatch):
    """Rung 05's PERSISTENT build: a 1-D grid of at most one block an SM (fewer when there are fewer query blocks),
    and sections of as many heads as keep their K and V within half of L2 (at least one, at most every head)."""
    import dataclasses

    from lab.families import attention as attention_module

    monkeypatch.setattr(attention_module, "_sm_count", lambda: 132)
    base = fam.rung("05")
    rung = dataclasses.replace(base, spec=base.spec.with_knobs(PERSISTENT=1))
    one_each = dataclasses.replace(base, spec=base.spec.with_knobs(PERSISTENT=0))
    big = {"B": 2, "H": 16, "S_q": 4096, "S_k": 4096, "D": 128, "causal": 0}
    assert fam.grid(rung, big) == (132, 1, 1) and fam.grid(one_each, big) == (32, 16, 2)
    assert fam.grid(rung, dict(big, S_q=130, H=8, B=1)) == (16, 1, 1)  # 2 query blocks x 8 heads
    mib = 1024 * 1024
    assert section_heads(big, 60 * mib) == 11  # 2 MiB of K and V a head: 15 fit 30 MiB, so 3 sections of 11, 11, 10
    assert section_heads(big, 50 * mib) == 11  # 12 fit 25 MiB: 3 sections again
    assert section_heads(dict(big, H=12), 60 * mib) == 12  # 24 heads, 15 fit: 2 sections of 12
    assert section_heads(dict(big, S_k=1 << 20), 60 * mib) == 1  # one head past the share: still one
    assert section_heads(dict(big, S_k=64), 60 * mib) == 32  # every head


def test_rung_05_is_persistent_by_default_where_it_measured_faster(fam, monkeypatch):
    """Without a PERSISTENT knob of its own, rung 05 builds and launches persistent at D = 128, and at D = 64 when
    causal (persistent_default); one block a query block at D = 256 and non-causal D = 64. A knob set on the rung
    wins, and the packed (VARLEN) and unpeeled builds are never persistent."""
    import dataclasses

    from lab.families import attention as attention_module

    monkeypatch.setattr(attention_module, "_sm_count", lambda: 132)
    base = fam.rung("05")
    expected = {(128, 0): 1, (128, 1): 1, (64, 1): 1, (64, 0): 0, (256, 0): 0, (256, 1): 0}
    for (D, causal), want in expected.items():
        p = {"B": 2, "H": 16, "S_q": 4096, "S_k": 4096, "D": D, "causal": causal, "dtype": "float16"}
        assert dict(fam.variant_for(base, p).spec.knobs).get("PERSISTENT", 0) == want, (D, causal)
        assert fam.grid(base, p) == ((132, 1, 1) if want else (32, 16, 2)), (D, causal)
        assert ("section_heads" in fam.launch_notes(base, fam.make_problem(**{k: p[k] for k in ("D", "causal")},
                                                                             S_q=200, S_k=200, B=1, H=2),
                                                    None)) == bool(want)
        for other in ({"PERSISTENT": 1 - want}, {"VARLEN": 1}, {"PEELED": 0}):
            rung = dataclasses.replace(base, spec=base.spec.with_knobs(**other))
            assert attention_module.persistent_build(rung, p) == other.get("PERSISTENT", 0), (D, causal, other)


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
@pytest.mark.parametrize("D", [64, 128, 256])
def test_the_persistent_build_keeps_the_loop_as_the_default_build_has_it(fam, D):
    """PERSISTENT = 1 wraps the default build's loop in a loop over items: no spills, no wgmma serialization, the
    same tensor-core instructions and the same exponentials between the waits for S and for P V."""
    for causal in (0, 1):
        default = fam.variant_for(fam.rung("05"), {"dtype": "bfloat16", "causal": causal, "D": D}).spec
        default = default.with_knobs(PERSISTENT=0)  # the one-block-a-query-block build, whichever is the default
        persistent = default.with_knobs(PERSISTENT=1)
        assert "Potential Performance Loss" not in build.compile_cubin(persistent, 90).log
        rep, base = _report(persistent, 90), _report(default, 90)
        assert not rep.spills and rep.stack_frame_bytes == 0, rep
        hgmma = [sum(v for k, v in r.instructions.items() if k.startswith("HGMMA")) for r in (rep, base)]
        assert hgmma[0] == hgmma[1], hgmma
        assert _exponentials_between_the_waits(persistent) == _exponentials_between_the_waits(default)


def test_the_persistent_build_takes_its_counter_and_sizes_after_o(fam, monkeypatch):
    """The PERSISTENT build's kernel takes (maps, O, counter, B, section_heads, H, H_kv, S_q, S_k, scale): its three
    extra arguments go after O, not before."""
    import dataclasses

    from lab.families import attention as attention_module

    counter = object()
    monkeypatch.setattr(attention_module, "work_counter", lambda: counter)
    monkeypatch.setattr(attention_module, "_sm_count", lambda: 132)
    monkeypatch.setattr(fam, "refusal", lambda *a, **k: None)
    monkeypatch.setattr(fam, "_tensor_maps", lambda rung, p, q, k, v: ("map_q", "map_k", "map_v"))
    p = fam.make_problem(seed=1, B=2, H=8, H_kv=2, S_q=300, S_k=200, D=128, causal=1)
    p.inputs = {n: [_Ptr(1 << 20)] for n in ("Q", "K", "V")}
    out = _Ptr(2 << 20)
    base = fam.rung("05")
    persistent = dataclasses.replace(base, spec=base.spec.with_knobs(PERSISTENT=1))
    _, (grid, block, args, smem, _) = _recorded_launch(fam, monkeypatch, persistent, p, out)
    assert args[:4] == ("map_q", "map_k", "map_v", out) and args[4] is counter
    assert [int(a) for a in args[5:11]] == [2, section_heads(p.params, 60 * 1024 * 1024), 8, 2, 300, 200]
    assert len(args) == 12 and grid == (48, 1, 1) and block == (384,)
    one_each = dataclasses.replace(base, spec=base.spec.with_knobs(PERSISTENT=0))
    _, (grid, _, args, _, _) = _recorded_launch(fam, monkeypatch, one_each, p, out)
    assert args[3] is out and [int(a) for a in args[4:8]] == [8, 2, 300, 200] and grid == (3, 8, 2)
    _, (grid, _, args, _, _) = _recorded_launch(fam, monkeypatch, base, p, out)  # D = 128: persistent by default
    assert args[4] is counter and grid == (48, 1, 1)


def test_the_persistent_order_is_every_item_once_and_the_model_ranks_the_counter_first():
    """attention_schedule.item_order (the kernel's item_at) is a bijection onto (query block, head) pairs, the last
    section short or not; longest first when causal. In the model, items from a counter in that order leave the
    busiest SM no more tiles than an ordinary launch on causal shapes, and fewer than a fixed round-robin share."""
    from lab.families import attention_schedule as model

    for m_blocks, heads, section, causal in [(32, 32, 11, 1), (3, 7, 3, 0), (5, 4, 4, 1), (1, 5, 2, 1)]:
        order = model.item_order(m_blocks, heads, section, causal)
        assert sorted(order) == sorted((m, bh) for m in range(m_blocks) for bh in range(heads))
        if causal:
            assert [m for m, _ in order[:min(section, heads)]] == [m_blocks - 1] * min(section, heads)
    for B, H, S in [(2, 16, 4096), (4, 32, 4096), (2, 16, 8192), (16, 32, 1024)]:
        params = {"B": B, "H": H, "S_k": S, "D": 128}
        r = model.compare_orders(B, H, S, True, 132, section_heads(params, 60 * 1024 * 1024))
        assert r["even_share"] <= r["persistent_counter"] <= min(r["launch_order"], r["persistent_round_robin"]), r
    # Notebook 09's reading of lab.lessons.attention.schedule_table: the counter closest to the even share in every
    # row, and a fixed share worse than the ordinary launch in some.
    from lab.lessons.attention import SCHEDULE_L2_BYTES, SCHEDULE_SHAPES, SCHEDULE_SMS

    rows = [model.compare_orders(B, H, S, True, SCHEDULE_SMS,
                                 section_heads({"B": B, "H": H, "S_k": S, "D": 128}, SCHEDULE_L2_BYTES))
            for B, H, S in SCHEDULE_SHAPES]
    assert all(r["persistent_counter"] == min(v for k, v in r.items() if k != "even_share") for r in rows), rows
    assert any(r["persistent_round_robin"] > r["launch_order"] for r in rows), rows
    # The figures the launcher's and the kernel's comments quote (B=2 H=16 S=4096 causal, 132 SMs).
    uneven, equal = (model.compare_orders(2, 16, 4096, True, 132, g) for g in (15, 11))
    assert (uneven["persistent_counter"], equal["persistent_counter"], equal["launch_order"]) == (151, 131, 149)
    assert (equal["even_share"], equal["longest_first"], equal["persistent_round_robin"]) == (128, 146, 142)
    assert [model.compare_orders(2, 16, 4096, True, 132, g)["persistent_round_robin"] for g in (12, 15)] == [165, 153]


def test_rung_02_refuses_misaligned_operands_and_other_head_dims(fam):
    p = fam.make_problem(seed=1, B=1, H=1, S_q=16, S_k=16, D=64)
    p.inputs = {n: [_Ptr(1 << 20)] for n in ("Q", "K", "V")}
    assert fam.refusal(fam.rung("02"), p, _Ptr(4096)) is None
    why = fam.refusal(fam.rung("02"), p, _Ptr(4096 + 2))
    assert why and "16-byte" in why and why.count(".") <= 3
    with pytest.raises(LabError, match="16-byte"):
        fam.launch(fam.rung("02"), p, _Ptr(4096 + 8))
    assert fam.refusal(fam.rung("01"), p, _Ptr(4096 + 2)) is None  # rung 01: 2-byte accesses
    p80 = fam.make_problem(seed=1, B=1, H=1, S_q=16, S_k=16, D=80)
    p80.inputs = p.inputs
    assert "HEAD_DIM" in fam.refusal(fam.rung("02"), p80, _Ptr(4096))
    huge = fam.make_problem(seed=1, B=1, H=1, S_q=1, S_k=1, D=64)
    huge.params["S_k"] = 1 << 20
    assert "shared memory" in fam.refusal(fam.rung("01"), huge, _Ptr(4096))


def test_the_baseline_says_when_pytorch_is_missing(fam, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    p = fam.make_problem(seed=1, B=1, H=1, S_q=4, S_k=4, D=64)
    with pytest.raises(LabError, match="PyTorch is not installed"):
        fam.launch_ceiling(p, np.empty(p.out_shape, p.dtype))


# --- problems and shape families -----------------------------------------------------------------------------

def test_problems_refuse_bad_parameters(fam):
    for bad in ({"H": 6, "H_kv": 4}, {"S_q": 0}, {"S_k": 0}, {"D": 0}, {"D": 300}, {"dtype": "float32"},
                {"causal": 2}, {"B": 0}):
        with pytest.raises(LabError):
            fam.make_problem(**({"B": 1, "H": 2, "S_q": 4, "D": 64} | bad))


def test_problems_hold_the_inputs_flops_and_bytes(fam):
    p = fam.make_problem(seed=1, B=2, H=4, H_kv=2, S_q=17, S_k=33, D=64, dtype="bfloat16", causal=1, sets=2)
    assert p.inputs["Q"][0].shape == (2, 4, 17, 64) and p.inputs["K"][1].shape == (2, 2, 33, 64)
    assert p.inputs["V"][0].dtype == np.uint16 and p.dtype == np.uint16 and p.out_shape == (2, 4, 17, 64)
    assert not np.array_equal(p.inputs["Q"][0], p.inputs["Q"][1])
    assert (_values(p, "V") != 0).all()
    assert p.flops == 4 * 64 * 2 * 4 * sum(range(17, 34))  # row i sees i + 17 keys
    assert p.bytes_moved == 2 * (2 * 2 * 4 * 17 * 64 + 2 * 2 * 2 * 33 * 64)
    assert "causal" in p.label and "H=4/2" in p.label


def test_check_cases_cover_the_required_shapes(fam):
    cases = fam.check_cases()
    assert len(cases) == len({tuple(sorted(c.items())) for c in cases})  # no case twice
    for dtype in DTYPES:
        mine = [c for c in cases if c["dtype"] == dtype]
        for causal in (0, 1):
            for d in (64, 128):
                sub = [c for c in mine if c["causal"] == causal and c["D"] == d]
                assert {1, 17, 128, 1000} <= {c["S_q"] for c in sub if c["S_q"] == c["S_k"]}, (dtype, causal, d)
                assert {17, 128, 1000} <= {c["S_k"] for c in sub if c["S_q"] == 1}
                assert any(1 < c["S_q"] < c["S_k"] for c in sub)
                assert any(c["H"] == 8 and c["H_kv"] == 2 for c in sub)
                assert any(c.get("large_logits") for c in sub)
        assert any(c["causal"] and c["S_q"] > c["S_k"] for c in mine)  # rows with no key
        assert any(c["B"] > 1 for c in mine)
    for c in cases:  # the float64 reference stays small
        assert c["B"] * c["H"] * c["S_q"] * c["S_k"] <= 2 * 1000 * 1000


def test_measured_sizes(fam):
    heads = fam.headline_params()
    assert {p["dtype"] for p in heads} == set(DTYPES) and any(p["S_q"] == 1 and p["H_kv"] < p["H"] for p in heads)
    assert all(fam.rungs_for("headline", p) == fam.rungs for p in heads)
    assert [r.key for r in fam.rungs_for("sweep", fam.sweep_params()[0])] == ["02_flash_mma", "03_flash_pipelined",
                                                                             "04_wgmma_ws", "05_pingpong"]
    assert {p["S_q"] for p in fam.tail_params()} == set(range(4090, 4100))
    assert fam.block_resources(fam.rung("02")) == (128, 0)


# --- rung 02's fragment index math, desk-checked ----------------------------------------------------------------
# Models of mma.m16n8k16 and ldmatrix from the PTX ISA's tables, as tests/test_gemm_tc_fragments.py writes them
# (copied: a test module is no library), run the index expressions of kernels/attention/02_flash_mma.cu (copied
# term by term) for every lane of the block's BLOCK_M / 16 warps, in float64 with exact exponentials and no rounding
# of P, and with exact-zero mma sums given the sign -0 (the ISA does not promise +0). The mma model fails if a
# fragment element is held by two lanes or by none (P's packing into A fragments included); the block's output must
# then equal the float64 reference. This proves the index math and the online softmax's bookkeeping (quad
# reductions, rescales, masks, skipped tiles, rows without keys and their +0), not the compiled code.

LANES = range(32)


def _mma(a_regs, b_regs, c_regs, zero=0.0):
    """a_regs[lane][4][2], b_regs[lane][2][2], c_regs[lane][4] -> d_regs[lane][4] (D = A B + C). Sums that are
    exactly 0 come out as `zero`: the PTX ISA does not promise the sign of a zero sum, so a desk-check can take -0."""
    A, B, C = np.full((16, 16), np.nan), np.full((16, 8), np.nan), np.full((16, 8), np.nan)
    for lane in LANES:
        g, t = lane // 4, lane % 4
        for i in range(8):
            row, col = (g if (i < 2 or 4 <= i < 6) else g + 8), 2 * t + (i & 1) + (8 if i >= 4 else 0)
            assert np.isnan(A[row, col]), f"A[{row}, {col}] held twice"
            A[row, col] = a_regs[lane][i // 2][i % 2]
        for i in range(4):
            row, col = 2 * t + (i & 1) + (8 if i >= 2 else 0), g
            assert np.isnan(B[row, col]), f"B[{row}, {col}] held twice"
            B[row, col] = b_regs[lane][i // 2][i % 2]
            row, col = g + (8 if i >= 2 else 0), 2 * t + (i & 1)
            assert np.isnan(C[row, col])
            C[row, col] = c_regs[lane][i]
    assert not (np.isnan(A).any() or np.isnan(B).any() or np.isnan(C).any()), "a fragment element no lane holds"
    D = A @ B + C
    D = np.where(D == 0, zero, D)
    return [[D[lane // 4 + (8 if i >= 2 else 0), 2 * (lane % 4) + (i & 1)] for i in range(4)] for lane in LANES]


def _ldmatrix_x4(smem, addresses, trans=False):
    """addresses[lane] = (row, col) of the 16-byte row lane gives (lanes 8i .. 8i+7: matrix i's rows 0..7)."""
    mats = []
    for i in range(4):
        rows = []
        for r in range(8):
            row, col = addresses[8 * i + r]
            assert col % 8 == 0, "ldmatrix rows are 16-byte aligned"
            rows.append(smem[row, col:col + 8])
        mats.append(np.array(rows))
    return [[(m[2 * (lane % 4), lane // 4], m[2 * (lane % 4) + 1, lane // 4]) if trans else
             (m[lane // 4, 2 * (lane % 4)], m[lane // 4, 2 * (lane % 4) + 1]) for m in mats] for lane in LANES]


def model_flash_block(q, k, v, m0: int, causal: int, c: float, BLOCK_M=64, BLOCK_N=64, PAD=8, zero=0.0) -> dict:
    """Rung 02's block at query row m0 for one head: {row: output row} for the rows it writes. `zero`: the sign
    the mma model gives exactly-zero sums (_mma)."""
    S_q, D = q.shape
    S_k = k.shape[0]
    STRIDE, DK, DN, NT, NK = D + PAD, D // 16, D // 8, BLOCK_N // 8, BLOCK_N // 16
    WARPS = BLOCK_M // 16  # THREADS / 32
    smem = np.zeros((max(BLOCK_M, 2 * BLOCK_N), STRIDE))

    def copy_rows(first_row, x, r0, rows, count):
        for r in range(count):
            smem[first_row + r, :D] = x[r0 + r] if r0 + r < rows else 0.0

    n_end = min(S_k, m0 + BLOCK_M + S_k - S_q) if causal else S_k
    copy_rows(0, q, m0, S_q, BLOCK_M)
    qf = {w: [_ldmatrix_x4(smem, [(16 * w + lane % 16, 16 * kk + 8 * (lane // 16)) for lane in LANES])
              for kk in range(DK)] for w in range(WARPS)}
    o = {w: [[[0.0] * 4 for _ in range(DN)] for _ in LANES] for w in range(WARPS)}
    m = {w: [[-np.inf, -np.inf] for _ in LANES] for w in range(WARPS)}
    l_part = {w: [[0.0, 0.0] for _ in LANES] for w in range(WARPS)}
    for n0 in range(0, n_end, BLOCK_N):
        copy_rows(0, k, n0, S_k, BLOCK_N)
        copy_rows(BLOCK_N, v, n0, S_k, BLOCK_N)
        for w in range(WARPS):
            row = [(m0 + 16 * w + lane // 4, m0 + 16 * w + lane // 4 + 8) for lane in LANES]
            s = [[[0.0] * 4 for _ in range(NT)] for _ in LANES]
            for kk in range(DK):
                for p in range(NT // 2):
                    frag = _ldmatrix_x4(smem, [(16 * p + lane % 8 + 8 * (lane // 16), 16 * kk + 8 * ((lane // 8) % 2))
                                               for lane in LANES])
                    for nt, regs in ((2 * p, (0, 1)), (2 * p + 1, (2, 3))):
                        d = _mma(qf[w][kk], [[frag[lane][regs[0]], frag[lane][regs[1]]] for lane in LANES],
                                 [s[lane][nt] for lane in LANES], zero)
                        for lane in LANES:
                            s[lane][nt] = d[lane]
            if n0 + BLOCK_N > S_k or (causal and n0 + BLOCK_N - 1 > m0 + S_k - S_q):
                for lane in LANES:
                    t = lane % 4
                    for nt in range(NT):
                        for e in range(4):
                            j, i = n0 + 8 * nt + 2 * t + (e % 2), row[lane][e // 2]
                            if j >= S_k or (causal and j > i + S_k - S_q):
                                s[lane][nt][e] = -np.inf
            pa = [[[None] * 4 for _ in range(NK)] for _ in LANES]
            for r in range(2):
                tile_max = [max(max(s[lane][nt][2 * r], s[lane][nt][2 * r + 1]) for nt in range(NT)) for lane in LANES]
                quad = [max(tile_max[4 * (lane // 4) + x] for x in range(4)) for lane in LANES]
                for lane in LANES:  # m in log2 units, as the kernel keeps it
                    m_new = max(m[w][lane][r], quad[lane] * c)
                    shift = 0.0 if m_new == -np.inf else m_new
                    alpha = 1.0 if m_new == m[w][lane][r] else 2.0 ** (m[w][lane][r] - shift)
                    m[w][lane][r] = m_new
                    total = 0.0
                    for nt in range(NT):
                        p0, p1 = 2.0 ** (s[lane][nt][2 * r] * c - shift), 2.0 ** (s[lane][nt][2 * r + 1] * c - shift)
                        total += p0 + p1
                        pa[lane][nt // 2][2 * (nt % 2) + r] = (p0, p1)
                    l_part[w][lane][r] = l_part[w][lane][r] * alpha + total
                    for dn in range(DN):
                        o[w][lane][dn][2 * r] *= alpha
                        o[w][lane][dn][2 * r + 1] *= alpha
            for kp in range(NK):
                for p in range(DN // 2):
                    frag = _ldmatrix_x4(smem, [(BLOCK_N + 16 * kp + lane % 8 + 8 * ((lane // 8) % 2),
                                                16 * p + 8 * (lane // 16)) for lane in LANES], trans=True)
                    for dn, regs in ((2 * p, (0, 1)), (2 * p + 1, (2, 3))):
                        d = _mma([pa[lane][kp] for lane in LANES],
                                 [[frag[lane][regs[0]], frag[lane][regs[1]]] for lane in LANES],
                                 [o[w][lane][dn] for lane in LANES], zero)
                        for lane in LANES:
                            o[w][lane][dn] = d[lane]
    out = {}
    for w in range(WARPS):
        for lane in LANES:
            g, t = lane // 4, lane % 4
            for r in range(2):
                total = sum(l_part[w][4 * g + x][r] for x in range(4))
                seen = total > 0
                inv = 1.0 / total if seen else 0.0
                i = m0 + 16 * w + g + 8 * r
                if i >= S_q:
                    continue
                for dn in range(DN):
                    for e in range(2):
                        x = o[w][lane][dn][2 * r + e] * inv if seen else 0.0
                        out.setdefault(i, np.full(D, np.nan))[8 * dn + 2 * t + e] = x
    return out


@pytest.mark.parametrize("S_q, S_k, D, causal, knobs", [
    (70, 100, 64, 1, {}), (130, 67, 64, 1, {}), (20, 130, 64, 0, {}), (1, 65, 128, 1, {}), (64, 64, 128, 1, {}),
    # The other block shapes the header allows: BLOCK_M = 128 on 8 warps, key tiles of 32 and 128.
    (150, 90, 64, 1, {"BLOCK_M": 128, "BLOCK_N": 32}), (40, 300, 64, 0, {"BLOCK_N": 128}),
])
def test_rung_02_index_math_computes_attention(fam, S_q, S_k, D, causal, knobs):
    """The mma model gives exact-zero sums the sign -0 (the ISA leaves it open): the rows with no visible key that
    a block computes anyway ((130, 67): rows 0..62 in the block at 0) must still come out +0."""
    p = fam.make_problem(seed=12, B=1, H=1, S_q=S_q, S_k=S_k, D=D, causal=causal, dtype="float16")
    ref = fam.reference(p)[0, 0]
    q, k, v = (_values(p, n)[0, 0] for n in ("Q", "K", "V"))
    c = LOG2E / math.sqrt(D)
    got = {}
    block_m = knobs.get("BLOCK_M", 64)
    for m0 in range(0, S_q, block_m):
        block = model_flash_block(q, k, v, m0, causal, c, zero=-0.0, **knobs)
        assert set(block) == set(range(m0, min(S_q, m0 + block_m)))  # every row of the block once, none past S_q
        got |= block
    out = np.array([got[i] for i in range(S_q)])
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
    empty = visible_keys(S_q, S_k, causal) == 0
    assert (out[empty] == 0).all() and not np.signbit(out[empty]).any()


# --- rung 02's online-softmax rescales, in fp32 ----------------------------------------------------------------

def _ex2_exact(x) -> np.ndarray:
    """A deterministic ex2 (the SFU gives the same result for the same argument every time): 2^x rounded to fp32."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.exp2(np.asarray(x, np.float64)).astype(F32)


def _row_weights_fp32(tiles, c, unrounded_rescale=False) -> np.ndarray:
    """One row's bookkeeping in rung 02, statement by statement in fp32 (the quad max already taken): the factor
    each key's value ends up multiplied by in O, p_j times every rescale after its tile. unrounded_rescale: the
    first draft, which kept the raw max and rescaled by 2^(fma(m_raw, c, -m_new c))."""
    c = F32(c)
    m = F32(-np.inf)
    weights: list[np.ndarray] = []
    for s in tiles:
        s = np.asarray(s, F32)
        if unrounded_rescale:
            m_new = max(m, s.max())
            shift = F32(0) if m_new == -np.inf else F32(m_new * c)
            alpha = _ex2_exact(_fma(m, c, -shift))
        else:
            m_new = max(m, F32(s.max() * c))
            shift = F32(0) if m_new == -np.inf else m_new
            alpha = F32(1) if m_new == m else _ex2_exact(F32(m - shift))
        m = m_new
        weights = [(w * alpha).astype(F32) for w in weights] + [_ex2_exact(_fma(s, c, -shift))]
    return np.concatenate(weights)


@pytest.mark.parametrize("D", (64, 128))
def test_rung_02_rescales_telescope_over_many_tiles(D):
    """Every key scores the same across 256 tiles (S_k = 16384): every key must end up with the same weight. A
    rescale recomputed from the unrounded max, 2^(m c - RN(m c)) != 1, tilts the first tile's keys against the
    last one's by 255 roundings of m c: a bias growing with S_k that no single tile shows."""
    c = F32(LOG2E / math.sqrt(D))
    for score in (F32(30000.5), F32(-3000.25), F32(123.456)):
        # m c rounds, by more than 2^-24 (an error below it would vanish in 2^error's own rounding to 1): the case
        # that matters, with |m c| of a few or more (large logits: ~90).
        assert abs(np.float64(F32(score * c)) - np.float64(score) * np.float64(c)) > 2.0**-24
        tiles = [np.full(64, score, F32)] * 256
        w = _row_weights_fp32(tiles, c)
        assert (w == w[0]).all() and 0.5 < w[0] <= 2, (score, w[0], w[-1])
        bad = _row_weights_fp32(tiles, c, unrounded_rescale=True)
        assert bad[0] != bad[-1], score  # the first draft's drift, which the check above rejects
    # A rising max: each key's weight is 2^(s c - m c) up to a few roundings, however many rescales came between.
    rng = np.random.default_rng(0)
    scores = np.sort(rng.normal(0, 20, 64 * 64)).astype(F32)  # the max rises in every tile
    w = _row_weights_fp32(scores.reshape(64, 64), c).astype(np.float64)
    exact = np.exp2((scores.astype(np.float64) - scores[-1]) * np.float64(c))
    keep = exact > 1e-30
    assert np.abs(w[keep] / exact[keep] - 1).max() < 1e-5


def _exponentials_between_the_waits(spec) -> list[int]:
    """For each wgmma.wait_group 1 in rung 05's SASS (WARPGROUP.DEPBAR.LE gsb0, 0x1), the MUFU.EX2 before the next
    wait_group 0: the exponentials that run while the P V products are still in flight."""
    compiled = build.compile_cubin(spec, 90)
    counts, inside = [], False
    for line in build.function_sass(compiled.cubin, compiled.lowered_name):
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in line:
            counts.append(0)
            inside = True
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line:
            inside = False
        elif inside and "MUFU.EX2" in line:
            counts[-1] += 1
    return counts


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
@pytest.mark.parametrize("D", [64, 128, 256])
def test_rung_05_runs_its_exponentials_under_its_own_p_v(fam, D):
    """SOFTMAX_OVERLAP = 1: one wait for S alone in the main loop, and every exponential of the tile (BLOCK_N / 2 a
    thread, and two for O's factors) before the wait for P V, in the packed build (pinned to 1) as in the dense one.
    SOFTMAX_OVERLAP = 2 (its first build) writes the same code, but ptxas hoists the second wait above the
    exponentials: none is left between the waits. SOFTMAX_OVERLAP = 0 has no wait for S alone. The default build is
    1 at D = 256 and 2 at 64 and 128 (the kernel's header says why)."""
    from lab.families.attention_varlen import AttentionVarlenFamily

    rung = fam.variant_for(fam.rung("05"), {"dtype": "float16", "causal": 1, "D": D})
    block_n = dict(rung.spec.knobs)["BLOCK_N"]
    overlapped = [block_n // 2 + 2]
    assert _exponentials_between_the_waits(rung.spec.with_knobs(SOFTMAX_OVERLAP=1)) == overlapped
    assert _exponentials_between_the_waits(rung.spec.with_knobs(SOFTMAX_OVERLAP=2)) == [0]
    assert _exponentials_between_the_waits(rung.spec.with_knobs(SOFTMAX_OVERLAP=0)) == []
    assert _exponentials_between_the_waits(rung.spec) == (overlapped if D == 256 else [0])
    if D != 256:
        packed = AttentionVarlenFamily().rungs[0].spec.with_knobs(HEAD_DIM=D, CAUSAL=1)
        assert _exponentials_between_the_waits(packed) == overlapped
