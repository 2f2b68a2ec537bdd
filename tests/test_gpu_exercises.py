"""GPU: the GEMM exercises (03 shared-memory tiled, 04 register-tiled, 05 tensor-core fragments, 06 the tile
order of the warp-specialized Hopper rung, 07 split-K with a workspace and a reduction kernel, both built from the
student's file, 08 the epilogue functor plugged into the persistent one) graded end to end through the grader,
hidden checks included: worker processes, time limits, the performance check against cuBLAS (SGEMM, or for 05,
06 and 07 cuBLAS in the same type and layout; for 08, rung 06 without the epilogue).
The reference rung must earn every correctness point and reach its performance target (chosen below
the rung's predicted speed); the stripped starter must compile and earn nothing, except 06's: it keeps the
row-major tile order, so it must earn every correctness point and miss the performance target. 06, 07 and 08 need
sm_90a (wgmma, setmaxnreg) and are skipped, with the reason, on any other GPU. The performance path
is also checked directly on problems whose output is an input (beta != 0) and has padding.

    python -m pytest -q -m gpu tests/test_gpu_exercises.py

With LAB_EXERCISE_SUMMARY=path.json every graded check's score and output is written there (the
measured fractions of cuBLAS, to calibrate the targets in exercise.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.core import build, device
from lab.grading import grader
from lab.grading.exercises import load

pytestmark = pytest.mark.gpu

GEMM_EXERCISES = ["03_smem_tiled_gemm", "04_register_tiled_gemm", "05_mma_fragments", "06_tile_order", "07_split_k"]
# Starters that are correct as they stand and only slow: 06's is rung 05 in row-major tile order.
ROW_MAJOR_STARTERS = ["06_tile_order"]
# Exercises on the fused-epilogue family: int8 outputs (beta must be 0), so the beta cases below do not apply.
EPILOGUE_EXERCISES = ["08_epilogue_functor"]
GRADED_EXERCISES = GEMM_EXERCISES + EPILOGUE_EXERCISES
EMPTY_STARTERS = [e for e in GRADED_EXERCISES if e not in ROW_MAJOR_STARTERS]
SEED = 4242
_SUMMARY: dict = {}


def _submit(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text(text)
    return folder


def _skip_unless_this_gpu_runs(exercise) -> None:
    """Skip, saying why, where the exercise's reference rung cannot run (06: sm_90a only)."""
    why = build.arch_refusal(exercise.reference_spec(), device.current().arch)
    if why:
        pytest.skip(f"{exercise.id}: its reference rung {exercise.rung} {why}")


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


@pytest.fixture(scope="module", params=GRADED_EXERCISES)
def graded(request, tmp_path_factory):
    """The reference solution and the starter of one exercise, each graded once with the hidden checks."""
    exercise = load(request.param)
    _skip_unless_this_gpu_runs(exercise)
    root = tmp_path_factory.mktemp(exercise.id)
    results = {}
    for name, text in (("reference", exercise.reference_source()), ("starter", exercise.starter_text())):
        if name == "starter" and _starter_issues_no_tma_loads(exercise):
            results[name] = None  # it would hang every check until its time limit: its tests fail at once instead
            continue
        result = grader.grade_submission(exercise, _submit(root, name, text), seed=SEED, include_hidden=True)
        _record(result)
        results[name] = result
    return exercise, results


def _tma_loads(spec: build.KernelSpec) -> int | None:
    """TMA loads (UTMALDG) in the entry's SASS for sm_90a, or None where nvdisasm is not installed."""
    compiled = build.compile_cubin(spec, 90)
    mix = build.sass_instruction_mix(compiled.cubin, compiled.lowered_name)
    return None if mix is None else mix.get("UTMALDG", 0)


def _starter_issues_no_tma_loads(exercise) -> bool:
    """The reference's producer issues TMA loads and the starter's none: its consumers would wait forever (the
    CPU test tests/test_exercises.py::test_starter_compiles_through_nvrtc_for_sm_90 says what to change)."""
    return bool(_tma_loads(exercise.reference_spec())) and _tma_loads(exercise.student_spec(exercise.starter_path)) == 0


def _graded_starter(results: dict) -> grader.SubmissionResult:
    assert results["starter"] is not None, "the starter would hang (its producer issues no TMA load): not graded"
    return results["starter"]


def _report(result: grader.SubmissionResult) -> str:
    return "\n".join(f"{c.name}: {c.score:g}/{c.max_score:g} {c.output}" for c in result.checks)


def test_the_reference_earns_every_correctness_point_visible_and_hidden(graded):
    exercise, results = graded
    ref = results["reference"]
    assert ref.check("compile").passed, _report(ref)
    correctness = [c for c in ref.checks if c.name not in ("compile", "performance")]
    assert {c.name for c in correctness} == {g.name for g in exercise.checks + exercise.hidden_checks()}
    assert sum(c.hidden for c in correctness) == len(exercise.hidden_checks()) == 3
    assert all(c.passed and c.score == c.max_score for c in correctness), _report(ref)
    assert sum(c.score for c in correctness) == exercise.max_points(include_hidden=True) - exercise.performance.points


