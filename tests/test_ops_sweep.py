"""CPU: the dispatch-table sweep's pure parts (lab.studies.ops_sweep): every sample falls in the class that lists it,
the
winner of a class is the library unless a lab path beats it on the class as a whole, losses inside a class are
kept, the table it writes parses and names its record, and the summary's ratios are per round."""

import json

import pytest

from lab.ops import rules
from lab.studies import ops_sweep as sw


def test_every_sample_belongs_to_its_class():
    for name, _, _, samples in sw.CLASSES:
        for sample in samples:
            assert sw.class_of(sample) == name, (name, sample)


def test_the_last_class_takes_every_shape():
    assert sw.CLASSES[-1][1] == {}
    assert sw.class_of(sw.Sample(12345, 777, 64)) in {name for name, *_ in sw.CLASSES}


def test_methods_end_with_the_library_and_name_persistent_by_tile():
    methods = sw.methods_for("default")
    assert methods[-1] == ("cublas", "cublas", {})
    assert {m for m, _, _ in methods} >= {"persistent BN=256", "persistent BN=128"}


def _row(cold, check=None, paths=None):
    return {"sample": "s", "cold_us": cold, "check": check or {}, "paths": paths or {}}


def test_the_library_wins_unless_a_path_beats_it_on_the_class():
    paths = {"persistent BN=256": ("persistent", {"BN": 256, "GROUP_M": 8})}
    close = [_row({"cublas": [10, 10, 10], "persistent BN=256": [9.9, 9.9, 9.9]}, paths=paths)]
    assert sw.choose("default", close)["method"] == "cublas"  # 1% faster: inside the margin
    far = [_row({"cublas": [10, 10, 10], "persistent BN=256": [5, 5, 5]}, paths=paths),
           _row({"cublas": [10, 10, 10], "persistent BN=256": [11, 11, 11]}, paths=paths)]
    choice = sw.choose("default", far)
    assert choice["method"] == "persistent BN=256" and choice["path"] == "persistent"
    assert choice["config"] == {"BN": 256, "GROUP_M": 8}
    assert [loss["faster"] for loss in choice["losses"]] == ["cublas"]  # the sample it still loses is kept


def test_a_path_that_failed_its_check_or_refused_a_sample_cannot_win():
    rows = [_row({"cublas": [10], "generic": [1]}, check={"generic": "3 elements outside the bound"}),
            _row({"cublas": [10]})]
    assert sw.choose("small", rows)["method"] == "cublas"


def test_the_table_parses_in_class_order_and_cites_the_record():
    choices = [{"class": name, "method": "cublas", "path": "cublas", "config": {}, "score": 1.0, "losses": []}
               for name, *_ in sw.CLASSES]
    choices[0] |= {"method": "decode", "path": "decode", "score": 1.2}
    payload = sw.table_from(choices, "results/h200/ops_sweep.json", "NVIDIA H200, abc1234, 2026-12-01")
    table = rules.parse(json.loads(json.dumps(payload)), "x")
    assert [r.path for r in table.rules][0] == "decode" and len(table.rules) == len(sw.CLASSES)
    assert all("ops_sweep.json" in note for note in table.notes)


def test_summary_ratios_are_per_round():
    final = [{"sample": "s", "decision": "d", "flops": 2e12, "check": {"lab_ops": None, "torch": None},
              "cold_us": {"lab_ops": [1000.0, 2000.0], "torch": [1100.0, 1800.0]},
              "b2b_us": {"lab_ops": [10.0, 10.0], "torch": [20.0, 5.0]}}]
    row = sw.summarize(final)[0]
    assert row["ratio_cold"] == [1.1, 0.9] and row["ratio_b2b"] == [2.0, 0.5]
    assert row["lab_tflops"] == pytest.approx(2e12 / 1500 / 1e6, rel=1e-3)


def test_the_built_in_table_has_a_note_for_every_rule():
    assert len(rules.DEFAULT.notes) == len(rules.DEFAULT.rules) and all(rules.DEFAULT.notes)
    assert sw.TABLE_FILE == rules.DEFAULT_FILE


def test_run_names_its_two_studies_and_refuses_options_host_cost_does_not_take(tmp_path):
    from lab.core.errors import LabError

    with pytest.raises(LabError, match="its studies are sweep, host-cost"):
        sw.run(tmp_path, "table")
    with pytest.raises(LabError, match="the host-cost study takes no options"):
        sw.run(tmp_path, "host-cost", rounds=2)


def test_ops_study_run_names_its_studies(tmp_path):
    from lab.core.errors import LabError
    from lab.studies import ops_study

    with pytest.raises(LabError, match="its studies are tune, trace, trace-gemms, overhead, latency"):
        ops_study.run(tmp_path, "warmup")
