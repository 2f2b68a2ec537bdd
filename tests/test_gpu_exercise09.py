"""GPU: exercise 09 graded for real on small traces of its family (a few minutes at most, most of it the first
compiles): the reference table earns every correctness point and nearly every performance point against itself;
the starter (every GEMM to generic) is correct and clearly slower; a table that sends everything to split_k
(which refuses unaligned operands, and the trace has none) is still correct; and one submission goes through the
grading process end to end. The CPU half is tests/test_exercise09.py."""

from __future__ import annotations

import pytest

from lab.grading import grade_worker, grader
from lab.grading.exercises import CheckGroup, load
from lab.ops import rules

pytestmark = pytest.mark.gpu

# Small traces of the exercise's family (its skew and prefill share): the grade's own code on fewer steps.
SMALL = {"seed": 90, "steps": 40, "max_m": 512}
TIMED = {"seed": 90, "steps": 60, "max_m": 1024}
GROUP = CheckGroup("small_trace", 4.0, [SMALL])


@pytest.fixture(scope="module")
def exercise():
    return load("09")


@pytest.fixture(scope="module")
def reference(exercise):
    return exercise.reference_table()[0]


def _performance(exercise, table) -> dict:
    """The performance check on TIMED, its values of M checked first where SMALL did not cover them."""
    checked = {s.M for s in exercise.trace_steps(SMALL)}
    return grade_worker.run_rules_performance(exercise, table, TIMED, checked, "a small trace")


@pytest.fixture(scope="module")
def reference_performance(exercise, reference):
    return _performance(exercise, reference)


def test_the_reference_earns_every_correctness_point(exercise, reference):
    result = grade_worker.run_trace_group(exercise, reference, GROUP)
    assert result["passed"] and result["score"] == 4.0, result["output"]
    paths = result["output"].split("paths: ")[1]
    assert "decode" in paths and "," in paths, paths  # the GEMV for the smallest batches, and other paths past it


def test_the_reference_earns_nearly_every_performance_point_against_itself(exercise, reference_performance):
    perf, points = reference_performance, exercise.performance.points
    assert "ratio_of_ceiling" in perf, perf["output"]
    # Timed against itself in one run, it should sit at 1.0 within the timing's noise, well above the target.
    assert 0.9 < perf["ratio_of_ceiling"] < 1.1, perf["output"]
    assert perf["score"] >= 0.8 * points, perf["output"]


def test_the_starter_is_correct_and_clearly_slower(exercise, reference_performance):
    starter = rules.load(exercise.starter_path)
    result = grade_worker.run_trace_group(exercise, starter, GROUP)
    assert result["passed"] and "generic" in result["output"], result["output"]
    perf, points = _performance(exercise, starter), exercise.performance.points
    assert "ratio_of_ceiling" in perf, perf["output"]
    assert perf["ratio_of_ceiling"] < exercise.performance.target_of_ceiling, perf["output"]
    assert perf["score"] <= reference_performance["score"] - 0.25 * points, perf["output"]


def test_split_k_everywhere_is_still_correct(exercise):
    table = rules.parse({"rules": [{"when": {}, "path": "split_k", "config": {"splits": 0}}]}, "split_k everywhere")
    result = grade_worker.run_trace_group(exercise, table, GROUP)
    assert result["passed"], result["output"]
    paths = result["output"].split("paths: ")[1]
    assert paths.startswith("split_k ") and "," not in paths, paths  # split_k served every shape: none fell back


def test_a_table_is_graded_end_to_end_by_the_grading_process(exercise, tmp_path):
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "rules.json").write_text(exercise.solution_path.read_text())
    result = grader.grade_submission(exercise, folder, include_hidden=False, with_performance=False)
    assert [c.name for c in result.checks] == ["parse", "visible_trace"]
    assert all(c.passed for c in result.checks), [c.output for c in result.checks]
    assert result.score == 4.0 and f"{len(rules.load(exercise.solution_path).rules)} rules" in \
        result.check("parse").output
