"""Measure the L2 sweep (lab.l2) and the anomaly probes (lab.anomalies) on this GPU and write their records.

    python3 scripts/l2_sweep.py OUT_DIR [--quick] [--skip-probes]
writes OUT_DIR/l2.json and OUT_DIR/l2_probes.json (the reference GPU's are under results/h200/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab import anomalies, l2, records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter timings (a smoke run)")
    parser.add_argument("--skip-probes", action="store_true", help="the L2 sweep only")
    args = parser.parse_args(argv)

    def progress(msg: str) -> None:
        print(msg, flush=True)

    rs = l2.run(quick=args.quick, progress=progress)
    records.save(args.out_dir / "l2.json", rs)
    print(l2.summary(rs))
    if not args.skip_probes:
        probes = anomalies.run(progress=progress)
        records.save(args.out_dir / "l2_probes.json", probes)
        print(anomalies.warm_cold_table(probes))
        print(anomalies.tail_parity(probes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
