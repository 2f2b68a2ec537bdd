"""L2-resident bandwidth, measured so that the fixed cost of a timed launch does not hide it.

An event pair around one launch costs a few microseconds even with nothing to do, about as long as a
16 MiB copy out of L2 takes; so a warm-L2 curve timed one launch at a time never rises far above the
HBM plateau, whatever the L2 can deliver. Here every size is timed three ways, in the same run:
- "graph": many launches captured in one CUDA graph and timed together (lab.measure.timing.measure_graph), so
  the event pair's cost is divided by the number of launches; warm L2 (nothing flushed between them);
- "events", warm and cold: one launch between two events, as every other record in the lab is timed;
- the fixed costs themselves: an empty kernel timed both ways (lab.measure.timing.launch_overhead).
The working set is what one launch touches: the input and the output, `bytes_moved` (2 x 4 B x n for a
copy). Sizes are binary (MiB), dense between 16 MiB and 96 MiB, around the L2 size read from the device.
Records: kind "l2" (method in `extra`), kind "overhead"; ceiling = the HBM plateau, the device copy
timed cold at the largest size in the same run, so `ratio` reads "x HBM".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lab.measure.records import Record, RecordSet, provenance

MIB = 1 << 20
# Working sets in MiB: coarse below 16 and above 96, every 8 MiB between.
SIZES_MIB = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 112, 128, 192, 256, 512, 1024)
QUICK_SIZES_MIB = (4, 16, 32, 48, 64, 96, 256, 1024)
TARGETS = ("cupy_device_copy", "04_unrolled")  # the ceiling and the copy ladder's best rung
HBM_SIZE_MIB = 1024  # where the HBM plateau is read (cold, one launch per event pair)


def working_sets(quick: bool = False) -> list[int]:
    """Working sets in bytes (input + output), smallest first."""
    return [m * MIB for m in (QUICK_SIZES_MIB if quick else SIZES_MIB)]


def _launchers(family, problem, out) -> dict[str, Callable[[int], None]]:
    rung = family.rung(TARGETS[1])
    return {TARGETS[0]: lambda i: family.launch_ceiling(problem, out, i),
            TARGETS[1]: lambda i: family.launch(rung, problem, out, i)}


def _record(name: str, kind: str, params: dict, bytes_moved: int, l2: str, median: float, p10: float,
            p90: float, reps: int, extra: dict, hbm: float) -> Record:
    value = bytes_moved / (median * 1e-3) / 1e9 if bytes_moved else 0.0
    return Record("copy", name, kind, params, bytes_moved, l2, median, p10, p90, reps, "GB/s", value,
                  "hbm_plateau", hbm, extra)


def _hbm_plateau(copy, flusher, min_ms: float) -> float:
    """The device copy's GB/s at HBM_SIZE_MIB, cold L2, one launch per event pair."""
    import cupy as cp

    from lab.measure import timing

    problem = copy.make_problem(seed=3, n=HBM_SIZE_MIB * MIB // 8)
    out = cp.empty(problem.out_shape, problem.dtype)
    t = timing.measure(lambda i: copy.launch_ceiling(problem, out, i), l2="cold", flusher=flusher,
                       min_time_ms=min_ms)
    return problem.bytes_moved / (t.median_ms * 1e-3) / 1e9


def measure(quick: bool = False, progress: Callable[[str], None] | None = None) -> RecordSet:
    """Measure the L2 sweep and the launch overheads now (needs a GPU)."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure import timing

    copy = get_family("copy")
    flusher = timing.L2Flusher()
    min_ms = 2.0 if quick else 5.0

    hbm = _hbm_plateau(copy, flusher, min_ms)  # first: every record of this run is read against it

    records = []
    for method, t in timing.launch_overhead().items():
        median, p10, p90 = (t.median_ms, t.p10_ms, t.p90_ms) if method == "events" else \
            (t.per_launch_ms, t.p10_ms, t.p90_ms)
        reps = t.reps if method == "events" else t.replays
        extra = {"method": method} | ({"launches": t.launches} if method == "graph" else {})
        records.append(_record("empty_kernel", "overhead", {}, 0, "warm", median, p10, p90, reps, extra, hbm))

    for size in working_sets(quick):
        problem = copy.make_problem(seed=4, n=size // 8)
        out = cp.empty(problem.out_shape, problem.dtype)
        for name, launch in _launchers(copy, problem, out).items():
            g = timing.measure_graph(launch, min_graph_ms=min_ms)
            records.append(_record(name, "l2", dict(problem.params), problem.bytes_moved, "warm", g.per_launch_ms,
                                   g.p10_ms, g.p90_ms, g.replays, {"method": "graph", "launches": g.launches}, hbm))
            for l2 in ("warm", "cold"):
                e = timing.measure(launch, l2=l2, flusher=flusher, min_time_ms=min_ms)
                records.append(_record(name, "l2", dict(problem.params), problem.bytes_moved, l2, e.median_ms,
                                       e.p10_ms, e.p90_ms, e.reps, {"method": "events"}, hbm))
        del problem, out
        cp.get_default_memory_pool().free_all_blocks()
        if progress:
            progress(f"l2 sweep {size // MIB} MiB")
    return RecordSet(provenance(), records)


def run(out_dir: Path, *, quick: bool = False, progress: Callable[[str], None] | None = None) -> Path:
    """The sweep (measure), written to out_dir/REFERENCE_FILE; its summary goes to `progress`. Returns the path."""
    from lab.measure import records

    rs = measure(quick=quick, progress=progress)
    path = records.save(Path(out_dir) / REFERENCE_FILE, rs)
    if progress:
        progress(summary(rs))
    return path


# --- Reading the records (no GPU needed) ---------------------------------------------------------------

REFERENCE_FILE = "l2.json"


def lesson_records(live: bool) -> RecordSet | None:
    """For a notebook: measured now with the quick plan (live), else the reference GPU's records (None if absent)."""
    from lab.measure import records

    return records.measured_or_reference(live, lambda: measure(quick=True), REFERENCE_FILE)


def graph_versus_events_at_largest(rs: RecordSet | None) -> str:
    """Per target, at the largest working set: graph-timed against one launch per event pair (both warm)."""
    if rs is None:
        return "(no L2 records)"
    lines = []
    for rung in TARGETS:
        g, w = series(rs, rung, "graph"), series(rs, rung, "events")
        if g and w and g[-1].bytes_moved == w[-1].bytes_moved:
            lines.append(f"{rung} at {g[-1].bytes_moved // MIB} MiB: graph-timed {g[-1].value:.0f} GB/s, "
                         f"one launch per event pair {w[-1].value:.0f} GB/s ({g[-1].value / w[-1].value:.2f}x)")
    return "\n".join(lines)

def series(rs: RecordSet, rung: str, method: str, l2: str = "warm") -> list[Record]:
    """One curve: the records of a target timed one way, smallest working set first."""
    rows = [r for r in rs.where(kind="l2", rung=rung, l2=l2) if r.extra.get("method") == method]
    return sorted(rows, key=lambda r: r.bytes_moved)


def overhead_us(rs: RecordSet, method: str) -> float | None:
    """The empty kernel's time per launch in microseconds, timed alone ("events") or in a graph ("graph")."""
    rows = [r for r in rs.where(kind="overhead") if r.extra.get("method") == method]
    return rows[0].median_ms * 1e3 if rows else None


def l2_bytes(rs: RecordSet) -> int:
    return int(rs.provenance.get("l2_bytes", 0))


def hbm_plateau(rs: RecordSet) -> float:
    """The HBM plateau this run's records are read against (GB/s): their `ceiling_value`."""
    rows = rs.where(kind="l2")
    return rows[0].ceiling_value if rows else float("nan")


def peak(rows: list[Record]) -> Record | None:
    """The fastest record of a curve: the top of its L2 plateau."""
    return max(rows, key=lambda r: r.value) if rows else None


def less_gap(rec: Record, gap_us: float) -> float:
    """GB/s of a graph-timed record once the graph's own per-launch gap (the empty kernel's time) is taken
    off its time: an upper estimate, since part of that gap may overlap the kernel's start."""
    return rec.bytes_moved / ((rec.median_ms * 1e3 - gap_us) * 1e-6) / 1e9


def marginal(rows: list[Record], low: int, high: int) -> float | None:
    """GB/s from the difference between two working sets (bytes): (bytes_high - bytes_low) / (t_high - t_low).
    Any fixed cost per launch cancels in the difference."""
    at = {r.bytes_moved: r for r in rows}
    if low not in at or high not in at or at[high].median_ms <= at[low].median_ms:
        return None
    return (high - low) / ((at[high].median_ms - at[low].median_ms) * 1e-3) / 1e9


def knee(rows: list[Record], hbm: float, fraction: float = 0.5) -> tuple[int, int] | None:
    """Where the working set leaves the L2: the last working set (bytes) still above `fraction` of the way
    from the HBM plateau up to the curve's peak, and the next one, below it; None when it never falls."""
    top = peak(rows)
    if top is None:
        return None
    threshold = hbm + fraction * (top.value - hbm)
    after = [r for r in rows if r.bytes_moved >= top.bytes_moved]
    for above, below in zip(after, after[1:], strict=False):
        if below.value < threshold <= above.value:
            return above.bytes_moved, below.bytes_moved
    return None


def summary(rs: RecordSet | None) -> str:
    """What the sweep shows, every figure computed from the records."""
    if rs is None:
        return "(no L2 records: run `lab study l2 --out results/h200` on a GPU)"
    hbm, gap, ev = hbm_plateau(rs), overhead_us(rs, "graph"), overhead_us(rs, "events")
    lines = [f"{rs.label()}; L2 (device attribute): {l2_bytes(rs) / MIB:.0f} MiB; "
             f"HBM plateau (device copy, {HBM_SIZE_MIB} MiB working set, cold, one launch per event pair): "
             f"{hbm:.0f} GB/s"]
    if ev is not None and gap is not None:
        lines.append(f"an empty kernel: {ev:.2f} us between two events, {gap:.2f} us per launch inside a graph")
    for rung in TARGETS:
        g, w = series(rs, rung, "graph"), series(rs, rung, "events")
        top, top_w = peak(g), peak([r for r in w if r.bytes_moved <= l2_bytes(rs)])
        if top is None or top_w is None:
            continue
        lines.append(f"{rung}:")
        lines.append(f"  one launch per event pair (warm), best up to the L2 size: {top_w.value:.0f} GB/s "
                     f"({top_w.value / hbm:.2f}x HBM) at {top_w.bytes_moved // MIB} MiB")
        lines.append(f"  graph-timed (warm): peak {top.value:.0f} GB/s ({top.value / hbm:.2f}x HBM) at "
                     f"{top.bytes_moved // MIB} MiB, {top.extra.get('launches')} launches per graph")
        if gap is not None:
            corrected = less_gap(top, gap)
            lines.append(f"  the same, less the graph's {gap:.2f} us per launch: {corrected:.0f} GB/s "
                         f"({corrected / hbm:.2f}x HBM)")
        m = marginal(g, top.bytes_moved // 2, top.bytes_moved)
        if m is not None:
            lines.append(f"  from the difference {top.bytes_moved // 2 // MIB} -> {top.bytes_moved // MIB} MiB "
                         f"(fixed costs cancel): {m:.0f} GB/s ({m / hbm:.2f}x HBM)")
        k = knee(g, hbm)
        if k is not None:
            lines.append(f"  knee: half-way down to HBM between {k[0] // MIB} and {k[1] // MIB} MiB of working set, "
                         f"{k[0] / l2_bytes(rs):.2f}-{k[1] / l2_bytes(rs):.2f} of the L2 size")
    return "\n".join(lines)
