"""Nsight Compute on a decode attention step: where rung 02's time goes against SDPA's kernels on the same step.

For B = 1 and 8 sequences of 8192 keys (H = 32 on H_kv = 8, S_q = 1, D = 128, fp16: the decode study's heads), rung 02
(split-KV) and SDPA each run twice to warm up, then once inside an NVTX range that ncu profiles (caches flushed
before each kernel). Per kernel: its duration, DRAM bytes and throughput, the SMs' active and elapsed cycles, the
achieved occupancy, and the warps' stall reasons that a memory-bound kernel shows (long scoreboard: waiting on global
memory; barrier: __syncthreads). Writes the ncu CSV and a JSON summary.

Before ncu, the same two calls are timed with CUDA events in 3 interleaved rounds after each of the lab's two L2
evictions: by writing a buffer twice the L2 (what records use: the L2 left full of dirty lines, which a reading
kernel's misses must write back to HBM first) and by reading one (clean lines). ncu flushes and invalidates the
caches itself, so its durations are the clean case. A step of 33.5 MB (B = 1) is about half the L2: if the
write-backs cost its time, the written-evicted step takes up to twice the read-evicted one, for rung 02 and SDPA alike.
Predicted before the run (H200 or H100, B = 1): rung 02 read-evicted 11-14 us and under ncu 9-12 us, write-evicted
21-24 us as in the decode study's records; SDPA likewise within 10% of rung 02 in each condition. At B = 8 (268 MB,
four times the L2) the write-backs are a quarter of the bytes at most: 1.1-1.25x between the two evictions.

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

    from lab.measure import timing

    fam, problem, named = _problem(shape)
    calls = tuple(named.values())
    for call in calls:
        call(), call()
    print("plan", fam.plan(fam.rung("02_split_kv"), problem.params), flush=True)
    timing.L2Flusher().flush()
    cp.cuda.Device().synchronize()
    with time_range(RANGE):
        for call in calls:
            call()
        cp.cuda.Device().synchronize()


def _problem(shape: dict):
    import cupy as cp

    from lab.families.attention_decode import AttentionDecodeFamily
    from lab.studies.decode_attention_study import HEADS

    fam = AttentionDecodeFamily()
    problem = fam.make_problem(seed=9, **HEADS, **shape, dtype="float16")
    out = cp.empty(problem.out_shape, problem.dtype)
    rung = fam.rung("02_split_kv")
    return fam, problem, {"02_split_kv": lambda i=0: fam.launch(rung, problem, out),
                          "sdpa": lambda i=0: fam.launch_ceiling(problem, out)}


def timed_by_flush(rounds: int = 3) -> list[dict]:
    """Median event time of each call on each shape after each L2 eviction, interleaved rounds."""
    from lab.measure import timing

    flushers = {"write": timing.L2Flusher(by="write"), "read": timing.L2Flusher(by="read")}
    rows = []
    for shape in SHAPES:
        _, problem, calls = _problem(shape)
        for r in range(rounds):
            for by, flusher in flushers.items():
                for name, call in calls.items():
                    t = timing.measure(call, l2="cold", flusher=flusher, min_time_ms=5.0)
                    rows.append({"shape": shape, "method": name, "evicted_by": by, "round": r,
                                 "median_us": t.median_ms * 1e3, "GB/s": problem.bytes_moved / t.median_ms / 1e6})
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def main(out_dir: Path) -> int:
    from lab.measure.records import provenance
    from lab.tools import ncu

    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"provenance": provenance(), "about": __doc__.split("\n\n")[0], "metrics": METRICS, "shapes": [],
              "timed_by_flush": timed_by_flush()}
    for shape in SHAPES:
        cmd = ncu.command([sys.executable, __file__, "--target", json.dumps(shape)], METRICS.values(),
                          nvtx_include=f"{RANGE}/")
        (out_dir / "decode_ncu.json").write_text(json.dumps(record, indent=1))  # what there is, should ncu run over
        text = ncu.run(cmd, timeout=90)
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
