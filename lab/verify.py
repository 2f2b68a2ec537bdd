"""Run a family's rungs through the correctness checks of lab.check, case by case."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from lab.check import DISTRIBUTIONS, CheckResult, Comparison, GuardedBuffer, compare, to_numpy, tolerance
from lab.errors import LabError
from lab.ladder import Family, Problem, Rung


def _cuda_error_reason(exc: Exception) -> str:
    return f"CUDA error during the launch: {str(exc).splitlines()[0]}"


def expected_output(family: Family, problem: Problem) -> tuple[np.ndarray, object, float]:
    """What a launch on `problem` must produce: the float64 reference restricted to the elements the
    kernel must write, the write mask (None: all of them), and the relative tolerance."""
    reference = family.reference(problem)
    mask = problem.write_mask
    if mask is not None:  # compare only what the kernel must write
        reference = reference[to_numpy(mask)]
    length = problem.reduction_length if problem.reduction_length is not None else family.reduction_length
    return reference, mask, tolerance(problem.dtype, length)


def compare_output(family: Family, problem: Problem, out) -> Comparison:
    """The output of one launch (the whole output array) against the reference, as check_case compares it."""
    reference, mask, rtol = expected_output(family, problem)
    return compare(out[mask] if mask is not None else out, reference, rtol)


def check_case(family: Family, rung: Rung, case: dict, seed: int = 0, repeats: int = 2) -> CheckResult:
    """One rung on one case: every distribution in turn, `repeats` runs each, all checks."""
    reasons: list[str] = []
    worst = 0.0
    label = ""
    for d_index, dist in enumerate(DISTRIBUTIONS):
        problem = family.make_problem(seed=seed + 1000 * d_index, dist=dist, **case)
        label = problem.label
        reference, mask, rtol = expected_output(family, problem)
        buf = GuardedBuffer(problem.out_shape, problem.dtype, offset=problem.out_offset, xp=family.array_module)
        outputs = []
        for rep in range(repeats):
            buf.poison(variant=rep)
            if problem.out_init is not None:
                buf.out[...] = problem.out_init
            before = buf.output_bits() if mask is not None else None
            try:
                family.launch(rung, problem, buf.out)
                _synchronize(buf.out)
            except LabError:
                raise
            except Exception as exc:  # an illegal address etc.: report, do not crash the suite
                reasons.append(_cuda_error_reason(exc))
                return CheckResult(family.name, rung.key, label, False, reasons)
            reasons += [f"{p} ({dist} inputs)" for p in buf.problems(mask, before)]
            result = buf.out[mask] if mask is not None else buf.out
            cmp = compare(result, reference, rtol)
            worst = max(worst, cmp.max_rel_error)
            if not cmp.passed:
                reasons.append(f"wrong result on {dist} inputs: {cmp.describe()}")
            outputs.append(to_numpy(result))  # only what the kernel writes: the rest holds the poison
        # Outputs that differ between runs are a race, unless unwritten (still poisoned) elements
        # already explain it: the two runs use different poison patterns.
        bits = np.dtype(f"u{problem.dtype.itemsize}")
        if not reasons and len(outputs) > 1 and not all(
                np.array_equal(o.view(bits), outputs[0].view(bits)) for o in outputs[1:]):
            reasons.append(f"different results on repeated runs ({dist} inputs): a race")
        if reasons:
            break
    return CheckResult(family.name, rung.key, label, not reasons, sorted(set(reasons)), worst)


def _synchronize(array) -> None:
    if type(array).__module__.startswith("cupy"):  # wait for the kernel, so its errors surface here
        import cupy as cp

        cp.cuda.get_current_stream().synchronize()


def check_rung(family: Family, rung: Rung, cases: Iterable[dict] | None = None, seed: int = 0) -> list[CheckResult]:
    return [check_case(family, rung, case, seed) for case in (cases if cases is not None else family.check_cases())]
