"""Rung 10's tile per shape, from the tile study's record (lab.studies.hopper_tile_study ->
results/h200/hopper_tile_study.json): what the wave model (lab.families.gemm_tc_tiles) picked for each shape and
predicted, beside what each build measured against the default build and the library in the same rounds. Everything
here is read from the record; a record that lacks a shape or a build says so."""

from __future__ import annotations

from lab.lessons.hopper_techniques import load as load_record
from lab.lessons.hopper_techniques import replayed_from, shape_label

STUDY = "hopper_tile_study.json"


def load() -> dict | None:
    return load_record(STUDY)


def slots(payload: dict | None, family) -> int | None:
    """The clusters that fit at once: the record's, else the current GPU's (the driver's, gemm_tc.cluster_slots);
    None with neither (no record, no GPU)."""
    if payload and payload.get("cluster_slots"):
        return int(payload["cluster_slots"])
    from lab.families.gemm_tc import cluster_slots

    try:
        return cluster_slots(family.variant(family.rung("10_tma_store"), family.make_problem(M=256, N=256, K=64)))
    except Exception:  # no GPU here (CuPy cannot make the problem's arrays): nothing to count against
        return None


def shapes(payload: dict | None) -> list[dict]:
    """The record's shapes in its order, else the study's own list."""
    if payload and payload.get("model"):
        return [m["shape"] for m in payload["model"]]
    from lab.studies.hopper_gemm_study import SHAPES

    return list(SHAPES)


def _summary(payload: dict) -> dict:
    return {(tuple(sorted(s["shape"].items())), s["method"]): s for s in payload.get("summary", [])}


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def tile_table(payload: dict | None) -> str:
    """Per shape: the model's pick and predicted speedup over the 128 x 256 build, that build's measured speedup
    and ratio to the library (same rounds), the default build's ratio to the library, and the fastest build."""
    from lab.studies.hopper_tile_study import build_name

    if payload is None:
        return "(no tile study record: run python -m lab.studies.hopper_tile_study on an H100 or H200)"
    summary = _summary(payload)
    head = (f"{'shape':<26} {'picks':>6} {'predicted':>9} {'measured':>9} {'x library':>10} "
            f"{'BN=256 x lib':>12} {'fastest':>8}")
    lines = [replayed_from(payload, STUDY), "speedups over the BN = 256 build; ratios to the faster of torch.mm and "
             "cuBLASLt, each the median of same-round ratios", head]
    for v in payload.get("verdicts", []):
        default = summary.get((tuple(sorted(v["shape"].items())), build_name(256)), {})
        lines.append(f"{shape_label(v['shape']):<26} {'BN=' + str(v['chosen_bn']):>6} "
                     f"{_ratio(v['predicted_x_10']):>9} {_ratio(v['chosen_x_10']):>9} "
                     f"{_ratio(v['chosen_x_library']):>10} {_ratio(default.get('x_library')):>12} "
                     f"{'BN=' + str(v['best_bn']):>8}")
    if not payload.get("verdicts"):
        lines.append("(the record has no shape where every build was timed)")
    for f in payload.get("failed", []):
        lines.append(f"not timed: {f['method']} on {shape_label(f['shape'])} (its check failed)")
    return "\n".join(lines)


def tile_figure(payload: dict | None):
    """Bars: each build's median same-round ratio to the library per shape, the model's pick outlined in black, the
    library at 1.0. None when there is no record."""
    import matplotlib.pyplot as plt

    from lab.families import gemm_tc_tiles as tiles
    from lab.lessons.plots.style import figure_title, legend_outside, series_style
    from lab.studies.hopper_tile_study import build_name

    if payload is None or not payload.get("model"):
        return None
    summary = _summary(payload)
    models = payload["model"]
    bns = sorted(tiles.TILE_KNOBS, reverse=True)
    colors = {bn: series_style(key)["color"] for bn, key in zip(bns, ("10_tma_store", "09_cluster_multicast",
                                                                       "06_persistent"), strict=True)}
    fig, ax = plt.subplots(figsize=(11, 3.8))
    width = 0.8 / len(bns)
    low, labelled = 1.0, set()
    for i, bn in enumerate(bns):
        for j, m in enumerate(models):
            s = summary.get((tuple(sorted(m["shape"].items())), build_name(bn)))
            if not s or s.get("x_library") is None:
                continue
            low = min(low, s["x_library"])
            picked = m["chosen_bn"] == bn
            ax.bar(j + (i - (len(bns) - 1) / 2) * width, s["x_library"], width, color=colors[bn],
                   edgecolor="black" if picked else colors[bn], linewidth=1.6 if picked else 0.0,
                   label=None if bn in labelled else f"BN = {bn}")
            labelled.add(bn)
    ax.axhline(1.0, **series_style("cublas_sgemm") | {"lw": 1.2}, label="library (faster of torch.mm, cuBLASLt)")
    ax.bar([], [], color="white", edgecolor="black", linewidth=1.6, label="the wave model's pick")
    ax.set_xticks(range(len(models)), [shape_label(m["shape"]) for m in models], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(max(0.0, low - 0.1), 1.15)
    ax.set_ylabel("x the library's speed")
    ax.set_title(figure_title("gemm_tc", "rung 10 with each tile width against the library, same rounds",
                              source=replayed_from(payload, STUDY)), fontsize=9)
    legend_outside(ax)
    return fig
