#!/usr/bin/env python3
"""The optimization checklist, measured (lab/checklist.py): Y = GELU_tanh(A @ W.T + bias) through the library path,
graph fusion, a Triton kernel and the lab's fused CUDA epilogue, each checked before it is timed against the plain
GEMM in the same run. Writes OUT/checklist.json (with provenance) and prints a table and the verdicts derived from it.

    python scripts/checklist_study.py --out results/local [--sizes 4096 8192] [--no-ncu] [--replay kernel|range]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

COLUMNS = (("size", "size"), ("level", "level"), ("status", "status"), ("median_ms", "median ms"),
           ("p10_p90_ms", "p10-p90 ms"), ("x_gemm", "x GEMM"), ("kernels", "kernels"), ("dram", "DRAM bytes"),
           ("lines", "lines of code"))


def parse_args(argv: list[str]) -> argparse.Namespace:
    from lab import checklist

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for checklist.json")
    p.add_argument("--sizes", type=int, nargs="+", default=list(checklist.DEFAULT_SIZES),
                   help="M = N = K of each timed problem (default: %(default)s)")
    p.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute (no DRAM bytes)")
    p.add_argument("--replay", choices=("kernel", "range"), default="kernel",
                   help="ncu replay: per kernel with caches flushed before each (default), or the whole call as one "
                        "range")
    p.add_argument("--min-time-ms", type=float, default=50.0, help="minimum measured time per timing (default 50)")
    return p.parse_args(argv)


def print_table(record: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from lab import checklist

    table = Table(title=f"{record.get('operation', '')} (cold L2) on {record['provenance'].get('device', '?')}",
                  title_justify="left")
    for _, title in COLUMNS:
        table.add_column(title)
    for row in checklist.summary_rows(record):
        table.add_row(*(row[key] for key, _ in COLUMNS))
    console = Console()
    console.print(table)
    for sentence in checklist.verdicts(record):
        console.print(f"- {sentence}")


def main(argv: list[str]) -> int:
    from lab import checklist, device

    args = parse_args(argv)
    device.current()  # one sentence, not a CUDA traceback, when there is no GPU
    backend = checklist.CupyBackend(min_time_ms=args.min_time_ms, ncu=not args.no_ncu, replay=args.replay)
    record = checklist.measure_levels(args.sizes, backend=backend, progress=lambda line: print(line, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / checklist.STUDY_FILE
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}", flush=True)
    print_table(record)
    return 0


if __name__ == "__main__":
    from lab.errors import LabError

    try:
        sys.exit(main(sys.argv[1:]))
    except LabError as exc:
        raise SystemExit(str(exc)) from None
