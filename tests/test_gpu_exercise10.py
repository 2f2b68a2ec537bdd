"""GPU: exercise 10 (the online-softmax step plugged into a copy of attention rung 02) graded end to end through the
grader, hidden checks included: the solution earns every point, its speed measured against rung 02 itself in the
same run; the starter compiles and earns nothing; broken steps (no rescale of O, a shift by -inf for rows with no
key) lose their groups with a sentence that says what is wrong. The step harness passes the solution on its own.

    python -m pytest -q -m gpu tests/test_gpu_exercise10.py

With LAB_EXERCISE_SUMMARY=path.json every graded check's score and output is written there (the measured ratio to
rung 02, to calibrate the target in exercise.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.core import build, device
from lab.grading import grader
from lab.grading.exercises import load

pytestmark = pytest.mark.gpu

SEED = 1010
HARNESS_GROUP = "empty_rows_and_groups"
# Lines of the solution that broken variants change (each must occur once in it).
RESCALE_O = "for (int j = 0; j < COLS; ++j) o[j] *= alpha;"
SHIFT = "shift = no_key_yet ? 0.0f : m_next;"
_SUMMARY: dict = {}


def _exercise():
    exercise = load("10")
    why = build.arch_refusal(exercise.reference_spec(), device.current().arch)
    if why:
        pytest.skip(f"{exercise.id}: its kernel {why}")
    return exercise


def _submit(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(text)
    return folder


def _report(result: grader.SubmissionResult) -> str:
    return "\n".join(f"{c.name}: {c.score:g}/{c.max_score:g} {c.output}" for c in result.checks)


def _record(result: grader.SubmissionResult) -> None:
    if not os.environ.get("LAB_EXERCISE_SUMMARY"):
        return
    _SUMMARY[f"{result.exercise}/{result.submission}"] = {
        "score": result.score, "max": result.max_score, "seconds": round(result.seconds, 1),
        "checks": {c.name: {"score": c.score, "max": c.max_score, "hidden": c.hidden, "output": c.output,
                            **({"ratio_of_ceiling": c.extra["ratio_of_ceiling"]} if "ratio_of_ceiling" in c.extra
                               else {})}
                   for c in result.checks}}
    Path(os.environ["LAB_EXERCISE_SUMMARY"]).write_text(json.dumps(_SUMMARY, indent=1) + "\n")


def _broken(exercise, line: str, replacement: str) -> str:
    text = exercise.reference_source()
    assert text.count(line) == 1, f"the solution no longer holds {line!r} once: update this test's variants"
    return text.replace(line, replacement)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The solution and the starter, each graded once with the hidden checks and the performance check."""
    exercise = _exercise()
    root = tmp_path_factory.mktemp("exercise10")
    results = {}
    for name, text in (("solution", exercise.reference_source()), ("starter", exercise.starter_text())):
        results[name] = grader.grade_submission(exercise, _submit(root, name, text), seed=SEED, include_hidden=True)
        _record(results[name])
    return exercise, results


def test_the_solution_passes_every_check_and_is_graded_full_marks(graded):
    exercise, results = graded
    solution = results["solution"]
    assert solution.check("compile").passed, _report(solution)
    names = {c.name for c in solution.checks} - {"compile", "performance"}
    assert names == {g.name for g in exercise.checks + exercise.hidden_checks()}
    assert all(c.passed and c.score == c.max_score for c in solution.checks), _report(solution)
    assert solution.score == exercise.max_points(include_hidden=True), _report(solution)
    assert "all exact" in solution.check(HARNESS_GROUP).output, solution.check(HARNESS_GROUP).output


def test_the_solution_runs_at_rung_02_s_speed_timed_in_the_same_run(graded):
    exercise, results = graded
    perf = results["solution"].check("performance")
    ratio = perf.extra.get("ratio_of_ceiling")
    assert "rung 02_flash_mma" in perf.output and "TFLOP/s" in perf.output and "same run" in perf.output, perf.output
    assert perf.passed and ratio >= exercise.performance.target_of_ceiling, (
        f"the solution reached {ratio}x of rung 02, under the target {exercise.performance.target_of_ceiling}x: "
        f"the same kernel with the lab's step should run at rung 02's speed.\n{perf.output}")
    assert ratio < 1.25, f"the solution ran {ratio}x faster than the kernel it copies: a timing artefact\n{perf.output}"


