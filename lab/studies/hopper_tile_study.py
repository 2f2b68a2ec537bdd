"""Rung 10 with each tile the family can build (BN = 256, 192, 128: lab.families.gemm_tc_tiles) beside torch.mm and
cuBLASLt on the Hopper study's shapes, in interleaved rounds, and the wave model's pick for each shape against what
was measured.

Methods (every one once a round on each shape, the order rotated from round to round, cold L2):

    torch_mm, cublaslt                the library calls, as in lab.studies.hopper_gemm_study
    10_tma_store                      rung 10 as the family builds it by default (128 x 256 tiles)
    10 BN=192 STAGES=4 C_PARTS=1      rung 10 with 192 columns (the TN layout only)
    10 BN=128 STAGES=6 C_PARTS=1      rung 10 with 128 columns

Per shape the record keeps the model's predicted speed of each build over the default, the BN the family picks
(`GemmTcFamily.shaped`), and the measured same-round ratios: to the faster library call (x_library) and to the
default build (x_10). Nothing here asserts a speed.

    python -m lab.studies.hopper_tile_study OUT_DIR [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.families import gemm_tc_tiles as tiles
from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.hopper_gemm_study import QUICK_SHAPES, SHAPES, knob_name, study_methods, timed_rows
from lab.studies.rounds import same_round_summary

RUNG = "10_tma_store"
NARROWER = tuple(bn for bn in sorted(tiles.TILE_KNOBS, reverse=True) if bn != tiles.DEFAULT_BN)


def build_name(bn: int) -> str:
    """The method name of rung 10 built with BN columns (the default build keeps the rung's key)."""
    return RUNG if bn == tiles.DEFAULT_BN else knob_name(RUNG, tiles.TILE_KNOBS[bn])


def _settings(key: str, shape: dict) -> tuple[dict, ...]:
    return tuple(tiles.TILE_KNOBS[bn] for bn in NARROWER if bn in tiles.candidates(shape["layout"]))


def model_rows(shapes, slots: int) -> list[dict]:
    """The wave model's view of each shape: pair tiles and waves per BN, its predicted speedups, its pick."""
    out = []
    for shape in shapes:
        M, N, layout = shape["M"], shape["N"], shape["layout"]
        bns = tiles.candidates(layout)
        out.append({"shape": shape, "slots": slots, "chosen_bn": tiles.choose(M, N, layout, slots),
                    "pair_tiles": {str(bn): tiles.pair_tiles(M, N, bn) for bn in bns},
                    "waves": {str(bn): tiles.waves(M, N, bn, slots) for bn in bns},
                    "predicted_x_256": {str(bn): x for bn, x in tiles.predicted_speedups(M, N, layout, slots).items()}})
    return out


def verdicts(summary: list[dict], models: list[dict]) -> list[dict]:
    """Per shape: the build the model picked and the one measured fastest, each with its ratio to the library."""
    out = []
    for m in models:
        mine = {s["method"]: s for s in summary if s["shape"] == m["shape"]}
        builds = {bn: mine[build_name(bn)] for bn in tiles.candidates(m["shape"]["layout"]) if build_name(bn) in mine}
        if not builds:
            continue
        best = max(builds, key=lambda bn: builds[bn]["TFLOP/s"])
        chosen = builds.get(m["chosen_bn"])
        out.append({"shape": m["shape"], "chosen_bn": m["chosen_bn"], "best_bn": best,
                    "chosen_x_library": chosen["x_library"] if chosen else None,
                    "chosen_x_10": chosen["x_10"] if chosen else None,
                    "best_x_library": builds[best]["x_library"],
                    "predicted_x_10": m["predicted_x_256"][str(m["chosen_bn"])]})
    return out


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 20.0) -> dict:
    from lab.families.gemm_tc import cluster_slots
    from lab.measure import timing

    fam = get_family("gemm_tc")
    flusher = timing.L2Flusher()
    failed: list = []
    rows = timed_rows(lambda shape: study_methods(fam, shape, failed, (RUNG,), _settings), shapes, rounds, flusher,
                      min_time_ms)
    slots = cluster_slots(fam.variant(fam.rung(RUNG), fam.make_problem(M=256, N=256, K=64)))
    return assemble(rows, shapes, slots, rounds, failed, provenance())


def assemble(rows: list[dict], shapes, slots: int, rounds: int, failed: list, prov: dict) -> dict:
    """The record from the timed rows: their same-round summary, the model's view of each shape, the verdicts."""
    summary = same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", RUNG, "x_10")
    models = model_rows(shapes, slots)
    return {"provenance": prov, "about": __doc__.split("\n\n")[0], "rounds": rounds, "cluster_slots": slots,
            "tile_knobs": {str(bn): k for bn, k in tiles.TILE_KNOBS.items()}, "min_gain": tiles.MIN_GAIN,
            "rows": rows, "summary": summary, "model": models, "verdicts": verdicts(summary, models),
            "failed": failed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one shape, for a smoke run")
    args = parser.parse_args(argv)
    record = study(args.rounds, QUICK_SHAPES if args.quick else SHAPES)
    path = write_json(Path(args.out_dir) / "hopper_tile_study.json", record)
    ratio = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    print(f"clusters that fit: {record['cluster_slots']}")
    for s in record["summary"]:
        sh = s["shape"]
        print(f"{sh['M']}x{sh['N']}x{sh['K']} {sh['layout']} {sh['dtype']:<9} {s['method']:<30} "
              f"{s['TFLOP/s']:6.1f} TFLOP/s  spread {s['spread']:.3f}  x library {ratio(s['x_library'])} "
              f"(min {ratio(s['x_library_min'])})  x 10 {ratio(s['x_10'])}")
    for v in record["verdicts"]:
        sh = v["shape"]
        print(f"{sh['M']}x{sh['N']}x{sh['K']} {sh['layout']} {sh['dtype']:<9} model picks BN={v['chosen_bn']} "
              f"(predicted x 10 {v['predicted_x_10']:.3f}, measured {ratio(v['chosen_x_10'])}, x library "
              f"{ratio(v['chosen_x_library'])}); fastest BN={v['best_bn']} (x library {ratio(v['best_x_library'])})")
    for f in record["failed"]:
        print("not timed:", f)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
