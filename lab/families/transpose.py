"""The transpose ladder: out = in.T for float32 matrices of any shape."""

from __future__ import annotations

import numpy as np

from lab.core.build import KernelSpec
from lab.core.ladder import Family, Problem, Rung
from lab.measure import shapes

# Default knobs per rung, chosen by scripts/knob_sweep.py on the H200 at 8192x8192 (cold L2); its
# output is results/h200/knobs.json. 64-wide tiles give DRAM 256-byte runs in both directions.


def _rung(key: str, entry: str, title: str, tile: int, block_rows: int, *, launch: str) -> Rung:
    spec = KernelSpec(f"transpose/{key}.cu", entry, (("BLOCK_ROWS", block_rows), ("TILE", tile)))
    return Rung("transpose", key, spec, title, launch)


class TransposeFamily(Family):
    name = "transpose"
    title = "Transpose (out = in.T), float32"
    profile_figure = "bank_conflicts"  # the padded and swizzled rungs are about shared-memory banks
    # Launch "tiles": grid (ceil(cols / TILE), ceil(rows / TILE)) of TILE x BLOCK_ROWS threads, arguments (x, out,
    # rows, cols); "tiles_out_offset": the same, plus the output's offset in floats from a 32-byte boundary.
    launches = ("tiles", "tiles_out_offset")
    rungs = (
        _rung("01_naive", "transpose_naive", "straight from global memory", 32, 8, launch="tiles"),
        _rung("02_smem_tiled", "transpose_smem_tiled", "shared-memory tile (bank conflicts)", 64, 4, launch="tiles"),
        _rung("03_padded", "transpose_padded", "padded tile, conflict-free", 64, 4, launch="tiles"),
        # BLOCK_ROWS as rung 03's, so that 03 -> 04 changes the tile layout alone; launched on the same tile grid.
        _rung("04_swizzled", "transpose_swizzled", "XOR-swizzled tile, conflict-free", 64, 4, launch="tiles"),
        # The tile grid, and the output's offset from a 32-byte boundary (floats), to which it aligns its writes.
        _rung("05_sector_aligned", "transpose_sector_aligned", "sector-aligned writes for any row length", 64, 4,
              launch="tiles_out_offset"),
    )

    def check_cases(self) -> list[dict]:
        cases = [{"rows": r, "cols": c} for r, c in shapes.check_matrix_shapes()]
        # Outputs that start off a 32-byte boundary: rung 05 aligns its writes to the real address.
        cases += [{"rows": r, "cols": c, "out_offset": o}
                  for r, c, o in ((1, 7, 7), (64, 64, 2), (97, 101, 3), (1023, 1025, 1), (2049, 2047, 5))]
        return cases

    def make_problem(self, seed: int = 0, dist: str = "normal", rows: int = 1, cols: int = 1,
                     sets: int = 1, out_offset: int = 0) -> Problem:
        from lab.measure.check import random_array

        xs = [random_array((rows, cols), np.float32, seed + s, dist) for s in range(sets)]
        params = {"rows": rows, "cols": cols} | ({"out_offset": out_offset} if out_offset else {})
        label = f"{rows}x{cols}" + (f" out+{out_offset}" if out_offset else "")
        return Problem(label, {"x": xs}, (cols, rows), 2 * 4 * rows * cols, out_offset, params)

    def geometry(self, rung: Rung, x, out) -> tuple[tuple[int, int], tuple[int, int], tuple]:
        """(grid, block, arguments) of `rung` transposing x into `out`, by its launch scheme."""
        rows, cols = x.shape
        tile = dict(rung.spec.knobs)["TILE"]
        block_rows = dict(rung.spec.knobs)["BLOCK_ROWS"]
        grid = ((cols + tile - 1) // tile, (rows + tile - 1) // tile)
        args = (x, out, np.int32(rows), np.int32(cols))
        if self.launch_scheme(rung) == "tiles_out_offset":
            args += (np.int32((out.data.ptr // 4) % 8),)  # the output's offset in floats from a 32-byte boundary
        return grid, (tile, block_rows), args

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        get_kernel(rung.spec)(*self.geometry(rung, x, out))

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
        # Two aligned squares, then two shapes whose output rows are not a multiple of 8 floats: the tail
        # that rung 05 is for (the README's table shows the best rung of each).
        return [{"rows": 8192, "cols": 8192}, {"rows": 16384, "cols": 16384}, {"rows": 8191, "cols": 8193},
                {"rows": 12345, "cols": 6789}]
