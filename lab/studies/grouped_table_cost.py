"""Grouped GEMM's problem table, costed on the host: per case (lab.families.grouped_gemm.CASES), the time to build
the table the persistent kernel reads (the tensor maps, encoded through the driver, and the packing), as
lab.families.grouped_gemm.table_build_cost measures it. Notebook 05 (lab.lessons.underfill) sets it beside the
grouped kernel's own time: what re-routing every step would cost if the maps were rebuilt on the host.

    lab study grouped-table-cost --out DIR [--repeats 5]     writes DIR/grouped_table_cost.json

Needs the CUDA driver (cuTensorMapEncodeTiled) and a GPU for the provenance.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lab.families.grouped_gemm import CASES
from lab.measure import records
from lab.measure.records import write_json

RECORD = "grouped_table_cost.json"


def measure(repeats: int = 5) -> dict:
    """The host time to build each case's problem table, as a payload with provenance."""
    import cupy as cp

    from lab.families.grouped_gemm import table_build_cost

    cp.cuda.runtime.free(0)  # a CUDA context first: cuTensorMapEncodeTiled refuses to run without one
    rows = [table_build_cost(case, repeats=repeats) for case in CASES]
    return {"provenance": records.provenance(), "repeats": repeats, "rows": rows}


def run(out_dir: Path, *, repeats: int = 5, progress: Callable[[str], None] | None = None) -> Path:
    """Measure (measure) and write out_dir/RECORD; one line per case goes to `progress`. Returns the path."""
    payload = measure(repeats)
    path = Path(out_dir) / RECORD
    write_json(path, payload)
    if progress:
        for row in payload["rows"]:
            progress(f"{row['case']}: {row['groups']} groups, {row['maps']} maps, {row['median_ms']:.2f} ms "
                     f"({row['per_map_us']:.1f} us per map)")
    return path
