"""The process that runs one student's kernel: compile, correctness checks, performance. For a dispatch_rules
exercise (09) it runs the student's dispatch table instead: the table is data (lab.ops.rules.load parses it and
nothing in it is executed), the kernels are the lab's own, and the checks run serving traces through lab.ops.

It is always started by lab.grading.grader in its own process (a student kernel can kill its CUDA context
or hang, and must take nothing else down). It reports through an append-only JSON-lines file, one
event per line, flushed at once, so the parent knows which check was running if the process dies:

    {"event": "start", "check": NAME}
    {"event": "done", "check": NAME, "passed": bool, "score": float, "max_score": float, "output": str, ...}

After a CUDA error the context may be unusable, so the worker records the check and exits with
EXIT_CUDA_ERROR; the parent starts a fresh worker for the checks that remain.

    python -m lab.grading.grade_worker --exercise 01 --kernel /abs/kernel.cu --events ev.jsonl
        --checks compile,friendly,tails,performance --seed 0 [--hidden] [--no-perf]
        [--mode grade|leaderboard]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

EXIT_CUDA_ERROR = 3
EXIT_NO_GPU = 4


class Events:
    def __init__(self, path: Path):
        self.path = path

    def emit(self, **event) -> None:
        event["t"] = time.time()
        with open(self.path, "a") as f:
            f.write(json.dumps(event) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _groups(exercise, include_hidden: bool):
    return list(exercise.checks) + (exercise.hidden_checks() if include_hidden else [])


def run_compile(exercise, kernel: Path, shown: str | None = None):
    import dataclasses

    from lab.core.build import get_kernel
    from lab.core.errors import LabError

    spec = dataclasses.replace(exercise.student_spec(kernel), label=shown or "")
    entries = (spec.entry, *exercise.family_object().companion_entries(exercise.reference_rung()))
    try:
        for entry in entries:  # every kernel the launches use: a missing one is this sentence, not a dead worker
            get_kernel(dataclasses.replace(spec, entry=entry))
    except LabError as exc:
        return False, str(exc)
    return True, "compiled" + (f" ({', '.join(entries)})" if len(entries) > 1 else "")


def run_group(exercise, kernel: Path, group, seed: int, shown: str | None = None) -> dict:
    """All cases of one check group; stops at the first failing case and says where and why."""
    from lab.families import get_family
    from lab.measure.verify import check_case

    harness_note = ""
    if group.harness:  # the student's functions on chosen values first (08: ties, saturation, NaN; 10: the step)
        check, function = _harness(group.harness)
        try:
            ok, why = check(kernel, shown or kernel.name, exercise.allowed_headers())
        except _cuda_errors() as exc:
            return {"passed": False, "score": 0.0, "cuda_error": True,
                    "output": f"CUDA error in {function} on chosen values: {str(exc).splitlines()[0]}"}
        if not ok:
            return {"passed": False, "score": 0.0, "cuda_error": False, "output": why}
        harness_note = f"{why}; then "  # what the chosen values showed stays in the report
    family = get_family(exercise.family)
    rung = exercise.student_rung(kernel)
    worst = worst_normwise = 0.0
    for index, case in enumerate(group.cases):
        result = check_case(family, rung, case, seed=seed + 7919 * index)
        worst, worst_normwise = max(worst, result.worst_ratio), max(worst_normwise, result.max_rel_error)
        if not result.passed:
            cuda_error = any(r.startswith("CUDA error") for r in result.reasons)
            return {"passed": False, "score": 0.0, "cuda_error": cuda_error,
                    "output": f"failed on {result.case} (case {index + 1} of {len(group.cases)}): "
                              + "; ".join(result.reasons)}
    return {"passed": True, "score": float(group.points), "cuda_error": False,
            "output": f"{harness_note}passed all {len(group.cases)} cases x 3 input distributions"
                      + (f" (every element within its error bound: worst at {worst:.2g} of it; worst normwise "
                         f"error {worst_normwise:.2g})" if worst else " (bit-exact)")}


def _harness(name: str):
    """(check(kernel, shown, headers) -> (ok, why), the function it judges) of a check group's harness."""
    if name == "online_softmax_step":
        from lab.grading.online_softmax_numerics import check_step_numerics

        return check_step_numerics, "lab_online_softmax_step"
    from lab.grading.plugin_numerics import check_int8_numerics

    return check_int8_numerics, "lab_plugin_store_pair"


