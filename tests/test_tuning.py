"""lab.lessons.knob_tuning: knob-tuning rounds read from a scripts/gemm_sweep.py file (synthetic here; CPU only)."""

import json

import pytest

from lab.core.errors import LabError
from lab.lessons import knob_tuning


def _row(knobs, r4096, rung="08_multistage"):
    return {"rung": rung, "knobs": knobs, "compile": {"registers": 128, "spills": False},
            "tflops": {"4096": 50 * r4096}, "ratio": {"4096": r4096}}


def _payload():
    base = {"BM": 64, "BN": 128, "STAGES": 3, "THREADS": 128}
    return {"about": "synthetic", "rounds": [
        {"round": 1, "provenance": {"commit": "aaaaaaa"}, "sizes": [4096], "cublas": [{"4096": 50.0}] * 2,
         "rows": [_row(base, 0.90), _row(dict(base, STAGES=4), 0.91), _row(dict(base, BM=128, STAGES=4), 0.80),
                  {"rung": "08_multistage", "knobs": base, "error": "build failed"}]},
        {"round": 2, "provenance": {"commit": "bbbbbbb"}, "sizes": [4096], "cublas": [{"4096": 50.0}] * 2,
         "rows": [_row(dict(base, STAGES=2), 0.95), _row(dict(base, STAGES=3), 0.97)]}]}


def test_knob_effect_groups_settings_that_differ_in_that_knob_alone():
    text = knob_tuning.knob_effect(_payload(), "08_multistage", "STAGES", {"BM": 64, "BN": 128, "STAGES": 3})
    assert "round 1, BM=64 BN=128   <- the family's default knobs" in text
    assert "STAGES=3: 4096^3 0.900" in text and "STAGES=4: 4096^3 0.910" in text
    assert "round 2" in text and "BM=128" not in text  # a lone setting is no comparison
    only = knob_tuning.knob_effect(_payload(), "08_multistage", "STAGES", like=[{"BM": 128}])
    assert "hold no settings that differ in STAGES alone" in only


def test_best_per_round_and_failed_settings_left_out():
    best = knob_tuning.best_per_round(_payload(), "08_multistage", "4096")
    assert [(s.round, s.ratio["4096"]) for s in best] == [(1, 0.91), (2, 0.97)]
    assert len(knob_tuning.settings(_payload())) == 5


def test_a_missing_file_is_none_and_a_broken_one_one_clear_error(tmp_path):
    assert knob_tuning.load(tmp_path / "absent.json") is None
    assert "nothing measured about STAGES" in knob_tuning.knob_effect(None, "08_multistage", "STAGES")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LabError, match="not a valid tuning file"):
        knob_tuning.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(LabError, match="not a scripts/gemm_sweep.py result"):
        knob_tuning.load(tmp_path / "other.json")
