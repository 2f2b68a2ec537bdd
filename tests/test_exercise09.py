"""CPU: exercise 09 (a dispatch table, not a kernel): loading, its traces, the reference and the starter, bad
tables refused with one sentence before any worker starts, the worker's wiring with the GPU parts faked, `lab check`
without a GPU, and the student bundle (no solution, no hidden trace). The GPU half is tests/test_gpu_exercise09.py."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.cli import main
from lab.core.errors import LabError
from lab.grading import exercises, grade_worker, grader, release
from lab.grading.exercises import DISPATCH_RULES, KINDS, RulesExercise
from lab.ops import rules
from lab.studies import serving_trace as st

ID = "09_dispatch_rules"


@pytest.fixture
def ex() -> RulesExercise:
    return exercises.load("09")


def _trace_ms(ex: RulesExercise, spec: dict) -> set[int]:
    return {s.M for s in ex.trace_steps(spec)}


# ----------------------------------------------------------------------------------------------
# The exercise
# ----------------------------------------------------------------------------------------------

def test_the_exercise_loads_as_a_table_exercise(ex):
    assert isinstance(ex, RulesExercise) and ex.id == ID and ex.number == 9
    assert (ex.kind, ex.gate, ex.student_file) == (DISPATCH_RULES, "parse", "rules.json")
    assert exercises.load("dispatch_rules").id == exercises.load("9").id == ID
    assert [g.name for g in ex.checks] == ["visible_trace"]
    assert ex.performance.points == 6 and ex.performance.target_of_ceiling == 0.95
    assert ex.max_points(include_hidden=False) == 10 and ex.max_points(include_hidden=True) == 12
    assert ex.trace == {"prefill_share": 0.05, "skew": 1.2}
    assert ex.ceiling_title == "the reference table"
    with pytest.raises(LabError, match="dispatch table, not a kernel"):
        ex.reference_source()
    with pytest.raises(LabError, match="dispatch table, not a kernel"):
        ex.student_rung(ex.starter_path)


def test_the_kernel_tooling_walks_kernel_exercises_and_the_release_every_one():
    kernel_ids = [e.id for e in exercises.all_exercises()]
    every = exercises.all_exercises(KINDS)
    assert ID not in kernel_ids and [e.id for e in every] == sorted(kernel_ids + [ID])
    assert all(e.kind == "kernel" for e in exercises.all_exercises())


def test_the_traces_are_one_family_and_the_hidden_one_another_seed(ex):
    (visible,) = ex.checks[0].cases
    (hidden_group,) = ex.hidden_checks()
    (hidden,) = hidden_group.cases
    assert hidden_group.hidden and hidden_group.points == 2 and hidden_group.name not in {g.name for g in ex.checks}
    assert hidden["seed"] != visible["seed"] and hidden["seed"] != ex.performance.params[0]["seed"]
    # the hidden performance trace is the hidden check group's, so every GEMM timed was checked first
    assert ex.performance_trace(include_hidden=True) == hidden
    assert ex.performance_trace(include_hidden=False) == ex.performance.params[0]
    # the correctness trace stays quick (M up to 512), the timed traces hold a few prefills up to 2048 tokens
    steps = ex.trace_steps(visible)
    assert 90 <= len(steps) <= 100 and max(s.M for s in steps) <= 512 and visible["max_m"] == 512
    for spec in (hidden, ex.performance.params[0]):
        steps = ex.trace_steps(spec)
        prefill = [s.M for s in steps if s.kind == "prefill"]
        assert 250 <= len(steps) <= 300 and 1 <= len(prefill) <= 30 and max(prefill) == 2048
        assert len(set(steps)) <= 100  # distinct steps: what the timing costs
    # one family: the same draw as lab.studies.serving_trace's, with exercise.json's skew and prefill share
    assert ex.trace_steps(hidden) == [s for s in st.make_trace(hidden["seed"], hidden["steps"], 0.05, 1.2)
                                      if s.M <= hidden["max_m"]]


def test_the_starter_is_one_catch_all_rule_to_generic_and_the_reference_is_the_lab_s_table(ex):
    starter = rules.load(ex.starter_path)
    assert starter.rules == (rules.Rule((), "generic"),)
    assert ex.starter_text() == ex.starter_path.read_text()
    reference, name = ex.reference_table()
    assert ex.solution_path == ex.path / "solution" / "rules.json" and "reference solution" in name
    paths = {r.path for r in reference.rules}
    assert "decode" in paths and paths <= set(rules.PATHS)  # the measured table (lab tune --table) decides the rest
    # The reference is lab.ops.rules.DEFAULT with the output head's two rules after its first (written by
    # lab.grading.exercise09_calibration --write-solution); a student's bundle, which has no solution, times against
    # DEFAULT
    # itself, so the rest must not drift apart unnoticed.
    head = [r for r in reference.rules if dict(r.when).get("min_n") == 16384]
    assert [r.path for r in head] == ["decode", "persistent"]
    assert reference.rules[:1] + reference.rules[3:] == rules.DEFAULT.rules, (
        "solution/rules.json is no longer lab.ops.rules.DEFAULT plus the head's rules: run "
        "python -m lab.grading.exercise09_calibration --write-solution on a GPU")


def test_without_the_solution_the_reference_is_the_lab_s_table(ex, tmp_path):
    folder = tmp_path / ID
    shutil.copytree(ex.path, folder, ignore=shutil.ignore_patterns("solution", "hidden.json"))
    bundle_like = dataclasses.replace(ex, path=folder)
    table, name = bundle_like.reference_table()
    assert table is rules.DEFAULT and "DEFAULT" in name
    assert bundle_like.hidden_checks() == [] and bundle_like.performance_trace(True) == ex.performance.params[0]


def test_the_readme_states_the_points_the_target_and_where_the_measurements_are(ex):
    readme = (ex.path / "README.md").read_text()
    for group in ex.checks:
        assert f"| {group.name} |" in readme and f"| {group.points:g} |" in readme
    assert f"| {ex.performance.points:g} |" in readme and f"{ex.performance.target_of_ceiling:.2f}x" in readme
    assert f"none at {ex.performance.zero_ratio:g}x" in readme and "lab check 09" in readme
    for record in ("results/h200/ops_trace.json", "results/h200/ops_tune.json"):
        assert record in readme
    for path in rules.PATHS:
        assert f"| `{path}` |" in readme, path
    for condition in (*rules.INT_CONDITIONS, *rules.FLOAT_CONDITIONS, *rules.BOOL_CONDITIONS, *rules.CHOICE_CONDITIONS):
        assert f"`{condition}`" in readme, condition
    (hidden,) = ex.hidden_checks()
    assert str(hidden.cases[0]["seed"]) not in readme and f'"{hidden.name}"' not in readme


def _copy_exercises(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "exercises"
    shutil.copytree(exercises.EXERCISES_DIR, root)
    monkeypatch.setattr(exercises, "EXERCISES_DIR", root)
    return root


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(kind="notebook"), "kind 'notebook'"),
    (lambda d: d.update(student_file="rules.cu"), "plain .json file name"),
    (lambda d: d.pop("trace"), "lacks trace"),
    (lambda d: d.update(trace={"prefill_share": 2, "skew": 1.2}), "prefill_share"),
    (lambda d: d.update(trace={"skew": 1.2}), "prefill_share"),
    (lambda d: d["checks"][0]["cases"].append({"seed": 1, "steps": 10}), "a trace is"),
    (lambda d: d["checks"][0]["cases"].append({"seed": 1, "steps": 0, "max_m": 8}), "1 to"),
    (lambda d: d["checks"][0]["cases"].append({"seed": -1, "steps": 10, "max_m": 8}), "non-negative"),
    (lambda d: d["performance"]["params"].append({"seed": 1, "steps": 10, "max_m": 8}), "one trace"),
    (lambda d: d["performance"].pop("target_of_ceiling"), "target_of_ceiling"),
])
def test_a_broken_exercise_json_is_a_clear_error(tmp_path, monkeypatch, change, words):
    root = _copy_exercises(tmp_path, monkeypatch)
    _edit_json(root / ID / "exercise.json", change)
    with pytest.raises(LabError, match=words):
        exercises.load("09")


def test_a_broken_hidden_json_is_a_clear_error(tmp_path, monkeypatch):
    root = _copy_exercises(tmp_path, monkeypatch)
    _edit_json(root / ID / "hidden.json", lambda d: d["performance"]["params"].append(d["performance"]["params"][0]))
    with pytest.raises(LabError, match="one trace"):
        exercises.load("09").performance_trace(include_hidden=True)
    _edit_json(root / ID / "hidden.json", lambda d: d["checks"][0]["cases"][0].pop("max_m"))
    with pytest.raises(LabError, match="a trace is"):
        exercises.load("09").hidden_checks()


def test_a_trace_with_no_step_left_is_a_clear_error(ex):
    seed = next(s for s in range(100) if _trace_ms(ex, {"seed": s, "steps": 1, "max_m": 10 ** 6}) != {1})
    with pytest.raises(LabError, match="raise max_m"):
        ex.trace_steps({"seed": seed, "steps": 1, "max_m": 1})


# ----------------------------------------------------------------------------------------------
# A bad table: one sentence and no points, before any worker (or GPU) is involved
# ----------------------------------------------------------------------------------------------

@pytest.fixture
def no_worker(monkeypatch):
    """A worker module that does not exist: any grading that starts a worker fails the test."""
    monkeypatch.setattr(grader, "WORKER_MODULE", "lab_no_such_worker_module")


BAD_TABLES = [
    ('{"rules": [{"when": {}, "path": "generic"},]}', "not valid JSON"),
    ('{"rules": [{"when": {}, "path": "gemv"}]}', "path 'gemv' is not one of"),
    ('{"rules": [{"when": {"max_batch": 8}, "path": "decode"}]}', "unknown condition 'max_batch'"),
    ('{"rules": [{"when": {}, "path": "persistent", "config": {"BN": 192}}]}', "BN must be one of 128, 256"),
    ('{"rules": [{"when": {}, "path": "split_k", "config": {"splits": 300}}]}', "splits must be one of 0..256"),
    ('{"rules": [{"when": {}, "path": "decode", "config": {"BN": 128}}]}', "has no setting 'BN'"),
    ('{"rules": [{"when": {"max_m": "8"}, "path": "decode"}]}', "max_m must be a whole number"),
    ('{"rules": []}', "between 1 and"),
    ('[{"when": {}, "path": "generic"}]', "list under \"rules\""),
    ('{"rules": [{"when": {"min_k_over_mn": NaN}, "path": "split_k"}]}', "NaN"),
    ('{"rules": [{"when": {}, "path": "generic"}], "rules": [{"when": {}, "path": "cublas"}]}', "twice"),
    ("[" * 100_000 + "]" * 100_000, "levels deep"),
    ('{"rules": [{"when": {"max_m": ' + "7" * 5000 + '}, "path": "decode"}]}', "5000 digits"),
]


@pytest.mark.parametrize("text, words", BAD_TABLES)
def test_a_bad_table_gets_one_sentence_and_no_points_without_a_worker(ex, tmp_path, no_worker, text, words):
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "rules.json").write_text(text)
    result = grader.grade_submission(ex, folder, include_hidden=True)
    assert [c.name for c in result.checks] == ["parse", "visible_trace", "hidden_trace", "performance"]
    assert result.score == 0 and result.max_score == 12
    for check in result.checks:
        assert not check.passed and words in check.output, check.output
        assert "\n" not in check.output and "Traceback" not in check.output
        assert check.output.startswith("rules.json") and str(folder) not in check.output


def test_a_table_that_is_not_utf8_gets_one_sentence(ex, tmp_path, no_worker):
    folder = tmp_path / "latin"
    folder.mkdir()
    (folder / "rules.json").write_bytes(b'{"rules": [{"when": {}, "path": "generic", "note": "caf\xe9"}]}')
    result = grader.grade_submission(ex, folder, include_hidden=True)
    assert result.score == 0 and all("not UTF-8" in c.output and "\n" not in c.output for c in result.checks)


def test_the_bad_table_s_sentence_names_the_file_as_the_student_typed_it(ex, tmp_path, no_worker):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "rules.json").write_text(BAD_TABLES[2][0])
    kernel, notes = grader.find_kernel(ex, folder, shown="my/table.json")
    assert kernel is None and notes[-1].startswith("my/table.json, rule 1: unknown condition")


def test_a_good_table_passes_the_folder_checks_and_reaches_the_worker(ex, tmp_path):
    folder = tmp_path / "bob"
    folder.mkdir()
    (folder / "table.json").write_text(ex.solution_path.read_text())  # another name: the one .json file is taken
    (folder / "notes.txt").write_text("why my rules are what they are")
    kernel, notes = grader.find_kernel(ex, folder)
    assert kernel == folder / "table.json" and any("notes.txt" in n for n in notes)
    (folder / "other.json").write_text("{}")
    assert grader.find_kernel(ex, folder)[0] is None  # two candidates: none is guessed
    (folder / "rules.json").write_text("  \n")
    assert "empty" in grader.find_kernel(ex, folder)[1][-1] and "rules.json" in grader.find_kernel(ex, folder)[1][-1]


def test_a_kernel_file_is_not_a_table(ex, tmp_path):
    folder = tmp_path / "carol"
    folder.mkdir()
    (folder / "kernel.cu").write_text("__global__ void k() {}\n")
    kernel, notes = grader.find_kernel(ex, folder)
    assert kernel is None and "no rules.json" in notes[-1]


def test_the_fingerprint_covers_the_reference_table_and_the_hidden_trace(ex, tmp_path):
    folder = tmp_path / ID
    shutil.copytree(ex.path, folder)
    copy = dataclasses.replace(ex, path=folder)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "rules.json").write_text(ex.starter_text())
    before = grader.fingerprint(copy, sub, 0, True)
    (folder / "solution" / "rules.json").write_text('{"rules": [{"when": {}, "path": "cublas"}]}')
    assert grader.fingerprint(copy, sub, 0, True) != before
    before = grader.fingerprint(copy, sub, 0, True)
    _edit_json(folder / "hidden.json", lambda d: d["checks"][0]["cases"][0].update(seed=1))
    assert grader.fingerprint(copy, sub, 0, True) != before


FAKE_WORKER = """
import argparse, json, sys
p = argparse.ArgumentParser()
for a in ("--exercise", "--kernel", "--events", "--checks", "--seed", "--shown"):
    p.add_argument(a)
