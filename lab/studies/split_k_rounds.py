"""Split-K against the library in interleaved rounds: gemm_split_k's workspace mode (rung 08, a reduction kernel
after the split kernel) and its cluster mode (the partial tiles summed through distributed shared memory inside
thread-block clusters) beside torch.mm and cuBLASLt on the same operands, on the K-heavy shapes with few output
tiles that split-K exists for.

Every method runs once a round on each shape, in an order rotated from round to round, on cold L2
(lab.studies.rounds); the figure is TFLOP/s (2 M N K over the median time), the same-round ratio to the faster
library call (x_library) and to the workspace mode (x_08). Each rung passes a check on an odd case first
(lab.studies.hopper_gemm_study.study_methods); one that fails gets a row saying so and is not timed. Nothing here
asserts a speed.

    python -m lab.studies.split_k_rounds OUT_DIR [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from lab.families import get_family
from lab.measure.records import provenance, write_json
from lab.studies.hopper_gemm_study import study_methods
from lab.studies.rounds import interleaved_rows, same_round_summary, summary_line

STUDY_FILE = "split_k_rounds.json"
SHAPES = [dict(M=m, N=n, K=k, layout="TN", dtype=t) for (m, n, k) in ((256, 256, 65536), (128, 128, 131072))
          for t in ("float16", "bfloat16")]
SHAPES += [dict(M=n, N=n, K=k, layout="TN", dtype="float16") for n, k in ((512, 32768), (1024, 16384))]
RUNGS = ("08_split_k", "08_split_k_cluster")
REFERENCE = "08_split_k"


def committed_record() -> tuple[dict, Path] | None:
    """The newest committed record (results/h200, or results/h100 beside it: its provenance names the GPU) and its
    path; None where there is none (lab.measure.records.newest_study_record)."""
    from lab.measure.records import newest_study_record

    return newest_study_record(STUDY_FILE, {"shape", "method", "TFLOP/s"})


def launch_choices(fam, shapes=SHAPES, rungs=RUNGS) -> list[dict]:
    """What each rung runs on each shape (its split factor, tile and, for the cluster mode, the cluster size and how
    many clusters of it fit at once), from the launcher itself."""
    import cupy as cp

    from lab.families.gemm_split_k import cluster_fit, split_mode

    out = []
    for shape in shapes:
        problem = fam.make_problem(seed=3, **shape)
        c = cp.empty(problem.out_shape, problem.dtype)
        for key in rungs:
            rung = fam.rung(key)
            notes = fam.launch_notes(rung, problem, c)
            entry = {"shape": shape, "method": key, **{k: notes[k] for k in ("splits", "tile", "reduction")}}
            if split_mode(rung) == 3:
                built = fam.variant(rung, problem)
                fits = {w: cluster_fit(dataclasses.replace(built, spec=built.spec.with_knobs(SPLIT_CLUSTER=w)))
                        for w in (1, 2, 4, 8)}
                entry |= {"cluster": notes["cluster"], "clusters_that_fit": fits}
            out.append(entry)
    return out


def study(rounds: int = 3, shapes=SHAPES, min_time_ms: float = 20.0, rungs=RUNGS,
          progress: Callable[[dict], None] | None = None) -> dict:
    from lab.measure import timing

    fam = get_family("gemm_split_k")
    flusher = timing.L2Flusher()
    failed: list = []
    done = (lambda shape, rows: progress({"shape": shape, "rows": len(rows)})) if progress else None
    rows = interleaved_rows(shapes, lambda shape: study_methods(fam, shape, failed, rungs), rounds, flusher,
                            min_time_ms, lambda problem, ms: {"TFLOP/s": problem.flops / ms / 1e9}, done)
    summary = same_round_summary(rows, "TFLOP/s", ("torch_mm", "cublaslt"), "x_library", REFERENCE, "x_08")
    return {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "rounds": rounds,
            "launches": launch_choices(fam, shapes, rungs), "rows": rows, "summary": summary, "failed": failed}


def run(out_dir: Path, *, rounds: int = 3, progress: Callable[[dict], None] | None = None) -> Path:
    """The study (study), written to out_dir/STUDY_FILE; returns the path."""
    return write_json(Path(out_dir) / STUDY_FILE, study(rounds, progress=progress))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    record = study(args.rounds)
    path = write_json(Path(args.out_dir) / STUDY_FILE, record)  # as run() writes it, and printed below
    print_record(record, path, record["summary"])
    return 0


def print_record(record: dict, path: Path, summary: list[dict]) -> None:
    """A split-K study's record on the console: the launches, one line per entry of `summary` (its ratios to the
    library and to the workspace mode), what was not timed, and where the record went."""
    for entry in record["launches"]:
        print("launch:", entry)
    for s in summary:
        sh = s["shape"]
        print(summary_line(s, f"{sh['M']}x{sh['N']}x{sh['K']} {sh['dtype']:<9}",
                           {"x_library": "x library", "x_library_min": "(min)", "x_08": "x 08"}))
    for failed in record["failed"]:
        print("not timed:", failed)
    print(f"written: {path}")


if __name__ == "__main__":
    sys.exit(main())
