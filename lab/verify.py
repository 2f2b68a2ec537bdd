"""Run a family's rungs through the correctness checks of lab.check, case by case."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from lab.check import DISTRIBUTIONS, CheckResult, GuardedBuffer, compare, tolerance
from lab.errors import LabError
from lab.ladder import Family, Rung


def _cuda_error_reason(exc: Exception) -> str:
    return f"CUDA error during the launch: {str(exc).splitlines()[0]}"


def check_case(family: Family, rung: Rung, case: dict, seed: int = 0, repeats: int = 2) -> CheckResult:
    """One rung on one case: every distribution in turn, `repeats` runs each, all checks."""
    import cupy as cp

    reasons: list[str] = []
    worst = 0.0
    label = ""
    for d_index, dist in enumerate(DISTRIBUTIONS):
        problem = family.make_problem(seed=seed + 1000 * d_index, dist=dist, **case)
        label = problem.label
        reference = family.reference(problem)
        buf = GuardedBuffer(problem.out_shape, problem.dtype, offset=problem.out_offset)
        outputs = []
        for rep in range(repeats):
            buf.poison(variant=rep)
            try:
                family.launch(rung, problem, buf.out)
                cp.cuda.get_current_stream().synchronize()
            except LabError:
                raise
            except Exception as exc:  # an illegal address etc.: report, do not crash the suite
                reasons.append(_cuda_error_reason(exc))
                return CheckResult(family.name, rung.key, label, False, reasons)
            reasons += [f"{p} ({dist} inputs)" for p in buf.problems()]
            cmp = compare(buf.out, reference, tolerance(problem.dtype, family.reduction_length))
            worst = max(worst, cmp.max_rel_error)
            if not cmp.passed:
                reasons.append(f"wrong result on {dist} inputs: {cmp.describe()}")
            outputs.append(buf.out.get())
        # Outputs that differ between runs are a race, unless unwritten (still poisoned) elements
        # already explain it: the two runs use different poison patterns.
        if not reasons and len(outputs) > 1 and not all(
                np.array_equal(o.view(np.uint32), outputs[0].view(np.uint32)) for o in outputs[1:]):
            reasons.append(f"different results on repeated runs ({dist} inputs): a race")
        if reasons:
            break
    return CheckResult(family.name, rung.key, label, not reasons, sorted(set(reasons)), worst)


def check_rung(family: Family, rung: Rung, cases: Iterable[dict] | None = None, seed: int = 0) -> list[CheckResult]:
    return [check_case(family, rung, case, seed) for case in (cases if cases is not None else family.check_cases())]
