"""CPU: the fused-epilogue study's record and report (lab.studies.fused_epilogue_study) on synthetic timings."""

import statistics

import pytest

from lab.studies import fused_epilogue_study as study

CASE = {"M": 4096, "N": 4096, "K": 4096, "layout": "TN", "dtype": "float16", "epilogue": "bias+gelu_tanh"}


def _rows(case, times_by_method):
    return [{"shape": case, "method": m, "round": r, "median_ms": t[r], "TFLOP/s": 1.0 / t[r]}
            for m, t in times_by_method.items() for r in range(len(t))]


def test_the_record_gives_same_round_ratios_to_torchs_composition_and_to_rung_06():
    times = {"torch_composed": [1.0, 1.1, 1.0], "torch_mm": [0.95, 0.96, 0.95], "06 fused": [1.06, 1.1, 1.08],
             "10 fused": [0.96, 1.0, 0.97], "10 plain": [0.95, 0.97, 0.96]}
    prov = {"device": "SYNTHETIC", "commit": "synthetic", "date": "2000-01-01"}
    record = study.assemble(_rows(CASE, times), 3, [], [{"case": CASE, "max_error_over_bound": 0.4}], prov)
    ten = next(s for s in record["summary"] if s["method"] == "10 fused")
    assert ten["x_torch"] == pytest.approx(statistics.median([1.0 / 0.96, 1.1 / 1.0, 1.0 / 0.97]))
    assert ten["x_torch_min"] == pytest.approx(min([1.0 / 0.96, 1.1 / 1.0, 1.0 / 0.97]))
    assert ten["x_06"] == pytest.approx(statistics.median([1.06 / 0.96, 1.1 / 1.0, 1.08 / 0.97]))
    lines = study.report_lines(record)
    assert any(line.startswith("4096x4096x4096 float16") and "10 fused" in line for line in lines)
    assert any("torch's largest error over the bound: 0.40" in line for line in lines)


def test_the_cases_hold_the_targets_shapes_and_an_int8_output():
    assert {(c["M"], c["dtype"], c.get("out", "same")) for c in study.CASES} == {
        (4096, "float16", "same"), (8192, "float16", "same"), (4096, "bfloat16", "same"), (4096, "float16", "int8")}
    assert all(c["epilogue"] == "bias+gelu_tanh" for c in study.CASES)
    # The check shape meets the TMA store's conditions: N a multiple of 8 (C 16-byte rows), tails in M and K.
    assert study.CHECK_SHAPE["N"] % 8 == 0 and study.CHECK_SHAPE["M"] % 128 and study.CHECK_SHAPE["K"] % 64
