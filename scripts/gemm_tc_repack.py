#!/usr/bin/env python3
"""The cost of the TMA rungs' generic fallback: repacking a side x side fp16 operand whose leading dimension
is not a multiple of 8 into an aligned copy, by CuPy's strided copy and by kernels/common/repack_rows.cu,
beside a plain device copy of the same bytes (the bandwidth ceiling), cold L2, same run. JSON with provenance.

    python3 scripts/gemm_tc_repack.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def time_side(side: int, flusher) -> list[dict]:
    import cupy as cp

    from lab.families.gemm_tc import tma_operand
    from lab.measure import timing

    src = cp.random.standard_normal((side, side), dtype=cp.float32).astype(cp.float16)
    ld8 = -(-side // 8) * 8
    dst = cp.empty((side, ld8), cp.float16)
    flat_src, flat_dst = cp.empty(src.size, cp.float16), cp.empty(src.size, cp.float16)
    packed, ld = tma_operand(src, side, side, side)
    assert ld == ld8 and bool(cp.all(packed[:, :side] == src)) and bool(cp.all(packed[:, side:] == 0))
    moved = src.nbytes + dst.nbytes  # bytes read + bytes written

    def strided(i):
        dst[:, :side] = src

    rows = []
    for name, fn in (("device_copy", lambda i: flat_dst.__setitem__(Ellipsis, flat_src)),
                     ("cupy_strided_copy", strided),
                     ("lab_repack_rows", lambda i: tma_operand(src, side, side, side))):
        t = timing.measure(fn, l2="cold", flusher=flusher, min_time_ms=20)
        rows.append({"side": side, "method": name, "median_ms": t.median_ms, "bytes_moved": int(moved),
                     "gb_per_s": moved / (t.median_ms * 1e-3) / 1e9})
        print(rows[-1], flush=True)
    return rows


def main(out_path: str) -> None:
    from lab.measure import records, timing

    flusher = timing.L2Flusher()
    rows = [row for side in (4095, 4097) for row in time_side(side, flusher)]
    Path(out_path).write_text(json.dumps({"provenance": records.provenance(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
