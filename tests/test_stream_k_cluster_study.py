"""CPU: the stream-K cluster study's split model, predictions and verdicts (lab.studies.stream_k_cluster_study) on
synthetic timings, and the model held to the kernel's source."""

import re
import statistics
from pathlib import Path

import pytest

from lab.studies import stream_k_cluster_study as study
from lab.studies.rounds import same_round_summary

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {"M": 2176, "N": 2176, "K": 4096, "layout": "TN", "dtype": "float16"}
SQUARE = {"M": 4096, "N": 4096, "K": 4096, "layout": "TN", "dtype": "float16"}


def _rows(shape, times_by_method):
    return [{"shape": shape, "method": m, "round": r, "median_ms": t[r], "TFLOP/s": 1.0 / t[r]}
            for m, t in times_by_method.items() for r in range(len(t))]


def test_the_split_model_is_the_kernels_integer_arithmetic():
    """81 pair tiles on 66 clusters: two rounds data-parallel (200) against 122 + the fix-up's 50 (172), a gain of
    1.16 >= 1.05, so it splits every tile (the partial wave plus one whole one is all of them); 256 tiles: 400
    against 387 + 50, no split; a whole number of waves never splits."""
    m = study.split_model(81, 64, 66)
    assert (m["dp"], m["sk"], m["split"], m["sk_tiles"]) == (200, 172, True, 81)
    m = study.split_model(256, 64, 66)
    assert (m["dp"], m["sk"], m["split"], m["sk_tiles"]) == (400, 437, False, 0)
    assert not study.split_model(132, 64, 66)["split"]
    assert study.split_model(208, 64, 66, min_gain=0)["sk_tiles"] == 208 % 66 + 66
    # The fix-up's share shrinks with longer tiles: 64 * 50 / k_tiles hundredths.
    assert study.split_model(81, 128, 66)["sk"] == 122 + 25


def test_the_models_defaults_are_the_kernels():
    """KNOB_DEFAULTS and the arithmetic mirror kernels/common/lab_stream_k.cuh and rung 12's knob defaults."""
    rung = (ROOT / "kernels/gemm_tc/12_stream_k_cluster.cu").read_text()
    for knob in ("SK_WAVES", "SK_FIXUP_COST", "SK_MIN_GAIN"):
        assert re.search(rf"#define {knob} (\d+)", rung).group(1) == str(study.KNOB_DEFAULTS[knob])
    header = (ROOT / "kernels/common/lab_stream_k.cuh").read_text()
    assert "const long long dp = 100LL * ((tiles + p - 1) / p);" in header
    assert "const long long sk = 100LL * tiles / p + 64LL * FIXUP_COST / k_tiles;" in header
    assert "const bool split = tiles % p != 0 && 100 * dp >= MIN_GAIN * sk;" in header


def test_predictions_over_rung_10_count_rounds_against_the_spread_work_plus_the_fix_up():
    assert study.predicted_over_base(81, 66, 0.25, True) == pytest.approx(2 / (81 / 66 + 0.25))
    assert study.predicted_over_base(256, 66, 0.25, False) == 1.0
    (row,) = study.model_rows([SHAPE], slots=66)
    assert row["split_model"]["split"] and row["chosen_bn_10"] == 192
    assert row["predicted_x_10"]["measured_fixup"] == pytest.approx(2 / (81 / 66 + 0.25))
    assert row["predicted_x_10"]["model_fixup"] == pytest.approx(2 / (81 / 66 + 0.5))


def test_a_problem_with_fewer_k_tiles_than_slots_gets_that_many_workers():
    """The launcher's grid is min(pair tiles x k-tiles, slots) clusters: one pair tile of 3 k-tiles runs 3."""
    (row,) = study.model_rows([{"M": 128, "N": 256, "K": 192, "layout": "TN", "dtype": "float16"}], slots=66)
    assert row["split_model"]["workers"] == 3 and not row["split_model"]["split"]


def test_settings_time_rung_10_with_the_familys_tile_and_rung_12_forced():
    pick = study.settings(66)
    assert pick(study.BASE, SHAPE) == ({"BN": 192, "STAGES": 4, "C_PARTS": 1},)
    assert pick(study.BASE, SQUARE) == ()
    assert pick(study.STREAM_K, SHAPE) == (study.FORCED,)


def test_verdicts_give_same_round_ratios_beside_the_predictions():
    forced = "12 SK_MIN_GAIN=0"
    picked = "10 BN=192 STAGES=4 C_PARTS=1"
    times = {"torch_mm": [1.0, 1.0, 1.1], "cublaslt": [1.05, 1.1, 1.0], study.BASE: [1.4, 1.5, 1.45],
             picked: [1.1, 1.15, 1.1], study.STREAM_K: [1.02, 1.0, 1.05], forced: [1.03, 1.0, 1.04]}
    prov = {"device": "SYNTHETIC", "commit": "synthetic", "date": "2000-01-01", "sm_count": 132}
    record = study.assemble(_rows(SHAPE, times), [SHAPE], 66, 3, [], prov)
    (v,) = record["verdicts"]
    assert v["split"] and v["stream_k"]["method"] == study.STREAM_K and v["forced"]["method"] == forced
    assert v["picked_10"]["method"] == picked
    assert v["stream_k"]["x_10"] == pytest.approx(statistics.median([1.4 / 1.02, 1.5 / 1.0, 1.45 / 1.05]))
    assert v["stream_k"]["x_library"] == pytest.approx(statistics.median([1.0 / 1.02, 1.0 / 1.0, 1.0 / 1.05]))
    lines = study.report_lines(record)
    assert any("split True" in line and "stream_k x10" in line for line in lines)
    summary = same_round_summary(_rows(SHAPE, times), "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", study.BASE,
                                 "x_10")
    assert record["summary"] == summary


def test_the_readme_rows_give_both_ratios_to_the_library_and_rung_12_over_the_pick():
    forced, picked = "12 SK_MIN_GAIN=0", "10 BN=192 STAGES=4 C_PARTS=1"
    times = {"torch_mm": [1.0, 1.0, 1.0], "cublaslt": [1.1, 1.1, 1.1], study.BASE: [1.5, 1.5, 1.5],
             picked: [1.2, 1.2, 1.2], study.STREAM_K: [1.1, 1.1, 1.1], forced: [1.1, 1.1, 1.1]}
    prov = {"device": "SYNTHETIC", "commit": "synthetic", "date": "2000-01-01", "sm_count": 132}
    (row,) = study.verdicts_table_rows(study.assemble(_rows(SHAPE, times), [SHAPE], 66, 3, [], prov))
    assert row == (f"| 2176 x 2176 x 4096 | float16 | yes | {1 / 1.1:.2f}x | {1 / 1.2:.2f}x ({picked}) | "
                   f"{1.2 / 1.1:.2f}x | rung 12, {1 / 1.1:.2f}x |")