_REFILLS = itertools.count(1)


def _refill(problem, seed: int) -> None:
    """Fresh random values into every input array, in place (same addresses, new contents).

    Every refill in the process draws a new seed: had two timing loops ended on the same seed, a
    kernel that skips repeated launches would have left exactly the output the check expected
    (seen on the H200 with tests/grading/submissions/skip_repeated_launches).

    An array of integers holds bit patterns (gemm_tc keeps bf16 values in uint16), which random floats
    cast to integers would turn into tiny subnormals: its own values are shuffled instead, so they stay
    the family's values and distribution in new places."""
    from lab.measure.check import random_array

    for arrays in problem.inputs.values():
        if isinstance(arrays, dict):  # named operands (an epilogue's bias, scales): shuffled, keeping their values
            for a in arrays.values():
                a[...] = _shuffled(a, seed + 7_919 * next(_REFILLS))
            continue
        for a in arrays:
            refill_seed = seed + 7_919 * next(_REFILLS)
            if a.dtype.kind in "iub":
                a[...] = _shuffled(a, refill_seed)
            else:
                a[...] = random_array(a.shape, a.dtype, seed=refill_seed)
    problem.derived.clear()  # a cached reference belongs to the old values


def _shuffled(a, seed: int):
    """The values of `a` (a NumPy or CuPy array) in a random order, shaped as `a`."""
    import cupy

    xp = cupy.get_array_module(a)
    flat = a.reshape(-1)
    rng = xp.random.RandomState(seed % (1 << 32))  # RandomState: CuPy's Generator has no permutation
    return flat[rng.permutation(flat.size)].reshape(a.shape)


def _reset_output(problem, out) -> None:
    """An output that is also an input (C in C = alpha*A@B + beta*C) starts every timed launch from
    the problem's out_init, as in the correctness checks; other outputs are left as they are."""
    if problem.out_init is not None:
        out[...] = problem.out_init


def time_fresh(family, problem, launch, seed: int, check: bool = True):
    """Cold-L2 timing where every timed launch sees freshly written inputs, then the last output is
    checked like a correctness case (the elements the kernel must write, each within its bound): a
    kernel that caches results across launches or skips repeated inputs gains nothing and is caught.
    Returns the median time and whether that output is right (None with check=False: the ceiling's
    output is not graded, and a float64 GEMM reference costs seconds of CPU)."""
    import cupy as cp

    from lab.measure import timing
    from lab.measure.verify import compare_output

    out = cp.empty(problem.out_shape, dtype=problem.dtype)

    def prepare(i: int) -> None:
        _refill(problem, seed)
        _reset_output(problem, out)

    _reset_output(problem, out)  # the warm-up launches read C too
    t = timing.measure(lambda i: launch(problem, out), l2="cold", warmup=2, min_time_ms=15, max_reps=60,
                       prepare=prepare)
    cp.cuda.get_current_stream().synchronize()
    ok = compare_output(family, problem, out).passed if check else None
    return t.median_ms, ok


