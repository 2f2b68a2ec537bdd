"""The attention study without a GPU: which rung settings it times at each head dim, and its summary's same-round
ratios on synthetic rows."""

import pytest

from lab.families import get_family
from lab.studies import attention_study as study


@pytest.mark.parametrize("D, extra", [(128, []), (64, ["04 STAGES=4", "05 STAGES=4"])])
def test_each_head_dim_gets_the_tiled_rungs_and_the_settings_meant_for_it(D, extra):
    att = get_family("attention")
    rungs = study.rung_settings(att, {"D": D})
    tiled = [r.key for r in att.rungs if r.number >= 2]
    assert list(rungs) == tiled + ["03 BLOCK_M=128", "05 PEELED=0"] + extra
    assert dict(rungs["03 BLOCK_M=128"].spec.knobs)["THREADS"] == 256  # THREADS follows BLOCK_M, unnamed
    for name in extra:
        assert dict(rungs[name].spec.knobs)["STAGES"] == 4
        assert att.rung(name[:2]).spec.knobs != rungs[name].spec.knobs  # not the default build


def test_the_summary_takes_same_round_ratios_to_cudnn_and_flash():
    shape = {"B": 1, "H": 1, "S": 1024, "D": 64, "causal": 0, "dtype": "float16"}
    rows = []
    for r, times in enumerate([(1.0, 2.0, 1.25), (1.1, 2.0, 1.1), (1.0, 2.2, 1.0)]):
        for method, ms in zip(("sdpa_cudnn", "sdpa_flash", "04_wgmma_ws"), times, strict=True):
            rows.append({"shape": shape, "method": method, "round": r, "median_ms": ms, "TFLOP/s": 1.0 / ms})
    mine = next(s for s in study.summarize(rows) if s["method"] == "04_wgmma_ws")
    assert mine["x_sdpa_cudnn"] == pytest.approx(1.0)  # the median of 0.8, 1.0, 1.0
    assert mine["x_sdpa_flash"] == pytest.approx(2.0 / 1.1)  # of 1.6, 1.818, 2.2
    assert mine["spread"] == pytest.approx(0.25)
