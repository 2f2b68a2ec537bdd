"""Notebook 08's decode boundary (lab.lessons.ops): the boundary sweep forces each path on one GEMM as M grows; this
says, from that record, the first M where another path beats the decode GEMV, every M where decode wins again after
that, and how the dispatch table's decode rule compares."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lab.lessons.ops_records import TRACE, missing

if TYPE_CHECKING:
    from lab.ops.rules import Table


def boundary(record: dict | None) -> dict | None:
    """The trace record's boundary sweep ({} when the record has none), None without the record."""
    return None if record is None else (record.get("boundary") or {})


def decode_rule_max_m(table: Table | None = None) -> int | None:
    """The largest M the dispatch table sends to the decode GEMV (its first decode rule's max_m)."""
    from lab.ops import rules

    limits = [dict(r.when).get("max_m") for r in (table or rules.DEFAULT).rules if r.path == "decode"]
    return limits[0] if limits else None


def decode_wins(record: dict | None) -> list[tuple[int, bool, float]]:
    """Per M of the boundary sweep where decode and another path both ran: (M, decode is the fastest, the best other
    path's time over decode's)."""
    return [(m, ok, ratio) for m, ok, ratio, _ in sweep_points(record)]


def sweep_points(record: dict | None) -> list[tuple[int, bool, float, str]]:
    """decode_wins with the fastest other path named: (M, decode is the fastest, the best other path's time over
    decode's, that path)."""
    b = (record or {}).get("boundary") or {}
    ms, us = b.get("M") or [], b.get("us") or {}
    decode = us.get("decode") or []
    out = []
    for i, m in enumerate(ms):
        rivals = {p: v[i] for p, v in us.items() if p != "decode" and i < len(v) and v[i] is not None}
        d = decode[i] if i < len(decode) else None
        if d is not None and rivals:
            best = min(rivals, key=rivals.get)
            out.append((m, d < rivals[best], rivals[best] / d, best))
    return out


def decode_runs(record: dict | None) -> dict:
    """The sweep read in order of M: 'pays_up_to', the last M of the run of Ms, from the smallest, at which decode is
    the fastest path (None when it loses already at the smallest); 'first_loss', the first M at which another path
    is faster (None when decode wins everywhere) and 'first_loss_by', that path; 'wins_again', every M after the
    first loss at which decode is the fastest again, and 'loses_again_from', the first M after the last of those at
    which it is not; 'largest', the sweep's largest M."""
    points = sweep_points(record)
    first = next((i for i, (_, ok, _, _) in enumerate(points) if not ok), None)
    run = points if first is None else points[:first]
    again = [] if first is None else [(m, r) for m, ok, r, _ in points[first + 1:] if ok]
    after_again = [m for m, ok, _, _ in points if again and m > again[-1][0] and not ok]
    return {"pays_up_to": run[-1][0] if run else None,
            "first_loss": None if first is None else points[first][0],
            "first_loss_by": None if first is None else points[first][3],
            "wins_again": again, "loses_again_from": after_again[0] if after_again else None,
            "largest": points[-1][0] if points else None}


def decode_limit(record: dict | None) -> tuple[int | None, int | None]:
    """(the last M of the first run at which decode is the fastest path, the first M at which another path is)."""
    runs = decode_runs(record)
    return runs["pays_up_to"], runs["first_loss"]


def _again(runs: dict) -> str:
    """'decode is the fastest again at M = 24 (1.04x)', or '' where it never is after its first loss."""
    if not runs["wins_again"]:
        return ""
    return "decode is the fastest again at " + ", ".join(f"M = {m} ({r:.2f}x)" for m, r in runs["wins_again"])


def boundary_against_table(record: dict | None) -> str:
    """The sweep's decode limit against the dispatch table's, in one sentence."""
    runs = decode_runs(record)
    last, after = runs["pays_up_to"], runs["first_loss"]
    table = decode_rule_max_m()
    if table is None:
        return "the table has no decode rule"
    if last is None and not runs["wins_again"]:
        return "decode wins at no M of the sweep"
    if after is not None and table >= after:
        return (f"the table sends M up to {table} to decode, past M = {after} where the sweep has another path "
                "faster on this GEMM: its boundary is worth re-measuring")
    if last is not None and table < last:
        return (f"the table stops decode at M = {table}, while the sweep has it fastest up to M = {last} on this GEMM")
    again = _again(runs)
    return (f"the table's decode limit (M <= {table}) agrees with the sweep's first crossover on this GEMM"
            + (f"; past it, {again}, an isolated win the table leaves to the other paths" if again else ""))


def boundary_reading(record: dict | None) -> str:
    """Where the decode GEMV stops paying on the boundary sweep: the last M of its first winning run, the first M
    at which another path is faster (and which), and every M after that at which decode wins again; beside the
    dispatch table's decode rule."""
    if record is None:
        return missing(TRACE)
    b = record.get("boundary")
    if not b:
        return f"(no boundary sweep in {TRACE})"
    lines = [f"{b.get('gemm', '?')} GEMM, N={b.get('N')} K={b.get('K')}: the best other path's time (rung 06, split-K, "
             "cuBLAS) over decode's, per M (above 1: decode is faster):",
             "  " + ", ".join(f"M={m}: {r:.3f}x" for m, _, r in decode_wins(record))]
    runs = decode_runs(record)
    last, after = runs["pays_up_to"], runs["first_loss"]
    if last is None and not runs["wins_again"]:
        lines.append("decode beats every other path at no M of the sweep")
    elif after is None:
        lines.append(f"decode pays up to M = {last}; it still wins at the sweep's largest M")
    else:
        head = (f"decode pays up to M = {last}; " if last is not None else
                "decode is not the fastest at the sweep's smallest M; ")
        lines.append(head + f"from M = {after} another path is faster ({runs['first_loss_by']} at M = {after})")
        again = _again(runs)
        lines.append((again + (f"; from M = {runs['loses_again_from']} another path is faster again"
                               if runs["loses_again_from"] else ", up to the sweep's largest M"))
                     if again else f"decode is not the fastest again at any M up to {runs['largest']}")
    if decode_rule_max_m() is not None:
        lines.append(f"the dispatch table sends M <= {decode_rule_max_m()} to decode (rules.DEFAULT): "
                     + boundary_against_table(record))
    return "\n".join(lines)
