"""Small experiments that explain odd features of the memory-bound records, recorded like everything else.

- "warm_cold": in the copy records, rungs 02 and 03 run a few % slower warm than cold at working sets of
  256 MiB and more, where neither should find its data in L2. The same launches are timed under several
  conditions that separate the candidate causes: what the L2 holds when the launch starts (the previous
  launch's output, dirty; the flush's writes, dirty; the flush's reads, clean), and how long the GPU sits
  idle between launches (the spin before each start event; none at all inside a graph).
- "tail_order": in the copy tail records (n stepping by one around 2^24 floats, a fresh pair of buffers per
  length), rungs 01 and 04 zigzag between even and odd n, in opposite phases. The same lengths are timed in
  ascending order, in descending order, and with one pair of buffers reused for every length: a zigzag that
  follows the order of the runs or disappears with reused buffers comes from where the buffers were placed,
  not from n.
Records: kind "probe", `extra` = {"experiment", "condition"}; `ceiling` = the device copy in the same condition.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from lab.core.errors import LabError
from lab.measure.records import Record, RecordSet, provenance

MIB = 1 << 20
WARM_COLD_SIZES_MIB = (256, 1024)  # working sets (input + output)
WARM_COLD_RUNGS = ("02_grid_stride", "03_vectorized", "04_unrolled")
LONG_SPIN_NS = 500_000
TAIL_BASE, TAIL_COUNT = 1 << 24, 16
TAIL_RUNGS = ("01_naive", "04_unrolled")
CONDITIONS = {
    "warm_cold": ("warm", "warm_long_gap", "cold_write_flush", "cold_read_flush", "graph"),
    "tail_order": ("ascending", "descending", "reused_buffers"),
}


def _targets(copy, rungs) -> dict[str, Callable]:
    out = {copy.ceiling_name: copy.launch_ceiling}
    for key in rungs:
        rung = copy.rung(key)
        out[key] = (lambda r: lambda p, o, i=0: copy.launch(r, p, o, i))(rung)
    return out


def _time(condition: str, launch: Callable[[int], None], flushers: dict) -> tuple[float, float, float, int]:
    from lab.measure import timing

    if condition == "graph":
        g = timing.measure_graph(launch, min_graph_ms=5.0)
        return g.per_launch_ms, g.p10_ms, g.p90_ms, g.replays
    kwargs = {"warm_long_gap": {"spin_ns": LONG_SPIN_NS},
              "cold_write_flush": {"l2": "cold", "flusher": flushers["write"]},
              "cold_read_flush": {"l2": "cold", "flusher": flushers["read"]}}.get(condition, {})
    t = timing.measure(launch, min_time_ms=10.0, **kwargs)
    return t.median_ms, t.p10_ms, t.p90_ms, t.reps


def _records(copy, problem, out, targets: dict, experiment: str, condition: str, flushers: dict) -> list[Record]:
    timed = {}
    for name, launch in targets.items():
        timed[name] = _time(condition, lambda i, launch=launch: launch(problem, out, i), flushers)
    ceiling = problem.bytes_moved / (timed[copy.ceiling_name][0] * 1e-3) / 1e9
    l2 = "cold" if condition.startswith("cold") else "warm"
    return [Record("copy", name, "probe", dict(problem.params), problem.bytes_moved, l2, med, p10, p90, reps, "GB/s",
                   problem.bytes_moved / (med * 1e-3) / 1e9, copy.ceiling_name, ceiling,
                   {"experiment": experiment, "condition": condition})
            for name, (med, p10, p90, reps) in timed.items()]


def measure(progress: Callable[[str], None] | None = None,
            experiments: tuple[str, ...] = tuple(CONDITIONS)) -> RecordSet:
    """The experiments named (both by default), now (needs a GPU)."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure import timing

    copy = get_family("copy")
    flushers = {"write": timing.L2Flusher(by="write"), "read": timing.L2Flusher(by="read")}
    records: list[Record] = []

    targets = _targets(copy, WARM_COLD_RUNGS)
    for size in WARM_COLD_SIZES_MIB if "warm_cold" in experiments else ():
        problem = copy.make_problem(seed=5, n=size * MIB // 8)
        out = cp.empty(problem.out_shape, problem.dtype)
        for condition in CONDITIONS["warm_cold"]:
            records += _records(copy, problem, out, targets, "warm_cold", condition, flushers)
        del problem, out
        cp.get_default_memory_pool().free_all_blocks()
        if progress:
            progress(f"warm_cold {size} MiB")

    targets = _targets(copy, TAIL_RUNGS)
    lengths = [TAIL_BASE + k for k in range(TAIL_COUNT)]
    for condition in CONDITIONS["tail_order"] if "tail_order" in experiments else ():
        reused = None
        if condition == "reused_buffers":
            reused = copy.make_problem(seed=6, n=lengths[-1]), cp.empty(lengths[-1], np.float32)
        for n in (reversed(lengths) if condition == "descending" else lengths):
            if reused is None:  # as lab.measure.bench does: a fresh pair of buffers per length
                problem = copy.make_problem(seed=6, n=n)
                out = cp.empty(problem.out_shape, problem.dtype)
            else:
                problem = copy.make_problem(seed=6, n=1)
                problem.inputs["x"] = [reused[0].inputs["x"][0][:n]]
                problem.params, problem.bytes_moved = {"n": n, "x_offset": 0, "y_offset": 0}, 8 * n
                out = reused[1][:n]
            records += _records(copy, problem, out, targets, "tail_order", condition, flushers)
            if reused is None:
                del problem, out
                cp.get_default_memory_pool().free_all_blocks()
        if progress:
            progress(f"tail_order {condition}")
    return RecordSet(provenance(), records)


def run(out_dir: Path, *, experiments: tuple[str, ...] = tuple(CONDITIONS),
        progress: Callable[[str], None] | None = None) -> Path:
    """The experiments (measure), written to out_dir/REFERENCE_FILE; their tables go to `progress`. Returns the
    path."""
    from lab.measure import records

    unknown = [e for e in experiments if e not in CONDITIONS]
    if unknown:
        raise LabError(f"no experiment {', '.join(unknown)}; the experiments are {', '.join(CONDITIONS)}.")
    rs = measure(progress=progress, experiments=tuple(experiments))
    path = records.save(Path(out_dir) / REFERENCE_FILE, rs)
    if progress:
        progress(warm_cold_table(rs))
        progress(tail_parity(rs))
    return path


# --- Reading the records (no GPU needed) ---------------------------------------------------------------

REFERENCE_FILE = "l2_probes.json"


def lesson_records(live: bool, experiment: str) -> RecordSet | None:
    """For a notebook: one experiment measured now (live), else the reference GPU's records (None if absent)."""
    from lab.measure import records

    return records.measured_or_reference(live, lambda: measure(experiments=(experiment,)), REFERENCE_FILE)


def _value(rs: RecordSet, rung: str, condition: str, size_mib: int) -> float | None:
    rows = [r for r in _rows(rs, "warm_cold", condition, rung) if r.bytes_moved == size_mib * MIB]
    return rows[0].value if rows else None


def warm_cold_findings(rs: RecordSet | None) -> str:
    """The ratios that separate the causes, per rung and working set: warm against cold (the anomaly), a long
    idle gap against the usual one (does idle time matter?), a clean L2 against a dirty one (the read flush
    against the write flush: does the state the L2 is left in matter?)."""
    if rs is None:
        return "(no probe records)"
    lines = [f"{'rung':<18} {'MiB':>5} {'warm/cold':>10} {'long gap/warm':>14} {'read/write flush':>17}"]
    for size in WARM_COLD_SIZES_MIB:
        for rung in ("cupy_device_copy", *WARM_COLD_RUNGS):
            v = {c: _value(rs, rung, c, size) for c in CONDITIONS["warm_cold"]}
            if None in v.values():
                continue
            cold = v["cold_write_flush"]
            lines.append(f"{rung:<18} {size:>5} {v['warm'] / cold:>10.3f} "
                         f"{v['warm_long_gap'] / v['warm']:>14.3f} {v['cold_read_flush'] / cold:>17.3f}")
    return "\n".join(lines)

def _rows(rs: RecordSet, experiment: str, condition: str, rung: str) -> list[Record]:
    return [r for r in rs.where(kind="probe", rung=rung)
            if r.extra.get("experiment") == experiment and r.extra.get("condition") == condition]


def warm_cold_table(rs: RecordSet | None) -> str:
    """GB/s per rung and condition at each working set, and each rung's ratio to the device copy there."""
    if rs is None:
        return "(no probe records: run `lab study probes --out DIR` on a GPU)"
    lines = []
    for size in WARM_COLD_SIZES_MIB:
        lines.append(f"working set {size} MiB   " + "  ".join(f"{c:>16}" for c in CONDITIONS["warm_cold"]))
        for rung in ("cupy_device_copy", *WARM_COLD_RUNGS):
            cells = []
            for condition in CONDITIONS["warm_cold"]:
                rows = [r for r in _rows(rs, "warm_cold", condition, rung) if r.bytes_moved == size * MIB]
                cells.append(f"{rows[0].value:8.0f} ({rows[0].ratio:.2f})" if rows else f"{'-':>16}")
            lines.append(f"  {rung:<20} " + "  ".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def _parities(rs: RecordSet) -> list[tuple[str, str, float, float]]:
    """(rung, condition, median GB/s at even n, at odd n) for every rung and condition with both."""
    found = []
    for rung in ("cupy_device_copy", *TAIL_RUNGS):
        for condition in CONDITIONS["tail_order"]:
            rows = _rows(rs, "tail_order", condition, rung)
            even = [r.value for r in rows if r.params["n"] % 2 == 0]
            odd = [r.value for r in rows if r.params["n"] % 2 == 1]
            if even and odd:
                found.append((rung, condition, float(np.median(even)), float(np.median(odd))))
    return found


def tail_parity(rs: RecordSet | None) -> str:
    """Per rung and condition: median GB/s at even n, at odd n, and their ratio (1.00: no zigzag)."""
    if rs is None:
        return "(no probe records)"
    lines = [f"{'rung':<18} {'condition':<16} {'even n':>8} {'odd n':>8} {'odd/even':>9}"]
    lines += [f"{rung:<18} {cond:<16} {e:8.0f} {o:8.0f} {o / e:9.3f}" for rung, cond, e, o in _parities(rs)]
    return "\n".join(lines)


def tail_parity_spread(rs: RecordSet | None) -> str:
    """The largest distance of any odd/even ratio from one, and the conditions where a rung's exceeds half of it."""
    if rs is None:
        return "(no probe records)"
    found = [(rung, cond, o / e) for rung, cond, e, o in _parities(rs)]
    if not found:
        return "(no tail_order probes in these records)"
    worst = max(abs(r - 1) for _, _, r in found)
    marked = [f"{rung} {cond} ({r:.3f})" for rung, cond, r in found if abs(r - 1) > worst / 2]
    return (f"every odd/even ratio is within {100 * worst:.1f}% of one; the largest ones: " + ", ".join(marked))
