"""The copy ladder: y = x for float32 arrays of any length and any alignment."""

from __future__ import annotations

import numpy as np

from lab.core.build import KernelSpec
from lab.core.ladder import Family, Problem, Rung
from lab.measure import shapes

BLOCK = 256
BLOCKS_PER_SM = 8  # grid-stride rungs: enough resident blocks to hide latency, few enough to loop


def _rung(key: str, entry: str, title: str, *, launch: str, **knobs: int) -> Rung:
    spec = KernelSpec(f"copy/{key}.cu", entry, tuple(sorted(knobs.items())))
    return Rung("copy", key, spec, title, launch)


def _head(x, y, n: int) -> int:
    """Leading elements to copy one at a time before x and y are both 16-byte aligned."""
    ax, ay = x.data.ptr % 16, y.data.ptr % 16
    if ax != ay or ax % 4:
        return n  # no common alignment: the rung falls back to scalar for everything
    return min(n, ((16 - ax) % 16) // 4)


class CopyFamily(Family):
    name = "copy"
    title = "Copy (y = x), float32"
    launches = ("per_element", "grid_stride", "grid_stride_head", "chunk_per_block")  # `geometry` maps them
    rungs = (
        # Launch: ceil(n / BLOCK) blocks of BLOCK threads, one element each; arguments (x, y, n).
        _rung("01_naive", "copy_naive", "one thread per element", launch="per_element"),
        # Launch: min(SMs x BLOCKS_PER_SM, ceil(n / BLOCK)) blocks of BLOCK threads looping over the array; (x, y, n).
        _rung("02_grid_stride", "copy_grid_stride", "grid-stride loop", launch="grid_stride"),
        # Launch: the grid-stride grid (min(SMs x BLOCKS_PER_SM, ceil(n / BLOCK)) blocks of BLOCK threads), and the
        # scalar head before x and y are 16-byte aligned (_head) as a fourth argument: (x, y, n, head).
        _rung("03_vectorized", "copy_vectorized", "16-byte float4 accesses", launch="grid_stride_head"),
        # Launch: one chunk of 4 x BLOCK x UNROLL floats per block (max(1, (n - head) / chunk) blocks of the BLOCK
        # knob's threads, no grid-stride rounds: see the rung's header); (x, y, n, head).
        # UNROLL and BLOCK from scripts/knob_sweep.py on the H200 (results/h200/knobs.json).
        _rung("04_unrolled", "copy_unrolled", "float4 x UNROLL loads in flight", launch="chunk_per_block", UNROLL=2,
              BLOCK=128, STREAMING=0),
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
        from lab.measure.check import random_array

        xs = []
        for s in range(sets):
            base = random_array((n + x_offset,), np.float32, seed + s, dist)
            xs.append(base[x_offset:])
        label = f"n={n}" + (f" x+{x_offset} y+{y_offset}" if x_offset or y_offset else "")
        return Problem(label, {"x": xs}, (n,), 2 * 4 * n, y_offset, {"n": n, "x_offset": x_offset,
                                                                        "y_offset": y_offset})

    def geometry(self, rung: Rung, x, out) -> tuple[tuple[int], tuple[int], tuple]:
        """(grid, block, the arguments after x and y) of `rung` copying x into `out`, by its launch scheme."""
        n = x.size
        scheme = self.launch_scheme(rung)
        if scheme == "per_element":
            return ((n + BLOCK - 1) // BLOCK,), (BLOCK,), (np.int64(n),)
        head = _head(x, out, n)
        if scheme == "chunk_per_block":
            knobs = dict(rung.spec.knobs)
            block = knobs.get("BLOCK", BLOCK)
            chunks = max(1, (n - head) // (4 * block * knobs["UNROLL"]))
            return (min(chunks, 2**31 - 1),), (block,), (np.int64(n), np.int64(head))
        from lab.core import device

        blocks = max(1, min(device.current().sm_count * BLOCKS_PER_SM, (n + BLOCK - 1) // BLOCK))
        if scheme == "grid_stride":
            return (blocks,), (BLOCK,), (np.int64(n),)
        return (blocks,), (BLOCK,), (np.int64(n), np.int64(head))  # grid_stride_head

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        grid, block, args = self.geometry(rung, x, out)
        get_kernel(rung.spec)(grid, block, (x, out) + args)

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
