"""Notebook 06 from the records: the bytes a separate pass adds, the fused rung against the plain one and the library
paths, the lessons' targets for them, int8 against fp16, the sweep, and rung 06's fused-epilogue prediction."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from lab.lessons.common import Markdown, md
from lab.lessons.fusion.records import (
    GRAPH_PATH,
    OPS_PATH,
    PLAIN,
    TARGETS,
    against_range,
    cube_side,
    header_fields,
    ladder,
    meets,
    not_in_catalogue,
    problem_label,
    problems_of,
    record_at,
    recorded_by,
    status,
)
from lab.measure.records import RecordSet, format_bytes, format_value

# ----------------------------------------------------------------------------------------------
# Notebook 06: what the write-back costs, modelled before anything is measured
# ----------------------------------------------------------------------------------------------

def traffic_model(sides: Iterable[int] = TARGETS["fused_sides"], epilogue: str = "bias+gelu_tanh") -> str:
    """DRAM bytes of a fp16 GEMM with the epilogue fused (the family's minimum: A, B and the bias read once, C
    written once) against the same GEMM followed by one separate elementwise pass (C read back and written
    again), at each square size."""
    fam = ladder("gemm_tc_epilogue")
    if fam is None:
        return not_in_catalogue("gemm_tc_epilogue")
    lines = [f"{'size':8s} {'fused (minimum)':>16s} {'+ one pass':>12s} {'ratio':>6s}   (fp16, {epilogue})"]
    for n in sides:
        params = {"M": n, "N": n, "K": n, "epilogue": epilogue}
        fused = fam.min_dram_bytes(params)
        separate = fused + 2 * 2 * n * n  # C read back and written again, 2 bytes each way
        lines.append(f"{n}^3{'':3s} {format_bytes(fused):>16s} {format_bytes(separate):>12s} "
                     f"{separate / fused:6.2f}")
    return "\n".join(lines)


def unfused_cost(rs: RecordSet | None, name: str = "gemm_tc_epilogue") -> str:
    """What one separate elementwise pass over C would cost in time at the device copy's bandwidth (the copy
    records' headline ceiling, if recorded on the same device), against the plain GEMM's recorded time: the
    overhead an unfused epilogue cannot avoid, predicted from two measurements."""
    if rs is None:
        return status(rs, name)
    from lab.lessons.views import reference

    copy = reference("copy")
    device = rs.provenance.get("device")
    heads = [] if copy is None else copy.where(kind="headline", rung=copy.records[0].ceiling if copy.records else "")
    if not heads or copy.provenance.get("device") != device:
        return (f"(no copy records made on {device} to take a DRAM bandwidth from: `lab bench copy` records them; "
                "the prediction needs them)")
    bandwidth = max(heads, key=lambda r: r.bytes_moved).value  # GB/s at the largest headline copy
    lines = [f"one extra pass over C (read + write, fp16) at the device copy's {format_value(bandwidth, 'GB/s')} "
             f"GB/s ({copy.label()}), against the plain GEMM ({rs.label()}):"]
    for params in problems_of(rs):
        plain = record_at(rs, "headline", PLAIN, params)
        if plain is None or params.get("out", "same") != "same":
            continue
        extra_ms = 2 * 2 * params["M"] * params["N"] / (bandwidth * 1e9) * 1e3
        lines.append(f"  {problem_label(params)}: {extra_ms:.4f} ms extra on {plain.median_ms:.4f} ms -> "
                     f"{(plain.median_ms + extra_ms) / plain.median_ms:.3f}x the plain time, at best")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Notebook 06: fused vs plain vs library, from the records
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EpilogueRow:
    """One headline problem: the median times of the plain rung, the fused rung and the library paths."""

    params: dict
    plain_ms: float
    fused_ms: float | None
    ops_ms: float | None = None
    graph_ms: float | None = None

    @property
    def fused_over_plain(self) -> float | None:
        return self.fused_ms / self.plain_ms if self.fused_ms else None

    def speedup(self, library_ms: float | None) -> float | None:
        """How many times faster the fused rung is than a library path (its time over the fused time)."""
        return library_ms / self.fused_ms if library_ms and self.fused_ms else None


def epilogue_rows(rs: RecordSet | None, kind: str = "headline") -> list[EpilogueRow]:
    """Per problem of `kind` (cold L2): the plain rung (the ceiling), the fused rung and the library baselines."""
    if rs is None:
        return []
    rows = []
    for params in problems_of(rs, kind):
        plain = record_at(rs, kind, PLAIN, params)
        if plain is None:
            continue
        others = [r for r in rs.where(kind=kind, params=params) if r.rung != PLAIN and r.l2 == plain.l2]
        fused = next((r for r in others if r.rung[:2].isdigit()), None)
        ops, graph = (next((r for r in others if r.rung == k), None) for k in (OPS_PATH, GRAPH_PATH))
        rows.append(EpilogueRow(params, plain.median_ms, fused and fused.median_ms, ops and ops.median_ms,
                                graph and graph.median_ms))
    return rows


def _x(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def epilogue_table(rs: RecordSet | None, name: str) -> Markdown:
    """Median times (ms, cold L2) per headline problem, the fused rung over the plain one, and how many times
    faster the fused rung is than each library path; all from the same run."""
    if rs is None or ladder(name) is None:
        return md(status(rs, name))
    rows = epilogue_rows(rs)
    if not rows:
        return md(f"(no headline records with a {PLAIN} ceiling in {name}: {rs.label()})")
    paths = [(k, attr) for k, attr in ((OPS_PATH, "ops_ms"), (GRAPH_PATH, "graph_ms"))
             if any(getattr(r, attr) for r in rows)]  # only the library paths these records hold
    head = "| problem | plain ms | fused ms | fused / plain |" + "".join(
        f" {k} ms | fused speed-up over it |" for k, _ in paths)
    lines = [f"{name}, {rs.label()}", "", head, "|---|" + "---:|" * (3 + 2 * len(paths))]
    for r in rows:
        cells = "".join(f" {_x(getattr(r, a), 4)} | {_x(r.speedup(getattr(r, a)), 2)} |" for _, a in paths)
        lines.append(f"| {problem_label(r.params)} | {r.plain_ms:.4f} | {_x(r.fused_ms, 4)} | "
                     f"{_x(r.fused_over_plain)} |{cells}")
    return md("\n".join(lines))


def _at_side(rows: list[EpilogueRow], side: int, out: str = "same") -> EpilogueRow | None:
    return next((r for r in rows if cube_side(r.params) == side and r.params.get("out", "same") == out), None)


def epilogue_targets(tc: RecordSet | None, fp32: RecordSet | None = None) -> str:
    """The epilogue lesson's targets against the records: the fused rung within TARGETS["fused_over_plain"] of the plain
    one at each of TARGETS["fused_sides"] (fp16 output; int8 shown beside), and at least TARGETS["ops_speedup"]
    times faster than the cupy_ops path at TARGETS["ops_side"]."""
    lines = []
    for name, rs in (("gemm_tc_epilogue", tc), ("gemm_fp32_epilogue", fp32)):
        if rs is None:
            lines.append(status(rs, name))
            continue
        rows = epilogue_rows(rs)
        lines.append(f"{name} ({rs.label()}):")
        for side in TARGETS["fused_sides"]:
            for out in ("same", "int8"):
                row = _at_side(rows, side, out)
                if row is None or row.fused_over_plain is None:
                    if out == "same":
                        lines.append(f"  {side}^3: no fused and plain records at this size: the target cannot be "
                                     "judged here")
                    continue
                judged = meets(row.fused_over_plain, TARGETS["fused_over_plain"], at_most=True)
                lines.append(f"  {problem_label(row.params)}: fused / plain = {row.fused_over_plain:.3f} -> {judged}")
        if name == "gemm_tc_epilogue":
            row = _at_side(rows, TARGETS["ops_side"])
            speedup = row and row.speedup(row.ops_ms)
            if speedup is None:
                lines.append(f"  {TARGETS['ops_side']}^3: no {OPS_PATH} record beside the fused rung: the library "
                             "target cannot be judged here")
            else:
                lines.append(f"  {problem_label(row.params)}: {OPS_PATH} / fused = {speedup:.2f} -> "
                             f"{meets(speedup, TARGETS['ops_speedup'])}")
    return "\n".join(lines)


def int8_against_fp16(rs: RecordSet | None, name: str = "gemm_tc_epilogue") -> str:
    """The fused rung's time with an int8 (per-row) output over its time with the fp16 output, per size."""
    if rs is None:
        return status(rs, name)
    rows = epilogue_rows(rs)
    lines = []
    for side in sorted({cube_side(r.params) for r in rows if cube_side(r.params)}):
        same, q8 = _at_side(rows, side, "same"), _at_side(rows, side, "int8")
        if same and q8 and same.fused_ms and q8.fused_ms:
            lines.append(f"  {side}^3: fused int8 time / fused fp16 time = {q8.fused_ms / same.fused_ms:.3f} "
                         f"(C stored in {format_bytes(side * side)} instead of {format_bytes(2 * side * side)})")
    if not lines:
        return f"(no size with both an fp16 and an int8 output in {name})"
    return "\n".join([f"{name} ({rs.label()}):", *lines])


