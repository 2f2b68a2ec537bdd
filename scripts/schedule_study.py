#!/usr/bin/env python3
"""The scheduling lesson's records (lab/scheduling.py): tile orders (time, then Nsight Compute's L2 hit rate and
DRAM bytes), the FP32 contrast, and stream-K against the waves. Each study is checked before it is timed, writes
its own JSON with provenance, and a failure in one does not stop the others.

    python3 scripts/schedule_study.py OUT_DIR [orders] [counters] [fp32] [streamk]   (default: all four)
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _save(out_dir: Path, name: str, payload: dict) -> None:
    (out_dir / name).write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {out_dir / name}", flush=True)


def _show(row: dict) -> None:
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "tflops"}, flush=True)


def main(out_dir: str, *studies: str) -> int:
    from lab import scheduling

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    steps = {
        "orders": lambda: _save(out, "schedule_orders.json", scheduling.time_orders(progress=_show)),
        "counters": lambda: _save(out, "schedule_orders_ncu.json", scheduling.order_counters()),
        "fp32": lambda: _save(out, "schedule_orders_fp32.json", scheduling.time_orders(
            scheduling.FP32_ORDER_SHAPES, scheduling.FP32_ORDER_SETTINGS, "gemm_fp32", "08_multistage",
            progress=_show) | {"counters": scheduling.order_counters(
                scheduling.FP32_ORDER_SHAPES, scheduling.FP32_ORDER_SETTINGS, "gemm_fp32", "08_multistage")}),
        "streamk": lambda: _save(out, "schedule_stream_k.json", scheduling.stream_k_study(progress=_show)),
    }
    failed = 0
    for name in studies or tuple(steps):
        start = time.time()
        print(f"== {name}", flush=True)
        try:
            steps[name]()
        except Exception:  # report and go on: the other studies' records are still worth having
            failed += 1
            traceback.print_exc()
        print(f"== {name}: {time.time() - start:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.exit(main(*sys.argv[1:]))
