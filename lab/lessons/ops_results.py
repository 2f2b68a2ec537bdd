"""Notebook 08's results on the trace (lab.lessons.ops): each method's total GPU time, the targets, the GEMMs' share,
the speedups per step, the hot shape's choice forced everywhere, and the host's cost per call (dispatch overhead)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from lab.lessons.common import Markdown, md
from lab.lessons.ops_records import (
    GEMMS_ONLY,
    METHODS,
    OVERHEAD,
    TARGETS,
    TRACE,
    as_x,
    md_table,
    meets,
    missing,
    share_of,
    us_text,
)
from lab.lessons.ops_trace import per_step

if TYPE_CHECKING:
    from lab.lessons.ops_trace import Trace

# The two "one generic kernel" baselines of the trace (lab.studies.serving_trace's methods).
ONE_KERNEL = {"generic": "gemm_tc rung 03 (cp.async + mma.sync, sm_80 on) for every GEMM, epilogue after: lab.ops's "
                         "own generic fallback path",
              "persistent": "gemm_tc rung 06 (TMA + wgmma, persistent, 128 x 256 tiles) for every GEMM, epilogue "
                            "fused: one tuned kernel everywhere"}


# ----------------------------------------------------------------------------------------------
# 7. The trace's result
# ----------------------------------------------------------------------------------------------

def _methods(record: dict) -> list[str]:
    totals = record.get("totals_us") or {}
    return [m for m in METHODS if m in totals] + [m for m in totals if m not in METHODS]


def totals_table(record: dict | None) -> Markdown:
    """Each method's total GPU time over the trace (one layer per step), per step kind, and against lab.ops."""
    if record is None:
        return md(missing(TRACE))
    totals, ratios, what = record.get("totals_us") or {}, record.get("time_over_lab_ops") or {}, \
        record.get("methods") or {}
    rows = [[f"`{m}`", what.get(m, ""), us_text(totals[m].get("total_us")), us_text(totals[m].get("decode_us")),
             us_text(totals[m].get("prefill_us")), as_x(ratios.get(m))] for m in _methods(record)]
    checks = record.get("checks") or []
    failed = record.get("checks_failed", sum(1 for c in checks if c.get("bad")))
    head = ["method", "what", "total us", "decode steps us", "prefill steps us", "time / lab_ops"]
    return md(f"Checked first: {len(checks)} distinct GEMMs of the trace through lab.ops against float64, "
              f"{failed} with elements outside the bound.\n\n" + md_table(head, rows))


def trace_targets(record: dict | None) -> str:
    """The trace's targets, from the record: lab.ops at least TARGETS['x_generic'] less total time than one
    generic kernel (both readings of 'one generic kernel') and TARGETS['x_cublas'] less than cuBLAS alone."""
    if record is None:
        return missing(TRACE)
    ratios = record.get("time_over_lab_ops") or {}
    lines = []
    for method, what in ONE_KERNEL.items():
        ratio = ratios.get(method)
        lines.append(f"{method} / lab_ops = {as_x(ratio)} -> {meets(ratio, TARGETS['x_generic'])}   ({what})")
    ratio = ratios.get("cublas")
    lines.append(f"cublas / lab_ops = {as_x(ratio)} -> {meets(ratio, TARGETS['x_cublas'])}   (cuBLAS for every GEMM, "
                 "one CuPy elementwise kernel per epilogue)")
    if "lab_ops_table" in ratios:
        lines.append(f"lab_ops_table / lab_ops = {as_x(ratios['lab_ops_table'])}: what the tune cache adds over the "
                     "dispatch table alone")
    return "\n".join(lines)


