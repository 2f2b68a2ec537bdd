"""The copy ladder: y = x for float32 arrays of any length and any alignment."""

from __future__ import annotations

import numpy as np

from lab import shapes
from lab.build import KernelSpec
from lab.ladder import Family, Problem, Rung

BLOCK = 256
BLOCKS_PER_SM = 8  # grid-stride rungs: enough resident blocks to hide latency, few enough to loop


def _rung(key: str, entry: str, title: str, **knobs: int) -> Rung:
    spec = KernelSpec(f"copy/{key}.cu", entry, tuple(sorted(knobs.items())))
    return Rung("copy", key, spec, title)


def _head(x, y, n: int) -> int:
    """Leading elements to copy one at a time before x and y are both 16-byte aligned."""
    ax, ay = x.data.ptr % 16, y.data.ptr % 16
    if ax != ay or ax % 4:
        return n  # no common alignment: the rung falls back to scalar for everything
    return min(n, ((16 - ax) % 16) // 4)


class CopyFamily(Family):
    name = "copy"
    title = "Copy (y = x), float32"
    rungs = (
        _rung("01_naive", "copy_naive", "one thread per element"),
        _rung("02_grid_stride", "copy_grid_stride", "grid-stride loop"),
        _rung("03_vectorized", "copy_vectorized", "16-byte float4 accesses"),
        # UNROLL and BLOCK from scripts/knob_sweep.py on the H200 (results/h200/knobs.json).
        _rung("04_unrolled", "copy_unrolled", "float4 x UNROLL loads in flight", UNROLL=2, BLOCK=128, STREAMING=0),
    )

    def check_cases(self) -> list[dict]:
        cases = [{"n": n} for n in shapes.check_lengths()]
        # Starts that break 16-byte alignment: equal offsets (vector body after a scalar head) and
        # unequal ones (no common alignment: scalar fallback).
        for n in (1, 5, 1027, 1 << 16, (1 << 20) + 3):
            cases += [{"n": n, "x_offset": a, "y_offset": b} for a, b in ((1, 1), (2, 2), (3, 3), (1, 3), (0, 2))]
        return cases

    def make_problem(self, seed: int = 0, dist: str = "normal", n: int = 1, x_offset: int = 0,
                     y_offset: int = 0, sets: int = 1) -> Problem:
        from lab.check import random_array

        xs = []
        for s in range(sets):
            base = random_array((n + x_offset,), np.float32, seed + s, dist)
            xs.append(base[x_offset:])
        label = f"n={n}" + (f" x+{x_offset} y+{y_offset}" if x_offset or y_offset else "")
        return Problem(label, {"x": xs}, (n,), 2 * 4 * n, y_offset, {"n": n, "x_offset": x_offset,
                                                                        "y_offset": y_offset})

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab import device
        from lab.build import get_kernel

        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        n = x.size
        kernel = get_kernel(rung.spec)
        if rung.key == "01_naive":
            kernel(((n + BLOCK - 1) // BLOCK,), (BLOCK,), (x, out, np.int64(n)))
            return
        blocks = max(1, min(device.current().sm_count * BLOCKS_PER_SM, (n + BLOCK - 1) // BLOCK))
        head = _head(x, out, n)
        if rung.key == "02_grid_stride":
            kernel((blocks,), (BLOCK,), (x, out, np.int64(n)))
        elif rung.key == "04_unrolled":
            # One chunk per block, no grid-stride rounds: see the rung's header.
            knobs = dict(rung.spec.knobs)
            block = knobs.get("BLOCK", BLOCK)
            chunks = max(1, (n - head) // (4 * block * knobs["UNROLL"]))
            kernel((min(chunks, 2**31 - 1),), (block,), (x, out, np.int64(n), np.int64(head)))
        else:
            kernel((blocks,), (BLOCK,), (x, out, np.int64(n), np.int64(head)))

    def reference(self, problem: Problem) -> np.ndarray:
        return problem.inputs["x"][0].get().astype(np.float64)

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        out.data.copy_from_device_async(x.data, x.nbytes)  # cudaMemcpyAsync, device to device

    def min_dram_bytes(self, params: dict) -> int:
        return 8 * params["n"]

    def sweep_params(self, max_bytes: int) -> list[dict]:
        return [{"n": max(1, b // 8)} for b in shapes.byte_sweep(1 << 10, max_bytes)]

    def tail_params(self) -> list[dict]:
        # 64 MiB arrays (past the L2), every length across 4-element and 128-element boundaries.
        return [{"n": n} for n in shapes.tail_range(1 << 24, 160)]

    def headline_params(self) -> list[dict]:
        return [{"n": 1 << 26}, {"n": 1 << 28}]  # 256 MiB and 1 GiB per array
