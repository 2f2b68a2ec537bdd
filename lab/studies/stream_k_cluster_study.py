"""Stream-K on the fastest main loop: gemm_tc rung 12 (rung 10's clusters and TMA-store epilogue, the last partial
wave of pair tiles split along K) beside rung 10, as the family builds it by default and with the tile it picks per
shape, and beside torch.mm and cuBLASLt, on shapes whose pair tiles do not fill whole waves.

Methods (every one once a round on each shape, the order rotated from round to round, cold L2):

    torch_mm, cublaslt        the library calls, as in lab.studies.hopper_gemm_study
    10_tma_store              rung 10, 128 x 256 block tiles (the stream-K rung's tile)
    10 BN=...                 rung 10 with the tile the family picks for the shape, where that is not 256
    12_stream_k_cluster       rung 12 as the family launches it: its model (lab_stream_k.cuh) decides whether to split
    12 SK_MIN_GAIN=0          rung 12 splitting every partial wave, whatever the model says

Per shape the record keeps what the split model decides (`split_model`, the kernel's arithmetic in Python) and two
predictions of rung 12 over rung 10's 256-column build: with the fix-up the kernel's model assumes (half a
tile-time) and with the quarter rung 07 measured. Every method is checked on a small odd case first; one that fails
is reported, not timed. Nothing here asserts a speed.

    python -m lab.studies.stream_k_cluster_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from lab.families import gemm_tc_tiles as tiles
from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.hopper_gemm_study import knob_name, study_methods
from lab.studies.rounds import interleaved_rows, same_round_summary

BASE, STREAM_K = "10_tma_store", "12_stream_k_cluster"
FORCED = {"SK_MIN_GAIN": 0}
# Wave-quantized shapes (the issue of rung 10's tile choice), a wave plus a little, and two controls: 3072^3 (144 pair
# tiles, 2.2 waves) and 4096^3 (256 pair tiles, 3.9 waves, where the model splits nothing).
SHAPES = [dict(M=m, N=n, K=k, layout="TN", dtype="float16")
          for m, n, k in ((2176, 2176, 4096), (3200, 4096, 4096), (4352, 4096, 4096), (1152, 4096, 4096),
                          (3072, 3072, 3072), (4096, 4096, 4096))]
SHAPES.append(dict(M=2176, N=2176, K=4096, layout="TN", dtype="bfloat16"))
QUICK_SHAPES = SHAPES[:1]
KNOB_DEFAULTS = tiles.STREAM_K_KNOBS  # the rung's knobs (its header)
split_model = tiles.split_model  # the kernel's split decision in Python
MEASURED_FIXUP = 0.25  # tile-times: what rung 07's 1.51x over rung 06 at 1152 x 4096 x 4096 implies (rung 12's header)


def predicted_over_base(tiles_: int, workers: int, fixup: float, split: bool) -> float:
    """Rung 12's speed over rung 10's 256-column build: ceil(T / P) rounds against T / P + the fix-up where it
    splits, the same rounds where it does not."""
    if not split:
        return 1.0
    return math.ceil(tiles_ / workers) / (tiles_ / workers + fixup)


def model_rows(shapes, slots: int) -> list[dict]:
    """Per shape: the split model's decision on `slots` clusters, and the two predictions over rung 10."""
    out = []
    for shape in shapes:
        t = tiles.pair_tiles(shape["M"], shape["N"], tiles.DEFAULT_BN)
        workers = min(slots, t * -(-shape["K"] // KNOB_DEFAULTS["BK"]))  # the launcher's grid, in clusters
        model = split_model(t, -(-shape["K"] // KNOB_DEFAULTS["BK"]), workers)
        out.append({"shape": shape, "slots": slots, "split_model": model,
                    "chosen_bn_10": tiles.choose(shape["M"], shape["N"], shape["layout"], slots),
                    "family": tiles.schedule(shape["M"], shape["N"], shape["K"], shape["layout"], slots),
                    "predicted_costs": tiles.schedule_costs(shape["M"], shape["N"], shape["K"], shape["layout"],
                                                            slots),
                    "predicted_x_10": {
                        "model_fixup": predicted_over_base(t, workers, KNOB_DEFAULTS["SK_FIXUP_COST"] / 100 * 64
                                                           / model["k_tiles"], model["split"]),
                        "measured_fixup": predicted_over_base(t, workers, MEASURED_FIXUP, model["split"])}})
    return out


def settings(slots: int):
    """The other builds timed per shape: rung 10 with the family's tile where that is not 256, rung 12 forced."""
    def for_shape(key: str, shape: dict) -> tuple[dict, ...]:
        if key == BASE:
            bn = tiles.choose(shape["M"], shape["N"], shape["layout"], slots)
            return (tiles.TILE_KNOBS[bn],) if bn != tiles.DEFAULT_BN else ()
        return (FORCED,) if key == STREAM_K else ()
    return for_shape


def verdicts(summary: list[dict], models: list[dict]) -> list[dict]:
    """Per shape: rung 12 (as launched and forced) and rung 10's picked build, each over rung 10's 256 build and the
    library, beside the predictions."""
    out = []
    for m in models:
        mine = {s["method"]: s for s in summary if s["shape"] == m["shape"]}
        picked = BASE if m["chosen_bn_10"] == tiles.DEFAULT_BN else knob_name(BASE, tiles.TILE_KNOBS[m["chosen_bn_10"]])
        row = {"shape": m["shape"], "split": m["split_model"]["split"], "predicted_x_10": m["predicted_x_10"]}
        family = STREAM_K if m.get("family", (BASE,))[0] == STREAM_K else picked  # the build the family runs
        for label, name in (("stream_k", STREAM_K), ("forced", knob_name(STREAM_K, FORCED)), ("picked_10", picked),
                            ("family", family)):
            if name in mine:
                row[label] = {"method": name, "x_10": mine[name]["x_10"], "x_library": mine[name]["x_library"],
                              "x_library_min": mine[name]["x_library_min"], "TFLOP/s": mine[name]["TFLOP/s"]}
        out.append(row)
    return out


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 20.0, progress=None) -> dict:
    from lab.families.gemm_tc import cluster_slots
    from lab.measure import timing

    fam = get_family("gemm_tc")
    slots = cluster_slots(fam.variant(fam.rung(BASE), fam.make_problem(M=256, N=256, K=64)))
    failed: list = []
    rows = interleaved_rows(shapes, lambda shape: study_methods(fam, shape, failed, (BASE, STREAM_K), settings(slots)),
                            rounds, timing.L2Flusher(), min_time_ms,
                            lambda problem, ms: {"TFLOP/s": problem.flops / ms / 1e9},
                            progress and (lambda shape, rows: progress({"shape": shape, "rows": len(rows)})))
    return assemble(rows, shapes, slots, rounds, failed, provenance())


def assemble(rows: list[dict], shapes, slots: int, rounds: int, failed: list, prov: dict) -> dict:
    summary = same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", BASE, "x_10")
    models = model_rows(shapes, slots)
    return {"provenance": prov, "about": __doc__.split("\n\n")[0], "rounds": rounds, "cluster_slots": slots,
            "knobs": KNOB_DEFAULTS, "measured_fixup": MEASURED_FIXUP, "rows": rows, "summary": summary,
            "model": models, "verdicts": verdicts(summary, models), "failed": failed}


def verdicts_table_rows(record: dict) -> list[str]:
    """The README's table rows: per shape, whether the model splits, rung 12's and rung 10's picked build's ratios to
    the library, rung 12's over that build (same rounds), and which of the two the family runs (tiles.schedule on
    the record's cluster count) with its ratio."""
    rows = []
    for v in record["verdicts"]:
        sh, mine, picked = v["shape"], v.get("stream_k"), v.get("picked_10")
        if not mine or not picked:
            continue
        runs_12 = tiles.schedule(sh["M"], sh["N"], sh["K"], sh["layout"], record["cluster_slots"])[0] == STREAM_K
        family = f"rung 12, {mine['x_library']:.2f}x" if runs_12 else f"rung 10, {picked['x_library']:.2f}x"
        rows.append(f"| {sh['M']} x {sh['N']} x {sh['K']} | {sh['dtype']} | {'yes' if v['split'] else 'no'} | "
                    f"{mine['x_library']:.2f}x | {picked['x_library']:.2f}x ({picked['method']}) | "
                    f"{mine['x_10'] / picked['x_10']:.2f}x | {family} |")
    return rows


def report_lines(record: dict) -> list[str]:
    """The record as the console prints it: every method per shape, then the verdicts beside the predictions."""
    ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    lines = [f"clusters that fit: {record['cluster_slots']}"]
    for s in record["summary"]:
        sh = s["shape"]
        lines.append(f"{sh['M']}x{sh['N']}x{sh['K']} {sh['dtype']:<9} {s['method']:<30} {s['TFLOP/s']:6.1f} TFLOP/s  "
                     f"spread {s['spread']:.3f}  x library {ratio(s['x_library'])} (min {ratio(s['x_library_min'])})"
                     f"  x 10 {ratio(s['x_10'])}")
    for v in record["verdicts"]:
        sh, p = v["shape"], v["predicted_x_10"]
        parts = [f"{label} x10 {ratio(v[label]['x_10'])} xlib {ratio(v[label]['x_library'])}"
                 for label in ("stream_k", "forced", "picked_10") if label in v]
        lines.append(f"{sh['M']}x{sh['N']}x{sh['K']} {sh['dtype']}: split {v['split']}, predicted x10 "
                     f"{p['model_fixup']:.2f} (model's fix-up) / {p['measured_fixup']:.2f} (rung 07's); "
                     + "; ".join(parts))
    lines += [f"not timed: {f}" for f in record["failed"]]
    return lines


def run(out_dir: Path, *, rounds: int = 3, quick: bool = False, progress=None) -> Path:
    """The study (`lab study`), written to out_dir/stream_k_cluster_study.json; returns the path. progress(item) gets
    a line a shape."""
    record = study(rounds, QUICK_SHAPES if quick else SHAPES, progress=progress)
    return write_json(Path(out_dir) / "stream_k_cluster_study.json", record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one shape, for a smoke run")
    args = parser.parse_args(argv)
    path = run(Path(args.out_dir), rounds=args.rounds, quick=args.quick)
    record = json.loads(path.read_text())
    print("\n".join(report_lines(record)))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
