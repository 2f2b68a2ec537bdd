"""Transpose records by row alignment, and knob variants that split one rung's change from another's.

- `by_alignment`: the tail records (square sides stepping by one) grouped by how many of the output's rows
  start on a 32-byte sector: a side that is a multiple of 8 floats starts every row on one; a side of
  4 mod 8, every other row; 2 or 6 mod 8, every fourth; an odd side, every eighth.
- `run` / `table`: rungs timed under knob variants and on misaligned, non-square shapes (cold L2), beside
  the device copy of the same run (`lab study transpose-variants --out DIR` writes them to
  DIR/transpose_variants.json; the reference GPU's are results/h200/transpose_variants.json).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from pathlib import Path

from lab.measure.records import Record, RecordSet, provenance

CLASSES = (("multiple of 8", 0), ("4 mod 8", 4), ("2 or 6 mod 8", 2), ("odd", 1))
SHAPES = ({"rows": 8192, "cols": 8192}, {"rows": 8191, "cols": 8193}, {"rows": 12345, "cols": 6789},
          {"rows": 8193, "cols": 8192}, {"rows": 8192, "cols": 8193})
VARIANTS = (("03", {}), ("04", {}), ("04", {"BLOCK_ROWS": 8}), ("05", {}), ("05", {"BLOCK_ROWS": 8}),
            ("05", {"TILE": 32, "BLOCK_ROWS": 8}))
REFERENCE_FILE = "transpose_variants.json"


def _class(side: int) -> int:
    """0 (multiple of 8), 4, 2 (2 or 6 mod 8) or 1 (odd): the largest power of two dividing side, capped at 8."""
    for c in (8, 4, 2):
        if side % c == 0:
            return c % 8
    return 1


def by_alignment(rs: RecordSet | None, rungs: tuple[str, ...] = ()) -> str:
    """Per target: the median fraction of the device copy over tail sizes in each alignment class."""
    if rs is None:
        return "(no transpose records)"
    recs = [r for r in rs.where(kind="tail") if r.params.get("rows") == r.params.get("cols")]
    if not recs:
        return "(no square tail records)"
    names = rungs or tuple(dict.fromkeys(r.rung for r in recs if r.rung != r.ceiling))
    lines = [f"median x device copy over the tail sizes ({rs.label()}); side ->  "
             + " | ".join(f"{label}" for label, _ in CLASSES)]
    for name in names:
        cells = []
        for _, c in CLASSES:
            values = [r.ratio for r in recs if r.rung == name and _class(r.params["rows"]) == c]
            cells.append(f"{statistics.median(values):.2f} ({len(values)})" if values else "-")
        lines.append(f"  {name:<20} " + " | ".join(f"{cell:>13}" for cell in cells))
    return "\n".join(lines)


def _shape(fam, params: dict, flusher) -> list[Record]:
    import cupy as cp

    from lab.measure import timing

    problem = fam.make_problem(seed=7, **params)
    out = cp.empty(problem.out_shape, problem.dtype)
    t = timing.measure(lambda i: fam.launch_ceiling(problem, out, i), l2="cold", flusher=flusher)
    ceiling = fam.throughput(problem, t.median_ms)
    records = [Record("transpose", fam.ceiling_name, "variant", dict(params), problem.bytes_moved, "cold",
                      t.median_ms, t.p10_ms, t.p90_ms, t.reps, "GB/s", ceiling, fam.ceiling_name, ceiling, {})]
    for key, knobs in VARIANTS:
        base = fam.rung(key)
        rung = dataclasses.replace(base, spec=base.spec.with_knobs(**knobs)) if knobs else base
        t = timing.measure(lambda i, rung=rung: fam.launch(rung, problem, out, i), l2="cold", flusher=flusher)
        records.append(Record("transpose", rung.key, "variant", dict(params), problem.bytes_moved, "cold",
                              t.median_ms, t.p10_ms, t.p90_ms, t.reps, "GB/s", fam.throughput(problem, t.median_ms),
                              fam.ceiling_name, ceiling, {"knobs": dict(rung.spec.knobs)}))
    return records


def measure(shapes: tuple[dict, ...] = SHAPES) -> RecordSet:
    """Every variant on every shape, now (needs a GPU)."""
    import cupy as cp

    from lab.families import get_family
    from lab.measure import timing

    fam, flusher, records = get_family("transpose"), timing.L2Flusher(), []
    for params in shapes:
        records += _shape(fam, params, flusher)
        cp.get_default_memory_pool().free_all_blocks()
    return RecordSet(provenance(), records)


def run(out_dir: Path, *, shapes: tuple[dict, ...] = SHAPES, progress: Callable[[str], None] | None = None) -> Path:
    """The variants (measure), written to out_dir/REFERENCE_FILE; their table goes to `progress`. Returns the path."""
    from lab.measure.records import save

    rs = measure(tuple(shapes))
    path = save(Path(out_dir) / REFERENCE_FILE, rs)
    if progress:
        progress(table(rs))
    return path


def lesson_records(live: bool) -> RecordSet | None:
    """For a notebook: the variants measured now on the first two shapes (live), else the reference GPU's."""
    from lab.core.errors import LabError
    from lab.measure import records

    if live:
        return measure(SHAPES[:2])
    try:
        return records.load(records.reference_dir() / REFERENCE_FILE)
    except LabError:
        return None


