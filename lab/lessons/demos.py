"""Live-only checks and demonstrations (they need a GPU): the ladder's correctness checks before any
timing, and the two timing mistakes the method notebook shows next to the right way."""

from __future__ import annotations

import time
from collections.abc import Callable

from lab.core.errors import LabError
from lab.core.ladder import Family
from lab.lessons.common import family_of


def few_cases(family: str | Family, count: int = 8) -> list[dict]:
    """`count` of the family's check cases, spread evenly from the smallest to the largest."""
    cases = family_of(family).check_cases()
    if len(cases) <= count:
        return cases
    step = (len(cases) - 1) / (count - 1)
    return [cases[round(i * step)] for i in range(count)]


def check_ladder(family: str | Family, cases: list[dict]) -> dict:
    """lab.measure.verify.check_rung for every rung; raises LabError (stopping the notebook) if any fails."""
    from lab.core import device
    from lab.core.ladder import runnable_rungs
    from lab.measure.verify import check_rung

    fam = family_of(family)
    here, skipped = runnable_rungs(fam.rungs, device.current().arch)
    for line in skipped:
        print(line)
    results = {rung.key: check_rung(fam, rung, cases) for rung in here}
    failed = [r.line() for rs in results.values() for r in rs if not r.passed]
    if failed:
        raise LabError(f"{len(failed)} check(s) failed in {fam.name}; fix them before measuring:\n" +
                       "\n".join(failed[:10]))
    return results


def check_summary(results: dict | None, family: str | Family, key: str) -> str:
    fam = family_of(family)
    if results is None:
        return (f"(not run: checks need a GPU. LIVE mode runs lab.measure.verify.check_rung on {fam.name}/"
                f"{fam.rung(key).key} here before anything is measured.)")
    mine = results.get(fam.rung(key).key)
    if mine is None:
        return (f"(not checked here: this GPU cannot run {fam.rung(key).key}; it is compile-only on this machine, "
                "see the line above its compile report)")
    lines = [r.line() for r in mine]
    passed = sum(r.passed for r in mine)
    worst = max(mine, key=lambda r: r.worst_ratio, default=None)
    margin = (" Every element within its own error bound (lab.measure.bounds): the closest came to "
              f"{worst.worst_ratio:.2g} "
              f"of it ({worst.case}); worst normwise error {max(r.max_rel_error for r in mine):.2g}."
              if worst is not None and worst.worst_ratio else " Bit-exact." if passed == len(mine) else "")
    return "\n".join(lines) + f"\n{passed}/{len(mine)} cases passed, 3 input distributions each.{margin}"


def host_clock_versus_events(launch: Callable[[int], None]) -> str:
    """The wrong way (a host clock around an asynchronous launch) beside the right way (CUDA events)."""
    import cupy as cp

    from lab.measure import timing

    stream = cp.cuda.get_current_stream()
    launch(0)
    stream.synchronize()
    t0 = time.perf_counter()
    launch(0)
    enqueue_ms = (time.perf_counter() - t0) * 1e3  # returns as soon as the launch is queued
    stream.synchronize()
    synced_ms = (time.perf_counter() - t0) * 1e3  # includes Python, the queue and the sync's own cost
    events = timing.measure(launch, l2="warm")
    return "\n".join([
        f"host clock, no synchronize : {enqueue_ms:8.4f} ms  (only the time to queue the launch)",
        f"host clock, synchronize    : {synced_ms:8.4f} ms  (one sample, host overheads included)",
        f"CUDA events, median        : {events.median_ms:8.4f} ms  (p10-p90 {events.p10_ms:.4f}-"
        f"{events.p90_ms:.4f} ms over {events.reps} launches)",
    ])


def first_launch_versus_steady(launch: Callable[[int], None]) -> str:
    """Events around the very first launch (module load, first touch, clocks ramping) vs the warm median."""
    import cupy as cp

    from lab.measure import timing

    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    launch(0)
    end.record()
    end.synchronize()
    first = cp.cuda.get_elapsed_time(start, end)
    steady = timing.measure(launch, l2="warm")
    return (f"first launch: {first:.4f} ms; after warm-up: median {steady.median_ms:.4f} ms "
            f"-> the first launch took {first / steady.median_ms:.1f}x the steady time")