def test_the_reference_reaches_the_performance_target(graded):
    exercise, results = graded
    perf = results["reference"].check("performance")
    ceiling = exercise.family_object().ceiling_title
    assert ceiling in perf.output and "TFLOP/s" in perf.output, perf.output
    ratio = perf.extra.get("ratio_of_ceiling")
    assert perf.passed and perf.score == exercise.performance.points, (
        f"the reference rung reached {ratio}x of {ceiling}, under the target "
        f"{exercise.performance.target_of_ceiling}x: lower target_of_ceiling in {exercise.path / 'exercise.json'} "
        f"(and the README) to about two thirds of the measured ratio.\n{perf.output}")


@pytest.mark.parametrize("graded", EMPTY_STARTERS, indirect=True)
def test_the_starter_compiles_and_earns_nothing(graded):
    _, results = graded
    starter = _graded_starter(results)
    assert starter.check("compile").passed, _report(starter)  # it fails at its TODOs, not in the compiler
    assert starter.score == 0, _report(starter)
    for check in starter.checks:
        if check.name == "performance":
            assert "not timed" in check.output, check.output
        elif check.name != "compile" and _harness_of(starter, check.name):  # its chosen values come first
            assert not check.passed and "lab_plugin_store_pair" in check.output, check.output
        elif check.name != "compile":
            assert not check.passed and "failed on" in check.output and "wrong result" in check.output, check.output


def _harness_of(result: grader.SubmissionResult, name: str) -> str | None:
    exercise = load(result.exercise)
    groups = exercise.checks + exercise.hidden_checks()
    return next((g.harness for g in groups if g.name == name), None)


@pytest.mark.parametrize("graded", ROW_MAJOR_STARTERS, indirect=True)
def test_the_row_major_starter_earns_the_correctness_points_and_misses_the_performance_target(graded):
    # 06's starter computes every tile, in the launch order: correct everywhere, slow where a wave's panels
    # outgrow the L2 (calibrated on the H200: 0.708x of cuBLAS against the grouped order's 0.853x).
    exercise, results = graded
    starter, reference = _graded_starter(results), results["reference"]
    assert starter.check("compile").passed, _report(starter)
    correctness = [c for c in starter.checks if c.name not in ("compile", "performance")]
    assert {c.name for c in correctness} == {g.name for g in exercise.checks + exercise.hidden_checks()}
    assert all(c.passed and c.score == c.max_score for c in correctness), _report(starter)
    perf = starter.check("performance")
    ratio, target = perf.extra.get("ratio_of_ceiling"), exercise.performance.target_of_ceiling
    assert ratio is not None and "not timed" not in perf.output, perf.output
    assert not perf.passed and perf.score < exercise.performance.points, (
        f"the row-major starter reached {ratio:.3f}x of cuBLAS, at or above the target {target}x: raise "
        f"target_of_ceiling in {exercise.path / 'exercise.json'} (and the README) above it, below the "
        f"reference's {reference.check('performance').extra.get('ratio_of_ceiling')}x.\n{perf.output}")
    assert starter.score == sum(c.score for c in correctness) + perf.score  # half the points, or none
    reference_ratio = reference.check("performance").extra.get("ratio_of_ceiling")
    assert reference_ratio is not None, _report(reference)  # the reference's own tests say why
    assert ratio < 0.95 * reference_ratio, (
        f"the row-major starter ran at {ratio:.3f}x of cuBLAS, within 5% of the grouped reference's "
        f"{reference_ratio:.3f}x: at this shape the tile order does not matter, so the exercise grades nothing")


@pytest.mark.parametrize("exercise_id", GEMM_EXERCISES)
@pytest.mark.parametrize("case", [
    {"M": 257, "N": 255, "K": 129, "alpha": 1.5, "beta": -0.5, "pad": 3},
    {"M": 300, "N": 200, "K": 100, "beta": 1.0},
    {"M": 128, "N": 130, "K": 64, "pad": 5},
], ids=["alpha-beta-pad", "beta", "pad"])
def test_the_timed_runs_check_outputs_that_are_inputs_and_padded(exercise_id, case, monkeypatch):
    # Every timed launch starts from C = out_init (beta != 0 reads C), and only the M x N part of a
    # padded C is compared, with the GEMM tolerance: the reference rung and cuBLAS both pass.
    from lab.grading import grade_worker

    exercise = load(exercise_id)
    _skip_unless_this_gpu_runs(exercise)
    family = exercise.family_object()
    rung = exercise.reference_rung()
    problem = family.make_problem(seed=11, **case)
    _, ok = grade_worker.time_fresh(family, problem, lambda p, o: family.launch(rung, p, o), seed=11)
    assert ok is True
    _, ok = grade_worker.time_fresh(family, problem, family.launch_ceiling, seed=11, check=True)
    assert ok is True
    if case.get("beta"):
        # Without the reset, C = alpha*A@B + beta*C compounds over the warm-up and timed launches,
        # and the last output no longer matches: the reset is what makes a beta != 0 problem timeable.
        monkeypatch.setattr(grade_worker, "_reset_output", lambda problem, out: None)
        _, ok = grade_worker.time_fresh(family, problem, lambda p, o: family.launch(rung, p, o), seed=11)
        assert ok is False