def table(rs: RecordSet | None) -> str:
    """Per shape: each variant's GB/s and fraction of the device copy measured beside it."""
    if rs is None:
        return "(no variant records: run `lab study transpose-variants --out DIR` on a GPU)"
    lines = [f"cold L2, {rs.label()}"]
    for params in dict.fromkeys(tuple(sorted(r.params.items())) for r in rs.where(kind="variant")):
        shape = dict(params)
        lines.append(f"{shape['rows']}x{shape['cols']}:")
        for r in rs.where(kind="variant", params=shape):
            knobs = ", ".join(f"{k}={v}" for k, v in r.extra.get("knobs", {}).items())
            lines.append(f"  {r.rung:<18} {knobs:<22} {r.value:6.0f} GB/s  {r.ratio:.3f}x copy")
    return "\n".join(lines)


def ratio(rs: RecordSet | None, shape: dict, a: tuple[str, dict], b: tuple[str, dict]) -> float | None:
    """Time of variant b over time of variant a on one shape (> 1: a is faster); variants as (rung key, knobs)."""
    if rs is None:
        return None

    def find(key: str, knobs: dict) -> Record | None:
        for r in rs.where(kind="variant", params=shape):
            if r.rung.split("_")[0] == key and all(r.extra.get("knobs", {}).get(k) == v for k, v in knobs.items()):
                return r
        return None

    ra, rb = find(*a), find(*b)
    return rb.median_ms / ra.median_ms if ra and rb else None


def rung04_split(rs: RecordSet | None) -> str:
    """Rung 04's two possible causes apart, at 8192x8192: the swizzle at rung 03's knobs, and BLOCK_ROWS."""
    square = {"rows": 8192, "cols": 8192}
    pairs = (("rung 04 time / rung 03 time, both BLOCK_ROWS=4 (the swizzle alone)", ("03", {"BLOCK_ROWS": 4}),
              ("04", {"BLOCK_ROWS": 4})),
             ("rung 04 at BLOCK_ROWS=4 / at BLOCK_ROWS=8 (the knob alone)", ("04", {"BLOCK_ROWS": 8}),
              ("04", {"BLOCK_ROWS": 4})))
    lines = []
    for label, a, b in pairs:
        r = ratio(rs, square, a, b)
        lines.append(f"{label}, 8192x8192: {r:.3f}" if r else f"{label}: no variant records")
    return "\n".join(lines)


def rung05_against_03(rs: RecordSet | None) -> str:
    """Per shape of the variant records: rung 03's time over rung 05's (above one: rung 05 is faster)."""
    lines = []
    for shape in SHAPES:
        r = ratio(rs, shape, ("05", {"BLOCK_ROWS": 4, "TILE": 64}), ("03", {"BLOCK_ROWS": 4, "TILE": 64}))
        if r:
            lines.append(f"{shape['rows']}x{shape['cols']}: rung 03 time / rung 05 time = {r:.3f}")
    return "\n".join(lines) or "(no variant records)"
