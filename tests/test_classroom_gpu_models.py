"""CPU: leaderboard fairness. A speed-up is the ratio of two times taken in one grading process on one
GPU, so it holds whatever GPU ran it; every row and every graded result names its GPU (model, uuid, host); and a
class timed on several GPU models gets one ranking per model, never one across models. Fake timings and fake
GPUs throughout; tests/test_gpu_classroom.py checks the real ones."""

import csv
import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
from test_grader import _submission, fake  # noqa: F401  (the fake worker fixture and helper)

from lab.grading import classroom, grade_worker, grader
from lab.grading.exercises import load

MODELS = {"0": "NVIDIA H200", "1": "NVIDIA A100-SXM4-80GB"}


def _identity(gpu):
    return {"model": MODELS[gpu], "uuid": f"GPU-{gpu}", "arch": "sm_90", "host": "node7"}


def _row(name, speedup, model, ranked=True):
    row = {"submission": name, "ranked": ranked, "gpu": {"model": model, "uuid": "u", "host": "h"}}
    return row | ({"geomean_speedup": speedup} if ranked else {"why": "friendly: failed on n=1025"})


def test_each_gpu_model_is_ranked_on_its_own():
    rows = [_row("a", 1.2, "NVIDIA H200"), _row("b", 3.0, "NVIDIA A100"), _row("c", 0.9, "NVIDIA H200"),
            _row("d", 1.5, "NVIDIA A100"), _row("e", 0, "NVIDIA H200", ranked=False),
            {"submission": "f", "ranked": False, "why": "empty", "gpu": None}, _row("g", 2.0, None)]
    ordered = classroom.rank_by_gpu_model(rows)
    assert [(r["gpu_model"], r.get("rank"), r["submission"]) for r in ordered] == [
        ("NVIDIA A100", 1, "b"), ("NVIDIA A100", 2, "d"),
        ("NVIDIA H200", 1, "a"), ("NVIDIA H200", 2, "c"),
        (classroom.UNKNOWN_GPU, 1, "g"),
        ("NVIDIA H200", None, "e"), ("", None, "f")]


def test_a_class_on_several_models_says_so_and_one_model_does_not():
    one = [_row("a", 1.0, "NVIDIA H200"), _row("b", 2.0, "NVIDIA H200"), _row("c", 0, "NVIDIA A100", ranked=False)]
    assert classroom.models_note(one) is None
    note = classroom.models_note(one + [_row("d", 1.1, "NVIDIA A100")])
    assert note.startswith("These submissions were timed on 2 GPU models (NVIDIA A100; NVIDIA H200)")
    assert "own ranking" in note


def _fake_leaderboard_run(calls, lock):
    """run_checks as the leaderboard calls it: a speed-up that depends on the GPU it is given (A100: half)."""
    def run_checks(exercise, kernel, names, seed, include_hidden, gpu=None, stop=None, **_):
        with lock:
            calls.append((kernel.parent.name, gpu))
        time.sleep(0.15)  # both GPUs' threads are busy at once
        speedup = (1.0 + int(kernel.parent.name[1:]) / 10) / (2 if MODELS[gpu].endswith("80GB") else 1)
        done = {n: {"passed": True, "output": "ok"} for n in names}
        done["leaderboard"] = {"passed": True, "geomean_speedup": speedup, "output": f"{speedup:.3f}x",
                               "rows": [{"shape": "n=16777216", "student_ms": 1 / speedup, "reference_ms": 1.0,
                                         "speedup": speedup}]}
        return done
    return run_checks


