"""CPU: the packed (varlen) attention family (lab.families.attention_varlen): offsets, the serving mix and the share of
padded work that is real; the reference against a direct per-sequence formula (empty sequences, sequences with no key,
GQA, causal per sequence); the padded copy and the row map the baseline gathers by; the launcher's arguments, grid and
tensor maps; refusals and bad problems as one sentence; the check cases; the VARLEN builds compile without spills and
run on warpgroup MMAs from tensor-copied tiles."""

from __future__ import annotations

import functools
import math
import types

import numpy as np
import pytest

from lab.core import build
from lab.core.errors import LabError
from lab.families.attention import LOG2E, AttentionFamily
from lab.families.attention_varlen import (
    AttentionVarlenFamily,
    cu_seqlens,
    padded_work_share,
    serving_lengths,
)
from lab.families.gemm_tc import bfloat16_bits_to_float32


@pytest.fixture(scope="module")
def fam() -> AttentionVarlenFamily:
    f = AttentionVarlenFamily()
    f.array_module = np
    return f


def _values(problem, name: str) -> np.ndarray:
    x = problem.inputs[name][0]
    return (bfloat16_bits_to_float32(x) if problem.params["dtype"] == "bfloat16" else x.astype(np.float32)).astype(
        np.float64)


def test_offsets_start_at_zero_and_end_at_the_total():
    assert cu_seqlens([3, 0, 5]).tolist() == [0, 3, 3, 8] and cu_seqlens([3]).dtype == np.int32


def test_the_serving_mix_is_log_uniform_with_the_longest_first():
    lens = serving_lengths(64, 8192)
    assert lens[0] == 8192 and min(lens) >= 1 and max(lens) == 8192 and lens == serving_lengths(64, 8192)
    short = sum(n < 91 for n in lens)  # log-uniform: about half below sqrt(8192) = 90.5
    assert 16 <= short <= 48, lens


