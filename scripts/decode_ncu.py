"""Nsight Compute on a decode attention step: where rung 02's time goes against SDPA's kernels on the same step.

For B = 1 and 8 sequences of 8192 keys (H = 32 on H_kv = 8, S_q = 1, D = 128, fp16: the decode study's heads), rung 02
(split-KV) and SDPA each run twice to warm up, then once inside an NVTX range that ncu profiles (caches flushed
before each kernel). Per kernel: its duration, DRAM bytes and throughput, the SMs' active and elapsed cycles, the
achieved occupancy, and the warps' stall reasons that a memory-bound kernel shows (long scoreboard: waiting on global
memory; barrier: __syncthreads). Writes the ncu CSV and a JSON summary.

    python3 scripts/decode_ncu.py OUT_DIR            (on a GPU machine with ncu; --clock-control none)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RANGE = "decode_step"
SHAPES = ({"B": 1, "S_k": 8192}, {"B": 8, "S_k": 8192})
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_pct_of_peak": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_active_cycles": "sm__cycles_active.avg",
    "sm_elapsed_cycles": "sm__cycles_elapsed.avg",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "stall_long_scoreboard": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "stall_barrier": "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "stall_short_scoreboard": "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "stall_lg_throttle": "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
}


def target(shape: dict) -> None:
    """Rung 02 and SDPA on one decode step: two warm-up calls each, then one each inside the NVTX range."""
    import cupy as cp
    from cupyx.profiler import time_range

    from lab.families.attention_decode import AttentionDecodeFamily
    from lab.measure import timing
    from lab.studies.decode_attention_study import HEADS

    fam = AttentionDecodeFamily()
    problem = fam.make_problem(seed=9, **HEADS, **shape, dtype="float16")
    out = cp.empty(problem.out_shape, problem.dtype)
    rung = fam.rung("02_split_kv")
    calls = (lambda: fam.launch(rung, problem, out), lambda: fam.launch_ceiling(problem, out))
    for call in calls:
        call(), call()
    print("plan", fam.launch_notes(rung, problem, out), flush=True)
    timing.L2Flusher().flush()
    cp.cuda.Device().synchronize()
    with time_range(RANGE):
        for call in calls:
            call()
        cp.cuda.Device().synchronize()


def main(out_dir: Path) -> int:
    from lab.measure.records import provenance
    from lab.tools import ncu

    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "metrics": METRICS, "shapes": []}
    for shape in SHAPES:
        cmd = ncu.command([sys.executable, __file__, "--target", json.dumps(shape)], METRICS.values(),
                          nvtx_include=f"{RANGE}/")
        text = ncu.run(cmd, timeout=150)
        name = "_".join(f"{k}{v}" for k, v in shape.items())
        (out_dir / f"decode_ncu_{name}.csv").write_text(text)
        launches = [{"kernel": launch.kernel[:120], **launch.named(METRICS)} for launch in ncu.parse(text)]
        plan = [line for line in text.splitlines() if line.startswith("plan ")]
        record["shapes"].append({"shape": shape, "plan": plan[-1] if plan else None, "kernels": launches})
        for launch in launches:
            print(shape, json.dumps(launch))
    (out_dir / "decode_ncu.json").write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    if "--target" in sys.argv:
        target(json.loads(sys.argv[sys.argv.index("--target") + 1]))
    elif len(sys.argv) == 2:
        sys.exit(main(Path(sys.argv[1])))
    else:
        print(__doc__)
        sys.exit(2)