def test_the_starter_compiles_and_earns_nothing(graded):
    _, results = graded
    starter = results["starter"]
    assert starter.check("compile").passed, _report(starter)
    assert starter.score == 0, _report(starter)
    for check in starter.checks:
        if check.name == "performance":
            assert "not timed" in check.output, check.output
        elif check.name == HARNESS_GROUP:
            assert not check.passed and check.output.startswith("lab_online_softmax_step"), check.output
        elif check.name != "compile":
            assert not check.passed and "failed on" in check.output and "wrong result" in check.output, check.output


def test_a_step_that_does_not_rescale_o_fails_with_a_clear_message(tmp_path):
    exercise = _exercise()
    text = _broken(exercise, RESCALE_O, "// O is not rescaled")
    result = grader.grade_submission(exercise, _submit(tmp_path, "no_rescale", text), seed=SEED,
                                     include_hidden=False, with_performance=False)
    assert result.check("compile").passed, _report(result)
    harness = result.check(HARNESS_GROUP)
    assert not harness.passed and "raises the row's max" in harness.output and "o[0] became" in harness.output
    assert "alpha" in harness.output, harness.output
    # Rows of many tiles whose max moves: the old tiles' weights are too large, outside their bounds (with large
    # logits, past fp16's range: an infinity where the reference is finite).
    for name in ("lengths", "large_logits"):
        check = result.check(name)
        assert not check.passed and check.score == 0, _report(result)
        assert "failed on" in check.output and "wrong result" in check.output, check.output
        assert "exceeds its bound" in check.output or "NaN/Inf" in check.output, check.output
        assert "Traceback" not in check.output
    assert result.score == 0, _report(result)


def test_a_step_that_shifts_by_minus_inf_fails_the_step_check_only(tmp_path):
    # A row that has seen no key shifted by m_new = -inf gives NaN weights and a NaN sum; the kernel still stores
    # +0 for it (its sum is not > 0), so only the step harness sees it: the other groups pass.
    exercise = _exercise()
    text = _broken(exercise, SHIFT, "shift = m_next;")
    result = grader.grade_submission(exercise, _submit(tmp_path, "nan_shift", text), seed=SEED,
                                     include_hidden=False, with_performance=False)
    harness = result.check(HARNESS_GROUP)
    assert not harness.passed and harness.score == 0, _report(result)
    assert "has seen no key" in harness.output and "nan" in harness.output and "shift by 0" in harness.output
    for group in exercise.checks:
        if group.name != HARNESS_GROUP:
            assert result.check(group.name).passed, _report(result)


def test_the_step_harness_passes_the_solution_and_fails_the_starter():
    from lab.grading.online_softmax_numerics import check_step_numerics

    exercise = _exercise()
    ok, message = check_step_numerics(exercise.reference_path, "kernel.cu", exercise.allowed_headers())
    assert ok, message
    ok, message = check_step_numerics(exercise.starter_path, "kernel.cu", exercise.allowed_headers())
    assert not ok and message.startswith("lab_online_softmax_step on a row's first visible tile"), message


def test_the_timed_runs_check_the_last_output_of_the_step_and_of_rung_02():
    from lab.grading import grade_worker

    exercise = _exercise()
    family = exercise.family_object()
    rung = exercise.reference_rung()
    for case in ({"B": 1, "H": 4, "H_kv": 2, "S_q": 300, "S_k": 517, "D": 64, "dtype": "bfloat16", "causal": 1},
                 {"B": 2, "H": 2, "S_q": 129, "S_k": 129, "D": 128, "dtype": "float16", "causal": 0}):
        problem = family.make_problem(seed=21, **case)
        _, ok = grade_worker.time_fresh(family, problem, lambda p, o: family.launch(rung, p, o), seed=21)
        assert ok is True, case
        _, ok = grade_worker.time_fresh(family, problem, exercise.launch_ceiling(), seed=21, check=True)
        assert ok is True, case