def run_performance(exercise, kernel: Path, seed: int) -> dict:
    from lab.families import get_family

    family = get_family(exercise.family)
    rung = exercise.student_rung(kernel)
    perf = exercise.performance
    ceiling, launch_ceiling = exercise.ceiling_title, exercise.launch_ceiling()  # exercise 10: rung 02 itself
    ratios, lines = [], []
    for params in perf.params:
        problem = family.make_problem(seed=seed, **params)
        ceiling_ms, _ = time_fresh(family, problem, launch_ceiling, seed, check=False)
        student_ms, ok = time_fresh(family, problem, lambda p, o: family.launch(rung, p, o), seed)
        if not ok:
            return {"passed": False, "score": 0.0, "cuda_error": False,
                    "output": f"the output of the last timed run at {problem.label} is wrong: the timed runs "
                              "get fresh inputs every launch, so results cannot be cached or reused across launches"}
        ratio = ceiling_ms / student_ms
        ratios.append(ratio)
        lines.append(f"{problem.label}: {student_ms:.4f} ms ({family.throughput(problem, student_ms):.4g} "
                     f"{family.metric}), {ratio:.3f}x of {ceiling} ({ceiling_ms:.4f} ms, "
                     f"{family.throughput(problem, ceiling_ms):.4g} {family.metric}, same run)")
    ratio = math.prod(ratios) ** (1 / len(ratios))
    if ratio >= perf.target_of_ceiling:
        score = perf.points
    elif ratio >= perf.target_of_ceiling / 2:
        score = perf.points / 2
    else:
        score = 0.0
    lines.append(f"target {perf.target_of_ceiling:.2f}x of {ceiling} for full points, "
                 f"half of it for half: {score:g}/{perf.points:g}")
    return {"passed": score == perf.points, "score": float(score), "cuda_error": False,
            "output": "\n".join(lines), "ratio_of_ceiling": ratio}


def run_leaderboard(exercise, kernel: Path, seed: int) -> dict:
    """Student, reference rung and ceiling timed on the leaderboard shapes in this one process."""
    from lab.families import get_family

    family = get_family(exercise.family)
    student = exercise.student_rung(kernel)
    reference = family.rung(exercise.rung)
    rows = []
    for params in exercise.performance.params:  # the fixed shape set of the classroom benchmark
        problem = family.make_problem(seed=seed, **params)
        ref_ms, ref_ok = time_fresh(family, problem, lambda p, o: family.launch(reference, p, o), seed)
        student_ms, ok = time_fresh(family, problem, lambda p, o: family.launch(student, p, o), seed)
        if not (ok and ref_ok):
            return {"passed": False, "score": 0.0, "cuda_error": False,
                    "output": f"wrong output in the timed runs at {problem.label}"}
        rows.append({"shape": problem.label, "student_ms": student_ms, "reference_ms": ref_ms,
                     "speedup": ref_ms / student_ms})
    geomean = math.prod(r["speedup"] for r in rows) ** (1 / len(rows))
    return {"passed": True, "score": 0.0, "cuda_error": False, "rows": rows, "geomean_speedup": geomean,
            "output": f"geometric-mean speed-up over the reference rung: {geomean:.3f}x"}


def warm_up() -> None:
    """Create the CUDA context and build CuPy's own kernels (random numbers, comparisons) before any
    check's clock starts: on a cold cache they take seconds, and they are not the student's time."""
    import cupy as cp
    import numpy as np

    from lab.measure.check import GuardedBuffer, compare, random_array

    buf = GuardedBuffer((64,), np.float32)
    buf.poison()
    x = random_array((64,), np.float32, seed=1)
    buf.out[...] = x
    buf.problems()
    compare(buf.out, x.get().astype(np.float64), 0.0)
    for dist in ("uniform", "wide"):
        random_array((8, 8), np.float32, seed=2, dist=dist)
    cp.cuda.get_current_stream().synchronize()


# ----------------------------------------------------------------------------------------------
# dispatch_rules exercises: the student's file is a lab.ops dispatch table, never code
# ----------------------------------------------------------------------------------------------
# Honest timing: the student's table and the reference table run in this one process, on one Layer (the same
# weights, activations and addresses), each distinct step timed under both, in an order that alternates from step
# to step so that a drift of the clocks favours neither. Compiles and recordings happen before each timing
# (lab.studies.serving_trace.time_steps runs every step once first).

# lab.measure.timing.measure's minimum measured time per distinct step and table (at least 5 repetitions): every
# repetition
# also waits behind time_steps's 2 ms spin, so this bounds a grade's GPU time more than the kernels do.
RULES_MIN_TIME_MS = 5.0
LOSSES_SHOWN = 3  # the steps where a table lost the most time to the reference, named in the output


