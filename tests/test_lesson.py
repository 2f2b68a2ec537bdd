"""lab.lesson: the notebooks' helpers (mode, sources and diffs, figures read from records). CPU only."""

import math

import pytest

from lab import lesson
from lab.errors import LabError
from lab.records import Record, RecordSet

PROVENANCE = {"device": "TEST GPU", "arch": "sm_90", "l2_bytes": 100 * 2**20, "date": "2000-01-01T00:00:00"}


def _rec(rung, kind, n, value, l2="cold", ceiling_value=100.0):
    bytes_moved = 8 * n
    ms = bytes_moved / (value * 1e9) * 1e3
    return Record("copy", rung, kind, {"n": n}, bytes_moved, l2, ms, ms * 0.99, ms * 1.01, 10, "GB/s", value,
                  "cupy_device_copy", ceiling_value)


def _records():
    recs = []
    for n in (1 << 20, 1 << 26, 1 << 28):
        recs += [_rec("cupy_device_copy", "sweep", n, 100.0), _rec("01_naive", "sweep", n, 80.0),
                 _rec("02_grid_stride", "sweep", n, 88.0)]
    recs += [_rec("cupy_device_copy", "headline", 1 << 26, 100.0), _rec("01_naive", "headline", 1 << 26, 90.0),
             _rec("02_grid_stride", "headline", 1 << 26, 99.0)]
    return RecordSet(PROVENANCE, recs, replayed=True)


def test_replay_is_forced_by_the_environment(monkeypatch):
    monkeypatch.setenv(lesson.MODE_VARIABLE, "replay")
    mode = lesson.mode()
    assert not mode.live and lesson.compile_arch(mode) == lesson.DEFAULT_ARCH


def test_a_bad_mode_value_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(lesson.MODE_VARIABLE, "sometimes")
    with pytest.raises(LabError, match="live, replay or auto"):
        lesson.mode()


def test_banner_says_replay_and_names_missing_records(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    text = lesson.mode_banner("copy", current=lesson.Mode(False, "no GPU here (test)"))
    assert "REPLAY MODE" in text and "NO RECORDED RESULTS" in text and "lab bench copy" in text


def test_rung_diff_is_empty_for_the_first_rung_and_a_unified_diff_after():
    assert lesson.rung_diff("copy", "01") == ""
    diff = lesson.rung_diff("copy", "02")
    assert diff.startswith("--- copy/01_naive.cu\n+++ copy/02_grid_stride.cu")
    assert "+extern \"C\" __global__ void copy_grid_stride" in diff


def test_every_rung_states_a_prediction():
    from lab.ladder import families

    for fam in families().values():
        for rung in fam.rungs:
            text = lesson.prediction(fam, rung.key)
            assert text and not text.startswith("(this rung's header"), rung.spec.source
            assert "Requires:" not in text and "Tails" not in text


def test_show_source_and_diff_render_as_markdown_code():
    assert "```cuda" in lesson.show_source("transpose", "01")._repr_markdown_()
    assert "```diff" in lesson.show_diff("transpose", "03")._repr_markdown_()


def test_select_keeps_the_ceiling_and_so_far_keeps_earlier_rungs():
    rs = _records()
    assert {r.rung for r in lesson.select(rs, "copy", ["02"]).records} == {"cupy_device_copy", "02_grid_stride"}
    assert {r.rung for r in lesson.so_far(rs, "copy", "01").records} == {"cupy_device_copy", "01_naive"}
    assert lesson.select(None, "copy", ["01"]) is None


def test_ratio_pairs_matching_problems_and_filters_by_regime():
    rs = _records()
    head = lesson.ratio(rs, "copy", "02", "01")
    assert [round(p[2], 3) for p in head.pairs] == [1.1]
    hbm = lesson.ratio(rs, "copy", "01", "ceiling", kind="sweep", regime="hbm")
    assert [p[0]["n"] for p in hbm.pairs] == [1 << 28]  # 2 GiB moved; 512 MiB is under 8 L2s
    assert math.isclose(hbm.median, 0.8)
    assert "no matching records" in str(lesson.ratio(rs, "copy", "03", "01"))


def test_helpers_say_so_when_there_are_no_records():
    for text in (lesson.headline_summary(None, "copy", "01"), str(lesson.ratio(None, "copy", "01")),
                 lesson.cold_versus_warm(None, "copy"), lesson.spread_table(None, "copy"),
                 lesson.tail_sawtooth(None, "copy"), lesson.records_status(None, "copy")):
        assert text.startswith("NO RECORDS for copy")
    lesson.plot(lambda rs, fam: None, None, "copy")  # prints, does not raise


def test_reference_profile_absent_or_malformed_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert lesson.reference_profile("transpose") is None
    (tmp_path / "transpose_profile.json").write_text("{not json")
    assert lesson.reference_profile("transpose") is None
    (tmp_path / "transpose_profile.json").write_text('{"provenance": {}, "params": {}, "rows": '
                                                     '[{"rung": "02_smem_tiled", "smem_bank_conflicts_ld": 7}]}')
    prof = lesson.reference_profile("transpose")
    assert prof["replayed"] and "= 7" in lesson.profile_value(prof, "transpose", "02")


def test_few_cases_spreads_over_the_check_cases():
    from lab.ladder import get_family

    cases = get_family("copy").check_cases()
    few = lesson.few_cases("copy", 5)
    assert len(few) == 5 and few[0] == cases[0] and few[-1] == cases[-1]
