"""Split-K's cluster mode, every plan that runs in one wave: for each cluster size (1, 2, 4, 8 blocks) and each
number of clusters a tile (the slices the tile's last cluster sums, band by band), the time of one launch beside the
workspace mode (rung 08 with its reduction kernel) and the library, in the same interleaved rounds on cold L2.

The launcher's plan (gemm_split_k._cluster_plan) picked the size that kept the most SMs busy when this study was
written. That does not weigh what a plan costs after its main loop: a cluster's blocks wait for one another at its
barriers, and a tile's last cluster sums every other cluster's slice alone. This study measures each plan so that a
rule can be read off the table rather than guessed. Each plan is checked on an odd case (its cluster size and number
of clusters pinned) before it is timed; one that fails gets a row saying so and is not timed. Nothing here asserts a
speed.

Prediction (written before the first run; fp16 TN, cold L2): at 256 x 256 x 65536 (four 128 x 128 tiles, 1024
k-tiles) the launcher's plan of clusters of 2, 16 a tile (S = 32, 128 blocks), leaves each block of a tile's last
cluster 16 band slices of 32 KB to read, 512 KB at about 110 GB/s (an SM's share of L2 bandwidth, 64 bytes a clock):
a tail of ~5 us. Its SASS already keeps up to 17 of those loads in flight, so the tail is that bandwidth, not their
latency. Clusters of 4, 7 a tile (S = 28) read 112 KB (~1 us), clusters of 8, 3 a tile (S = 24) 24 KB: predicted ~4 us
faster than 2 x 16 (about 40 against 45 us on an H100), still behind the workspace mode (~38 us) unless the cluster
waits cost less than the ncu stalls suggest. At 128 x 128 x 131072 (one tile) the launcher's 8 x 15 (S = 120) stays
best: a block of its last cluster reads 15 x 8 KB, and the smaller plans run 64 blocks or fewer.

Measured (results/h100/split_k_plans.json, an H100 at 730294a): 8 x 3 1.01x the workspace mode, 4 x 7 0.98x, 2 x 16
0.87x at 256 x 256 x 65536; 8 x 12 1.04x, 8 x 15 1.02x at 128 x 128 x 131072. The launcher now takes the widest size
that fits, at most 12 clusters a tile (rung 08's header).

    python -m lab.studies.split_k_plans OUT_DIR [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.rounds import interleaved_rows, same_round_summary
from lab.studies.split_k_rounds import print_record

STUDY_FILE = "split_k_plans.json"
SHAPES = [dict(M=256, N=256, K=65536, layout="TN", dtype="float16"),
          dict(M=128, N=128, K=131072, layout="TN", dtype="float16")]
CLUSTER_RUNG = "08_split_k_cluster"
REFERENCE = "08_split_k"  # the workspace mode, at the launcher's S
GROUPS = (1, 2, 3, 4, 6, 8, 12, 16)  # clusters a tile to try (and the most that fit, where fewer than 16)
MIN_BLOCKS = 32  # a plan with fewer blocks leaves three quarters of the GPU idle: not timed
CHECK_K = 8192 + 3  # the odd check case's K: 129 k-tiles, enough for 8 x 16 splits
CHECK_CASE = {"M": 200, "N": 136, "layout": "TN"}


def plan_name(width: int, groups: int) -> str:
    """A plan as the records name it: "cluster 4 x 7 (S=28)"."""
    return f"cluster {width} x {groups} (S={width * groups})"


def one_wave_plans(fam, shape: dict) -> list[tuple[int, int]]:
    """(cluster size, clusters a tile) for every plan of GROUPS (and the most that fit) whose clusters all run at
    once on this GPU (the driver's count, gemm_split_k.cluster_fit), whose splits are at least
    MIN_K_TILES_PER_SPLIT k-tiles long and which run at least MIN_BLOCKS blocks; none where the driver cannot say."""
    from lab.families.gemm_split_k import MAX_SLICES, MIN_K_TILES_PER_SPLIT, cluster_fit

    problem = fam.make_problem(seed=3, **shape)
    rung = fam.rung(CLUSTER_RUNG)
    tiled = fam._tiled(rung, problem)  # the tile the family picks for this shape, before any cluster plan
    k = dict(tiled.spec.knobs)
    tiles = -(-shape["M"] // k["BM"]) * -(-shape["N"] // k["BN"])
    k_tiles = -(-shape["K"] // k["BK"])
    plans = []
    for width in (1, 2, 4, 8):
        fit = cluster_fit(dataclasses.replace(tiled, spec=tiled.spec.with_knobs(SPLIT_CLUSTER=width)))
        if fit is None:
            return []
        most = min(fit // tiles, MAX_SLICES, k_tiles // (MIN_K_TILES_PER_SPLIT * width))
        groups = sorted({g for g in GROUPS if g <= most} | ({most} if most else set()))
        plans += [(width, g) for g in groups if tiles * width * g >= MIN_BLOCKS]
    return plans


def plan_bytes(shape: dict, bm: int, bn: int, bk: int, width: int, groups: int) -> dict:
    """What one block of a plan moves, from its sizes alone: the k-tiles of its split and their operand bytes, the
    fp32 band it writes as its cluster's slice (none with one cluster a tile), and the slices a block of the tile's
    last cluster reads back to sum its band (groups bands of BM / width rows). That last read runs on one cluster's
    blocks while the rest of the grid has left, so it is the plan's tail; the study's times show whether it is."""
    k_tiles = -(-shape["K"] // bk)
    per_block = -(-k_tiles // (width * groups))
    band = bm // width * bn * 4
    return {"k_tiles_per_block": per_block, "operand_bytes_per_block": per_block * (bm + bn) * bk * 2,
            "slice_bytes_per_block": band if groups > 1 else 0,
            "last_sum_bytes_per_block": groups * band if groups > 1 else 0}


def _plan_checked(fam, rung, width: int, groups: int, dtype: str, failed: list, shape: dict) -> bool:
    from lab.measure.verify import check_case

    case = CHECK_CASE | {"K": CHECK_K, "dtype": dtype, "splits": width * groups, "cluster": width}
    result = check_case(fam, rung, case, seed=21)
    if not result.passed:
        failed.append({"shape": shape, "method": plan_name(width, groups), "failed": result.reasons})
    return result.passed


def plan_methods(fam, shape: dict, failed: list, plans_by_shape: dict) -> tuple[dict, object]:
    """name -> launch(i) for one shape: the library calls, the workspace mode at the launcher's S, the cluster mode
    at the launcher's plan, and every one-wave plan (each on a copy of the problem with S and the cluster size
    pinned, the same operands)."""
    import cupy as cp

    from lab.studies.hopper_gemm_study import study_methods

    methods, problem = study_methods(fam, shape, failed, (REFERENCE, CLUSTER_RUNG))
    rung = fam.rung(CLUSTER_RUNG)
    out = cp.empty(problem.out_shape, problem.dtype)
    plans = one_wave_plans(fam, shape)
    k = dict(fam._tiled(rung, problem).spec.knobs)
    tiles = -(-shape["M"] // k["BM"]) * -(-shape["N"] // k["BN"])
    plans_by_shape[tuple(sorted(shape.items()))] = [
        {"method": plan_name(w, g), "cluster": w, "groups": g, "splits": w * g, "blocks": tiles * w * g,
         **plan_bytes(shape, k["BM"], k["BN"], k["BK"], w, g)} for w, g in plans]
    for width, groups in plans:
        if not _plan_checked(fam, rung, width, groups, shape["dtype"], failed, shape):
            continue
        pinned = dataclasses.replace(problem, params=problem.params | {"splits": width * groups, "cluster": width})
        methods[plan_name(width, groups)] = lambda i, p=pinned: fam.launch(rung, p, out)
    return methods, problem


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 20.0, progress=None, checkpoint=None) -> dict:
    """The record. checkpoint(record) gets the record of the shapes timed so far after each shape (marked
    "partial"), so that a run cut short by its time limit still leaves its first shape."""
    from lab.measure import timing

    fam = get_family("gemm_split_k")
    flusher = timing.L2Flusher()
    failed: list = []
    plans: dict = {}

    def done(shape, rows):
        if progress:
            progress({"shape": shape, "rows": len(rows)})
        if checkpoint and len(rows) and shape != shapes[-1]:
            checkpoint(_record(fam, rows, plans, failed, rounds, shapes[:shapes.index(shape) + 1]) | {"partial": True})

    rows = interleaved_rows(shapes, lambda shape: plan_methods(fam, shape, failed, plans), rounds, flusher,
                            min_time_ms, lambda problem, ms: {"TFLOP/s": problem.flops / ms / 1e9}, done)
    return _record(fam, rows, plans, failed, rounds, shapes)


def _record(fam, rows: list, plans: dict, failed: list, rounds: int, shapes) -> dict:
    from lab.studies.split_k_rounds import launch_choices

    summary = same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", REFERENCE, "x_08")
    return {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "rounds": rounds,
            "launches": launch_choices(fam, shapes, (REFERENCE, CLUSTER_RUNG)),
            "plans": [{"shape": dict(k), "plans": v} for k, v in plans.items()],
            "rows": list(rows), "summary": summary, "failed": list(failed)}


def committed_record() -> tuple[dict, Path] | None:
    """The newest committed record (results/h200, or results/h100 beside it: its provenance names the GPU) and its
    path; None where there is none."""
    from lab.measure.records import newest_study_record

    return newest_study_record(STUDY_FILE, {"shape", "method", "TFLOP/s"})


def plan_table(record: dict) -> list[str]:
    """A record's plans as markdown rows, a table per shape, fastest first: the plan, its blocks, k-tiles a block and
    the slices a block of its last cluster reads (KB), then the median time and the same-round speeds over the
    workspace mode and the library; the workspace mode, the launcher's own plan and the library beside them."""
    lines = []
    by_method = {}
    for entry in record["summary"]:
        by_method.setdefault(tuple(sorted(entry["shape"].items())), []).append(entry)
    plans = {(tuple(sorted(p["shape"].items())), q["method"]): q for p in record.get("plans", []) for q in p["plans"]}
    for key, entries in by_method.items():
        sh = dict(key)
        lines += ["", f"{sh['M']} x {sh['N']} x {sh['K']}, {sh.get('dtype', '')}:", "",
                  "| method | blocks | k-tiles a block | last cluster reads (KB a block) | us | x workspace "
                  "| x library |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for e in sorted(entries, key=lambda e: e["median_ms"]):
            plan = plans.get((key, e["method"]), {})
            cells = [str(plan.get("blocks", "")), str(plan.get("k_tiles_per_block", "")),
                     f"{plan['last_sum_bytes_per_block'] / 1024:.0f}" if plan else ""]
            ratios = [f"{e[k]:.2f}x" if e.get(k) is not None else "-" for k in ("x_08", "x_library")]
            lines.append(f"| {e['method']} | " + " | ".join(cells) + f" | {1e3 * e['median_ms']:.1f} | "
                         + " | ".join(ratios) + " |")
    return lines


def run(out_dir: Path, *, rounds: int = 3, progress=None) -> Path:
    """The study (study), written to out_dir/STUDY_FILE after each shape; returns the path. progress(item) gets a
    line a shape."""
    path = Path(out_dir) / STUDY_FILE
    return write_json(path, study(rounds, progress=progress, checkpoint=lambda record: write_json(path, record)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    path = Path(args.out_dir) / STUDY_FILE
    record = study(args.rounds, progress=lambda item: print("timed:", item),
                   checkpoint=lambda partial: write_json(path, partial))
    write_json(path, record)
    print_record(record, path, sorted(record["summary"], key=lambda s: (s["shape"]["K"], -s["TFLOP/s"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
