"""CPU: record files round-trip, bad files give a sentence, LAB_REFERENCE_RESULTS is honoured."""

import dataclasses
import json
import math

import pytest

from lab.core.errors import LabError
from lab.measure import records
from lab.measure.records import Record, RecordSet

# Synthetic test data: made up here, never written under results/.
PROVENANCE = {
    "device": "TEST GPU (synthetic)",
    "arch": "sm_90",
    "sm_count": 132,
    "l2_bytes": 50 << 20,
    "date": "2026-01-02T03:04:05+00:00",
    "commit": "test",
}


def _records() -> RecordSet:
    return RecordSet(
        PROVENANCE,
        [
            Record(
                "copy",
                "cupy_device_copy",
                "headline",
                {"n": 1 << 26},
                8 << 26,
                "cold",
                0.12,
                0.11,
                0.13,
                50,
                "GB/s",
                4473.9,
                "cupy_device_copy",
                4473.9,
            ),
            Record(
                "copy",
                "03_vectorized",
                "headline",
                {"n": 1 << 26, "x_offset": 0},
                8 << 26,
                "cold",
                0.125,
                0.12,
                0.14,
                48,
                "GB/s",
                4294.9,
                "cupy_device_copy",
                4473.9,
                {"note": "synthetic", "k": [1, 2]},
            ),
            Record("copy", "01_naive", "sweep", {"n": 128}, 1024, "warm", 0.002, 0.002, 0.003, 500),
        ],
    )


def test_save_load_round_trip_keeps_every_field(tmp_path):
    rs = _records()
    path = records.save(tmp_path / "sub" / "copy.json", rs)
    assert path == tmp_path / "sub" / "copy.json" and path.is_file()
    loaded = records.load(path)
    assert loaded.provenance == rs.provenance
    assert [r.as_dict() for r in loaded.records] == [r.as_dict() for r in rs.records]
    assert {f.name for f in dataclasses.fields(Record)} == set(loaded.records[0].as_dict())
    assert rs.replayed is False and loaded.replayed is True
    assert loaded.label().startswith("REPLAYED on TEST GPU (synthetic) (sm_90), 2026-01-02")
    assert json.loads(path.read_text())["schema"] == records.SCHEMA


def test_ratio_and_where():
    rs = _records()
    vec = rs.where(rung="03_vectorized")[0]
    assert vec.ratio == pytest.approx(4294.9 / 4473.9)
    assert math.isnan(rs.where(kind="sweep")[0].ratio)  # no ceiling recorded: no ratio, not a zero
    assert len(rs.where(family="copy", kind="headline")) == 2
    assert rs.where(family="transpose") == []
    assert rs.label().startswith("measured on")


def test_wrong_schema_is_a_lab_error(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": 99, "provenance": {}, "records": []}))
    with pytest.raises(LabError, match=r"schema 99.*reads 1"):
        records.load(path)


def test_missing_file_is_a_lab_error_saying_how_to_make_one(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(LabError, match="No record file") as info:
        records.load(path)
    assert str(path) in str(info.value) and "lab bench" in str(info.value)


def test_invalid_json_is_a_lab_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(LabError, match="not a valid record file"):
        records.load(path)


def test_reference_records_honours_the_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert records.reference_dir() == tmp_path
    records.save(tmp_path / "copy.json", _records())
    loaded = records.reference_records("copy")
    assert loaded.replayed and len(loaded.records) == 3
    with pytest.raises(LabError, match="transpose.json"):
        records.reference_records("transpose")


def test_reference_dir_defaults_to_the_committed_results(monkeypatch):
    monkeypatch.delenv("LAB_REFERENCE_RESULTS", raising=False)
    assert records.reference_dir() == records.REFERENCE_GPU_DIR
    assert records.REFERENCE_GPU_DIR.parent == records.RESULTS_DIR


def test_git_commit_honours_lab_commit(monkeypatch):
    monkeypatch.setenv("LAB_COMMIT", "abc123")
    assert records.git_commit() == "abc123"


def test_measured_or_reference_measures_live_and_replays_or_says_none_otherwise(tmp_path, monkeypatch):
    from lab.measure import records

    monkeypatch.setattr(records, "reference_dir", lambda: tmp_path)
    measured = records.RecordSet({"device": "now"}, [])
    assert records.measured_or_reference(True, lambda: measured, "x.json") is measured
    assert records.measured_or_reference(False, lambda: measured, "x.json") is None  # no file: nothing to replay
    records.save(tmp_path / "x.json", records.RecordSet({"device": "then"}, []))
    replayed = records.measured_or_reference(False, lambda: measured, "x.json")
    assert replayed.provenance["device"] == "then" and replayed.replayed
