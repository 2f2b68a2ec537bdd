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


# ----------------------------------------------------------------------------------------------
# GEMM: predictions with a "(where)", numeric claims checked against records, the FP32 peak,
# the operand mix and the DRAM profile
# ----------------------------------------------------------------------------------------------

def _gemm(rung, value, side=4096, kind="headline", ceiling_value=50.0, N=None):
    N = N or side
    params = {"M": side, "N": N, "K": side, "alpha": 1.0, "beta": 0.0, "pad": 0, "lda": side, "ldb": N, "ldc": N}
    ms = 2 * side * N * side / (value * 1e12) * 1e3
    l2 = "warm" if kind == "tail" else "cold"
    return Record("gemm_fp32", rung, kind, params, 4 * (2 * side * side + side * N), l2, ms, ms, ms, 5, "TFLOP/s",
                  value, "cublas_sgemm", ceiling_value)


def _gemm_records():
    values = {"cublas_sgemm": 50.0, "01_naive": 0.45, "02_coalesced": 2.0, "06_vectorized": 30.0,
              "07_warp_tiled": 36.0}
    recs = [_gemm(r, v) for r, v in values.items()] + [_gemm(r, 0.9 * v, 8192) for r, v in values.items()]
    recs += [_gemm(r, v * (1 if n % 4 == 0 else 0.8), kind="tail", N=n)
             for r, v in values.items() for n in range(4094, 4102)]
    return RecordSet(PROVENANCE | {"sm_count": 132}, recs, replayed=True)


def test_a_prediction_keeps_its_where_and_stops_at_the_next_field():
    text = lesson.prediction("gemm_fp32", "02")
    assert text.startswith("(4096^3, H200) ") and "TFLOP/s" in text
    assert "Measured" not in text and "Tails" not in text


def test_claims_read_throughput_ranges_and_ratios_to_rungs_and_the_ceiling():
    found = lesson.claims("6-10x rung 01, ~3-5 TFLOP/s; then 1.3-1.6x over rung 05, about 0.6-0.75x of cuBLAS")
    assert [(c.lo, c.hi, c.against) for c in found] == [(6, 10, "01"), (3, 5, ""), (1.3, 1.6, "05"),
                                                         (0.6, 0.75, "ceiling")]
    assert lesson.claims("reaches the device-copy ceiling at large sizes") == []


def test_prediction_check_says_inside_below_or_above_at_the_sizes_named():
    rs = _gemm_records()
    one = lesson.prediction_check(rs, "gemm_fp32", "01")  # ~0.4-0.5 TFLOP/s at 4096^3: 0.45 is inside
    assert "at 4096^3" in one and "inside the range" in one and "8192" not in one
    two = lesson.prediction_check(rs, "gemm_fp32", "02")  # 6-10x rung 01: 2.0 / 0.45 = 4.4x, below
    assert "BELOW the range" in two and "measured 4.444x rung 01" in two
    seven = lesson.prediction_check(rs, "gemm_fp32", "07")  # names 4096^3 and 8192^3
    assert "at 4096^3" in seven and "at 8192^3" in seven
    assert lesson.prediction_check(None, "gemm_fp32", "01").startswith("NO RECORDS for gemm_fp32")
    assert "no headline records" in lesson.prediction_check(rs, "gemm_fp32", "05")


def test_fp32_peak_in_replay_comes_from_the_records_provenance():
    replay = lesson.Mode(False, "test")
    peak = lesson.fp32_peak(replay, _gemm_records())
    assert peak.sm_count == 132 and peak.tflops == pytest.approx(66.9, abs=0.05)
    assert lesson.fp32_peak(replay, None) is None
    assert "unknown here" in lesson.peak_status(None, replay)
    assert "provenance" in lesson.peak_status(peak, replay)


def test_headline_summary_against_a_peak_and_headline_sizes():
    rs = _gemm_records()
    text = lesson.headline_summary(rs, "gemm_fp32", "07", peak=60.0)
    assert "36.0 TFLOP/s = 0.720x cublas_sgemm" in text and "vs the FP32 peak (60.0 TFLOP/s): 0.600x" in text
    assert [p["M"] for p in lesson.headline_sizes(rs)] == [4096, 8192]
    assert lesson.headline_sizes(None) == []


def test_tail_residues_separate_multiples_of_the_vector_width():
    text = lesson.tail_residues(_gemm_records(), "gemm_fp32", 4)
    row = next(line for line in text.splitlines() if line.strip().startswith("07_warp_tiled"))
    assert row.rstrip().endswith("| 0.800")
    assert "tail sizes N=4094..4101" in lesson.tail_sawtooth(_gemm_records(), "gemm_fp32")


def test_operand_mix_counts_ffma_per_shared_load_and_per_float():
    from types import SimpleNamespace

    tiled = SimpleNamespace(source="k.cu", sass_available=True,
                            instructions={"FFMA": 64, "LDS.128": 4, "LDS": 8, "LDGSTS.128": 2})
    naive = SimpleNamespace(source="n.cu", sass_available=True, instructions={"FFMA": 30, "LDG": 60})
    text = lesson.operand_mix([tiled, naive])
    assert "shared loads 12 (24 floats): 5.3 FFMA per LDS instruction, 2.7 per float" in text
    assert "(LDGSTS) x2" in text and "no shared loads: 0.50 FFMA per global load" in text


def test_dram_helpers_hold_each_rung_against_the_minimum(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert lesson.reference_profile("gemm_fp32") is None
    assert "NO PROFILE for gemm_fp32" in str(lesson.dram_table(None, "gemm_fp32"))
    assert "lab profile gemm_fp32 --json" in lesson.profile_status(None, "gemm_fp32")
    minimum = 4 * 3 * 64**2
    (tmp_path / "gemm_fp32_profile.json").write_text(
        '{"provenance": {}, "params": {"M": 64, "N": 64, "K": 64}, "rows": ['
        f'{{"rung": "01_naive", "dram_read_bytes": {2 * minimum}, "dram_write_bytes": {minimum}}}]}}')
    prof = lesson.reference_profile("gemm_fp32")
    line = lesson.dram_summary(prof, "gemm_fp32", "01")
    assert "3.00x the minimum" in line and "[REPLAYED]" in line
    assert "| 01_naive |" in str(lesson.dram_table(prof, "gemm_fp32"))
    assert "no DRAM counters" in lesson.dram_summary(prof, "gemm_fp32", "02")
