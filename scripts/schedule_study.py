#!/usr/bin/env python3
"""The scheduling lesson's records (lab/scheduling.py): tile orders (time, then Nsight Compute's L2 hit rate and
DRAM bytes), the FP32 contrast, stream-K against the waves, and the small items (lab/work_queue.py). Each study
is checked before it is timed, writes its own JSON with provenance, and a failure in one does not stop the
others. `lab study` runs the same.

    python3 scripts/schedule_study.py OUT_DIR [orders] [counters] [fp32] [streamk] [items]   (default: all)
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


def _show(row: dict | str) -> None:
    if isinstance(row, str):  # the small-items study reports lines
        print(row, flush=True)
        return
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "tflops"}, flush=True)


def main(out_dir: str, *studies: str) -> int:
    from lab import scheduling

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in studies or tuple(scheduling.STUDY_FILES):
        start = time.time()
        print(f"== {name}", flush=True)
        try:
            _save(out, scheduling.STUDY_FILES[name], scheduling.run_study(name, progress=_show))
        except Exception:  # report and go on: the other studies' records are still worth having
            failed += 1
            traceback.print_exc()
        print(f"== {name}: {time.time() - start:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.exit(main(*sys.argv[1:]))