@pytest.mark.parametrize("case", [
    {"M": 257, "N": 255, "K": 129, "alpha": 1.5, "beta": -0.5, "pad": 3, "layout": "NN", "dtype": "bfloat16"},
    {"M": 512, "N": 512, "K": 512, "layout": "TN", "dtype": "bfloat16"},
    {"M": 300, "N": 200, "K": 100, "beta": 1.0, "layout": "NN", "dtype": "float16"},
], ids=["nn-bf16-alpha-beta-pad", "tn-bf16", "nn-fp16-beta"])
def test_the_timed_runs_of_the_tensor_core_exercise_take_either_type_and_layout(case):
    # A performance shape may name any layout and type: the rung and cuBLAS (cublasGemmEx for bf16) are
    # checked on the last timed output, and the refilled bf16 inputs (uint16 patterns, shuffled by
    # grade_worker._refill) are still the family's values, not floats cast to tiny integer patterns.
    import cupy as cp

    from lab.families.gemm_tc import to_float32
    from lab.grading import grade_worker

    exercise = load("05_mma_fragments")
    family = exercise.family_object()
    rung = exercise.reference_rung()
    problem = family.make_problem(seed=13, **case)
    _, ok = grade_worker.time_fresh(family, problem, lambda p, o: family.launch(rung, p, o), seed=13)
    assert ok is True
    _, ok = grade_worker.time_fresh(family, problem, family.launch_ceiling, seed=13, check=True)
    assert ok is True
    for name in ("A", "B"):
        values = to_float32(problem.inputs[name][0], case["dtype"], xp=cp)
        assert 0.5 < float(cp.abs(values).max()) < 100, name  # N(0, 1) values; cast ones would be ~1e-40


@pytest.mark.parametrize("case", [
    {"M": 257, "N": 255, "K": 129, "alpha": 1.5, "pad": 3, "layout": "NN", "dtype": "bfloat16", "q_per_row": True},
    {"M": 300, "N": 200, "K": 100, "layout": "TN", "dtype": "float16"},
], ids=["nn-bf16-alpha-pad-rows", "tn-fp16"])
def test_the_timed_runs_of_the_epilogue_exercise_check_its_int8_output(case):
    # The performance check times the plugin rung on fresh inputs and checks its last int8 output; the ceiling
    # (rung 06 without the epilogue) writes a scratch fp16 C, which is not graded.
    from lab.grading import grade_worker

    exercise = load("08_epilogue_functor")
    _skip_unless_this_gpu_runs(exercise)
    family = exercise.family_object()
    rung = exercise.reference_rung()
    problem = family.make_problem(seed=17, epilogue="bias+gelu_tanh", out="int8", **case)
    _, ok = grade_worker.time_fresh(family, problem, lambda p, o: family.launch(rung, p, o), seed=17)
    assert ok is True
    _, ok = grade_worker.time_fresh(family, problem, family.launch_ceiling, seed=17, check=False)
    assert ok is None


def test_a_split_k_file_without_its_reduction_kernel_fails_the_compile_check_naming_the_kernel(tmp_path):
    # 07's launcher builds a second kernel from the student's file, gemm_tc_split_k_reduce. The compile check builds
    # every kernel the family's launches use (Family.companion_entries), so a file that renamed the second fails
    # there, with one sentence naming the kernel it lacks, and nothing else runs.
    exercise = load("07_split_k")
    _skip_unless_this_gpu_runs(exercise)
    text = exercise.reference_source().replace("gemm_tc_split_k_reduce(", "gemm_tc_split_k_sum(")
    assert text != exercise.reference_source()
    result = grader.grade_submission(exercise, _submit(tmp_path, "no_reduction", text), seed=SEED,
                                     include_hidden=False, with_performance=False)
    compile_check = result.check("compile")
    assert not compile_check.passed and "gemm_tc_split_k_reduce" in compile_check.output, _report(result)
    assert "Traceback" not in compile_check.output and "exit code" not in compile_check.output, _report(result)
    for group in exercise.checks:
        assert result.check(group.name).score == 0 and "did not compile" in result.check(group.name).output
    assert result.score == 0
