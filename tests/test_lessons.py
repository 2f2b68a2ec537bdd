"""lab.lessons: the notebooks' helpers (mode, sources and diffs, record views, Nsight views, predictions,
the rung walk). CPU only."""

import math

import pytest

from lab import lessons
from lab.core import device
from lab.core.errors import LabError
from lab.measure.records import Record, RecordSet
from lab.studies import profile

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
    monkeypatch.setenv(lessons.MODE_VARIABLE, "replay")
    mode = lessons.mode()
    assert not mode.live and lessons.compile_arch(mode) == device.REFERENCE_ARCH


def test_a_bad_mode_value_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(lessons.MODE_VARIABLE, "sometimes")
    with pytest.raises(LabError, match="live, replay or auto"):
        lessons.mode()


def test_banner_says_replay_and_names_missing_records(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    text = lessons.mode_banner("copy", current=lessons.Mode(False, "no GPU here (test)"))
    assert "REPLAY MODE" in text and "NO RECORDED RESULTS" in text and "lab bench copy" in text


def test_rung_diff_is_empty_for_the_first_rung_and_a_unified_diff_after():
    assert lessons.rung_diff("copy", "01") == ""
    diff = lessons.rung_diff("copy", "02")
    assert diff.startswith("--- copy/01_naive.cu\n+++ copy/02_grid_stride.cu")
    assert "+extern \"C\" __global__ void copy_grid_stride" in diff


def test_every_rung_states_a_prediction():
    from lab.families import families

    for fam in families().values():
        for rung in fam.rungs:
            text = lessons.prediction(fam, rung.key)
            assert text and not text.startswith("(this rung's header"), rung.spec.source
            assert "Requires:" not in text and "Tails" not in text


def test_show_source_and_diff_render_as_markdown_code():
    assert "```cuda" in lessons.show_source("transpose", "01")._repr_markdown_()
    assert "```diff" in lessons.show_diff("transpose", "03")._repr_markdown_()


def test_select_keeps_the_ceiling_and_so_far_keeps_earlier_rungs():
    rs = _records()
    assert {r.rung for r in lessons.select(rs, "copy", ["02"]).records} == {"cupy_device_copy", "02_grid_stride"}
    assert {r.rung for r in lessons.so_far(rs, "copy", "01").records} == {"cupy_device_copy", "01_naive"}
    assert lessons.select(None, "copy", ["01"]) is None


def test_ratio_pairs_matching_problems_and_filters_by_regime():
    rs = _records()
    head = lessons.ratio(rs, "copy", "02", "01")
    assert [round(p[2], 3) for p in head.pairs] == [1.1]
    hbm = lessons.ratio(rs, "copy", "01", "ceiling", kind="sweep", regime="hbm")
    assert [p[0]["n"] for p in hbm.pairs] == [1 << 28]  # 2 GiB moved; 512 MiB is under 8 L2s
    assert math.isclose(hbm.median, 0.8)
    assert "no matching records" in str(lessons.ratio(rs, "copy", "03", "01"))


def test_helpers_say_so_when_there_are_no_records():
    for text in (lessons.headline_summary(None, "copy", "01"), str(lessons.ratio(None, "copy", "01")),
                 lessons.cold_versus_warm(None, "copy"), lessons.spread_table(None, "copy"),
                 lessons.tail_sawtooth(None, "copy"), lessons.records_status(None, "copy")):
        assert text.startswith("NO RECORDS for copy")
    lessons.plot(lambda rs, fam: None, None, "copy")  # prints, does not raise


def test_reference_profile_absent_or_malformed_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert profile.reference_profile("transpose") is None
    (tmp_path / "transpose_profile.json").write_text("{not json")
    assert profile.reference_profile("transpose") is None
    (tmp_path / "transpose_profile.json").write_text('{"provenance": {}, "params": {}, "rows": '
                                                     '[{"rung": "02_smem_tiled", "smem_bank_conflicts_ld": 7}]}')
    prof = profile.reference_profile("transpose")
    assert prof["replayed"] and "= 7" in lessons.profile_value(prof, "transpose", "02")


def test_few_cases_spreads_over_the_check_cases():
    from lab.families import get_family

    cases = get_family("copy").check_cases()
    few = lessons.few_cases("copy", 5)
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
    text = lessons.prediction("gemm_fp32", "02")
    assert text.startswith("(4096^3, H200) ") and "TFLOP/s" in text
    assert "Measured" not in text and "Tails" not in text


def test_claims_read_throughput_ranges_and_ratios_to_rungs_and_the_ceiling():
    found = lessons.claims("6-10x rung 01, ~3-5 TFLOP/s; then 1.3-1.6x over rung 05, about 0.6-0.75x of cuBLAS")
    assert [(c.lo, c.hi, c.against) for c in found] == [(6, 10, "01"), (3, 5, ""), (1.3, 1.6, "05"),
                                                         (0.6, 0.75, "ceiling")]
    assert lessons.claims("reaches the device-copy ceiling at large sizes") == []


def test_prediction_check_says_inside_below_or_above_at_the_sizes_named():
    rs = _gemm_records()
    one = lessons.prediction_check(rs, "gemm_fp32", "01")  # ~0.4-0.5 TFLOP/s at 4096^3: 0.45 is inside
    assert "at 4096^3" in one and "inside the range" in one and "8192" not in one
    two = lessons.prediction_check(rs, "gemm_fp32", "02")  # 6-10x rung 01: 2.0 / 0.45 = 4.4x, below
    assert "BELOW the range" in two and "measured 4.444x rung 01" in two
    seven = lessons.prediction_check(rs, "gemm_fp32", "07")  # names 4096^3 and 8192^3
    assert "at 4096^3" in seven and "at 8192^3" in seven
    assert lessons.prediction_check(None, "gemm_fp32", "01").startswith("NO RECORDS for gemm_fp32")
    five = lessons.prediction_check(rs, "gemm_fp32", "05")  # names 4096^3, which has no rung-05 record
    assert "at 4096^3: the prediction names this size, but these records have no headline run there" in five


def test_fp32_peak_in_replay_comes_from_the_records_provenance():
    replay = lessons.Mode(False, "test")
    peak = lessons.fp32_peak(replay, _gemm_records())
    assert peak.sm_count == 132 and peak.tflops == pytest.approx(66.9, abs=0.05)
    assert lessons.fp32_peak(replay, None) is None
    assert "unknown here" in lessons.peak_status(None, replay)
    assert "provenance" in lessons.peak_status(peak, replay)


def test_headline_summary_against_a_peak_and_headline_sizes():
    rs = _gemm_records()
    text = lessons.headline_summary(rs, "gemm_fp32", "07", peak=60.0)
    assert "36.0 TFLOP/s = 0.720x cublas_sgemm" in text and "vs the FP32 peak (60.0 TFLOP/s): 0.600x" in text
    assert [p["M"] for p in lessons.headline_sizes(rs)] == [4096, 8192]
    assert lessons.headline_sizes(None) == []


def test_tail_residues_separate_multiples_of_the_vector_width():
    text = lessons.tail_residues(_gemm_records(), "gemm_fp32", 4)
    row = next(line for line in text.splitlines() if line.strip().startswith("07_warp_tiled"))
    assert row.rstrip().endswith("| 0.800")
    assert "tail sizes N=4094..4101" in lessons.tail_sawtooth(_gemm_records(), "gemm_fp32")


def test_operand_mix_counts_ffma_per_shared_load_and_per_float():
    from types import SimpleNamespace

    tiled = SimpleNamespace(source="k.cu", sass_available=True,
                            instructions={"FFMA": 64, "LDS.128": 4, "LDS": 8, "LDGSTS.128": 2})
    naive = SimpleNamespace(source="n.cu", sass_available=True, instructions={"FFMA": 30, "LDG": 60})
    text = lessons.operand_mix([tiled, naive])
    assert "shared loads 12 (24 floats): 5.3 FFMA per LDS instruction, 2.7 per float" in text
    assert "(LDGSTS) x2" in text and "no shared loads: 0.50 FFMA per global load" in text


def test_dram_helpers_hold_each_rung_against_the_minimum(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert profile.reference_profile("gemm_fp32") is None
    assert "NO PROFILE for gemm_fp32" in str(lessons.dram_table(None, "gemm_fp32"))
    assert "lab profile gemm_fp32 --json" in lessons.profile_status(None, "gemm_fp32")
    minimum = 4 * 3 * 64**2
    (tmp_path / "gemm_fp32_profile.json").write_text(
        '{"provenance": {}, "params": {"M": 64, "N": 64, "K": 64}, "rows": ['
        f'{{"rung": "01_naive", "dram_read_bytes": {2 * minimum}, "dram_write_bytes": {minimum}}}]}}')
    prof = profile.reference_profile("gemm_fp32")
    line = lessons.dram_summary(prof, "gemm_fp32", "01")
    assert "3.00x the minimum" in line and "[REPLAYED]" in line
    assert "| 01_naive |" in str(lessons.dram_table(prof, "gemm_fp32"))
    assert "no DRAM counters" in lessons.dram_summary(prof, "gemm_fp32", "02")


# ----------------------------------------------------------------------------------------------
# Helpers added with the lessons package: size and sweep comparisons, DRAM changes, the rung walk
# ----------------------------------------------------------------------------------------------

def test_ratio_by_size_names_the_sizes_where_a_rung_beats_the_ceiling():
    recs = [_gemm("cublas_sgemm", 50.0, n, "sweep") for n in (1024, 2048)]
    recs += [_gemm("07_warp_tiled", 55.0, 1024, "sweep"), _gemm("07_warp_tiled", 40.0, 2048, "sweep")]
    text = lessons.ratio_by_size(RecordSet(PROVENANCE, recs), "gemm_fp32", "07")
    assert "1.100x  <- faster" in text and "0.800x" in text
    assert "faster than cublas_sgemm at 1 of 2 sizes: M=1024, N=1024, K=1024" in text


def test_size_change_holds_each_size_against_the_first_for_the_rung_and_the_ceiling():
    rs = _gemm_records()
    sizes = lessons.headline_sizes(rs)
    text = lessons.size_change(rs, "gemm_fp32", "07", sizes[0], sizes[1:])
    assert "07_warp_tiled    at M=8192, N=8192, K=8192" in text and "0.900x its M=4096, N=4096, K=4096 figure" in text
    assert "cublas_sgemm" in text


def test_tail_steps_reports_the_step_the_records_took():
    recs = [_gemm("07_warp_tiled", 30.0, kind="tail", N=n) for n in (4090, 4093, 4096)]
    text = lessons.tail_steps(RecordSet(PROVENANCE, recs), "gemm_fp32")
    assert "N = 4090..4096, 3 sizes, stepping by 3" in text


def _profile(tmp_path, monkeypatch, rows):
    import json

    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    (tmp_path / "gemm_fp32_profile.json").write_text(json.dumps(
        {"provenance": {}, "params": {"M": 4096, "N": 4096, "K": 4096, "alpha": 1.0, "beta": 0.0, "pad": 0,
                                       "lda": 4096, "ldb": 4096, "ldc": 4096}, "rows": rows}))
    return profile.reference_profile("gemm_fp32")


def test_dram_change_says_when_a_rung_moves_more_bytes_and_dram_rate_holds_them_against_time(tmp_path,
                                                                                              monkeypatch):
    prof = _profile(tmp_path, monkeypatch, [
        {"rung": "06_vectorized", "dram_read_bytes": 3e8, "dram_write_bytes": 1e8, "l2_hit_rate_pct": 80.0},
        {"rung": "07_warp_tiled", "dram_read_bytes": 9e8, "dram_write_bytes": 1e8, "l2_hit_rate_pct": 70.0}])
    text = lessons.dram_change(prof, "gemm_fp32", "06", "07")
    assert "400 -> 1000 MB, 2.50x (MORE traffic)" in text and "L2 hit rate 80.0% -> 70.0%" in text
    rate = lessons.dram_rate(prof, _gemm_records(), "gemm_fp32", "07", 4000.0, "the device copy")
    ms = 2 * 4096**3 / 36e12 * 1e3
    assert f"= {1e9 / (ms * 1e-3) / 1e9:.0f} GB/s" in rate and "of the device copy (4000 GB/s)" in rate
    assert "needs both" in lessons.dram_rate(None, None, "gemm_fp32", "07")


def test_the_rung_walk_shows_every_repeated_step_without_records(capsys):
    from lab.families import get_family

    gemm = get_family("gemm_fp32")
    walk = lessons.RungWalk(gemm, device.REFERENCE_ARCH, None, None, operand_mix=True)
    shown = [s for s in walk.steps("02") if not callable(s)]
    text = "\n".join(str(s) for s in shown)
    assert "```diff" in text and "Predicted: (4096^3, H200)" in text and "| kernel | arch |" in text
    assert "02_coalesced: 1024 threads" in text and "blocks (" in text  # occupancy from lab.core.occupancy
    assert "(not run: checks need a GPU" in text and "NO RECORDS for gemm_fp32" in text
    reports = walk("01")  # first rung: the source, no diff; returns its compile report
    out = capsys.readouterr().out
    assert len(reports) == 1 and "FFMA" in out and "nothing to diff" not in out


def test_the_rung_walk_can_show_a_whole_source_and_the_bank_conflicts_a_family_profiles():
    from lab.families import get_family

    transpose = get_family("transpose")
    prof = {"provenance": {}, "params": {"rows": 64, "cols": 64},
            "rows": [{"rung": "05_sector_aligned", "smem_bank_conflicts_ld": 8.0, "smem_wavefronts_ld": 80.0}]}
    walk = lessons.RungWalk(transpose, device.REFERENCE_ARCH, None, None, profile=prof)
    assert "```diff" in str(walk.steps("05")[0])
    text = "\n".join(str(s) for s in walk.steps("05", source=True) if not callable(s))
    assert "```cuda" in text and "```diff" not in text  # the whole source, not the diff from rung 04
    assert "04_swizzled.cu -> transpose/05_sector_aligned.cu" in text  # the compile report's change still shown
    assert "smem_bank_conflicts_ld = 8 (10.0% of 80 shared-load wavefronts)" in text
    assert not any("no DRAM counters" in str(s) for s in walk.steps("05"))  # not the GEMM's DRAM line


def test_check_summary_gives_the_margin_to_the_error_bound():
    from lab.measure.check import CheckResult

    results = {"08_multistage": [CheckResult("gemm_fp32", "08_multistage", "M=1 N=1 K=1", True, [], 1e-8, 0.01),
                                 CheckResult("gemm_fp32", "08_multistage", "M=513 N=513 K=513", True, [], 2e-6, 0.21)]}
    text = lessons.check_summary(results, "gemm_fp32", "08")
    assert "2/2 cases passed" in text and "0.21 of it (M=513 N=513 K=513)" in text and "2e-06" in text
    exact = {"03_vectorized": [CheckResult("copy", "03_vectorized", "n=5", True)]}
    assert "Bit-exact." in lessons.check_summary(exact, "copy", "03")


def test_claims_read_percentages_increments_and_lower_bounds():
    from lab.lessons.predictions import claims

    found = claims("large copies reach ~85-95% of the device copy; +5-10% over rung 02; the device-copy "
                   "ceiling (>= 0.98x); 1.1-1.5x rung 02")
    ranges = {(c.against, round(c.lo, 3), c.hi if math.isinf(c.hi) else round(c.hi, 3)) for c in found}
    assert ranges == {("ceiling", 0.85, 0.95), ("02", 1.05, 1.1), ("ceiling", 0.98, math.inf), ("02", 1.1, 1.5)}


# ----------------------------------------------------------------------------------------------
# The tensor-core notebook's helpers: rungs a GPU cannot run, the mma instruction mix, ldmatrix bank
# conflicts, records by kind and by launch path, knob probes, and rungs walked without a written section
# ----------------------------------------------------------------------------------------------

def _fake_family():
    """Two rungs of an imaginary family: one for sm_80 and later, one that needs sm_90a exactly."""
    from lab.core.build import KernelSpec
    from lab.core.ladder import Family, Rung

    class Fake(Family):
        name, title = "fake", "a test family"
        rungs = (Rung("fake", "01_any", KernelSpec("copy/01_naive.cu", "a", min_arch=80), "any sm_80+"),
                 Rung("fake", "02_hopper", KernelSpec("copy/01_naive.cu", "b", min_arch=90, arch_suffix="a"),
                      "sm_90a only"))

    return Fake()


def test_rungs_a_gpu_cannot_run_are_compile_only_with_a_sentence(monkeypatch):
    import importlib

    mode_module = importlib.import_module("lab.lessons.mode")  # the module; lessons.mode is its function
    fake = _fake_family()
    any_arch, hopper = fake.rungs
    assert lessons.runs_on(any_arch, 80) and lessons.runs_on(hopper, 90)
    assert not lessons.runs_on(hopper, 80) and not lessons.runs_on(hopper, 100)  # sm_90a code runs on sm_90 only
    live = lessons.Mode(True, "test GPU")
    monkeypatch.setattr(mode_module, "live_arch", lambda current: 80 if current.live else None)
    note = lessons.arch_note(fake, "02", live)
    assert note.startswith("COMPILE-ONLY HERE: 02_hopper needs sm_90a and this GPU is sm_80")
    assert lessons.arch_note(fake, "01", live) == ""
    replay = lessons.Mode(False, "no GPU")
    assert "compiled here for sm_90a only" in lessons.arch_note(fake, "02", replay)
    listing = lessons.rung_listing(fake, live)
    assert "02_hopper" in listing and "COMPILE-ONLY here (this GPU is sm_80)" in listing
    assert "checked and measured here" in listing
    assert "(not checked here: this GPU cannot run 02_hopper" in lessons.check_summary({"01_any": []}, fake, "02")


def test_compile_pair_keeps_a_familys_vec_knob_and_its_dynamic_shared_memory():
    from lab.families import get_family
    from lab.families.gemm_tc import dynamic_smem_bytes

    tc = get_family("gemm_tc")
    reports = lessons.compile_pair(tc, "03", device.REFERENCE_ARCH)  # VEC=8 is gemm_tc's own: never forced to 4
    assert [r.knobs["VEC"] for r in reports] == [8, 8]
    assert reports[1].smem_dynamic_bytes == dynamic_smem_bytes(tc.rung("03")) > 0
    hopper = [r for r in tc.rungs if r.spec.arch_suffix]
    if hopper:  # a Hopper rung asked for on an older arch is compiled for the arch it needs
        report = lessons.compile_pair(tc, hopper[0].key, 80)[-1]
        assert report.arch == f"sm_{hopper[0].spec.min_arch}{hopper[0].spec.arch_suffix}"


def test_mma_mix_counts_tensor_core_instructions_against_what_feeds_them():
    from types import SimpleNamespace

    sync = SimpleNamespace(source="s.cu", sass_available=True,
                           instructions={"HMMA": 64, "LDSM": 16, "LDGSTS.128": 64, "FFMA": 192})
    direct = SimpleNamespace(source="d.cu", sass_available=True, instructions={"HMMA": 2, "LDG.U16": 24})
    hopper = SimpleNamespace(source="h.cu", sass_available=True,
                             instructions={"HGMMA.64": 12, "UTMALDG": 25, "SYNCS": 16, "SYNCS.64": 8, "USETMAXREG": 2})
    text = lessons.mma_mix([sync, direct, hopper])
    assert "mma.sync (HMMA) x64; 4.0 HMMA per ldmatrix (LDSM x16); cp.async copies (LDGSTS) x64" in text
    assert "no ldmatrix: fragments from global memory (LDG x24)" in text
    assert "wgmma (HGMMA) x12" in text and "TMA copies (UTMALDG) x25" in text
    assert "mbarrier operations (SYNCS) x24" in text and "setmaxnreg (USETMAXREG) x2" in text


def test_ldmatrix_conflicts_are_shown_beside_their_own_wavefronts():
    prof = {"provenance": {}, "params": {"M": 64, "N": 64, "K": 64},
            "rows": [{"rung": "02_ldmatrix_smem", "smem_bank_conflicts_ld": 0.0, "smem_wavefronts_ld": 10.0,
                      "smem_bank_conflicts_ldsm": 30.0, "smem_wavefronts_ldsm": 120.0}],
            "skipped": [{"rung": "04_tma_wgmma", "reason": "needs sm_90a"}]}
    assert lessons.conflict_metrics(prof) == ["smem_bank_conflicts_ld", "smem_bank_conflicts_ldsm"]
    assert lessons.conflict_metrics(None) == ["smem_bank_conflicts_ld"]
    line = lessons.profile_value(prof, "gemm_tc", "02", "smem_bank_conflicts_ldsm")
    assert "smem_bank_conflicts_ldsm = 30 (25.0% of 120 ldmatrix wavefronts)" in line
    assert "Not profiled: 04_tma_wgmma (needs sm_90a)." in lessons.profile_status(prof, "gemm_tc")


def _tc(rung, value, N=4096, kind="headline", layout="TN", dtype="float16", ceiling_value=700.0, path=None):
    n = 4096
    params = {"M": n, "N": N, "K": n, "layout": layout, "dtype": dtype, "alpha": 1.0, "beta": 0.0, "pad": 0,
              "lda": n, "ldb": n, "ldc": N}
    ms = 2 * n * n * N / (value * 1e12) * 1e3
    return Record("gemm_tc", rung, kind, params, 2 * (2 * n * n + 2 * n * N), "warm" if kind == "tail" else "cold",
                  ms, ms, ms, 5,
                  "TFLOP/s", value, "cublas_gemm", ceiling_value, {"path": path} if path else {})


def test_records_by_kind_by_path_and_the_best_rung():
    recs = [_tc("cublas_gemm", 700.0), _tc("02_ldmatrix_smem", 140.0), _tc("03_swizzled_multistage", 400.0),
            _tc("03_swizzled_multistage", 380.0, layout="NN"), _tc("cublas_gemm", 700.0, layout="NN")]
    recs += [_tc("03_swizzled_multistage", 300.0, N=4090 + i, kind="tail",
                 path="cp.async 16-byte" if (4090 + i) % 8 == 0 else "element loads") for i in range(9)]
    rs = RecordSet(PROVENANCE, recs, replayed=True)
    status = lessons.kinds_status(rs, "gemm_tc")
    assert "headline  5 records, 3 targets, 2 problems" in status
    assert "sweep     NOT IN THESE RECORDS" in status and "lab bench gemm_tc --json" in status
    assert lessons.kinds_status(None, "gemm_tc").startswith("NO RECORDS for gemm_tc")
    paths = lessons.launch_paths(rs, "gemm_tc")
    assert "cp.async 16-byte" in paths and "at 1 problems (N=4096)" in paths and "element loads" in paths
    assert lessons.launch_paths(RecordSet(PROVENANCE, recs[:5]), "gemm_tc") == "(no tail records)"
    assert lessons.best_rung(rs, "gemm_tc") == "03_swizzled_multistage" and lessons.best_rung(None, "gemm_tc") is None
    assert [p["layout"] for p in lessons.headline_sizes(rs, layout="NN")] == ["NN"]
    assert len(lessons.headline_sizes(rs)) == 2


def test_a_prediction_check_names_what_tells_records_of_one_size_apart():
    rs = RecordSet(PROVENANCE, [_tc("cublas_gemm", 700.0), _tc("02_ldmatrix_smem", 140.0)], replayed=True)
    text = lessons.prediction_check(rs, "gemm_tc", "02")
    assert "at 4096^3 layout=TN, dtype=float16: predicted" in text


def test_knob_probe_and_bound_margin_tables(monkeypatch, tmp_path):
    import json

    from lab.lessons import knob_records

    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path))
    assert knob_records.probe_table().startswith("(no knob probe")
    assert knob_records.margin_table().startswith("(no bound margins")
    prov = {"device": "TEST GPU", "date": "2000-01-01T00:00:00", "commit": "abc"}
    (tmp_path / "gemm_tc_knobs.json").write_text(json.dumps({"provenance": prov, "rung": "03_x", "side": 64, "rows": [
        {"setting": "cublas", "median_ms": 1.0, "tflops": 100.0},
        {"setting": {"STAGES": 2}, "checked": True, "median_ms": 2.0, "tflops": 50.0, "x_cublas": 0.5},
        {"setting": {"BN": 512}, "error": "static assertion failed"}]}))
    (tmp_path / "gemm_tc_margin.json").write_text(json.dumps({"provenance": prov, "rows": [
        {"rung": "03_x", "worst_share_of_E": 0.25, "worst_case": "M=1 N=1 K=1"}]}))
    probe = knob_records.probe_table()
    assert "knob probe of 03_x at 64^3" in probe and "STAGES=2" in probe and "0.500x cuBLAS" in probe
    assert "refused: static assertion failed" in probe and "REPLAYED: TEST GPU" in probe
    assert "03_x                     0.250 of E  at M=1 N=1 K=1" in knob_records.margin_table()


def test_a_rung_without_a_written_section_gets_a_heading_its_header_and_the_walk(capsys):
    from lab.families import get_family

    tc = get_family("gemm_tc")
    assert lessons.mostly_rewritten(tc, "03") and not lessons.mostly_rewritten(tc, "01")
    assert not lessons.mostly_rewritten("transpose", "03")
    walk = lessons.RungWalk(tc, device.REFERENCE_ARCH, None, None, mma_mix=True, mode=lessons.Mode(False, "test"))
    reports = walk.chapter("03")
    out = capsys.readouterr().out
    assert len(reports) == 2 and "### Rung 03 — " in out and "The header of `kernels/gemm_tc/03_" in out
    assert "```cuda" in out and "```diff" not in out  # rewritten: the whole source
    assert "HMMA per ldmatrix" in out and "NO RECORDS for gemm_tc" in out