p.add_argument("--hidden", action="store_true")
p.add_argument("--no-perf", action="store_true")
args = p.parse_args()
json.load(open(args.kernel))  # the parent only ever hands over a table that parses
for name in args.checks.split(","):
    with open(args.events, "a") as f:
        f.write(json.dumps({"event": "start", "check": name}) + "\\n")
        f.write(json.dumps({"event": "done", "check": name, "passed": True, "score": 99.0, "output": "ok"}) + "\\n")
"""


def test_lab_grade_takes_a_folder_of_tables(ex, tmp_path, monkeypatch):
    from lab.grading import classroom

    (tmp_path / "fake" / "fake_rules_worker.py").parent.mkdir()
    (tmp_path / "fake" / "fake_rules_worker.py").write_text(FAKE_WORKER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    monkeypatch.setattr(grader, "WORKER_MODULE", "fake_rules_worker")
    subs = tmp_path / "subs"
    for name, text in (("alice", ex.solution_path.read_text()), ("bob", BAD_TABLES[0][0]), ("carol", None)):
        (subs / name).mkdir(parents=True)
        if text is not None:
            (subs / name / "rules.json").write_text(text)
    results = classroom.grade_batch(ex, subs, tmp_path / "out", seed=1, include_hidden=True)
    by = {r.submission: r for r in results}
    assert by["alice"].score == by["alice"].max_score == 12  # each check capped at its own points
    assert [c.name for c in by["alice"].checks] == ["parse", "visible_trace", "hidden_trace", "performance"]
    assert by["bob"].score == 0 and "not valid JSON" in by["bob"].check("visible_trace").output
    assert by["carol"].score == 0 and "empty" in by["carol"].check("parse").output
    report = (tmp_path / "out" / "report.md").read_text()
    assert "not valid JSON" in report and (tmp_path / "out" / "grades.csv").is_file()


# ----------------------------------------------------------------------------------------------
# The worker's wiring, with the GPU parts faked
# ----------------------------------------------------------------------------------------------

def _args(rules_path: Path, events: Path, checks: str, hidden: bool = False, no_perf: bool = False):
    return SimpleNamespace(kernel=rules_path, events=events, checks=checks, hidden=hidden, no_perf=no_perf,
                           shown=None, seed=0)


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def faked(monkeypatch):
    """run_trace_group and run_rules_performance replaced by recorders; `fail` names groups that fail."""
    calls = {"groups": [], "performance": [], "fail": set()}

    def group(exercise, table, g):
        calls["groups"].append((g.name, table))
        ok = g.name not in calls["fail"]
        return {"passed": ok, "score": g.points if ok else 0.0, "cuda_error": False, "output": "faked"}

    def performance(exercise, table, spec, checked, which):
        calls["performance"].append((spec, checked, which))
        return {"passed": True, "score": exercise.performance.points, "cuda_error": False, "output": "faked",
                "ratio_of_ceiling": 1.0}

    monkeypatch.setattr(grade_worker, "run_trace_group", group)
    monkeypatch.setattr(grade_worker, "run_rules_performance", performance)
    return calls


def test_the_worker_runs_parse_the_groups_and_the_hidden_performance(ex, tmp_path, faked):
    events = tmp_path / "ev.jsonl"
    checks = "parse,visible_trace,hidden_trace,performance"
    args = _args(ex.solution_path, events, checks, hidden=True)
    assert grade_worker.run_rules(ex, args, grade_worker.Events(events)) == 0
    done = {e["check"]: e for e in _events(events) if e["event"] == "done"}
    assert list(done) == checks.split(",") and all(e["passed"] for e in done.values())
    reference = rules.load(ex.solution_path)
    assert done["parse"]["output"] == f"a valid dispatch table of {len(reference.rules)} rules"
    assert done["parse"]["max_score"] == 0
    assert [(n, t == reference) for n, t in faked["groups"]] == [("visible_trace", True), ("hidden_trace", True)]
    ((spec, checked, which),) = faked["performance"]
    (hidden,) = ex.hidden_checks()
    assert spec == hidden.cases[0] and which == "the hidden trace"
    assert checked == _trace_ms(ex, ex.checks[0].cases[0]) | _trace_ms(ex, hidden.cases[0])
    assert done["performance"]["max_score"] == 6 and done["performance"]["ratio_of_ceiling"] == 1.0


def test_the_worker_times_the_visible_trace_for_a_student(ex, tmp_path, faked):
    events = tmp_path / "ev.jsonl"
    grade_worker.run_rules(ex, _args(ex.starter_path, events, "parse,visible_trace,performance"),
                           grade_worker.Events(events))
    ((spec, checked, which),) = faked["performance"]
    assert spec == ex.performance.params[0] and which == "the performance trace"
    assert checked == _trace_ms(ex, ex.checks[0].cases[0])  # the rest of the performance trace is checked there


def test_a_failed_correctness_check_leaves_the_performance_untimed(ex, tmp_path, faked):
    faked["fail"].add("visible_trace")
    events = tmp_path / "ev.jsonl"
    grade_worker.run_rules(ex, _args(ex.solution_path, events, "parse,visible_trace,performance"),
                           grade_worker.Events(events))
    done = {e["check"]: e for e in _events(events) if e["event"] == "done"}
    assert not done["performance"]["passed"] and "not timed" in done["performance"]["output"]
    assert faked["performance"] == []
    again = tmp_path / "again.jsonl"  # a fresh worker after the parent saw a failure (--no-perf)
    grade_worker.run_rules(ex, _args(ex.solution_path, again, "performance", no_perf=True), grade_worker.Events(again))
    assert "not timed" in _events(again)[-1]["output"] and faked["performance"] == []


def test_the_worker_refuses_a_bad_table_at_the_gate_and_an_unknown_check(ex, tmp_path, faked):
    bad = tmp_path / "rules.json"
    bad.write_text(BAD_TABLES[1][0])
    events = tmp_path / "ev.jsonl"
    grade_worker.run_rules(ex, _args(bad, events, "parse,visible_trace"), grade_worker.Events(events))
    done = [e for e in _events(events) if e["event"] == "done"]
    assert [e["check"] for e in done] == ["parse"] and "path 'gemv'" in done[0]["output"]
    assert faked["groups"] == []
    other = tmp_path / "other.jsonl"
    grade_worker.run_rules(ex, _args(ex.starter_path, other, "compile,leaderboard"), grade_worker.Events(other))
    done = [e for e in _events(other) if e["event"] == "done"]
    assert [e["passed"] for e in done] == [False, False] and "not a check of exercise 09" in done[1]["output"]


def test_the_worker_s_main_hands_a_table_exercise_to_run_rules(ex, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(grade_worker, "warm_up", lambda: None)
    monkeypatch.setattr(grade_worker, "run_rules", lambda exercise, args, events: seen.append(exercise.id) or 0)
    argv = ["--exercise", "09", "--kernel", str(ex.starter_path), "--events", str(tmp_path / "e"), "--checks", "parse"]
    assert grade_worker.main(argv) == 0 and seen == [ID]


@pytest.mark.parametrize("ratio, share", [(0.95, 1.0), (1.3, 1.0), (0.475, 0.0), (0.2, 0.0), (0.7125, 0.5)])
def test_performance_points_run_from_half_the_target_to_the_target(ratio, share):
    assert grade_worker.performance_score(ratio, 0.95, 6.0) == pytest.approx(6.0 * share, abs=0.01)


def test_both_tables_are_timed_on_one_layer_in_alternating_order(monkeypatch):
    layers, calls = [], []

    class FakeLayer:
        def __init__(self, max_m, vocab=None):
            layers.append((max_m, vocab))

    def fake_time_steps(steps, methods, layer, runtime, min_time_ms):
        calls.append((steps[0], runtime, layer))
        return {"lab_ops": {(steps[0].kind, steps[0].M): float(steps[0].M)}}

    monkeypatch.setattr(st, "Layer", FakeLayer)
    monkeypatch.setattr(st, "time_steps", fake_time_steps)
    steps = [st.Step("decode", 3), st.Step("decode", 1), st.Step("prefill", 128), st.Step("decode", 3)]
    times = grade_worker.time_tables(steps, {"student": "S", "reference": "R"}, vocab=32001)
    assert layers == [(128, 32001)] and len({id(layer) for _, _, layer in calls}) == 1
    assert [(s.M, rt) for s, rt, _ in calls] == [(1, "S"), (1, "R"), (3, "R"), (3, "S"), (128, "S"), (128, "R")]
    assert times["student"] == times["reference"] == {("decode", 1): 1.0, ("decode", 3): 3.0, ("prefill", 128): 128.0}


# ----------------------------------------------------------------------------------------------
# `lab check 09` without a GPU
# ----------------------------------------------------------------------------------------------

@pytest.fixture
def no_gpu(monkeypatch):
    from lab.core import device

    monkeypatch.setattr(device, "_probe", lambda: "the CUDA driver sees no GPU")


def test_cli_check_without_a_gpu_shows_the_routes_and_grades_nothing(ex, no_gpu, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["check", "09"]) == 3
    out = capsys.readouterr().out
    assert "Nothing was graded" in out and "valid dispatch table" in out and "generic (rule 1)" in out
    assert main(["check", "09", str(ex.solution_path)]) == 3
    out = capsys.readouterr().out
    reference = ex.reference_table()[0].rules
    last = reference[-1]
    shown = " ".join([last.path, *(f"{k}={v}" for k, v in last.config)])
    assert "decode (rule 1)" in out and f"{shown} (rule {len(reference)})" in out


def test_cli_check_of_a_bad_table_is_one_sentence(tmp_path, no_gpu, capsys):
    bad = tmp_path / "mine.json"
    bad.write_text(BAD_TABLES[3][0])
    assert main(["check", "09", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "BN must be one of 128, 256" in out and "Traceback" not in out


# ----------------------------------------------------------------------------------------------
# The student bundle
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return release.release(tmp_path_factory.mktemp("release") / "student")


def test_the_bundle_ships_the_starter_readme_and_spec_only(bundle):
    ex = exercises.load("09")
    folder = bundle / "exercises" / ID
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "exercise.json", "rules.json"]
    assert (folder / "rules.json").read_text() == ex.starter_path.read_text()
    assert (folder / "exercise.json").read_text() == (ex.path / "exercise.json").read_text()
    assert not [p for p in bundle.rglob("*") if p.name in ("hidden.json", "solution")]
    row = f"| `{ID}` | {ex.title} | 10 | 0.95x of the reference table |"
    assert row in (bundle / "README.md").read_text()


def test_the_bundle_holds_neither_the_reference_table_nor_the_hidden_trace(bundle):
    ex = exercises.load("09")
    reference = rules.load(ex.solution_path)
    (hidden,) = ex.hidden_checks()
    # lab.ops's own table ships with the runtime, and the README sends students to read it: the reference starts
    # from it. Every other file of the bundle must hold neither.
    for path in (p for p in bundle.rglob("*") if p.is_file() and p.relative_to(bundle) != release._RUNTIME_TABLE):
        data = path.read_bytes()
        assert ex.solution_path.read_bytes() not in data, path
        if path.suffix == ".json" and b'"rules"' in data:
            try:
                assert rules.parse(json.loads(data)) != reference, path
            except LabError:
                pass
    texts = [p.read_text() for p in (bundle / "exercises").rglob("*") if p.is_file()]
    assert not any(json.dumps(hidden.cases[0]) in t or f'"{hidden.name}"' in t for t in texts)
    assert release.find_leaks(bundle) == []


def test_the_bundle_s_lab_checks_against_the_lab_s_table(bundle):
    import os
    import subprocess
    import sys

    code = ("import lab.grading.exercises as e; x = e.load('09'); t, name = x.reference_table(); "
            "from lab.ops import rules; print(t is rules.DEFAULT, x.hidden_checks(), x.performance_trace(True))")
    out = subprocess.run([sys.executable, "-c", code], cwd=bundle, env=dict(os.environ, PYTHONPATH=str(bundle)),
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "True [] {'seed': 90, 'steps': 300, 'max_m': 2048}"


def test_the_leak_check_finds_a_copy_of_the_reference_table(tmp_path):
    ex = exercises.load("09")
    table = rules.load(ex.solution_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "my_rules.json").write_text(json.dumps(table.to_json()))  # reformatted, notes dropped
    (tmp_path / "b.json").write_text(ex.starter_text())
    (tmp_path / "c.json").write_text('{"rules": "not a table"}')
    found = release.find_leaks(tmp_path)
    assert len(found) == 1 and "my_rules.json" in found[0] and "09_dispatch_rules/solution/rules.json" in found[0]


def test_release_refuses_a_bundle_that_would_ship_the_reference(tmp_path, monkeypatch):
    solution = exercises.load("09").solution_path.read_text()
    monkeypatch.setattr(RulesExercise, "starter_text", lambda self: solution)
    with pytest.raises(LabError, match="reference table"):
        release.release(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_leaderboard_refuses_a_dispatch_table_exercise_in_one_sentence(tmp_path):
    from lab.core.errors import LabError
    from lab.grading.classroom import leaderboard
    from lab.grading.exercises import load

    with pytest.raises(LabError, match="ranks kernel exercises only") as err:
        leaderboard(load("09"), tmp_path, tmp_path / "out")
    assert "\n" not in str(err.value)


def test_a_table_at_the_zero_point_earns_nothing_and_in_between_in_proportion():
    assert grade_worker.performance_score(0.75, 0.95, 6.0, zero_at=0.75) == 0.0
    assert grade_worker.performance_score(0.85, 0.95, 6.0, zero_at=0.75) == pytest.approx(3.0)
    assert grade_worker.performance_score(0.96, 0.95, 6.0, zero_at=0.75) == 6.0


def test_the_exercise_s_model_has_its_output_head_in_every_step():
    from lab.studies.serving_trace import Step, gemm_shapes, head_gemm

    ex = exercises.load("09")
    assert ex.vocab == 32001 and ex.performance.zero_ratio == 0.75
    shapes = gemm_shapes([Step("decode", 3), Step("prefill", 512)], ex.vocab)
    heads = sorted(m for m, g in shapes if g == head_gemm(ex.vocab))
    assert heads == [1, 3]  # a prefill scores its last token; a decode step every row
    assert len(shapes) == 2 * 5 + 2


def test_the_reference_table_sends_the_output_head_past_the_library():
    from lab.ops import rules
    from lab.ops.dispatch import Runtime
    from lab.ops.shapes import GemmShape

    ex = exercises.load("09")
    runtime = Runtime(rules.load(ex.solution_path))
    runtime._arch = 90
    paths = {m: runtime.rule_decision(GemmShape(m, ex.vocab, 4096, "float16", "TN", True, "none")).path
             for m in (1, 8, 16, 64, 2048)}
    assert paths[1] == paths[8] == paths[16] == "decode" and paths[64] == paths[2048] == "persistent"
    assert all("exercise09_calibration.json" in r.get("note", "") for r in
               json.loads(ex.solution_path.read_text())["rules"] if r["when"].get("min_n") == 16384)


def test_the_calibration_record_shows_the_reference_well_ahead_of_the_library_alone():
    """results/h200/grading/exercise09_calibration.json (lab.grading.exercise09_calibration --write-solution, on the
    H200):
    on both traces, in every round, the reference is at least 1.15x a table that sends every GEMM to the library,
    and that table earns at most half the performance points; the record was made with the exercise's present
    scoring and reference table."""
    from lab.measure.records import REFERENCE_GPU_DIR

    record = json.loads((REFERENCE_GPU_DIR / "grading" / "exercise09_calibration.json").read_text())
    ex = exercises.load("09")
    assert record["provenance"]["device"].startswith("NVIDIA H200")
    assert record["scoring"] == {"target": ex.performance.target_of_ceiling, "zero_at": ex.performance.zero_ratio,
                                 "points": ex.performance.points}
    assert record["reference"] == json.loads(ex.solution_path.read_text()) and record["model"]["vocab"] == ex.vocab
    assert {t["trace"] for t in record["traces"]} == {"visible", "hidden"}
    for trace in record["traces"]:
        assert len(trace["reference_over_library"]) == record["rounds"] >= 3
        assert min(trace["reference_over_library"]) >= 1.15, trace
        assert max(trace["points"]["library"]) <= ex.performance.points / 2, trace