def sweep_overhead(rs: RecordSet | None, name: str) -> str:
    """The fused rung over the plain one across the sweep's sizes (cold and warm L2): where the epilogue's fixed
    work per output weighs more, against a mainloop that shrinks with K."""
    if rs is None:
        return status(rs, name)
    if not any(r.kind == "sweep" for r in rs.records):
        return f"(no sweep records in {name}: `{recorded_by(name)}` records them with the headline)"
    lines = [f"{name}, sweep ({rs.label()}): fused time / plain time"]
    for l2 in ("cold", "warm"):
        pairs = []
        for params in problems_of(rs, "sweep"):
            plain = [r for r in rs.where(kind="sweep", rung=PLAIN, params=params) if r.l2 == l2]
            fused = [r for r in rs.where(kind="sweep", params=params) if r.l2 == l2 and r.rung[:2].isdigit()]
            if plain and fused:
                pairs.append((params, fused[0].median_ms / plain[0].median_ms))
        if pairs:
            lines.append(f"  {l2} L2: " + ", ".join(f"{cube_side(p) or p['M']}^3 {x:.3f}" for p, x in
                                                     sorted(pairs, key=lambda t: t[0]["M"])))
    return "\n".join(lines)



def fused_prediction(name: str) -> str:
    """The "Fused epilogue prediction" field of the family's rung header, or a sentence saying it has none."""
    fam = ladder(name)
    if fam is None:
        return not_in_catalogue(name)
    rung = fam.rungs[0]
    found = next((f for f in header_fields(name, rung.key) if f.lower().startswith("fused epilogue prediction")),
                 None)
    source = f"kernels/{rung.spec.source}"
    if found is None:
        return f"{source}: its header states no prediction for the fused epilogue."
    return f"{source}, as written in its header:\n  {found}"


