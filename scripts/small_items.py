#!/usr/bin/env python3
"""Many small work items (lab.work_queue): one launch per item, a CUDA graph of those launches, one batched launch
and a persistent kernel with a device-side queue, microseconds per item against item size; every path checked
against a float64 reference (outputs poisoned with NaN first) before it is timed. JSON with provenance.

    python3 scripts/small_items.py OUT.json [--quick] [--n-items N] [--blocks-per-sm B]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SKEWED_MEANS = (4096,)  # one skewed mix of lengths, at this mean
QUICK_SIZES = (256, 4096, 65536)
QUICK_N_ITEMS = 2000


def main(argv: list[str] | None = None) -> int:
    from lab import records, timing, work_queue
    from lab.errors import LabError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("--quick", action="store_true", help=f"lengths {QUICK_SIZES}, {QUICK_N_ITEMS} items")
    parser.add_argument("--n-items", type=int, default=None,
                        help=f"items per length (default {work_queue.N_ITEMS}; fewer for the longest items)")
    parser.add_argument("--blocks-per-sm", type=int, default=None,
                        help="blocks of the persistent kernel per SM (default: as many as fit)")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else work_queue.SIZES
    n_items = args.n_items or (QUICK_N_ITEMS if args.quick else work_queue.N_ITEMS)

    try:
        provenance = records.provenance()
        print(f"{provenance['device']} ({provenance['arch']}, {provenance['sm_count']} SMs); "
              f"per-item microseconds:", flush=True)
        print(work_queue.summary([]), flush=True)
        rows = work_queue.measure(sizes, n_items, skewed=SKEWED_MEANS, blocks_per_sm=args.blocks_per_sm,
                                  progress=lambda line: print(line, flush=True))
        overhead = timing.launch_overhead()
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    empty = {"events_us": overhead["events"].median_ms * 1e3, "graph_us": overhead["graph"].per_launch_ms * 1e3}
    payload = work_queue.make_payload(rows, provenance, empty_kernel=empty, sizes=list(sizes),
                                      skewed_means=list(SKEWED_MEANS))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(work_queue.summary(rows))
    print(f"empty kernel: {empty['events_us']:.2f} us between two events, {empty['graph_us']:.2f} us per graph node")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
