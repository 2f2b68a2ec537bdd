"""CPU: the row-operation study's cases, byte counts, method order, reference, error bound and summaries (on made-up
numbers); GPU: a tiny run end to end, read back through lab.measure.records."""

import json
import math

import numpy as np
import pytest

from lab.families.norms import norm_reference
from lab.studies import rowops_study as rs

MIB = 1 << 20


def test_cases_cover_the_study():
    cases = rs.case_list()
    names = {(c.op, c.dtype, c.n) for c in cases}
    for n in (1024, 4096, 8192, 16384, 32768):
        assert ("rmsnorm", "float16", n) in names
    assert {("rmsnorm", "bfloat16", 4096), ("layernorm", "float16", 4096), ("layernorm", "float16", 8192),
            ("softmax", "float16", 8192), ("softmax", "float32", 8192)} <= names
    assert len({c.name for c in cases}) == len(cases)  # the small case differs from the big one by its rows


def test_cases_move_about_256_mib_except_one_that_fits_the_l2():
    big = [c for c in rs.case_list() if c.bytes_moved > 64 * MIB]
    small = [c for c in rs.case_list() if c.bytes_moved <= 64 * MIB]
    assert len(small) == 1 and small[0].bytes_moved == 8 * MIB
    for c in big:
        assert 0 <= rs.TRAFFIC_BYTES - c.bytes_moved < 2 * c.n * c.itemsize  # whole rows, at most one short
        assert 128 * MIB <= c.bytes_moved <= 256 * MIB


def test_bytes_count_x_once_and_the_output_once():
    assert rs.Case("rmsnorm", "float16", 4096, 10).bytes_moved == 2 * 10 * 4096 * 2
    assert rs.Case("rmsnorm", "bfloat16", 4096, 10).bytes_moved == 2 * 10 * 4096 * 2
    assert rs.Case("softmax", "float32", 8192, 3).bytes_moved == 2 * 3 * 8192 * 4
    assert rs.rows_for(8192, "float32") == 4096 and rs.rows_for(1024, "float16") == 65536
    assert rs.gbps(10**9, 1.0) == pytest.approx(1000.0)


def test_quick_keeps_half_of_the_cases():
    full, quick = rs.case_list(), rs.case_list(quick=True)
    assert set(quick) < set(full) and len(quick) == math.ceil(len(full) / 2)
    assert {c.op for c in quick} == {"rmsnorm", "layernorm", "softmax"}


