"""Nsight Compute on the split-K kernels: duration, DRAM bytes and L2 hit rate of every kernel a launch runs
(mode 0 runs two: the split GEMM and the reduction), for the two K-heavy headline shapes, so the split GEMM's
mainloop and the reduction's cost can be told apart. Writes the ncu CSV and a JSON summary.

    python3 scripts/split_k_ncu.py OUT_DIR            (on a GPU machine with ncu; --clock-control none)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# With the SMs' active cycles and the stalls the cluster mode adds (its cluster barrier and DSMEM reads) beside the
# workspace mode's (the reduction kernel's loads).
METRICS = ("gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,"
           "sm__cycles_active.avg,sm__cycles_elapsed.avg,"
           "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,"
           "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,"
           "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio")
SHAPES = ({"M": 256, "N": 256, "K": 65536}, {"M": 128, "N": 128, "K": 131072})


def target() -> None:
    """Each split rung twice per shape (the first launch compiles and warms up; both are profiled)."""
    import cupy as cp

    from lab.families.gemm_split_k import SPLIT_MODES, GemmSplitKFamily

    fam = GemmSplitKFamily()
    for shape in SHAPES:
        problem = fam.make_problem(**shape)
        out = cp.empty(problem.out_shape, problem.dtype)
        for key in SPLIT_MODES:
            for _ in range(2):
                fam.launch(fam.rung(key), problem, out)
        cp.cuda.get_current_stream().synchronize()


def main(out_dir: Path) -> int:
    from lab.families.gemm_split_k import SPLIT_MODES
    from lab.measure.records import provenance
    from lab.studies.profile import find_ncu

    ncu = find_ncu()
    if ncu is None:
        print("ncu is not installed here")
        return 1
    cmd = [ncu, "--clock-control", "none", "--csv", "--kernel-name", "regex:gemm_tc_split", "--metrics", METRICS,
           sys.executable, __file__, "--target"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "split_k_ncu.csv").write_text(proc.stdout)
    rows = [line for line in proc.stdout.splitlines() if line.startswith('"') and "gemm_tc_split" in line]
    order = f"per shape: {', '.join(SPLIT_MODES)}, two launches each"
    (out_dir / "split_k_ncu.json").write_text(json.dumps({"provenance": provenance(), "shapes": SHAPES, "order": order,
                                                          "rows": rows, "stderr": proc.stderr[-2000:]}, indent=1))
    print("\n".join(rows[-60:]))
    return proc.returncode


if __name__ == "__main__":
    if "--target" in sys.argv:
        target()
    else:
        raise SystemExit(main(Path(sys.argv[1])))
