"""Run a family's rungs through the correctness checks of lab.measure.check, case by case."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.measure.check import DISTRIBUTIONS, CheckResult, Comparison, GuardedBuffer, compare, to_numpy


def _cuda_error_reason(exc: Exception) -> str:
    return f"CUDA error during the launch: {str(exc).splitlines()[0]}"


def expected_output(family: Family, problem: Problem) -> tuple[np.ndarray, object, np.ndarray | float]:
    """What a launch on `problem` must produce: the float64 reference and each element's error bound
    (0: bit-exact), both restricted to the elements the kernel must write, and the write mask (None:
    all of them)."""
    reference = family.reference(problem)
    bound = family.error_bound(problem, reference)
    mask = problem.write_mask
    if mask is not None:  # compare only what the kernel must write
        host_mask = to_numpy(mask)
        reference = reference[host_mask]
        bound = np.broadcast_to(bound, host_mask.shape)[host_mask]
    return reference, mask, bound


def compare_output(family: Family, problem: Problem, out) -> Comparison:
    """The output of one launch (the whole output array) against the reference, as check_case compares it."""
    reference, mask, bound = expected_output(family, problem)
    return compare(family.output_values(out[mask] if mask is not None else out), reference, bound)


def check_case(family: Family, rung: Rung, case: dict, seed: int = 0, repeats: int = 2) -> CheckResult:
    """One rung on one case: every distribution in turn, `repeats` runs each, all checks."""
    reasons: list[str] = []
    worst = worst_ratio = 0.0
    label = ""
    for d_index, dist in enumerate(DISTRIBUTIONS):
        problem = family.make_problem(seed=seed + 1000 * d_index, dist=dist, **case)
        label = problem.label
        reference, mask, bound = expected_output(family, problem)
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
            cmp = compare(family.output_values(result), reference, bound)
            worst, worst_ratio = max(worst, cmp.max_rel_error), max(worst_ratio, cmp.worst_ratio)
            if not cmp.passed:
                reasons.append(f"wrong result on {dist} inputs: {cmp.describe()}")
            outputs.append(to_numpy(result))  # only what the kernel writes: the rest holds the poison
        # Outputs that differ between runs are a race, unless unwritten (still poisoned) elements
        # already explain it: the two runs use different poison patterns.
        bits = np.dtype(f"u{problem.dtype.itemsize}")
        if not reasons and len(outputs) > 1 and family.reproducible(rung) and not all(
                np.array_equal(o.view(bits), outputs[0].view(bits)) for o in outputs[1:]):
            reasons.append(f"different results on repeated runs ({dist} inputs): a race")
        if reasons:
            break
    return CheckResult(family.name, rung.key, label, not reasons, sorted(set(reasons)), worst, worst_ratio)


def _synchronize(array) -> None:
    if type(array).__module__.startswith("cupy"):  # wait for the kernel, so its errors surface here
        import cupy as cp

        cp.cuda.get_current_stream().synchronize()


def check_rung(family: Family, rung: Rung, cases: Iterable[dict] | None = None, seed: int = 0) -> list[CheckResult]:
    cases = list(cases if cases is not None else family.check_cases())
    if hasattr(family, "cases_for"):  # rungs that serve different cases (attention's head dims, decode's layouts)
        cases = family.cases_for(rung, cases)
    return [check_case(family, rung, case, seed) for case in cases]


def bound_margins(family: Family, rung: Rung, seeds: Iterable[int], cases: Iterable[dict] | None = None) -> dict:
    """Every check case on several seeds: what failed, and how close the passing elements came to their bounds.

    `worst_ratio` is the largest |error| / bound of any element of any case and seed (<= 1 passes; 0 for a
    bit-exact family that passed): the figure that shows a check is neither loose nor flaky."""
    cases = list(cases if cases is not None else family.check_cases())
    results = [r for s in seeds for r in check_rung(family, rung, cases, seed=s)]
    # The margin of the checks that passed: a check stopped by a CUDA error has no ratio to speak of.
    worst = max((r for r in results if r.passed), key=lambda r: r.worst_ratio, default=None)
    return {"family": family.name, "rung": rung.key, "checks": len(results),
            "failed": [r.line() for r in results if not r.passed],
            "worst_ratio": worst.worst_ratio if worst else 0.0, "worst_case": worst.case if worst else "",
            "worst_normwise": max((r.max_rel_error for r in results), default=0.0)}
