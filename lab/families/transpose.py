"""The transpose ladder: out = in.T for float32 matrices of any shape."""

from __future__ import annotations

import numpy as np

from lab import shapes
from lab.build import KernelSpec
from lab.ladder import Family, Problem, Rung

# Default knobs per rung, chosen by scripts/knob_sweep.py on the H200 at 8192x8192 (cold L2); its
# output is results/h200/knobs.json. 64-wide tiles give DRAM 256-byte runs in both directions.


def _rung(key: str, entry: str, title: str, tile: int, block_rows: int) -> Rung:
    spec = KernelSpec(f"transpose/{key}.cu", entry, (("BLOCK_ROWS", block_rows), ("TILE", tile)))
    return Rung("transpose", key, spec, title)


class TransposeFamily(Family):
    name = "transpose"
    title = "Transpose (out = in.T), float32"
    rungs = (
        _rung("01_naive", "transpose_naive", "straight from global memory", 32, 8),
        _rung("02_smem_tiled", "transpose_smem_tiled", "shared-memory tile (bank conflicts)", 64, 4),
        _rung("03_padded", "transpose_padded", "padded tile, conflict-free", 64, 4),
        _rung("04_swizzled", "transpose_swizzled", "XOR-swizzled tile, conflict-free", 64, 8),
    )

    def check_cases(self) -> list[dict]:
        return [{"rows": r, "cols": c} for r, c in shapes.check_matrix_shapes()]

    def make_problem(self, seed: int = 0, dist: str = "normal", rows: int = 1, cols: int = 1,
                     sets: int = 1) -> Problem:
        from lab.check import random_array

        xs = [random_array((rows, cols), np.float32, seed + s, dist) for s in range(sets)]
        return Problem(f"{rows}x{cols}", {"x": xs}, (cols, rows), 2 * 4 * rows * cols, 0,
                       {"rows": rows, "cols": cols})

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.build import get_kernel

        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        rows, cols = x.shape
        tile = dict(rung.spec.knobs)["TILE"]
        block_rows = dict(rung.spec.knobs)["BLOCK_ROWS"]
        grid = ((cols + tile - 1) // tile, (rows + tile - 1) // tile)
        get_kernel(rung.spec)(grid, (tile, block_rows), (x, out, np.int32(rows), np.int32(cols)))

    def reference(self, problem: Problem) -> np.ndarray:
        return np.ascontiguousarray(problem.inputs["x"][0].get().astype(np.float64).T)

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        out.data.copy_from_device_async(x.data, x.nbytes)

    def baselines(self) -> dict:
        import cupy as cp

        def cupy_transpose(problem: Problem, out, set_index: int = 0) -> None:
            x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
            cp.copyto(out, x.T)

        return {"cupy_transpose": cupy_transpose}

    def min_dram_bytes(self, params: dict) -> int:
        return 8 * params["rows"] * params["cols"]

    def sweep_params(self, max_bytes: int) -> list[dict]:
        seen, params = set(), []
        for b in shapes.byte_sweep(1 << 10, max_bytes):
            n = shapes.square_for_bytes(b, 4, multiple=32)
            if n not in seen:
                seen.add(n)
                params.append({"rows": n, "cols": n})
        return params

    def tail_params(self) -> list[dict]:
        # Square sizes stepping by 1 across the 8192 and 8224 tile boundaries.
        return [{"rows": n, "cols": n} for n in shapes.tail_range(8184, 48)]

    def headline_params(self) -> list[dict]:
        return [{"rows": 8192, "cols": 8192}, {"rows": 16384, "cols": 16384}]
