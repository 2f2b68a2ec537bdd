"""CPU: the decode-attention family's logic with NumPy arrays: the paged cache holds each sequence's keys where its
block table says and nothing else does, the per-sequence reference is the attention family's on the visible keys,
the split plan fills the GPU's block slots and names its limits, the launcher lowers the stages to what a GPU holds,
and each misuse is one sentence. Rung 02's TIMELINE build and the summary scripts/decode_timeline.py makes of it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from lab.core import build, device
from lab.core.errors import LabError
from lab.families.attention import AttentionFamily
from lab.families.attention_decode import (
    MAX_SPLITS,
    WAVE_SHARE,
    AttentionDecodeFamily,
    row_groups,
    split_plan,
    wave_share,
)

TIMELINE_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "decode_timeline.py"


def numpy_family(cls=AttentionDecodeFamily):
    fam = cls()
    fam.array_module = np
    return fam


@pytest.mark.parametrize("page_size", [1, 7, 16, 64])
def test_a_paged_cache_holds_each_sequence_where_its_block_table_says(page_size):
    fam = numpy_family()
    p = fam.make_problem(seed=3, B=4, H=8, H_kv=2, S_q=2, S_k=130, D=64, page_size=page_size, varlen=1)
    table, lengths = p.inputs["block_table"][0], p.derived["lengths"]
    assert lengths[0] == 130 and lengths[-1] == 1 and (lengths >= 1).all()
    used = []
    for n_k, name in (("K", "K_dense"), ("V", "V_dense")):
        cache, dense = p.inputs[n_k][0], p.inputs[name][0]
        for b, n in enumerate(lengths):
            j = np.arange(n)
            rows = cache[table[b, j // page_size], j % page_size]  # (n, H_kv, D)
            assert np.array_equal(rows.transpose(1, 0, 2), dense[b, :, :n])
            used += list(table[b, : -(-int(n) // page_size)])
    pages = cache.shape[0]
    assert len(set(used)) == len(used) // 2 == pages - 2  # every page once per sequence, two spare ones
    assert (table[table >= 0] < pages).all()


def test_the_reference_is_the_attention_familys_on_each_sequences_visible_keys():
    fam, att = numpy_family(), numpy_family(AttentionFamily)
    p = fam.make_problem(seed=5, B=3, H=4, H_kv=2, S_q=3, S_k=50, D=64, causal=1, varlen=1)
    ref, bound = fam.reference(p), fam.error_bound(p, fam.reference(p))
    for b, n in enumerate(p.derived["lengths"]):
        one = att.make_problem(seed=1, B=1, H=4, H_kv=2, S_q=3, S_k=int(n), D=64, causal=1)
        one.inputs = {"Q": [p.inputs["Q"][0][b:b + 1]], "K": [p.inputs["K_dense"][0][b:b + 1, :, :n]],
                      "V": [p.inputs["V_dense"][0][b:b + 1, :, :n]]}
        assert np.array_equal(att.reference(one), ref[b:b + 1])
        assert np.array_equal(att.error_bound(one, att.reference(one)), bound[b:b + 1])
    # Sequence 2 has one key and 3 causal rows: rows 0 and 1 see none and must be exactly 0.
    assert p.derived["lengths"][-1] == 1 and (bound[-1, :, :2] == 0).all() and (ref[-1, :, :2] == 0).all()


def test_bytes_and_flops_count_each_sequences_own_keys():
    fam = numpy_family()
    p = fam.make_problem(seed=7, B=3, H=8, H_kv=2, S_q=1, S_k=100, D=128, varlen=1)
    keys = int(p.derived["lengths"].sum())
    assert p.bytes_moved == 2 * (2 * 3 * 8 * 128 + 2 * 2 * 128 * keys)
    assert p.flops == 4 * 128 * 8 * keys


@pytest.mark.parametrize("B, S_k", [(1, 8192), (1, 32768), (4, 8192), (8, 8192), (32, 8192), (64, 4096)])
def test_the_split_plan_keeps_the_block_slots_busy_with_the_fewest_splits(B, S_k):
    params = {"B": B, "H": 32, "H_kv": 8, "S_q": 1, "S_k": S_k}
    plan = split_plan(params, 64, 3, 132)
    base, capacity = B * 8, 3 * 132
    assert plan.split_keys % 64 == 0 and plan.splits * plan.split_keys >= S_k > (plan.splits - 1) * plan.split_keys
    share = wave_share(base * plan.splits, capacity)
    fewer = [wave_share(base * s, capacity) for s in range(1, plan.splits)]
    # The fewest splits that reach the bar (tiles rounded up may leave the plan a little under it).
    assert all(f < WAVE_SHARE for f in fewer)
    assert share >= 0.85


def test_a_forced_split_is_kept_and_too_many_splits_are_one_sentence():
    params = {"B": 1, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 1000, "split_keys": 100}
    assert split_plan(params, 64, 3, 132).splits == 10
    with pytest.raises(LabError, match=f"at most {MAX_SPLITS} splits") as err:
        split_plan(params | {"S_k": 100 * MAX_SPLITS + 1}, 64, 3, 132)
    assert "\n" not in str(err.value)


def test_query_rows_pack_by_key_value_head():
    assert row_groups({"H": 32, "H_kv": 8, "S_q": 1}) == 1  # 4 rows
    assert row_groups({"H": 16, "H_kv": 1, "S_q": 2}) == 2  # 32 rows
    assert row_groups({"H": 8, "H_kv": 8, "S_q": 16}) == 1


def test_the_stages_are_lowered_to_what_a_block_may_hold(monkeypatch):
    fam = AttentionDecodeFamily()
    rung = fam.rung("02")
    params = {"B": 1, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 100, "D": 128, "dtype": "float16", "causal": 0}
    monkeypatch.setattr(AttentionDecodeFamily, "_smem_optin", staticmethod(lambda: 227 * 1024 - 2048))
    assert dict(fam.variant_for(rung, params).spec.knobs)["STAGES"] == 4
    fam = AttentionDecodeFamily()
    monkeypatch.setattr(AttentionDecodeFamily, "_smem_optin", staticmethod(lambda: 99 * 1024 - 2048))
    assert dict(fam.variant_for(rung, params).spec.knobs)["STAGES"] == 2
    assert fam.launch_smem(rung, params) <= 99 * 1024 - 2048


def test_rung_01_serves_only_a_contiguous_cache_of_one_length():
    fam = numpy_family()
    one, split = fam.rung("01"), fam.rung("02")
    served = fam.cases_for(one)
    assert served and not any(c.get("page_size") or c.get("varlen") or c.get("split_keys") for c in served)
    assert fam.cases_for(split) == fam.check_cases()
    p = fam.make_problem(seed=1, B=2, H=4, H_kv=2, S_q=1, S_k=40, D=64, page_size=16)
    why = fam.refusal(one, p, np.empty(p.out_shape, p.dtype))
    assert why is not None and "rung 02" in why and "\n" not in why


def test_check_cases_cover_the_tails_and_the_layouts():
    cases = numpy_family().check_cases()
    assert {1, 17, 64, 65, 1000, 4097} <= {c["S_k"] for c in cases}
    assert {1, 2, 3, 4, 16} <= {c["S_q"] for c in cases}
    assert {7, 16, 64} <= {c.get("page_size", 0) for c in cases}
    assert {64, 100, 512} <= {c.get("split_keys", 0) for c in cases}
    assert any(c.get("varlen") and not c.get("page_size") for c in cases)
    assert {"float16", "bfloat16"} == {c["dtype"] for c in cases}


@pytest.mark.parametrize("kwargs, words", [({"S_q": 17}, "prefill"), ({"page_size": -1}, "page_size >= 0"),
                                           ({"D": 300}, "head dimensions up to"), ({"H": 6, "H_kv": 4}, "multiple")])
def test_a_bad_problem_is_one_sentence(kwargs, words):
    with pytest.raises(LabError, match=words) as err:
        numpy_family().make_problem(seed=1, **({"B": 1, "H": 8, "H_kv": 2, "S_q": 1, "S_k": 10, "D": 64} | kwargs))
    assert "\n" not in str(err.value)


def test_a_paged_cache_gets_a_plan_of_its_own_build(monkeypatch):
    """A paged cache builds with fewer stages, so an SM holds more of its blocks and it wants more splits: the plan of
    a contiguous cache of the same sizes (fewer blocks) must not be served to it."""
    monkeypatch.setattr(AttentionDecodeFamily, "_smem_optin", staticmethod(lambda: 227 * 1024 - 2048))
    fam = AttentionDecodeFamily()
    rung = fam.rung("02")
    params = {"B": 8, "H": 32, "H_kv": 8, "S_q": 1, "S_k": 8192, "D": 128, "dtype": "float16", "causal": 0}
    contiguous = fam.plan(rung, params)
    paged = fam.plan(rung, params | {"page_size": 64})
    assert paged.splits > contiguous.splits
    assert fam.plan(rung, params) == contiguous


@pytest.fixture(scope="module")
def decode_timeline():
    spec = importlib.util.spec_from_file_location("decode_timeline", TIMELINE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_timeline_build_has_its_global_and_the_default_build_none(decode_timeline):
    """TIMELINE = 1 adds the array scripts/decode_timeline.py reads by name, as many rows as the script expects; the
    default build leaves it out."""
    spec = AttentionDecodeFamily().rung("02").spec
    symbol = decode_timeline.SYMBOL.encode()
    assert symbol in build.compile_cubin(spec.with_knobs(TIMELINE=1), 90).cubin
    assert symbol not in build.compile_cubin(spec, 90).cubin
    rows = re.search(r"#define TIMELINE_BLOCKS \(1 << (\d+)\)", spec.path.read_text())
    assert rows and 1 << int(rows[1]) == decode_timeline.TIMELINE_BLOCKS


def test_the_timeline_summary_splits_the_ramp_from_the_tail(decode_timeline):
    # Grid (3, 2, 1): two block rows of three splits on SMs 0-3; block 5 never recorded.
    rows = np.array([[1000, 5000, 5200, 0], [1100, 6000, 6100, 1], [1300, 5500, 9000, 2],
                     [1000, 7000, 7100, 3], [1200, 6500, 8000, 0], [0, 0, 0, 0]], dtype=np.uint64)
    s = decode_timeline.summarize(rows, (3, 2, 1))
    assert s["blocks"] == 6 and s["blocks_missing"] == 1
    assert (s["ramp_ns"], s["loop_end_first_ns"], s["loop_end_last_ns"], s["span_ns"]) == (300, 4000, 6000, 8000)
    assert s["combine_tail_ns"] == 2000 and s["median_block_ns"] == 6100
    assert (s["head_tail_median_ns"], s["head_tail_max_ns"]) == (2000, 3000)  # rows 9000 - 6000 and 8000 - 7000
    assert s["sms_used"] == 4 and s["blocks_per_sm"] == {"1": 3, "2": 1}
    assert s["timer_step_ns"] == 100
    raw = decode_timeline.raw_blocks(rows)
    assert raw["start_ns"] == [0, 100, 300, 0, 200, None] and raw["smid"] == [0, 1, 2, 3, 0, None]
    # 250 keys in splits of 100: the third split of each row has 50, so blocks 2 and 5 are short; the full splits'
    # loop ends are 5000, 6000, 7000, 6500 (4000 .. 6000 from the first start).
    short = decode_timeline.short_splits((3, 2, 1), 250, 100)
    assert short.tolist() == [False, False, True, False, False, True]
    s = decode_timeline.summarize(rows, (3, 2, 1), short)
    assert (s["full_splits"], s["full_loop_end_first_ns"], s["full_loop_end_spread_ns"]) == (4, 4000, 2000)
    assert decode_timeline.short_splits((2, 1, 1), 200, 100).tolist() == [False, False]  # an exact split


def test_the_timeline_script_says_in_one_sentence_that_it_needs_a_gpu(decode_timeline, tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)  # as on a machine with none, here or on a GPU one
    assert decode_timeline.main(tmp_path) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("decode_timeline.py needs a CUDA GPU") and "\n" not in err
    assert not (tmp_path / "decode_timeline.json").exists()
