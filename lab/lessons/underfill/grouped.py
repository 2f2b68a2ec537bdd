"""Notebook 05, part 3: grouped GEMM (the grouped_gemm family: many GEMMs of different sizes in one launch). The
cases' tiles, padding and rounds, the prediction from rung 06's per-tile rate, and the records against the loop of
cuBLAS calls (the baseline the family is timed beside) and cuBLAS's strided-batched call."""

from __future__ import annotations

import statistics

from lab.lessons.underfill.facts import TileRate
from lab.lessons.underfill.records import (
    BATCHED,
    BK,
    GROUPED_CASES,
    GROUPED_FAMILY,
    GROUPED_RUNG,
    LOOP,
    TABLE_COST,
    TARGETS,
    dash_or,
    meets,
    missing,
    problems_of,
    provenance_of,
    source,
)
from lab.measure.records import RecordSet, format_bytes

# ----------------------------------------------------------------------------------------------
# 3. Grouped GEMM
# ----------------------------------------------------------------------------------------------

def case_groups(case: str) -> list[tuple[int, int, int]]:
    from lab.families.grouped_gemm import case_groups as groups

    return groups(case)


def grouped_shape(case: str, sm_count: int, bm: int = 128, bn: int = 256) -> dict:
    """A case's groups against the tiles: tile rows (each group's last one padded to bm), the share of computed
    rows that hold a token, tiles, waves and rounds over the SMs; and the loop of launches it replaces (one call
    per non-empty group, its tiles against the SMs if cuBLAS used the same tile)."""
    groups = case_groups(case)
    live = [g for g in groups if g[0] > 0]
    tile_rows = sum(-(-M // bm) for M, _, _ in live)
    tiles = sum(-(-M // bm) * -(-N // bn) for M, N, _ in live)
    per_call = [-(-M // bm) * -(-N // bn) for M, N, _ in live]
    return {"case": case, "groups": len(groups), "empty": len(groups) - len(live), "tokens": sum(g[0] for g in groups),
            "largest": max(g[0] for g in groups), "tile_rows": tile_rows,
            "useful": sum(g[0] for g in live) / (tile_rows * bm), "tiles": tiles, "waves": tiles / sm_count,
            "rounds": -(-tiles // sm_count), "k_tiles": max(-(-K // BK) for _, _, K in live), "calls": len(live),
            "calls_under_a_wave": sum(1 for t in per_call if t < sm_count), "median_call_tiles":
            statistics.median(per_call), "flops": sum(2 * M * N * K for M, N, K in live)}


def grouped_shapes(sm_count: int, rate: TileRate | None) -> str:
    """Every case's tiles and padding, and the TFLOP/s rung 06's per-tile rate predicts for the grouped kernel
    (rounds x k-steps x the time of one k-step: padding and the last round's idle SMs included)."""
    lines = [f"{'case':8s} {'groups':>6s} {'empty':>6s} {'tokens':>7s} {'largest':>8s} {'tile rows':>10s} "
             f"{'useful':>7s} {'tiles':>6s} {'waves':>6s} {'calls':>6s} {'calls < 1 wave':>15s} {'predicted':>10s}"]
    for case in GROUPED_CASES:
        g = grouped_shape(case, sm_count)
        pred = ""
        if rate is not None:
            us = g["rounds"] * g["k_tiles"] * rate.kstep_us(128, 256)
            pred = f"{g['flops'] / (us * 1e6):.0f}"
        lines.append(f"{case:8s} {g['groups']:6d} {g['empty']:6d} {g['tokens']:7d} {g['largest']:8d} "
                     f"{g['tile_rows']:10d} {g['useful']:7.2f} {g['tiles']:6d} {g['waves']:6.1f} {g['calls']:6d} "
                     f"{g['calls_under_a_wave']:15d} {pred:>10s}")
    lines.append("('useful': tokens over the rows the tiles compute; 'calls < 1 wave': calls of the loop with fewer "
                 f"128 x 256 tiles than {sm_count} SMs; 'predicted': TFLOP/s"
                 + (" from rung 06's rate)" if rate else ", unknown without the gemm_tc records)"))
    return "\n".join(lines)


def _grouped_rows(rs: RecordSet) -> list[dict]:
    rows = []
    heads = [r for r in rs.records if r.kind == "headline"]
    for params in problems_of(heads):
        mine = {r.rung: r for r in heads if r.params == params}
        rung, loop, batched = mine.get(GROUPED_RUNG), mine.get(LOOP), mine.get(BATCHED)
        if rung is None:
            continue
        rows.append({"params": params, "rung": rung, "loop": loop, "batched": batched,
                     "x_loop": loop.median_ms / rung.median_ms if loop else None,
                     "x_batched_time": rung.median_ms / batched.median_ms if batched else None})
    return rows


def grouped_table(rs: RecordSet | None, name: str = GROUPED_FAMILY) -> str:
    """Per headline case and type: the grouped kernel's, the loop's and (uniform) cuBLAS batched's TFLOP/s, the
    speed-up over the loop and the time against the batched call."""
    if rs is None:
        return missing(name)
    rows = _grouped_rows(rs)
    lines = [source(rs, name), f"  {'case':8s} {'dtype':9s} {'groups':>6s} {'grouped':>8s} {'loop':>7s} "
             f"{'batched':>8s} {'x loop':>7s} {'time / batched':>15s}"]
    for r in rows:
        p = r["params"]
        b, xb = r["batched"], r["x_batched_time"]
        lines.append(f"  {p.get('case', '?'):8s} {p.get('dtype', ''):9s} {r['rung'].extra.get('groups', ''):>6} "
                     f"{r['rung'].value:8.0f} {dash_or(r['loop'] and r['loop'].value, '7.0f')} "
                     f"{dash_or(b and b.value, '8.0f')} {dash_or(r['x_loop'], '7.2f')} "
                     f"{dash_or(xb, '15.3f')}")
    lines.append("(TFLOP/s of the useful FLOPs, sum of 2 M_g N_g K_g; cold L2)")
    return "\n".join(lines)


def grouped_targets(rs: RecordSet | None, name: str = GROUPED_FAMILY) -> str:
    """The lesson's grouped targets: the speed-up over the loop on the case of many small problems (TARGETS
    ['grouped_small_case'], when it has at least TARGETS['grouped_min_groups'] groups), and the time against cuBLAS
    batched wherever it was timed (the uniform case)."""
    if rs is None:
        return missing(name)
    lines = []
    for r in _grouped_rows(rs):
        p = r["params"]
        groups = int(r["rung"].extra.get("groups") or 0)
        label = f"{p.get('case', '?')} {p.get('dtype', '')}"
        if (r["x_loop"] is not None and p.get("case") == TARGETS["grouped_small_case"]
                and groups >= TARGETS["grouped_min_groups"]):
            lines.append(f"{label}: {r['x_loop']:.2f}x the loop's speed ({groups} groups), "
                         f"{meets(r['x_loop'], TARGETS['grouped_x_loop'])}")
        if r["x_batched_time"] is not None:
            lines.append(f"{label}: {r['x_batched_time']:.3f}x cuBLAS batched's time, "
                         f"{meets(r['x_batched_time'], TARGETS['grouped_batched_time'], at_most=True)}")
    return "\n".join(lines) or f"(no headline case in {name} that a target speaks of)"


def table_cost_table(payload: dict | None, rs: RecordSet | None, name: str = TABLE_COST) -> str:
    """The host cost of the table per case beside the grouped kernel's own time on the same case (fp16, when the
    grouped records were made on the same device): what re-routing every step costs if the maps are rebuilt on the
    host."""
    if payload is None:
        return missing(name)
    kernel_ms = {}
    if rs is not None and rs.provenance.get("device") == provenance_of(payload).get("device"):
        kernel_ms = {r["params"].get("case"): r["rung"].median_ms for r in _grouped_rows(rs)
                     if r["params"].get("dtype") == "float16"}
    lines = [source(payload, name), f"  {'case':8s} {'groups':>6s} {'maps':>5s} {'table':>9s} {'host ms':>8s} "
             f"{'us / map':>9s} {'kernel ms':>10s} {'host / kernel':>14s}"]
    for row in payload.get("rows", []):
        k = kernel_ms.get(row["case"])
        lines.append(f"  {row['case']:8s} {row['groups']:6d} {row['maps']:5d} {format_bytes(row['table_bytes']):>9s} "
                     f"{row['median_ms']:8.2f} {row['per_map_us']:9.1f} {dash_or(k, '10.3f')} "
                     f"{dash_or(k and row['median_ms'] / k, '14.1f')}")
    return "\n".join(lines)


def grouped_reading(rs: RecordSet | None, rate: TileRate | None, sm_count: int, name: str = GROUPED_FAMILY) -> str:
    """Per case: the grouped kernel's TFLOP/s against what rung 06's rate predicts for its tiles and rounds, and
    its speed over the loop."""
    if rs is None:
        return missing(name)
    lines = []
    for r in _grouped_rows(rs):
        p = r["params"]
        case = p.get("case")
        line = f"{case} {p.get('dtype', '')}: {r['rung'].value:.0f} TFLOP/s"
        if case in GROUPED_CASES and rate is not None:
            g = grouped_shape(case, sm_count)
            predicted = g["flops"] / (g["rounds"] * g["k_tiles"] * rate.kstep_us(128, 256) * 1e6)
            line += f", {r['rung'].value / predicted:.2f} of the {predicted:.0f} predicted"
        if r["x_loop"] is not None:
            line += f"; {r['x_loop']:.1f}x the loop"
        if r["x_batched_time"] is not None:
            line += f"; {r['x_batched_time']:.2f}x cuBLAS batched's time"
        lines.append(line)
    return "\n".join(lines) or f"(no headline records of {GROUPED_RUNG} in {name})"


def replayed_grouped_timing(rs: RecordSet | None, case: str = "small", dtype: str = "float16",
                            name: str = GROUPED_FAMILY) -> str:
    """The records' one case: the grouped kernel against the loop of cuBLAS calls (the family's baseline)."""
    if rs is None:
        return missing(name)
    row = next((r for r in _grouped_rows(rs) if r["params"].get("case") == case
                and r["params"].get("dtype") == dtype and r["loop"] is not None), None)
    if row is None:
        return f"(no headline record of {GROUPED_RUNG} and {LOOP} on the {case} case, {dtype}, in {name})"
    ours, loop = row["rung"], row["loop"]
    return (f"{source(rs, name)}\n{case}, {dtype}, cold L2: {GROUPED_RUNG} {ours.median_ms * 1e3:.0f} us = "
            f"{ours.value:.0f} TFLOP/s; the loop of cuBLAS calls {loop.median_ms * 1e3:.0f} us = {loop.value:.0f} "
            f"TFLOP/s; the loop's time / the kernel's = {row['x_loop']:.2f}")
