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



def main(argv: list[str] | None = None) -> int:
    from lab import work_queue
    from lab.errors import LabError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("--quick", action="store_true",
                        help=f"lengths {work_queue.QUICK_SIZES}, {work_queue.QUICK_N_ITEMS} items")
    parser.add_argument("--n-items", type=int, default=None,
                        help=f"items per length (default {work_queue.N_ITEMS}; fewer for the longest items)")
    parser.add_argument("--blocks-per-sm", type=int, default=None,
                        help="blocks of the persistent kernel per SM (default: as many as fit)")
    args = parser.parse_args(argv)
    try:
        print(work_queue.summary([]), flush=True)
        payload = work_queue.study(args.quick, args.n_items, args.blocks_per_sm,
                                   progress=lambda line: print(line, flush=True))
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    empty = payload["empty_kernel"]
    print(work_queue.summary(payload["rows"]))
    print(f"empty kernel: {empty['events_us']:.2f} us between two events, {empty['graph_us']:.2f} us per graph node")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