def test_methods_and_their_rotation():
    assert set(rs.DESCRIPTIONS) == set(rs.METHODS)
    assert rs.method_list(False) == [m for m in rs.METHODS if not m.startswith("torch_")]
    methods = rs.method_list(True)
    orders = [rs.rotation(methods, r, 3) for r in range(3)]
    assert all(sorted(o) == sorted(methods) for o in orders)
    firsts = [o[0] for o in orders]
    assert len(set(firsts)) == 3  # each round starts elsewhere
    positions = [[o.index(m) for o in orders] for m in methods]
    assert all(max(p) - min(p) >= len(methods) // 3 for p in positions)  # every method moves by a third or more


def test_spread():
    assert rs.spread([1.0, 1.0, 0.8]) == pytest.approx(0.25)
    assert rs.spread([0.9]) is None and rs.spread([None, 0.9]) is None
    assert rs.spread([0.9, float("nan"), 0.9]) == 0.0


def _rows(fractions: dict, copy_gbps=(4000.0, 4000.0, 4000.0)):
    rows = []
    for method, per_round in fractions.items():
        for r, f in enumerate(per_round):
            value = None if f is None else f * copy_gbps[r]
            rows.append({"case": "c", "method": method, "round": r, "gbps": value, "fraction": f})
    for r, g in enumerate(copy_gbps):
        rows.append({"case": "c", "method": "copy", "round": r, "gbps": g, "fraction": 1.0})
    return rows


def test_summary_names_the_methods_that_vary():
    rows = _rows({"lab_ops_cold_write": [0.97, 0.97, 0.67], "lab_ops_cold_read": [0.95, 0.96, 0.95],
                  "lab_ops_graph": [0.98, 0.99, 0.98], "torch_cold_write": [0.90, 0.91, 0.905]})
    s = rs.summarize(rows)["c"]
    assert s["varying"] == ["lab_ops_cold_write"]
    assert s["methods"]["lab_ops_cold_write"]["spread"] == pytest.approx(0.97 / 0.67 - 1)
    assert s["methods"]["lab_ops_cold_write"]["fractions"] == [0.97, 0.97, 0.67]
    assert s["methods"]["copy"]["spread"] == 0.0
    assert any("write flush" in h for h in s["hints"])
    table = rs.format_table(rs.summarize(rows), 3)
    assert "0.670" in table and "lab_ops_cold_write (44.8%)" in table


def test_summary_on_steady_numbers_and_a_moving_copy():
    s = rs.summarize(_rows({"lab_ops_cold_write": [0.9, 0.91, 0.9]}))["c"]
    assert s["varying"] == [] and s["hints"][0].startswith("steady")
    moving = rs.summarize(_rows({"lab_ops_cold_write": [0.9, 0.9, 0.9]}, copy_gbps=(4000.0, 3000.0, 4000.0)))["c"]
    assert moving["methods"]["copy"]["gbps_spread"] == pytest.approx(1 / 3)
    assert any("copy itself varies" in h for h in moving["hints"])


def test_summary_tolerates_a_failed_round_and_a_single_round():
    s = rs.summarize(_rows({"torch_graph": [0.9, None, 0.6]}))["c"]
    assert s["methods"]["torch_graph"]["spread"] == pytest.approx(0.5) and "torch_graph" in s["varying"]
    assert "-" in rs.format_table(rs.summarize(_rows({"torch_graph": [0.9, None, 0.6]})), 3)
    one = rs.summarize(_rows({"lab_ops_b2b": [0.9]}, copy_gbps=(4000.0,)))["c"]
    assert one["varying"] == [] and one["hints"] == ["fewer than two rounds: no spread to read"]


@pytest.mark.parametrize("varying, expected", [
    ({"lab_ops_fresh"}, "where the buffers were placed"),
    ({"lab_ops_out_none"}, "allocation per call"),
    ({"lab_ops_after_idle"}, "after idle"),
    ({"lab_ops_cold_write", "family_raw"}, "the flush's dirty lines"),
    ({"lab_ops_cold_write"}, "the family's own launch (after the same write flush) does not"),
    ({"lab_ops_cold_write", "lab_ops_cold_read", "family_raw"}, "single timed calls vary"),
    ({"lab_ops_cold_write", "lab_ops_cold_read", "family_raw", "lab_ops_b2b", "lab_ops_graph"},
     "PyTorch on the same buffers does not"),
    (set(rs.METHODS) - {"copy"}, "PyTorch varies too"),
])
def test_hints(varying, expected):
    measured = set(rs.METHODS)
    assert any(expected in h for h in rs.hints(varying, measured)), rs.hints(varying, measured)


def test_a_steady_family_launch_clears_the_write_flush():
    measured = set(rs.METHODS)
    assert not any("dirty lines" in h for h in rs.hints({"lab_ops_cold_write"}, measured))


def test_hints_never_call_an_unmeasured_method_steady():
    # PyTorch absent: a varying lab.ops is not "PyTorch does not vary".
    measured = set(rs.method_list(False))
    assert not any("PyTorch" in h for h in rs.hints(measured - {"copy"}, measured))


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "softmax"])
def test_reference_matches_the_families(op):
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((5, 33)), rng.uniform(0.5, 2, 33), rng.standard_normal(33)
    got = rs.reference(op, x, w, b, 1e-5)
    if op == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    else:
        want = norm_reference(x, w, b if op == "layernorm" else None, 1e-5, op == "layernorm")
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("dtype, storage", [("float16", np.float16), ("float32", np.float32)])
def test_bound_passes_one_rounding_and_fails_a_few_ulps(dtype, storage):
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((4, 256))
    rounded = ref.astype(storage).astype(np.float64)
    assert rs.outside_bound(rounded, ref, dtype)[0] == 0
    off = ref * (1 + 4 * rs.RTOL[dtype])  # four times the relative allowance
    assert rs.outside_bound(off, ref, dtype)[0] > ref.size // 2
    nan = rounded.copy()
    nan[0, 0] = np.nan
    bad, worst = rs.outside_bound(nan, ref, dtype)
    assert bad == 1 and worst == float("inf")
    # PyTorch's looser bound passes what the strict one fails by a little.
    ulp = np.spacing(np.abs(ref).astype(storage)).astype(np.float64)
    two = rounded + 2 * ulp * np.sign(ref)
    assert rs.outside_bound(two, ref, dtype, factor=rs.TORCH_FACTOR)[0] == 0


def test_payload_is_read_back_by_lab_records(tmp_path):
    from lab.measure import records

    rec = records.Record("rmsnorm", "lab_ops_graph", "probe", {"rows": 2, "n": 8, "dtype": "float16"}, 64, "warm",
                         0.01, 0.009, 0.011, 11, value=6.4, ceiling="cupy_device_copy", ceiling_value=7.0,
                         extra={"experiment": rs.EXPERIMENT, "round": 0})
    path = tmp_path / rs.FILENAME
    path.write_text(json.dumps(rs.payload({"device": "fake"}, [rec], {"rounds": 1})))
    loaded = records.load(path)
    assert loaded.records == [rec] and loaded.provenance == {"device": "fake"}
    assert json.loads(path.read_text())["study"] == {"rounds": 1}