def gemm_share(gemms: dict | None, record: dict | None) -> str:
    """The GEMMs' part of the whole-layer ratio to cuBLAS: the trace's GEMMs alone (with their epilogues, without
    the RMSNorms), lab.ops against cuBLAS, from ops_trace_gemms.json."""
    if gemms is None:
        return missing(GEMMS_ONLY)
    t = gemms.get("totals_us") or {}
    lab, cub = (t.get(m, {}).get("total_us") for m in ("lab_ops", "cublas"))
    if not lab or not cub:
        return f"{GEMMS_ONLY}: no lab_ops and cublas totals in the record"
    line = (f"the GEMMs alone (epilogues included, RMSNorms left out): cuBLAS {us_text(cub)} us, "
            f"lab.ops {us_text(lab)} us, "
            f"cublas / lab_ops = {as_x(cub / lab)} ({meets(cub / lab, TARGETS['x_cublas'])} on the GEMMs alone)")
    whole = ((record or {}).get("totals_us") or {})
    if whole.get("lab_ops") and whole.get("cublas"):
        norms_lab = whole["lab_ops"]["total_us"] - lab
        norms_cub = whole["cublas"]["total_us"] - cub
        line += (f"\nthe rest of each layer, the two RMSNorms (the whole-layer record minus this one, two runs): "
                 f"CuPy's composition {us_text(norms_cub)} us against lab.ops's kernel {us_text(norms_lab)} us: "
                 f"{share_of(norms_cub - norms_lab, whole['cublas']['total_us'] - whole['lab_ops']['total_us']):.0%} "
                 "of the whole-layer saving")
    return line


def speedup_rows(record: dict | None) -> list[dict] | None:
    """Per distinct step: lab.ops's speedup over cuBLAS, rung 03 (generic) and rung 06 (persistent)."""
    if record is None:
        return None
    out = []
    for r in record.get("per_step_us", []):
        base = r.get("lab_ops")
        if not base:
            continue
        out.append({"kind": r["kind"], "M": r["M"], "lab_ops_us": base,
                    **{f"over_{m}": r[m] / base for m in ("cublas", "generic", "persistent") if r.get(m)}})
    return sorted(out, key=lambda r: (r["M"], r["kind"]))


