"""The split-K rounds study without a GPU: its shapes and methods, where its record is looked for, and the README lines
read from a synthetic record."""

import json

from lab.studies import split_k_rounds as study


def test_the_study_times_both_modes_on_the_headline_shapes():
    shapes = {(s["M"], s["N"], s["K"], s["dtype"]) for s in study.SHAPES}
    assert {(256, 256, 65536, "float16"), (128, 128, 131072, "float16"), (256, 256, 65536, "bfloat16")} <= shapes
    assert study.RUNGS == ("08_split_k", "08_split_k_cluster") and study.REFERENCE == "08_split_k"


def _record() -> dict:
    shape = {"M": 256, "N": 256, "K": 65536, "layout": "TN", "dtype": "float16"}
    summary = [{"shape": shape, "method": "torch_mm", "TFLOP/s": 280.0, "x_library": 1.0, "x_library_min": 0.98,
                "x_08": 1.2},
               {"shape": shape, "method": "08_split_k", "TFLOP/s": 230.0, "x_library": 0.82, "x_library_min": 0.8,
                "x_08": 1.0},
               {"shape": shape, "method": "08_split_k_cluster", "TFLOP/s": 270.0, "x_library": 0.96,
                "x_library_min": 0.93, "x_08": 1.17}]
    launches = [{"shape": shape, "method": "08_split_k", "splits": 33},
                {"shape": shape, "method": "08_split_k_cluster", "splits": 32, "cluster": 8,
                 "clusters_that_fit": {"8": 16}}]
    return {"provenance": {"device": "NVIDIA H100 80GB HBM3", "date": "2000-01-02", "commit": "abcdef0"}, "rounds": 3,
            "summary": summary, "launches": launches}


def test_the_readme_lines_come_from_the_record_and_name_its_gpu(tmp_path, monkeypatch):
    from lab.studies import report

    reference, h100 = tmp_path / "h200", tmp_path / "h100"
    reference.mkdir(), h100.mkdir()
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(reference))
    assert report.split_k_rounds_lines() == []
    (h100 / study.STUDY_FILE).write_text(json.dumps(_record()))
    lines = report.split_k_rounds_lines()
    assert "NVIDIA H100 80GB HBM3" in lines[1] and "h100/split_k_rounds.json" in lines[1]
    row = next(line for line in lines if line.startswith("| 256 x 256 x 65536"))
    assert "| 280 |" in row and "230, S = 33 (0.82x / 0.80x)" in row and "270, S = 32 (0.96x / 0.93x)" in row
    assert row.endswith("| 1.17x |")


def test_a_summary_line_prints_each_ratio_or_a_dash():
    from lab.studies.rounds import summary_line

    entry = {"method": "08_split_k_cluster", "TFLOP/s": 146.06, "spread": 0.003, "x_library": 0.6661,
             "x_library_min": None, "x_08": 0.775}
    line = summary_line(entry, "256x256x65536 float16", {"x_library": "x library", "x_library_min": "(min)",
                                                          "x_08": "x 08"})
    assert line.startswith("256x256x65536 float16 08_split_k_cluster")
    assert "146.1 TFLOP/s  spread 0.003  x library 0.666  (min) -  x 08 0.775" in line