def test_the_real_share_of_padded_work():
    assert padded_work_share([4, 4], [4, 4], 0) == 1.0
    assert padded_work_share([4, 2], [4, 2], 0) == (16 + 4) / 32
    assert padded_work_share([4, 2], [4, 2], 1) == (10 + 3) / 20  # causal: 1+2+3+4 and 1+2 of 2 * 10
    assert 0.05 < padded_work_share(serving_lengths(16, 8192), serving_lengths(16, 8192), 1) < 0.15


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_reference_is_the_direct_formula_sequence_by_sequence(fam, causal, dtype):
    """softmax(q k^T / sqrt(D)) v over each sequence's visible keys (bottom-right aligned per sequence), no max
    subtracted (small logits), GQA 2:1; a sequence with no queries takes no row, one with no keys gives zeros."""
    lens_q, lens_k = [3, 0, 5, 2, 1], [6, 2, 5, 0, 1]
    p = fam.make_problem(seed=2, H=4, H_kv=2, seq_lens=lens_q, seq_lens_k=lens_k, D=64, dtype=dtype, causal=causal)
    q, k, v = (_values(p, n) for n in ("Q", "K", "V"))
    direct = np.zeros((sum(lens_q), 4, 64))
    sq, sk = cu_seqlens(lens_q), cu_seqlens(lens_k)
    for b, (n_q, n_k) in enumerate(zip(lens_q, lens_k, strict=True)):
        for h in range(4):
            for i in range(n_q):
                keys = [j for j in range(n_k) if not causal or j <= i + n_k - n_q]
                if not keys:
                    continue
                s = np.array([q[sq[b] + i, h] @ k[sk[b] + j, h // 2] for j in keys]) / math.sqrt(64)
                w = np.exp(s) / np.exp(s).sum()
                direct[sq[b] + i, h] = sum(wj * v[sk[b] + j, h // 2] for wj, j in zip(w, keys, strict=True))
    ref = fam.reference(p)
    assert ref.shape == p.out_shape == (11, 4, 64)
    np.testing.assert_allclose(ref, direct, rtol=1e-12, atol=1e-12)
    bound = fam.error_bound(p, ref)
    assert bound.shape == ref.shape and (bound[8:10] == 0).all() and (bound[:3] > 0).all()  # sequence 3: no keys


def test_the_padded_batch_and_the_rows_the_baseline_gathers(fam):
    lens = [3, 1, 4]
    p = fam.make_problem(seed=3, H=2, seq_lens=lens, D=64)
    padded = fam.padded(p)
    assert padded["Q"].shape == (3, 2, 4, 64) and padded["K"].shape == (3, 2, 4, 64)
    q = p.inputs["Q"][0]
    assert (padded["Q"][1, :, 0] == q[3]).all() and (padded["Q"][1, :, 1:] == 0).all()
    assert (padded["Q"][2].transpose(1, 0, 2) == q[4:8]).all()
    assert fam.packed_rows(p).tolist() == [0, 1, 2, 4, 8, 9, 10, 11]


class _Ptr:
    def __init__(self, ptr: int):
        self.data = types.SimpleNamespace(ptr=ptr)


def test_the_launch_passes_the_maps_offsets_and_sizes(fam, monkeypatch):
    from lab.core import tma

    p = fam.make_problem(seed=1, H=8, H_kv=2, seq_lens=[300, 5, 129], seq_lens_k=[700, 5, 129], D=128,
                         dtype="bfloat16", causal=1)
    cu_q, cu_k = p.inputs["cu_seqlens_q"][0], p.inputs["cu_seqlens_k"][0]
    p.inputs = {n: [_Ptr(1 << 20)] for n in ("Q", "K", "V")} | {"cu_seqlens_q": [cu_q], "cu_seqlens_k": [cu_k]}
    calls, specs, maps = [], [], []

    class Kernel:
        def __call__(self, grid, block, args, shared_mem=0):
            calls.append((grid, block, args, shared_mem))

    monkeypatch.setattr(build, "get_kernel", lambda spec, cooperative=False: specs.append(spec) or Kernel())
    monkeypatch.setattr(tma, "encode", lambda spec: maps.append(spec) or spec)
    monkeypatch.setattr(AttentionVarlenFamily, "_hopper_refusal", lambda self, rung: None)
    monkeypatch.setattr(AttentionVarlenFamily, "_smem_optin", staticmethod(lambda: 227 * 1024))  # an sm_90's
    fam.launch(fam.rungs[0], p, _Ptr(2 << 20))
    (grid, block, args, smem), = calls
    assert dict(specs[0].knobs) == {"BF16": 1, "CAUSAL": 1, "HEAD_DIM": 128, "BLOCK_N": 128, "STAGES": 2,
                                    "THREADS": 384, "VARLEN": 1, "SOFTMAX_OVERLAP": 1}
    assert grid == (3, 8, 3) and block == (384,) and smem == (128 + 4 * 128) * 128 * 2 + 1024
    assert args[4] is cu_q and args[5] is cu_k and [int(a) for a in args[6:10]] == [8, 2, 300, 700]
    assert args[10] == np.float32(LOG2E / math.sqrt(128))
    mq, mk, mv = maps
    assert (mq.width, mq.height, mq.depth, mq.row_stride_bytes, mq.plane_stride_bytes, mq.box_height) == (
        128, 434, 8, 8 * 128 * 2, 256, 64)
    assert (mk.height, mk.depth, mk.row_stride_bytes, mk.box_height) == (834, 2, 2 * 128 * 2, 128)
    assert (mv.height, mv.depth, mv.row_stride_bytes, mv.plane_stride_bytes, mv.box_height) == (834, 2, 512, 256, 128)


def test_refusals_and_bad_problems_are_one_sentence(fam, monkeypatch):
    monkeypatch.setattr(AttentionVarlenFamily, "_hopper_refusal", lambda self, rung: None)
    p = fam.make_problem(seed=1, H=2, seq_lens=[5, 7], D=64)
    p.inputs |= {n: [_Ptr(1 << 20)] for n in ("Q", "K", "V")}
    assert fam.refusal(fam.rungs[0], p, _Ptr(4096)) is None
    assert "16-byte" in fam.refusal(fam.rungs[0], p, _Ptr(4096 + 2))
    p80 = fam.make_problem(seed=1, H=2, seq_lens=[5, 7], D=80)
    p80.inputs |= {n: [_Ptr(1 << 20)] for n in ("Q", "K", "V")}
    assert "HEAD_DIM" in fam.refusal(fam.rungs[0], p80, _Ptr(4096))
    for kwargs, words in (({"seq_lens": []}, "one query and one key length"),
                          ({"seq_lens": [3, 4], "seq_lens_k": [3]}, "one query and one key length"),
                          ({"seq_lens": [0, 0]}, "at least one query"),
                          ({"seq_lens": [3, -1]}, "lengths >= 0"),
                          ({"seq_lens": [3], "seq_lens_k": [0]}, "one key token"),
                          ({"seq_lens": [3], "H": 3, "H_kv": 2}, "multiple of H_kv")):
        with pytest.raises(LabError, match=words) as err:
            fam.make_problem(seed=1, **({"H": 2} | kwargs))
        assert str(err.value).count(". ") <= 1


def test_problems_hold_flops_and_bytes_of_each_sequence(fam):
    p = fam.make_problem(seed=1, H=4, H_kv=2, seq_lens=[3, 5], seq_lens_k=[4, 5], D=64, causal=1)
    assert p.flops == 4 * 64 * 4 * ((2 + 3 + 4) + (1 + 2 + 3 + 4 + 5))
    assert p.bytes_moved == 2 * 64 * (2 * 4 * 8 + 2 * 2 * 9)
    assert p.params["S_q"] == 5 and p.params["S_k"] == 5 and p.params["B"] == 2


def test_check_cases_cover_the_tails_and_the_layouts(fam):
    cases = fam.check_cases()
    lens = [n for c in cases for n in c["seq_lens"]]
    assert {0, 1, 17, 127, 128, 129, 1000} <= set(lens)
    assert any(c.get("seq_lens_k") and 0 in c["seq_lens_k"] for c in cases)  # a sequence with no keys
    assert any(c.get("seq_lens_k") and any(q > k for q, k in zip(c["seq_lens"], c["seq_lens_k"], strict=True))
               for c in cases)  # causal rows that see no key
    assert {c["D"] for c in cases} == {64, 128} and {c["dtype"] for c in cases} == {"float16", "bfloat16"}
    assert {c["causal"] for c in cases} == {0, 1} and any(c.get("large_logits") for c in cases)
    assert any(c["H"] != c["H_kv"] for c in cases) and any(c["H"] == c["H_kv"] for c in cases)


@functools.cache
def _report(spec):
    return build.compile_report(spec, 90)


def _builds(fam):
    return [fam.variant_for(fam.rungs[0], {"dtype": t, "causal": c, "D": d}).spec
            for t in ("float16", "bfloat16") for c in (0, 1) for d in (64, 128)]


def test_the_varlen_builds_compile_without_spills(fam):
    for spec in _builds(fam):
        rep = _report(spec)
        assert rep.registers > 0 and not rep.spills and rep.stack_frame_bytes == 0, (dict(spec.knobs), rep)


@pytest.mark.skipif(build.find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
def test_the_varlen_builds_run_on_warpgroup_mmas_from_tensor_copies(fam):
    for spec in _builds(fam):
        mix = _report(spec).instructions
        count = lambda prefix, mix=mix: sum(v for k, v in mix.items() if k.startswith(prefix))  # noqa: E731
        d = dict(spec.knobs)["HEAD_DIM"]
        assert count("HGMMA") >= d // 16 + 128 // 16 and count("UTMALDG") > 0 and count("HMMA") == 0, mix


def test_the_dense_family_is_unchanged_by_the_knob():
    """The dense family's rung 05 does not set VARLEN (its default, 0, is the dense layout)."""
    assert "VARLEN" not in dict(AttentionFamily().rung("05").spec.knobs)


def test_the_study_summary_takes_same_round_ratios_to_the_packed_kernel():
    from lab.studies.varlen_attention_study import summarize

    batch = {"mix": "serving", "B": 2, "dtype": "float16"}
    rows = [{"batch": batch, "method": m, "round": r, "median_ms": ms, "TFLOP/s": 1.0 / ms}
            for r, (a, b) in enumerate(((1.0, 5.0), (2.0, 8.0))) for m, ms in (("lab_varlen", a), ("sdpa_padded", b))]
    out = {s["method"]: s for s in summarize(rows)}
    assert out["lab_varlen"]["time_x_lab_varlen"] == 1.0
    assert out["sdpa_padded"]["time_x_lab_varlen"] == 4.5 and out["sdpa_padded"]["time_x_lab_varlen_min"] == 4.0


def test_the_committed_study_feeds_the_readme_and_the_notebook():
    from lab.lessons import attention as lesson
    from lab.studies.report import varlen_study_lines

    lines = varlen_study_lines()
    assert lines and any(line.startswith("| serving B=16 float16 |") for line in lines), lines
    study = lesson.load_varlen_study()
    reading = lesson.varlen_reading(study)
    assert "serving B=16 float16" in reading and "varlen_attn" in reading
    assert "lab_dense_padded" in lesson.varlen_table(study).text


def test_the_newest_study_record_is_picked_by_date(tmp_path, monkeypatch):
    import json

    from lab.measure.records import newest_study_record

    for folder, date in (("h200", "2026-12-01"), ("h100", "2026-12-05")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "s.json").write_text(json.dumps(
            {"provenance": {"date": date}, "summary": [{"method": "m", "TFLOP/s": 1.0}]}))
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path / "h200"))
    record, path = newest_study_record("s.json", {"method", "TFLOP/s"})
    assert path == tmp_path / "h100" / "s.json" and record["provenance"]["date"] == "2026-12-05"
    assert newest_study_record("s.json", {"method", "missing"}) is None
