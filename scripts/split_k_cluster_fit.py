"""What split-K's cluster mode (rung 08, SPLIT_MODE 3) plans on this GPU for its rounds-study shapes: for each cluster
width the driver's count of clusters that fit at once (cuOccupancyMaxActiveClusters), and the (width, S) the launcher
picks from them, beside the launch notes. Nsight Compute showed mode 3 at 256 x 256 x 65536 with its SMs active for
only two thirds of the kernel's time: this says whether the plan launched more clusters than fit in one wave.

    python3 scripts/split_k_cluster_fit.py OUT.json            (on a GPU machine)
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from lab.studies.split_k_rounds import SHAPES


def main(path: Path) -> int:
    import cupy as cp

    from lab.families.gemm_split_k import GemmSplitKFamily, cluster_fit
    from lab.measure.records import provenance

    fam = GemmSplitKFamily()
    rung = fam.rung("08_split_k_cluster")
    rows = []
    for shape in SHAPES:
        problem = fam.make_problem(**shape)
        out = cp.empty(problem.out_shape, problem.dtype)
        tiled = fam._tiled(rung, problem, out)
        fits = {w: cluster_fit(dataclasses.replace(tiled, spec=tiled.spec.with_knobs(SPLIT_CLUSTER=w)))
                for w in (8, 4, 2, 1)}
        width, splits = fam._cluster_plan(tiled, problem)
        rows.append({"shape": shape, "fit_by_width": fits, "plan": {"width": width, "splits": splits},
                     "wanted_splits": fam._wanted_splits(tiled, problem),
                     "notes": fam.launch_notes(rung, problem, out)})
        print(json.dumps(rows[-1], default=str))
    path.write_text(json.dumps({"provenance": provenance(), "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