def speedup_reading(record: dict | None) -> str:
    """Per step kind: the range of lab.ops's speedups over cuBLAS and the generic kernel, and the steps it loses."""
    rows = speedup_rows(record)
    if rows is None:
        return missing(TRACE)
    lines = []
    for kind in ("decode", "prefill"):
        mine = [r for r in rows if r["kind"] == kind]
        for base in ("cublas", "generic"):
            vals = [(r[f"over_{base}"], r["M"]) for r in mine if f"over_{base}" in r]
            if not vals:
                continue
            lost = sorted(m for v, m in vals if v < 1.0)
            lines.append(f"{kind:7s} over {base:8s}: {min(vals)[0]:.2f}x (M={min(vals)[1]}) to {max(vals)[0]:.2f}x "
                         f"(M={max(vals)[1]}); slower than {base} at {len(lost)} of {len(vals)} step sizes"
                         + (f" (M = {', '.join(map(str, lost[:12]))}{' ...' if len(lost) > 12 else ''})" if lost
                            else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# 8. Hot versus cold
# ----------------------------------------------------------------------------------------------

def hot_cold(record: dict | None, trace: Trace) -> dict | None:
    """The hot shape's choice forced everywhere against lab.ops: per step kind (the record's totals) and split into
    the hot steps (M = the record's hot M) and the cold ones (every other step), from the per-step times."""
    if record is None or "hot_forced" not in (record.get("totals_us") or {}):
        return None
    totals, hot_m, per = record["totals_us"], record.get("hot_M"), per_step(record)
    groups = {"hot": Counter(), "cold": Counter()}
    steps = Counter()
    for (kind, m), n in trace.counts().items():
        times = per.get((kind, m))
        if times is None or times.get("hot_forced") is None:
            continue
        g = "hot" if m == hot_m else "cold"
        steps[g] += n
        for method in ("lab_ops", "hot_forced", "cublas"):
            groups[g][method] += n * times.get(method, float("nan"))
    kinds = {k: {m: totals[m].get(f"{k}_us") for m in ("lab_ops", "hot_forced")} for k in ("decode", "prefill")}
    return {"hot_M": hot_m, "choice": hot_choice(record), "kinds": kinds,
            "groups": {g: dict(v) for g, v in groups.items()}, "steps": dict(steps)}


def hot_choice(record: dict) -> str:
    """The path (and configuration) the study forced everywhere, from its description of the hot_forced method
    ("the hot shape's choice everywhere: decode {}")."""
    choice = record.get("hot_choice")
    if choice:
        config = " ".join(f"{k}={v}" for k, v in (choice.get("config") or {}).items())
        return f"{choice['path']} {config}".strip()
    text = (record.get("methods") or {}).get("hot_forced", "?")
    return text.split(": ", 1)[-1].removesuffix(" {}").strip() or "?"


def hot_cold_table(record: dict | None, trace: Trace) -> Markdown:
    hc = hot_cold(record, trace)
    if hc is None:
        return md(missing(TRACE) if record is None else f"(no hot_forced method in {TRACE})")
    rows = []
    for k, t in hc["kinds"].items():
        if t["lab_ops"]:
            rows.append([f"{k} steps", us_text(t["lab_ops"]), us_text(t["hot_forced"]),
                         as_x(t["hot_forced"] / t["lab_ops"])])
    for g in ("hot", "cold"):
        t = hc["groups"][g]
        if t.get("lab_ops"):
            what = f"M = {hc['hot_M']}" if g == "hot" else f"M != {hc['hot_M']}"
            rows.append([f"{g} steps ({what}, {hc['steps'][g]} steps)", us_text(t["lab_ops"]), us_text(t["hot_forced"]),
                         as_x(t["hot_forced"] / t["lab_ops"])])
    return md(f"The hot shape: M = {hc['hot_M']}, the most common step; its choice: {hc['choice']} (cuBLAS where "
              "that path cannot serve a shape).\n\n" + md_table(["steps", "lab_ops us", "hot_forced us",
                                                               "hot_forced / lab_ops"], rows))


# ----------------------------------------------------------------------------------------------
# 9. Dispatch overhead
# ----------------------------------------------------------------------------------------------

OVERHEAD_COLUMNS = ("raw_replay", "lab_ops", "lab_ops_alloc", "cupy_matmul")


def overhead_rows(record: dict | None) -> list[dict] | None:
    if record is None:
        return None
    rows = []
    for path, r in (record.get("paths") or {}).items():
        rows.append({"path": path, "shape": r.get("shape", {}), "launches": r.get("launches_per_call"),
                     "overhead_us": r.get("overhead_us"),
                     **{c: r[c]["median"] for c in OVERHEAD_COLUMNS if isinstance(r.get(c), dict)},
                     "spread": {c: (r[c]["min"], r[c]["max"]) for c in OVERHEAD_COLUMNS if isinstance(r.get(c), dict)}})
    return rows


def overhead_table(record: dict | None) -> Markdown:
    """Host microseconds per call, per path: the same launches replayed raw, lab.ops (output given and allocated),
    cupy.matmul; lab.ops's overhead over the raw replay against the target."""
    rows = overhead_rows(record)
    if rows is None:
        return md(missing(OVERHEAD))
    table = []
    for r in rows:
        s = r["shape"]
        cells = [f"{r[c]:.2f} ({r['spread'][c][0]:.2f}-{r['spread'][c][1]:.2f})" if c in r else "-"
                 for c in OVERHEAD_COLUMNS]
        table.append([r["path"], f"{s.get('M')}×{s.get('N')}×{s.get('K')}", r["launches"], *cells,
                      f"{r['overhead_us']:.2f}", meets(r["overhead_us"], TARGETS["overhead_us"], True, " us")])
    head = ["path", "M×N×K", "launches per call", *(f"{c} us (min-max)" for c in OVERHEAD_COLUMNS),
            "overhead us (lab_ops - raw_replay)", "target"]
    return md(f"Medians of {record.get('trials', '?')} trials of {record.get('calls_per_trial', '?')} calls each, "
              "host time per call (the GPU work is tiny, so the host is the bottleneck).\n\n" + md_table(head, table))
