"""The cluster-rows study without a GPU: its cases, the methods it times for each family (the rung before, the
cluster rung and only the knob probes the rung takes), and its summary of synthetic rounds."""

import pytest

from lab.families import get_family
from lab.studies import STUDIES
from lab.studies import cluster_rows_study as study


def test_cases_hold_x_of_the_same_bytes_for_every_op_type_and_length():
    cases = study.cases()
    assert {(c["op"], c["dtype"]) for c in cases} == {(op, d) for op, ds in study.TYPES.items() for d in ds}
    assert {c["n"] for c in cases} == set(study.ROW_LENGTHS)
    for c in cases:
        assert c["rows"] * c["n"] * (4 if c["dtype"] == "float32" else 2) == study.ARRAY_BYTES
    assert {c["n"] for c in study.cases(quick=True)} == {32768}


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm"])
def test_norm_methods_are_rung_03_rung_04_and_its_probes(op):
    names = list(study.rung_methods(get_family(op), op))
    one_exchange = ["04 STATS=1"] if op == "layernorm" else []  # RMSNorm has one statistic to exchange
    assert names == ["03_specialized", "04_cluster", "04 EXCHANGE=0", "04 BLOCK=128", "04 BLOCK=512"] + one_exchange
    probe = study.rung_methods(get_family(op), op)["04 EXCHANGE=0"]
    assert dict(probe.spec.knobs)["EXCHANGE"] == 0


def test_a_family_without_the_cluster_rung_keeps_the_rung_before():
    class Stub:
        rungs = get_family("rmsnorm").rungs[:3]

        def rung(self, key):
            return next(r for r in self.rungs if r.key == key)

    assert list(study.rung_methods(Stub(), "rmsnorm")) == ["03_specialized"]


def test_the_summary_takes_same_round_ratios_to_the_copy_and_to_torch():
    case = {"op": "rmsnorm", "dtype": "float16", "n": 32768, "rows": 4096}
    rows = []
    for r, (copy_ms, torch_ms, rung_ms) in enumerate([(1.0, 2.0, 1.1), (1.2, 2.4, 1.3), (1.0, 2.0, 1.05)]):
        for method, ms in (("copy", copy_ms), ("torch", torch_ms), ("04_cluster", rung_ms)):
            rows.append({"shape": case, "method": method, "round": r, "median_ms": ms, "p10_ms": ms, "p90_ms": ms,
                         "GB/s": 512.0 / ms})
    record = study.assemble(rows, 3, [], {}, {"device": "stand-in"})
    mine = next(s for s in record["summary"] if s["method"] == "04_cluster")
    assert mine["x_copy"] == pytest.approx(1.2 / 1.3)  # the median of 1/1.1, 1.2/1.3, 1/1.05
    assert mine["x_torch"] == pytest.approx(2.4 / 1.3)  # of 2/1.1, 2.4/1.3, 2/1.05
    assert record["rounds"] == 3 and record["failed"] == []


def test_the_registry_names_its_record():
    entry = STUDIES["cluster-rows"]
    assert entry.module == "lab.studies.cluster_rows_study" and entry.record == study.FILENAME and entry.needs_gpu


def test_the_readme_lines_show_each_case_from_the_record(tmp_path, monkeypatch):
    import json

    from lab.studies import report

    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert report.cluster_rows_lines() == []  # no record: no lines
    case = {"op": "layernorm", "dtype": "bfloat16", "n": 65536, "rows": 2048}
    rows = [{"shape": case, "method": m, "round": r, "median_ms": ms, "p10_ms": ms, "p90_ms": ms, "GB/s": 1.0 / ms}
            for r in range(2) for m, ms in (("copy", 1.0), ("torch", 1.5), ("03_specialized", 1.4),
                                            ("04_cluster", 1.05))]
    record = study.assemble(rows, 2, [], {}, {"device": "NVIDIA H200", "date": "2026-12-06", "commit": "abc1234"})
    (tmp_path / study.FILENAME).write_text(json.dumps(record))
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    lines = report.cluster_rows_lines()
    assert any("NVIDIA H200, 2026-12-06, commit abc1234" in line for line in lines)
    assert "| layernorm, bfloat16 | 65536 | 0.71 | 0.95 | 0.67 | 1.43x |" in lines


def test_the_record_is_the_reference_gpus_else_the_h100s_beside_it(tmp_path, monkeypatch):
    (tmp_path / "h200").mkdir()
    (tmp_path / "h100").mkdir()
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path / "h200"))
    assert study.record_path() is None
    (tmp_path / "h100" / study.FILENAME).write_text("{}")
    assert study.record_path() == tmp_path / "h100" / study.FILENAME
    (tmp_path / "h200" / study.FILENAME).write_text("{}")
    assert study.record_path() == tmp_path / "h200" / study.FILENAME


def test_the_cluster_method_is_the_rung_as_built_now():
    """In a record made while LayerNorm's rung 04 defaulted to STATS = 1 (its commit in STATS_1_COMMITS), the
    "04 STATS=2" row is the rung as built now; in any other record (RMSNorm's, an older or later LayerNorm one,
    even one with a "04 STATS=2" probe), the rung's own row."""
    then = study.STATS_1_COMMITS[-1] + "deadbeef"
    assert study.cluster_method("layernorm", {"04_cluster", "04 STATS=2"}, then) == "04 STATS=2"
    assert study.cluster_method("layernorm", {"04_cluster", "04 STATS=2"}, "abcdef0123") == "04_cluster"
    assert study.cluster_method("layernorm", {"04_cluster", "04 STATS=1"}, then) == "04_cluster"
    assert study.cluster_method("rmsnorm", {"04_cluster", "04 STATS=2"}, then) == "04_cluster"
    assert study.cluster_method("softmax", {"05_cluster"}) == "05_cluster"