def load_table(path: Path, shown: str | None = None):
    """(the table, None), or (None, lab.ops.rules.load's one sentence, naming the file as the student knows it)."""
    from lab.core.errors import LabError
    from lab.ops import rules

    try:
        return rules.load(path), None
    except LabError as exc:
        return None, str(exc).replace(str(path), shown) if shown else str(exc)


def _cuda_errors() -> tuple:
    import cupy

    return cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError


def _wrong_shapes(rows: list[dict]) -> str | None:
    """None when every GEMM of check_every_shape's rows is right, else what went wrong (one sentence)."""
    bad = [r for r in rows if r["bad"]]
    if not bad:
        return None
    r = bad[0]
    return (f"{len(bad)} of {len(rows)} GEMMs wrong; the first: M={r['M']} {r['gemm']} ({r['N']} x {r['K']}, "
            f"epilogue {r['epilogue']}) on path {r['path']}: {r['bad']} elements outside their error bound")


def check_trace(table, steps, vocab: int | None = None) -> list[dict]:
    """Every distinct GEMM of the steps (the output head's too, with `vocab`) through lab.ops with `table` (a fresh
    Runtime: the table alone decides, no tune cache), against float64 (lab.studies.serving_trace.check_every_shape)."""
    from lab.ops.dispatch import Runtime
    from lab.studies import serving_trace as st

    return st.check_every_shape(steps, Runtime(table), vocab=vocab)


def run_trace_group(exercise, table, group) -> dict:
    """One check group of a dispatch_rules exercise: every distinct GEMM of its traces, right or not."""
    from lab.core.errors import LabError

    rows = []
    try:
        for spec in group.cases:
            rows += check_trace(table, exercise.trace_steps(spec), exercise.vocab)
    except LabError as exc:
        return {"passed": False, "score": 0.0, "cuda_error": False, "output": str(exc)}
    except _cuda_errors() as exc:
        return {"passed": False, "score": 0.0, "cuda_error": True,
                "output": f"a kernel crashed the CUDA context: {str(exc).splitlines()[0][:200]}"}
    wrong = _wrong_shapes(rows)
    if wrong:
        return {"passed": False, "score": 0.0, "cuda_error": False, "output": wrong}
    paths = ", ".join(f"{path} {n}" for path, n in Counter(r["path"] for r in rows).most_common())
    return {"passed": True, "score": float(group.points), "cuda_error": False,
            "output": f"all {len(rows)} GEMMs of the trace right ({len({r['M'] for r in rows})} values of M x "
                      f"{len({r['gemm'] for r in rows})} GEMMs), every element within its error bound; paths: {paths}"}


def time_tables(steps, runtimes: dict, min_time_ms: float = RULES_MIN_TIME_MS, vocab: int | None = None) -> dict:
    """{name: {(kind, M): us}}: one layer (and the output head, with `vocab`) at every distinct step, timed under each
    runtime on one Layer, the runtimes' order alternating from step to step."""
    from lab.studies import serving_trace as st

    layer = st.Layer(max(s.M for s in steps), vocab=vocab)
    names = list(runtimes)
    times: dict = {name: {} for name in names}
    for i, step in enumerate(sorted(set(steps), key=lambda s: (s.kind, s.M))):
        for name in names if i % 2 == 0 else names[::-1]:
            times[name] |= st.time_steps([step], ("lab_ops",), layer, runtimes[name], min_time_ms)["lab_ops"]
    return times


def performance_score(ratio: float, target: float, points: float, zero_at: float | None = None) -> float:
    """Full points at `target` x the reference table's speed or faster, none at `zero_at` (half the target where
    None) or slower, and in proportion between."""
    zero = target / 2 if zero_at is None else zero_at
    share = (ratio - zero) / (target - zero)
    return round(points * min(1.0, max(0.0, share)), 2)


