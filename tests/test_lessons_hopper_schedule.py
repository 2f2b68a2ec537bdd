"""CPU: the Hopper schedule lesson (lab.lessons.hopper_schedule) renders the committed stream-K cluster and fused
epilogue records as they hold them, names the record's GPU, and says so when a record is missing."""

import json

from lab.families import gemm_tc_tiles as tiles
from lab.lessons import hopper_schedule as lesson


def test_the_stream_k_table_gives_each_shape_the_records_ratios_and_the_familys_pick():
    found = lesson.load(lesson.STREAM_K_STUDY)
    assert found is not None, "the committed stream-K cluster record"
    payload, path = found
    text = lesson.stream_k_table(found)
    assert payload["provenance"]["device"] in text and path.name in text
    for v in payload["verdicts"]:
        sh = v["shape"]
        label = f"{sh['M']}x{sh['N']}x{sh['K']} {sh['dtype']}"
        row = next(line for line in text.splitlines() if line.startswith(label))
        assert f"{v['stream_k']['x_library']:.2f}x" in row and f"{v['picked_10']['x_library']:.2f}x" in row
        key, _ = tiles.schedule(sh["M"], sh["N"], sh["K"], sh["layout"], payload["cluster_slots"])
        runs = v["stream_k"] if key == tiles.STREAM_K_RUNG else v["picked_10"]
        name = "rung 12" if key == tiles.STREAM_K_RUNG else "rung 10"
        assert row.rstrip().endswith(f"{name} ({runs['x_library']:.2f}x)")


def test_the_schedule_lines_name_each_shapes_pick():
    text = lesson.schedule_lines([{"M": 2176, "N": 2176, "K": 4096, "layout": "TN", "dtype": "float16"},
                                  {"M": 3072, "N": 3072, "K": 3072, "layout": "TN", "dtype": "float16"}], 66)
    lines = text.splitlines()
    assert lines[1].endswith("-> rung 12") and lines[2].endswith("-> rung 10 BN=192")


def test_the_fused_table_holds_every_case_and_method_of_the_record():
    found = lesson.load(lesson.FUSED_STUDY)
    assert found is not None, "the committed fused epilogue record"
    text = lesson.fused_table(found)
    for s in found[0]["summary"]:
        if s["method"] in lesson.FUSED_METHODS and s.get("x_torch"):
            assert f"{s['x_torch']:.2f}x" in text


def test_a_missing_record_is_one_line_saying_how_to_make_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(tmp_path / "h200"))
    assert lesson.load(lesson.STREAM_K_STUDY) is None
    assert "python -m lab.studies.stream_k_cluster_study" in lesson.stream_k_table(None)
    assert "python -m lab.studies.fused_epilogue_study" in lesson.fused_table(None)
    (tmp_path / "h100").mkdir()
    (tmp_path / "h100" / lesson.FUSED_STUDY).write_text(json.dumps({"no": "summary"}))
    assert lesson.load(lesson.FUSED_STUDY) is None
