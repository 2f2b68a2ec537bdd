"""The Hopper GEMM techniques one at a time, from the interleaved study's record (lab.studies.hopper_gemm_study ->
results/h200/hopper_gemm_study.json): each rung's same-round ratio to the library and to the rung before it, beside
the range its header predicted, and the fit of time against K that splits a launch into a fixed part and a part per
k-tile. Everything here is read from the record; a record that lacks a rung or a shape says so."""

from __future__ import annotations

import json
import statistics

from lab.lessons.predictions import claims, prediction

STUDY = "hopper_gemm_study.json"
LIBRARY = ("torch_mm", "cublaslt")
# Each technique against the rung it adds to (the ladder's order; rung 09 adds clusters to rung 06).
BEFORE = {"09_cluster_multicast": "06_persistent", "10_tma_store": "09_cluster_multicast",
          "11_pingpong": "10_tma_store"}


def load(filename: str = STUDY) -> dict | None:
    """The study's record from results/h200, or None when there is none (or it cannot be read)."""
    from lab.measure import records

    try:
        payload = json.loads((records.reference_dir() / filename).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) and (payload.get("rows") or payload.get("summary")) else None


def replayed_from(payload: dict, filename: str = STUDY) -> str:
    p = payload.get("provenance", {})
    rebuilt = "; rebuilt from the run's console log, figures as printed" if payload.get("rebuilt_from") else ""
    return (f"REPLAYED from results/h200/{filename}: measured on {p.get('device', '?')} at commit "
            f"{str(p.get('commit', '?'))[:7]}, {str(p.get('date', '?'))[:10]}; {payload.get('rounds', '?')} "
            f"interleaved rounds, cold L2{rebuilt}")


def has_rounds(payload: dict) -> bool:
    """Whether the record keeps its per-round rows (a record rebuilt from a console log has its summary only)."""
    return bool(payload.get("rows"))


def shapes_in(payload: dict) -> list[dict]:
    rows = payload["rows"] if has_rounds(payload) else payload.get("summary", [])
    return list({_shape_key(r["shape"]): r["shape"] for r in rows}.values())


def _shape_key(shape: dict) -> tuple:
    return tuple(sorted(shape.items()))


def shape_label(shape: dict) -> str:
    m, n, k = shape["M"], shape["N"], shape["K"]
    size = f"{m}^3" if m == n == k else f"{m}x{n}x{k}"
    return f"{size} {'fp16' if shape['dtype'] == 'float16' else 'bf16'} {shape['layout']}"


def rungs_in(payload: dict) -> list[str]:
    rows = payload["rows"] if has_rounds(payload) else payload.get("summary", [])
    return list(dict.fromkeys(r["method"] for r in rows if r["method"][:2].isdigit()))


def same_round_ratio(payload: dict, shape: dict, method: str, against: tuple[str, ...]) -> tuple[float, float] | None:
    """(median, lowest) over rounds of the time of the fastest of `against` over `method`'s, in the same round. A
    record without rounds gives its summary's ratio to the library, or against a rung the ratio of the median
    rates (the same for both ends)."""
    key = _shape_key(shape)
    if not has_rounds(payload):
        mine = {r["method"]: r for r in payload.get("summary", []) if _shape_key(r["shape"]) == key}
        if method not in mine:
            return None
        if tuple(against) == LIBRARY:
            x = mine[method].get("x_library")
            return (x, mine[method].get("x_library_min") or x) if x else None
        rates = [mine[m]["TFLOP/s"] for m in against if m in mine]
        return (mine[method]["TFLOP/s"] / max(rates),) * 2 if rates else None
    rows = [r for r in payload["rows"] if _shape_key(r["shape"]) == key]
    by = {(r["method"], r["round"]): r["median_ms"] for r in rows}
    ratios = []
    for rnd in sorted({r["round"] for r in rows if r["method"] == method}):
        others = [by[(m, rnd)] for m in against if (m, rnd) in by]
        if others:
            ratios.append(min(others) / by[(method, rnd)])
    return (statistics.median(ratios), min(ratios)) if ratios else None


def technique_table(payload: dict | None, family=None, shape: dict | None = None) -> str:
    """At one shape (the study's first, 4096^3 fp16 TN): each rung's TFLOP/s, its same-round ratio to the library
    and to the rung it adds to, and its header's predicted range for that ratio with the verdict."""
    if payload is None:
        return (f"(no study record at results/h200/{STUDY}: `python -m lab.studies.hopper_gemm_study results/h200` "
                "on an H200)")
    shape = shape or shapes_in(payload)[0]
    rates = {r["method"]: r["TFLOP/s"] for r in payload.get("summary", [])
             if _shape_key(r["shape"]) == _shape_key(shape)}
    before_how = "same rounds" if has_rounds(payload) else "ratio of the medians"
    lines = [f"{shape_label(shape)} ({replayed_from(payload)}):",
             f"  {'rung':<22}{'TFLOP/s':>9}{'x library (lowest)':>21}   against the rung before ({before_how}): "
             "measured, predicted"]
    for rung in rungs_in(payload):
        if rung not in rates:
            lines.append(f"  {rung:<22} not timed at this shape (see the record's failed list)")
            continue
        lib = same_round_ratio(payload, shape, rung, LIBRARY)
        lib_text = f"{lib[0]:.3f}x ({lib[1]:.3f}x)" if lib else "-"
        before = BEFORE.get(rung)
        step = ""
        if before and before in rates:
            ratio = same_round_ratio(payload, shape, rung, (before,))
            wanted = [c for c in claims(prediction(family, rung)) if c.against == before[:2]] if family else []
            verdict = ""
            if ratio and wanted:
                c = wanted[0]
                verdict = (", inside" if c.lo <= ratio[0] <= c.hi else ", BELOW" if ratio[0] < c.lo else ", ABOVE")
                verdict = f"; predicted {c.lo:.2f}-{c.hi:.2f}x{verdict}"
            step = f"{ratio[0]:.3f}x rung {before[:2]}{verdict}" if ratio else ""
        lines.append(f"  {rung:<22}{rates[rung]:>9.0f}{lib_text:>21}   {step}")
    return "\n".join(lines)