def test_a_leaderboard_over_two_gpu_models_is_written_per_model(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    for i in range(6):
        _submission(subs, f"s{i}")
    calls, lock = [], threading.Lock()
    monkeypatch.setattr(classroom, "run_checks", _fake_leaderboard_run(calls, lock))
    monkeypatch.setattr(classroom, "gpu_identity", _identity)
    rows = classroom.leaderboard(load("01"), subs, tmp_path / "board", gpus=["0", "1"])
    timed_on = dict(calls)
    assert sorted(timed_on) == [f"s{i}" for i in range(6)] and set(timed_on.values()) == {"0", "1"}
    for r in rows:  # each row names the GPU its own timing ran on
        assert r["gpu"] == _identity(timed_on[r["submission"]]) and r["gpu_model"] == MODELS[timed_on[r["submission"]]]
    for model in MODELS.values():
        group = [r for r in rows if r["gpu_model"] == model]
        assert [r["rank"] for r in group] == list(range(1, len(group) + 1))
        assert [r["geomean_speedup"] for r in group] == sorted((r["geomean_speedup"] for r in group), reverse=True)
    table = list(csv.DictReader(open(tmp_path / "board" / "leaderboard.csv")))
    assert [(t["gpu_model"], t["rank"], t["submission"], t["gpu_uuid"], t["host"]) for t in table] == \
        [(r["gpu_model"], str(r["rank"]), r["submission"], r["gpu"]["uuid"], "node7") for r in rows]
    assert json.loads((tmp_path / "board" / "leaderboard.json").read_text()) == rows
    assert (tmp_path / "board" / "leaderboard.png").stat().st_size > 0
    assert classroom.models_note(rows)


def test_a_grader_failure_stops_the_leaderboard_with_its_sentence(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    _submission(subs, "a")

    def broken(*args, **kwargs):
        raise classroom.LabError("The grading worker stopped (exit code 1) before it ran any check.")

    monkeypatch.setattr(classroom, "run_checks", broken)
    monkeypatch.setattr(classroom, "gpu_identity", _identity)
    with pytest.raises(classroom.LabError, match="before it ran any check"):
        classroom.leaderboard(load("01"), subs, tmp_path / "board", gpu="0")


class _FakeFamily:
    """Times that scale with the GPU's speed: a reference taken on another GPU (or from a record) would show."""
    gpu_speed = 1.0

    def __init__(self):
        self.launched = []

    def rung(self, key):
        return "reference"

    def make_problem(self, seed, n):
        return SimpleNamespace(label=f"n={n}", n=n)

    def launch(self, rung, problem, out):
        self.launched.append((rung, id(problem), os.getpid()))


def _fake_time_fresh(family, problem, launch, seed, check=True):
    launch(problem, None)
    rung = family.launched[-1][0]
    cost = {"reference": 2.0, "student": 1.6 if problem.n > 1000 else 2.5}[rung]
    return cost * problem.n * 1e-6 / family.gpu_speed, True


@pytest.mark.parametrize("gpu_speed", [1.0, 3.0])
def test_the_speedup_is_a_ratio_of_times_from_one_process_on_one_gpu(monkeypatch, gpu_speed):
    family = _FakeFamily()
    family.gpu_speed = gpu_speed
    monkeypatch.setattr("lab.families.get_family", lambda name: family)
    monkeypatch.setattr(grade_worker, "time_fresh", _fake_time_fresh)
    exercise = SimpleNamespace(family="copy", rung="03_vectorized", student_rung=lambda kernel: "student",
                               performance=SimpleNamespace(params=[{"n": 4096}, {"n": 997}]))
    result = grade_worker.run_leaderboard(exercise, "kernel.cu", seed=1)
    # Per shape: the reference, then the student, on the same problem object, in this one process.
    here = os.getpid()
    assert [(rung, pid) for rung, _, pid in family.launched] == [("reference", here), ("student", here)] * 2
    assert family.launched[0][1] == family.launched[1][1] != family.launched[2][1] == family.launched[3][1]
    assert [round(r["speedup"], 6) for r in result["rows"]] == [1.25, 0.8]  # the same on any GPU speed
    assert all(r["speedup"] == r["reference_ms"] / r["student_ms"] for r in result["rows"])
    assert result["geomean_speedup"] == pytest.approx(1.0)


def test_every_graded_result_names_the_gpu_its_checks_ran_on(fake, tmp_path, monkeypatch):  # noqa: F811
    subs = tmp_path / "subs"
    for i in range(4):
        _submission(subs, f"s{i}", "FAKE slow 0.2")
    monkeypatch.setattr(classroom, "gpu_identity", _identity)
    results = classroom.grade_batch(fake, subs, tmp_path / "out", include_hidden=False, gpus=["0", "1"])
    for r in results:
        ran_on = r.check("friendly").extra["gpu"]  # what the (fake) grading process saw in CUDA_VISIBLE_DEVICES
        saved = json.loads((tmp_path / "out" / r.submission / "results.json").read_text())["extra_data"]["device"]
        assert r.device == saved == _identity(ran_on)
    again = classroom.grade_batch(fake, subs, tmp_path / "out", include_hidden=False, gpus=["0", "1"])
    assert [r.device for r in again] == [r.device for r in results]  # kept by a resumed run


PROBE_ECHOING_THE_ENV = "import json, os; print(json.dumps({'model': os.environ.get('CUDA_VISIBLE_DEVICES')}))"


def test_the_gpu_is_read_under_the_grading_processes_environment(monkeypatch):
    monkeypatch.setattr(grader, "GPU_PROBE", PROBE_ECHOING_THE_ENV)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    grader._probe_gpu.cache_clear()
    try:
        assert grader.gpu_identity("1")["model"] == "1"  # pinned, as run_checks pins its processes
        assert grader.gpu_identity(None)["model"] == "2,3"  # inherited, as on a Dask worker
        assert grader.gpu_identity(None)["host"] == os.uname().nodename
        monkeypatch.setattr(grader, "GPU_PROBE", "raise SystemExit(3)")
        assert grader.gpu_identity("1")["model"] == "1"  # read once per setting
        assert grader.gpu_identity("5") == {"model": None, "why": "the GPU probe failed (exit code 3)",
                                            "host": os.uname().nodename}
    finally:
        grader._probe_gpu.cache_clear()
