"""The split-K plan study without a GPU: the plans it times (every one that runs in one wave, from the driver's
count), how a problem pins a plan, and the sentence a wrong pin gets."""

import dataclasses

import pytest

from lab.core.errors import LabError
from lab.families import gemm_split_k as family_module
from lab.families import get_family
from lab.studies import split_k_plans as study

FITS = {1: 132, 2: 66, 4: 30, 8: 15}  # clusters of each size at once, as an H100's driver counts them


@pytest.fixture
def fam(monkeypatch):
    monkeypatch.setattr(family_module, "cluster_fit", lambda built: FITS[dict(built.spec.knobs)["SPLIT_CLUSTER"]])
    fam = get_family("gemm_split_k")
    fam.array_module = __import__("numpy")  # operands drawn on the host: no GPU here
    return fam


def test_a_pinned_cluster_fixes_the_plan(fam):
    rung = fam.rung(study.CLUSTER_RUNG)
    problem = fam.make_problem(M=256, N=256, K=65536, splits=30, cluster=4)
    assert fam._cluster_plan(fam._tiled(rung, problem), problem) == (4, 28)  # S rounded down to clusters of 4
    assert dict(fam.variant(rung, problem).spec.knobs)["SPLIT_CLUSTER"] == 4
    assert "cluster=4" in problem.label
    unpinned = fam.make_problem(M=256, N=256, K=65536, splits=30)
    assert "cluster" not in unpinned.params


def test_a_wrong_pin_gets_one_sentence(fam):
    with pytest.raises(LabError, match="1, 2, 4 or 8"):
        fam.make_problem(M=256, N=256, K=65536, cluster=3)
    problem = fam.make_problem(M=64, N=64, K=128, splits=2, cluster=8)  # 2 k-tiles: no cluster of 8 fits in K
    with pytest.raises(LabError, match="longer K"):
        fam._cluster_plan(fam._tiled(fam.rung(study.CLUSTER_RUNG), problem), problem)


def test_the_plans_are_those_that_run_in_one_wave(fam):
    plans = study.one_wave_plans(fam, study.SHAPES[0])  # 256 x 256 x 65536: 4 tiles of 128 x 128
    assert (8, 3) in plans and (8, 4) not in plans  # 15 clusters of 8 fit: 3 a tile
    assert (4, 7) in plans and (4, 8) not in plans
    assert (2, 16) in plans and (1, 16) in plans and (1, 33) not in plans  # at most MAX_SLICES a tile
    assert (2, 2) not in plans and (1, 4) not in plans  # 16 blocks: fewer than MIN_BLOCKS
    assert all(w * g * 4 <= FITS[w] * w and w * g * 4 >= study.MIN_BLOCKS for w, g in plans)
    one_tile = study.one_wave_plans(fam, study.SHAPES[1])  # 128 x 128 x 131072: one tile
    assert (8, 15) in one_tile and (8, 16) not in one_tile and (4, 16) in one_tile
    assert (8, 3) not in one_tile and not [p for p in one_tile if p[0] == 1]  # 24 and at most 16 blocks


def test_every_plan_has_its_own_name():
    names = {study.plan_name(w, g) for w in (1, 2, 4, 8) for g in study.GROUPS}
    assert len(names) == 4 * len(study.GROUPS)
    assert study.plan_name(4, 7) == "cluster 4 x 7 (S=28)"


def test_a_pinned_copy_keeps_the_operands(fam):
    problem = fam.make_problem(M=64, N=64, K=1024)
    pinned = dataclasses.replace(problem, params=problem.params | {"splits": 8, "cluster": 4})
    assert pinned.inputs is problem.inputs and problem.params.get("cluster") is None