def fixed_cost_table(payload: dict | None) -> str:
    """The fit of time against K at M = N = 4096 (fp16 TN): each rung's fixed microseconds and microseconds per
    k-tile of 64, and what the fit puts at K = 4096."""
    if payload is None or not payload.get("fixed_cost"):
        return "(the study's record holds no fit of time against K)"
    ks = ", ".join(map(str, payload["fixed_cost"][0]["K"]))
    lines = [f"time = fixed + per k-tile x K / 64, least squares over K = {ks} at M = N = 4096, fp16 TN "
             f"({replayed_from(payload)}):"]
    for f in payload["fixed_cost"]:
        lines.append(f"  {f['rung']:<22} {f['fixed_us']:6.1f} us fixed + {f['us_per_k_tile']:.3f} us per k-tile "
                     f"(K = 4096: {f['fixed_us'] + 64 * f['us_per_k_tile']:.0f} us)")
    return "\n".join(lines)


def ratio_rows(payload: dict) -> tuple[list[dict], list[str], dict]:
    """(shapes in the study's order, rungs, {(shape label, rung): (median, lowest) same-round ratio to the library})."""
    shapes = shapes_in(payload)
    rungs = rungs_in(payload)
    ratios = {}
    for shape in shapes:
        for rung in rungs:
            value = same_round_ratio(payload, shape, rung, LIBRARY)
            if value:
                ratios[(shape_label(shape), rung)] = value
    return shapes, rungs, ratios


def technique_figure(payload: dict | None):
    """Bars: each rung's median same-round ratio to the library per shape (a tick down to its lowest round), the
    library at 1.0. None when there is no record."""
    import matplotlib.pyplot as plt

    from lab.lessons.plots.style import figure_title, legend_outside, series_style

    if payload is None:
        return None
    shapes, rungs, ratios = ratio_rows(payload)
    fig, ax = plt.subplots(figsize=(11, 3.8))
    width = 0.8 / max(1, len(rungs))
    for i, rung in enumerate(rungs):
        xs = [j + (i - (len(rungs) - 1) / 2) * width for j in range(len(shapes))]
        got = [ratios.get((shape_label(s), rung)) for s in shapes]
        ax.bar([x for x, g in zip(xs, got, strict=True) if g], [g[0] for g in got if g], width,
               color=series_style(rung)["color"], label=rung)
        ax.vlines([x for x, g in zip(xs, got, strict=True) if g], [g[1] for g in got if g],
                  [g[0] for g in got if g], color="black", lw=0.8)
    ax.axhline(1.0, **series_style("cublas_sgemm") | {"lw": 1.2}, label="library (faster of torch.mm, cuBLASLt)")
    ax.set_xticks(range(len(shapes)), [shape_label(s) for s in shapes], rotation=30, ha="right", fontsize=8)
    low = min((v[1] for v in ratios.values()), default=0.5)
    ax.set_ylim(max(0.0, low - 0.1), 1.15)
    ax.set_ylabel("x the library's speed")
    ax.set_title(figure_title("gemm_tc", "each Hopper technique against the library, same rounds",
                              source=replayed_from(payload)), fontsize=9)
    legend_outside(ax)
    return fig


def wave_lines(payload: dict | None, family, rung: str = "10_tma_store") -> str:
    """Per study shape: how many of `rung`'s block tiles it makes, and how many waves of them the record's GPU runs
    (tiles / SMs, one block per SM): a shape a little past a whole number of waves leaves its last wave mostly empty."""
    from lab.families.gemm_tc import block_tile

    if payload is None:
        return "(no study record: no shapes to count)"
    sms = payload.get("provenance", {}).get("sm_count")
    if not sms:
        return "(the study's record does not say how many SMs its GPU has)"
    bm, bn = block_tile(family.rung(rung))
    lines = [f"{rung}'s tiles of {bm} x {bn} on the {sms} SMs of the record's GPU:"]
    for shape in shapes_in(payload):
        tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
        lines.append(f"  {shape_label(shape):<26} {tiles:5d} tiles = {tiles / sms:5.2f} waves")
    return "\n".join(lines)