_SIDE_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)x[^,;.]*?\bat (\d+)\^3")


def side_ranges(text: str) -> list[tuple[float, float, int]]:
    """'1.02-1.05x the plain time at 4096^3, 1.01-1.03x at 8192^3' -> [(1.02, 1.05, 4096), (1.01, 1.03, 8192)]."""
    return [(float(m[1]), float(m[2]), int(m[3])) for m in _SIDE_RANGE.finditer(text)]



def fused_prediction_check(rs: RecordSet | None, name: str) -> str:
    """Each 'lo-hi x ... at N^3' range of the fused-epilogue prediction against the fused / plain time ratio of the
    fp16-output headline problem at N^3."""
    if rs is None or ladder(name) is None:
        return status(rs, name)
    text = fused_prediction(name)
    ranges = side_ranges(text)
    if not ranges:
        return f"{name}: no 'lo-hi x at N^3' range in the prediction to check; compare by eye."
    rows = epilogue_rows(rs)
    lines = [f"{name}: the prediction's ranges against the records ({rs.label()}):"]
    for lo, hi, side in ranges:
        row = _at_side(rows, side)
        if row is None or row.fused_over_plain is None:
            lines.append(f"  at {side}^3: predicted {lo:g}-{hi:g}x; no fused and plain records at this size")
            continue
        x = row.fused_over_plain
        lines.append(f"  at {side}^3: predicted {lo:g}-{hi:g}x the plain time, measured {x:.3f}x -> "
                     f"{against_range(x, lo, hi)}")
    return "\n".join(lines)
