#!/usr/bin/env python3
"""Run-to-run spread of the Hopper rungs at 8192^3: the headline benchmark of rungs 05 and 06 against cuBLAS
(fp16 and bf16, TN and NN, cold L2, same plan as `lab bench`), repeated REPEATS times in one process, with
nvidia-smi's SM clock and power read after each repeat. JSON with provenance.

    python3 scripts/gemm_tc_repeat.py OUT.json [REPEATS]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.families.gemm_tc import GemmTcFamily  # noqa: E402


class Hopper8192(GemmTcFamily):
    """The family with only the 8192^3 headline sizes and rungs 05 and 06."""

    def headline_params(self):
        return [p for p in super().headline_params() if p["M"] == 8192]

    def rungs_for(self, kind, params, quick=False):
        return tuple(r for r in self.rungs if r.number in (5, 6))


def _smi() -> str:
    q = "clocks.sm,power.draw,temperature.gpu"
    return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout.strip()


def main(out: str, repeats: int = 3) -> None:
    from lab.measure import bench, records

    runs = []
    for rep in range(repeats):
        rs = bench.run(Hopper8192(), bench.BenchPlan(kinds=("headline",), min_time_ms=20))
        rows = [{"rung": r.rung, "dtype": r.params["dtype"], "layout": r.params["layout"], "tflops": r.value,
                 "median_ms": r.median_ms, "p10_ms": r.p10_ms, "p90_ms": r.p90_ms, "ratio": r.ratio}
                for r in rs.records]
        runs.append({"repeat": rep, "after": _smi(), "rows": rows})
        for row in rows:
            print(rep, row["rung"], row["dtype"], row["layout"], f"{row['tflops']:.1f}", f"{row['ratio']:.3f}",
                  flush=True)
        print("nvidia-smi after:", runs[-1]["after"], flush=True)
    Path(out).write_text(json.dumps({"provenance": records.provenance(), "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], *[int(a) for a in sys.argv[2:3]])