def test_main_rejects_zero_rounds():
    with pytest.raises(SystemExit):
        rs.main(["out", "--rounds", "0"])


@pytest.mark.gpu
def test_tiny_study_runs_end_to_end(tmp_path):
    from lab.measure import records

    cases = [rs.Case("rmsnorm", "float16", 1024, 64), rs.Case("rmsnorm", "bfloat16", 4096, 16),
             rs.Case("layernorm", "float16", 2048, 32), rs.Case("softmax", "float32", 1000, 24)]
    lines = []
    path = rs.run(tmp_path, rounds=2, cases=cases, progress=lines.append, min_time_ms=0.5)
    data = json.loads(path.read_text())
    infos = data["study"]["cases"]
    assert [i["case"] for i in infos] == [c.name for c in cases]
    assert all(i["check"]["passed"] for i in infos), [i["check"] for i in infos]
    assert all(i["launch"] and i["family_launch_same_as_recorded"] for i in infos)
    loaded = records.load(path)
    lab_methods = rs.method_list(False)
    timed = {(r.extra["case"], r.rung, r.extra["round"]) for r in loaded.records}
    assert timed >= {(c.name, m, r) for c in cases for m in lab_methods for r in (0, 1)}  # no lab method failed
    if data["study"]["torch"] is not None:
        assert {r.rung for r in loaded.records} >= set(rs.TORCH_METHODS)
    assert all(r.value > 0 and r.ceiling_value > 0 and r.extra["round"] in (0, 1) for r in loaded.records)
    cold = [r for r in loaded.records if r.rung == "lab_ops_cold_write"]
    assert all(r.extra["ops_recordings"] == 0 and r.extra["ops_replays"] > 0 for r in cold)  # the replay path
    for case in cases:
        fresh = [r.extra["addresses"]["x"] for r in loaded.records if r.rung == "lab_ops_fresh"
                 and r.extra["case"] == case.name]
        assert len(set(fresh)) == len(fresh) == 2  # new buffers in every round
    assert "methods varying by more than" in "\n".join(lines)


class _Raw:
    name, num_regs, shared_size_bytes = "rmsnorm_specialized", 40, 64


class _Array:
    def __init__(self, ptr):
        self.data = type("Data", (), {"ptr": ptr})()


def test_launch_info_and_addresses():
    from types import SimpleNamespace

    gpu = SimpleNamespace(sm_count=132, arch=90)
    (info,) = rs._launch_info([(_Raw(), (264,), (256,), (), 0)], 1056, gpu)
    assert info["blocks"] == 264 and info["blocks_per_sm_of_grid"] == 2 and info["rows_per_block"] == 4
    assert info["resident_blocks_per_sm"] >= 1 and info["waves"] == 264 / (132 * info["resident_blocks_per_sm"])
    a = rs._address_info(_Array(5 * MIB + 512), _Array(9 * MIB))
    assert a["x_mod_2mib"] == MIB + 512 and a["out_mod_2mib"] == MIB and a["out_minus_x"] == 4 * MIB - 512
    assert a["distance_mod_2mib"] == 2 * MIB - 512


def test_recorded_launches_are_found_by_key_or_by_their_addresses(monkeypatch):
    from types import SimpleNamespace

    from lab.ops import api

    case = rs.Case("rmsnorm", "float16", 4096, 8)
    x, out = _Array(1 << 30), _Array(3 << 30)
    launch = (_Raw(), (8,), (128,), (np.uint64(1 << 30), np.uint64(7), np.uint64(3 << 30), np.int32(8)), 0)
    other = (_Raw(), (1,), (32,), (np.uint64(5),), 0)
    by_key = {(("rmsnorm", 8, 4096, "float16", 1e-5), None, (1 << 30, 3 << 30, 7)): [launch], ("x",): [other]}
    monkeypatch.setattr(api, "default_runtime", lambda: SimpleNamespace(recordings=by_key))
    assert rs._recorded(case, x, out) == [launch]
    by_args = {("another key format",): [launch], ("x",): [other]}
    monkeypatch.setattr(api, "default_runtime", lambda: SimpleNamespace(recordings=by_args))
    assert rs._recorded(case, x, out) == [launch]
    assert rs._recorded(case, _Array(11), out) == []
    assert rs._signature([launch]) == [((8,), (128,), 0)]