def _largest_losses(steps, times: dict) -> str:
    counts = Counter((s.kind, s.M) for s in steps)
    losses = sorted(((n * (times["student"][k] - times["reference"][k]), k) for k, n in counts.items()), reverse=True)
    shown = [f"{kind} M={m} ({counts[(kind, m)]} steps): {times['student'][(kind, m)]:.1f} us against "
             f"{times['reference'][(kind, m)]:.1f} us" for loss, (kind, m) in losses[:LOSSES_SHOWN] if loss > 0]
    return "; ".join(shown)


def run_rules_performance(exercise, table, spec: dict, checked: set[int], which: str) -> dict:
    """The student's table against the reference table on the trace `spec`: total GPU time of one layer per step
    (lab.studies.serving_trace.totals), both timed in this process; scored by reference / student. The trace's values of
    M that no correctness check of this grade covered (`checked`) are checked first: nothing wrong is timed."""
    from lab.core.errors import LabError
    from lab.ops.dispatch import Runtime
    from lab.studies.serving_trace import Step, totals

    perf = exercise.performance
    try:
        steps = exercise.trace_steps(spec)
        unchecked = sorted({s.M for s in steps} - checked)
        wrong = _wrong_shapes(check_trace(table, [Step("decode", m) for m in unchecked], exercise.vocab)) \
            if unchecked else None
        if wrong:
            return {"passed": False, "score": 0.0, "cuda_error": False, "output": f"not timed: {wrong}"}
        reference, reference_name = exercise.reference_table()
        times = time_tables(steps, {"student": Runtime(table), "reference": Runtime(reference)},
                            vocab=exercise.vocab)
    except LabError as exc:
        return {"passed": False, "score": 0.0, "cuda_error": False, "output": str(exc)}
    except _cuda_errors() as exc:
        return {"passed": False, "score": 0.0, "cuda_error": True,
                "output": f"a kernel crashed the CUDA context: {str(exc).splitlines()[0][:200]}"}
    total = totals(steps, times)
    student_us, reference_us = total["student"]["total_us"], total["reference"]["total_us"]
    ratio = reference_us / student_us
    score = performance_score(ratio, perf.target_of_ceiling, perf.points, perf.zero_at)
    kinds = Counter(s.kind for s in steps)
    mine = total["student"]
    lines = [f"{which}: {len(steps)} steps ({kinds['decode']} decode, {kinds['prefill']} prefill), "
             f"{len(set(steps))} distinct, one layer each",
             f"your table: {student_us / 1e3:.3f} ms of GPU time over the trace (decode "
             f"{mine.get('decode_us', 0) / 1e3:.3f} ms, prefill {mine.get('prefill_us', 0) / 1e3:.3f} ms)",
             f"{reference_name}: {reference_us / 1e3:.3f} ms (same run, same layer and inputs)",
             f"{ratio:.3f}x of the reference table's speed; target {perf.target_of_ceiling:.2f}x for full points, "
             f"none at {perf.zero_ratio:.3f}x or below: {score:g}/{perf.points:g}"]
    losses = _largest_losses(steps, times)
    if losses:
        lines.append(f"where your table lost the most time: {losses}")
    return {"passed": score == perf.points, "score": score, "cuda_error": False, "output": "\n".join(lines),
            "ratio_of_ceiling": ratio, "student_us": student_us, "reference_us": reference_us}