def test_a_plans_bytes_follow_from_its_sizes():
    shape = study.SHAPES[0]  # 256 x 256 x 65536 in 128 x 128 tiles: 1024 k-tiles
    two = study.plan_bytes(shape, 128, 128, 64, 2, 16)
    assert two["k_tiles_per_block"] == 32 and two["operand_bytes_per_block"] == 32 * 256 * 64 * 2
    assert two["slice_bytes_per_block"] == 64 * 128 * 4 and two["last_sum_bytes_per_block"] == 16 * 64 * 128 * 4
    eight = study.plan_bytes(shape, 128, 128, 64, 8, 3)  # 24 splits: 43 k-tiles, the last 35
    assert eight["k_tiles_per_block"] == 43 and eight["last_sum_bytes_per_block"] == 3 * 16 * 128 * 4
    assert study.plan_bytes(shape, 128, 128, 64, 8, 1)["last_sum_bytes_per_block"] == 0  # one cluster: no slices


def _record() -> dict:
    shape = {"M": 256, "N": 256, "K": 65536, "layout": "TN", "dtype": "float16"}
    entry = lambda method, ms, x08, xlib: {"shape": shape, "method": method, "TFLOP/s": 8.6e9 / ms / 1e9,  # noqa: E731
                                           "median_ms": ms, "x_08": x08, "x_library": xlib}
    plans = [{"method": study.plan_name(4, 7), "cluster": 4, "groups": 7, "splits": 28, "blocks": 112,
              **study.plan_bytes(shape, 128, 128, 64, 4, 7)}]
    return {"provenance": {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "date": "2000-01-02",
                           "commit": "abcdef0"}, "rounds": 3,
            "summary": [entry("torch_mm", 0.030, 1.25, 1.0), entry("08_split_k", 0.0375, 1.0, 0.8),
                        entry(study.plan_name(4, 7), 0.0355, 1.056, None)],
            "plans": [{"shape": shape, "plans": plans}]}


def test_the_notebook_text_comes_from_the_record_fastest_first(tmp_path, monkeypatch):
    import json

    from lab.lessons.underfill import split_k as lesson

    reference, h100 = tmp_path / "h200", tmp_path / "h100"
    reference.mkdir(), h100.mkdir()
    monkeypatch.setenv("LAB_REFERENCE_RESULTS", str(reference))
    assert lesson.cluster_plans_text().startswith("no record of the split-K plans study")
    (h100 / study.STUDY_FILE).write_text(json.dumps(_record()))
    text = lesson.cluster_plans_text()
    assert "NVIDIA H100 80GB HBM3" in text and "3 interleaved rounds" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "method" not in line]
    assert [r.split(" | ")[0] for r in rows] == ["| torch_mm", "| cluster 4 x 7 (S=28)", "| 08_split_k"]
    assert rows[1] == "| cluster 4 x 7 (S=28) | 112 | 37 | 112 | 35.5 | 1.06x | - |"


def test_a_run_cut_short_keeps_the_shapes_it_timed(monkeypatch):
    from lab.measure import timing
    from lab.studies import split_k_rounds

    def fake_rows(shapes, methods_for, rounds, flusher, min_time_ms, rates, after_case):
        rows = []
        for shape in shapes:
            rows.append({"shape": shape, "method": "08_split_k", "round": 0, "median_ms": 0.04, "TFLOP/s": 200.0})
            after_case(shape, rows)
        return rows

    monkeypatch.setattr(study, "interleaved_rows", fake_rows)
    monkeypatch.setattr(timing, "L2Flusher", lambda: None)
    monkeypatch.setattr(study, "provenance", lambda: {"device": "no GPU: this test's stand-in"})
    monkeypatch.setattr(split_k_rounds, "launch_choices", lambda fam, shapes, rungs: [dict(s) for s in shapes])
    saved = []
    record = study.study(rounds=1, checkpoint=saved.append)
    assert len(saved) == 1 and saved[0]["partial"] and len(saved[0]["rows"]) == 1  # after the first shape only
    assert saved[0]["launches"] == [study.SHAPES[0]]
    assert "partial" not in record and len(record["rows"]) == 2 and len(record["summary"]) == 2
