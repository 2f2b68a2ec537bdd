"""The attention study without a GPU: which rung settings it times at each head dim, and its summary's same-round
ratios on synthetic rows."""

import pytest

from lab.families import get_family
from lab.studies import attention_study as study


@pytest.mark.parametrize("D", [128, 64])
@pytest.mark.parametrize("causal", [0, 1])
def test_each_head_dim_gets_the_tiled_rungs_and_the_settings_meant_for_it(D, causal):
    """Rung 05's SOFTMAX_OVERLAP = 1 beside its default build at D = 64 and 128 (where the default is 2), and the
    PERSISTENT value its default build does not have for the shape (persistent_default)."""
    att = get_family("attention")
    rungs = study.rung_settings(att, {"D": D, "causal": causal})
    tiled = [r.key for r in att.rungs if r.number >= 2]
    other = 0 if D == 128 or causal else 1
    settings = ["03 BLOCK_M=128", f"05 PERSISTENT={other}", "05 SOFTMAX_OVERLAP=0", "05 SOFTMAX_OVERLAP=1"]
    assert list(rungs) == tiled + settings
    assert dict(rungs["05 SOFTMAX_OVERLAP=1"].spec.knobs)["SOFTMAX_OVERLAP"] == 1
    assert dict(rungs[f"05 PERSISTENT={other}"].spec.knobs)["PERSISTENT"] == other
    assert dict(rungs["03 BLOCK_M=128"].spec.knobs)["THREADS"] == 256  # THREADS follows BLOCK_M, unnamed


def test_the_wide_head_dim_times_the_other_overlap_build():
    """At D = 256, whose default build is SOFTMAX_OVERLAP = 1 and one block a query block, the settings timed beside
    it are SOFTMAX_OVERLAP 2 and 0, and PERSISTENT = 1."""
    rungs = study.rung_settings(get_family("attention"), {"D": 256})
    assert "05 SOFTMAX_OVERLAP=2" in rungs and "05 SOFTMAX_OVERLAP=1" not in rungs and "05 SOFTMAX_OVERLAP=0" in rungs
    assert "05 PERSISTENT=1" in rungs and "05 PERSISTENT=0" not in rungs


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


def _record(date: str, device: str, mine: float) -> dict:
    shape = {"B": 2, "H": 16, "S": 4096, "D": 128, "causal": 0, "dtype": "float16"}
    rows = [("sdpa_cudnn", 600.0, 1.0, 1.8), ("sdpa_flash", 330.0, 0.55, 1.0), ("04_wgmma_ws", 500.0, 0.83, 1.5),
            ("05_pingpong", mine, mine / 600.0, mine / 330.0)]
    return {"provenance": {"device": device, "date": date, "commit": "abcdef0"}, "rounds": 3,
            "summary": [{"shape": shape, "method": m, "TFLOP/s": t, "x_sdpa_cudnn": c, "x_sdpa_flash": f}
                        for m, t, c, f in rows]}


def test_the_readme_lines_come_from_the_newest_well_formed_record(tmp_path, monkeypatch):
    """The README's study table reads the newest of results/h200 and results/h100 (naming its GPU and file), skips a
    malformed file, and is left out when there is no record."""
    import json

    from lab.studies import report

    reference, h100 = tmp_path / "h200", tmp_path / "h100"
    reference.mkdir(), h100.mkdir()
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(reference))
    assert report.attention_study_lines() == []
    (reference / study.FILENAME).write_text(json.dumps(_record("2000-01-01", "NVIDIA H200", 540.0)))
    (h100 / study.FILENAME).write_text(json.dumps(_record("2000-01-02", "NVIDIA H100", 560.0)))
    lines = report.attention_study_lines()
    assert "NVIDIA H100" in lines[1] and "h100/attention_study.json" in lines[1]
    row = next(line for line in lines if line.startswith("| 2 x 16 x 4096 x 128"))
    assert "| 600 | 500 | 560 | 05_pingpong (560) | 0.93 | 1.70 |" in row
    (h100 / study.FILENAME).write_text("not json")
    assert "NVIDIA H200" in report.attention_study_lines()[1]