def run_rules(exercise, args, events: Events) -> int:
    """The checks of a dispatch_rules exercise (the gate is `parse`), reported like run_group's."""
    table, why = load_table(args.kernel, args.shown)
    groups = {g.name: g for g in _groups(exercise, args.hidden)}
    all_passed = not args.no_perf
    for name in args.checks.split(","):
        events.emit(event="start", check=name)
        if name == exercise.gate:
            events.emit(event="done", check=name, passed=table is not None, score=0.0, max_score=0.0,
                        output=why or f"a valid dispatch table of {len(table.rules)} rules")
            if table is None:
                return 0
            continue
        max_score = exercise.performance.points if name == "performance" else getattr(groups.get(name), "points", 0)
        if table is None:
            result = {"passed": False, "score": 0.0, "cuda_error": False, "output": f"not run: {why}"}
        elif name == "performance" and not all_passed:
            result = {"passed": False, "score": 0.0, "cuda_error": False,
                      "output": "not timed: performance counts only when every correctness check passes"}
        elif name == "performance":
            spec = exercise.performance_trace(args.hidden)
            which = "the hidden trace" if spec != exercise.performance.params[0] else "the performance trace"
            checked = {s.M for g in groups.values() for c in g.cases for s in exercise.trace_steps(c)}
            result = run_rules_performance(exercise, table, spec, checked, which)
        elif name in groups:
            result = run_trace_group(exercise, table, groups[name])
        else:
            result = {"passed": False, "score": 0.0, "cuda_error": False,
                      "output": f"{name} is not a check of exercise {exercise.id}"}
        all_passed = all_passed and result["passed"]
        cuda_error = result.pop("cuda_error")
        events.emit(event="done", check=name, max_score=float(max_score), **result)
        if cuda_error:
            return EXIT_CUDA_ERROR
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--exercise", required=True)
    p.add_argument("--kernel", required=True, type=Path)
    p.add_argument("--events", required=True, type=Path)
    p.add_argument("--checks", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", action="store_true")
    p.add_argument("--no-perf", action="store_true", help="an earlier worker saw a correctness failure")
    p.add_argument("--shown", default=None, help="the kernel's name in messages (the path a student typed)")
    args = p.parse_args(argv)

    from lab.core.errors import LabError
    from lab.grading.exercises import DISPATCH_RULES, load

    exercise = load(args.exercise)
    events = Events(args.events)
    try:
        warm_up()
    except Exception as exc:  # no usable GPU (a wrong --gpus index, a GPU in use): the grader's failure,
        # reported before any check starts so that no student is given a zero for it
        print(f"no usable GPU for grading: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)
        return EXIT_NO_GPU
    if exercise.kind == DISPATCH_RULES:
        return run_rules(exercise, args, events)
    wanted = args.checks.split(",")
    groups = {g.name: (i, g) for i, g in enumerate(_groups(exercise, args.hidden))}
    all_passed = not args.no_perf
    for name in wanted:
        events.emit(event="start", check=name)
        if name == "compile":
            ok, output = run_compile(exercise, args.kernel, args.shown)
            events.emit(event="done", check=name, passed=ok, score=0.0, max_score=0.0, output=output)
            if not ok:
                return 0
            continue
        try:
            result = _run_check(exercise, args, name, groups, all_passed)
        except LabError as exc:  # the lab refusing what the file does (a kernel it lacks): one sentence, this check
            result = {"passed": False, "score": 0.0, "cuda_error": False, "output": str(exc)}
        all_passed = all_passed and result["passed"]
        cuda_error = result.pop("cuda_error")
        events.emit(event="done", check=name, max_score=float(_points(exercise, name, groups)), **result)
        if cuda_error:
            return EXIT_CUDA_ERROR
    return 0


def _points(exercise, name: str, groups: dict) -> float:
    if name == "performance":
        return exercise.performance.points
    return groups[name][1].points if name in groups else 0.0


def _run_check(exercise, args, name: str, groups: dict, all_passed: bool) -> dict:
    """One check after the compile gate."""
    if name == "performance":
        if not all_passed:
            return {"passed": False, "score": 0.0, "cuda_error": False,
                    "output": "not timed: performance counts only when every correctness check passes"}
        return run_performance(exercise, args.kernel, args.seed)
    if name == "leaderboard":
        return run_leaderboard(exercise, args.kernel, args.seed) if all_passed else {
            "passed": False, "score": 0.0, "cuda_error": False, "output": "not ranked: a check failed"}
    index, group = groups[name]
    return run_group(exercise, args.kernel, group, args.seed + 1_000_003 * index, args.shown)


if __name__ == "__main__":
    sys.exit(main())
