"""CPU: the tile study's model rows and verdicts (lab.studies.hopper_tile_study) on synthetic timings."""

import statistics

import pytest

from lab.studies import hopper_tile_study as study
from lab.studies.rounds import same_round_summary

SHAPE_TN = {"M": 3072, "N": 3072, "K": 3072, "layout": "TN", "dtype": "float16"}
SHAPE_NN = {"M": 4096, "N": 4096, "K": 4096, "layout": "NN", "dtype": "float16"}


def _rows(shape, times_by_method):
    return [{"shape": shape, "method": m, "round": r, "median_ms": t[r], "TFLOP/s": 1.0 / t[r]}
            for m, t in times_by_method.items() for r in range(len(t))]


def test_model_rows_count_waves_per_build_and_nn_has_no_192():
    tn, nn = study.model_rows([SHAPE_TN, SHAPE_NN], slots=66)
    assert tn["chosen_bn"] == 192 and tn["waves"] == {"256": 3, "192": 3, "128": 5}
    assert tn["predicted_x_256"]["192"] == 256 / 192
    assert set(nn["waves"]) == {"256", "128"} and nn["chosen_bn"] == 256


def test_verdicts_name_the_models_pick_and_the_measured_fastest_with_same_round_ratios():
    times = {"torch_mm": [1.0, 1.2, 1.0], "cublaslt": [1.1, 1.0, 1.1], study.build_name(256): [1.3, 1.3, 1.4],
             study.build_name(192): [1.0, 1.1, 1.05], study.build_name(128): [0.95, 0.96, 0.97]}
    rows = _rows(SHAPE_TN, times)
    summary = same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", study.RUNG, "x_10")
    (v,) = study.verdicts(summary, study.model_rows([SHAPE_TN], slots=66))
    assert v["chosen_bn"] == 192 and v["best_bn"] == 128
    # Same-round ratios, then the median over rounds: to the faster library call, and to the 256 build.
    assert v["chosen_x_library"] == pytest.approx(statistics.median([1.0 / 1.0, 1.0 / 1.1, 1.0 / 1.05]))
    assert v["chosen_x_10"] == pytest.approx(statistics.median([1.3 / 1.0, 1.3 / 1.1, 1.4 / 1.05]))
    assert v["best_x_library"] == pytest.approx(statistics.median([1.0 / 0.95, 1.0 / 0.96, 1.0 / 0.97]))
    assert v["predicted_x_10"] == pytest.approx(256 / 192)


def test_a_build_that_was_not_timed_leaves_no_verdict():
    rows = _rows(SHAPE_NN, {"torch_mm": [1.0], "cublaslt": [1.0]})
    summary = same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", study.RUNG, "x_10")
    assert study.verdicts(summary, study.model_rows([SHAPE_NN], slots=66)) == []


def test_the_build_names_are_the_knob_names_the_hopper_study_uses():
    assert study.build_name(256) == "10_tma_store"
    assert study.build_name(192) == "10 BN=192 STAGES=4 C_PARTS=1"
    assert study.build_name(128) == "10 BN=128 STAGES=6 C_PARTS=1"


def _record():
    times = {"torch_mm": [1.0, 1.0, 1.0], "cublaslt": [1.1, 1.1, 1.1], study.build_name(256): [1.3, 1.3, 1.3],
             study.build_name(192): [1.02, 1.02, 1.02], study.build_name(128): [1.1, 1.1, 1.1]}
    prov = {"device": "SYNTHETIC", "commit": "synthetic", "date": "2000-01-01", "sm_count": 132}
    return study.assemble(_rows(SHAPE_TN, times), [SHAPE_TN], 66, 3, [], prov)


def test_the_lessons_tile_table_gives_the_pick_its_prediction_and_what_was_measured():
    from lab.lessons import hopper_tiles

    table = hopper_tiles.tile_table(_record())
    assert "REPLAYED from results/h200/hopper_tile_study.json" in table
    (line,) = [ln for ln in table.splitlines() if ln.startswith("3072^3 fp16 TN")]
    # picks 192, predicted 1.33x, measured 1.3 / 1.02 = 1.27x, 0.98x the library; 256 at 0.77x; fastest 192
    assert line.split()[3:] == ["BN=192", "1.33x", "1.27x", "0.98x", "0.77x", "BN=192"]
    assert "no tile study record" in hopper_tiles.tile_table(None)


def test_the_tile_figure_has_a_bar_per_build_and_outlines_the_pick():
    import matplotlib

    matplotlib.use("Agg")
    from lab.lessons import hopper_tiles

    fig = hopper_tiles.tile_figure(_record())
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_height() > 0]
    assert len(bars) == 3
    outlined = [p for p in bars if p.get_linewidth() > 1]
    assert len(outlined) == 1 and outlined[0].get_height() == pytest.approx(1.0 / 1.02)
    assert hopper_tiles.tile_figure(None) is None
