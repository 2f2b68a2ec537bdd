"""Benchmarks: each rung and the family's ceiling, timed in the same run, as Records.

Three kinds of measurement per family:
- sweep: bytes moved from 1 KB to >= 4 GB, cold and warm L2 (the regimes plot);
- tail: lengths stepping by 1 across vector/tile boundaries (the sawtooth plot);
- headline: the sizes the targets are stated at, cold L2 (the ladder table).
A rung is timed only on a problem family it passed its checks on (the tour runs checks first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lab.core.ladder import Family, Problem, runnable_rungs
from lab.measure import timing
from lab.measure.records import Record, RecordSet, provenance

ROTATION_BUDGET = 1 << 30  # bytes of extra input sets when rotating inputs for cold runs


@dataclass
class BenchPlan:
    kinds: tuple[str, ...] = ("headline", "sweep", "tail")
    max_bytes: int = 1 << 32
    l2_modes: tuple[str, ...] = ("cold", "warm")
    min_time_ms: float = 20.0
    quick: bool = False  # fewer sizes and shorter timings: a smoke run, not for the record
    sweep_step: int | None = None  # every n-th sweep size (None: every third when quick, else all)
    tail_step: int | None = None  # every n-th tail size (None: every eighth when quick, else all)

    def sweep_stride(self) -> int:
        return self.sweep_step or (3 if self.quick else 1)

    def tail_stride(self) -> int:
        return self.tail_step or (8 if self.quick else 1)


def _targets(family: Family, kind: str, params: dict, quick: bool = False,
             arch: int | None = None) -> list[tuple[str, Callable]]:
    """Everything timed on a problem: the ceiling first, library baselines, then the rungs (those that run
    on a GPU of `arch`, when one is given)."""
    targets = [(family.ceiling_name, family.launch_ceiling)]
    targets += list(family.baselines_for(params).items())
    rungs = family.rungs_for(kind, params, quick)
    if arch is not None:
        rungs = runnable_rungs(rungs, arch)[0]
    targets += [(r.key, (lambda rung: lambda p, out, i=0: family.launch(rung, p, out, i))(r)) for r in rungs]
    return targets


def _measure_problem(family: Family, problem: Problem, kind: str, l2: str, plan: BenchPlan,
                     flusher) -> list[Record]:
    import cupy as cp

    from lab.core import device

    out = cp.empty(problem.out_shape, dtype=problem.dtype)
    rungs = {r.key: r for r in family.rungs}
    timed = []
    for name, launch in _targets(family, kind, problem.params, plan.quick, device.current().arch):
        t = timing.measure(lambda i, launch=launch, out=out: launch(problem, out, i), l2=l2, flusher=flusher,
                           min_time_ms=plan.min_time_ms / (3 if plan.quick else 1),
                           max_reps=100 if plan.quick else 500)
        notes = family.launch_notes(rungs[name], problem, out) if name in rungs else {}
        timed.append((name, t, family.throughput(problem, t.median_ms), notes))
    # The ceiling is the best of the family's ceiling and its peer baselines (a library's best call, PyTorch's).
    peers = {name: value for name, _, value, _ in timed
             if name == family.ceiling_name or name in getattr(family, "peer_baselines", ())}
    best = max(peers, key=peers.get, default=family.ceiling_name)
    return [Record(family.name, name, kind, dict(problem.params), problem.bytes_moved, l2, t.median_ms, t.p10_ms,
                   t.p90_ms, t.reps, family.metric, value, best, peers.get(best, 0.0), extra=notes)
            for name, t, value, notes in timed]


def run(family: Family, plan: BenchPlan, progress: Callable[[str], None] | None = None) -> RecordSet:
    import cupy as cp

    flusher = timing.L2Flusher() if "cold" in plan.l2_modes else None
    jobs: list[tuple[str, dict, str]] = []
    if "headline" in plan.kinds:
        jobs += [("headline", p, "cold") for p in family.headline_params()[: 1 if plan.quick else None]]
    if "sweep" in plan.kinds:
        params = family.sweep_params(plan.max_bytes)[:: plan.sweep_stride()]
        jobs += [("sweep", p, l2) for p in params for l2 in plan.l2_modes]
    if "tail" in plan.kinds:
        jobs += [("tail", p, "warm") for p in family.tail_params()[:: plan.tail_stride()]]

    records: list[Record] = []
    for kind, params, l2 in jobs:
        probe = family.make_problem(seed=1, **params)
        # Cold runs of small problems rotate through several input sets as well as flushing.
        sets = 1 if l2 == "warm" else int(max(1, min(4, ROTATION_BUDGET // max(probe.bytes_moved, 1))))
        problem = family.make_problem(seed=1, sets=sets, **params) if sets > 1 else probe
        records += _measure_problem(family, problem, kind, l2, plan, flusher)
        del problem, probe
        cp.get_default_memory_pool().free_all_blocks()
        if progress:
            progress(f"{kind} {params} {l2}")
    return RecordSet(provenance(), records)


def job_count(family: Family, plan: BenchPlan) -> int:
    n = 0
    if "headline" in plan.kinds:
        n += len(family.headline_params()[: 1 if plan.quick else None])
    if "sweep" in plan.kinds:
        n += len(family.sweep_params(plan.max_bytes)[:: plan.sweep_stride()]) * len(plan.l2_modes)
    if "tail" in plan.kinds:
        n += len(family.tail_params()[:: plan.tail_stride()])
    return n
