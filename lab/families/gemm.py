"""The FP32 GEMM ladder: C = alpha * A @ B + beta * C, row-major, any M, N, K >= 1, leading
dimensions at least the widths. Measured against cuBLAS SGEMM (`cupy.matmul` on float32, TF32 off)
timed on the same problem in the same run.

Every rung has one signature:
    sgemm_<name>(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
                 float beta, float* C, int ldc)
and one launch geometry: 1-D blocks of THREADS threads, grid (ceil(N / BN), ceil(M / BM)). The
knobs below are passed as -D defines, so the launcher and the kernel always agree. Each rung names its
launch scheme: "tiles", that geometry as the knobs give it, or "tiles_vec", the same with VEC=4 (16-byte
accesses) when every leading dimension is a multiple of 4 and every pointer 16-byte aligned, VEC=1
otherwise: both variants are correct on any shape.

STATUS: verified by tests/test_gpu_gemm.py on the H200, 12 passed at commit 7ce5624.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core.build import KernelSpec
from lab.core.ladder import Family, Problem, Rung
from lab.measure import shapes

DEFAULT_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory
# Rungs 01-03 (seconds per launch at 8192^3) leave a sweep past this side, and past the second one in a
# quick plan (a notebook's LIVE run, `lab tour --quick`).
SLOW_RUNGS_MAX_SIDE = 4096
SLOW_RUNGS_MAX_SIDE_QUICK = 2048


def _rung(key: str, entry: str, title: str, *, launch: str, **knobs: int) -> Rung:
    return Rung("gemm_fp32", key, KernelSpec(f"gemm_fp32/{key}.cu", entry, tuple(sorted(knobs.items()))), title,
                launch)


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def dynamic_smem_bytes(rung: Rung) -> int:
    """Dynamic shared memory of the multistage rung: STAGES * (BK*(BM+4) + BK*BN) floats, A stored
    transposed with rows padded by 4 floats (the formula in its header's Requires line). The kernel
    traps at entry if it is given less."""
    k = _knobs(rung)
    if "STAGES" not in k:
        return 0
    return k["STAGES"] * (k["BK"] * (k["BM"] + 4) + k["BK"] * k["BN"]) * 4


def product(a: np.ndarray, b: np.ndarray, c0: np.ndarray | None, alpha: float, beta: float) -> np.ndarray:
    """alpha * a @ b + beta * c0 in float64 (c0 None: beta is 0 and C is not read)."""
    ref = alpha * (a @ b)
    return ref + beta * c0 if c0 is not None else ref


def padded(values: np.ndarray, ld: int) -> np.ndarray:
    """`values` (M x N) in an M x ld array whose padding columns hold 0: the reference, or the error bound,
    of a C with leading dimension ld (the padding is checked separately: it must stay untouched)."""
    out = np.zeros((values.shape[0], ld))
    out[:, :values.shape[1]] = values
    return out


def vectors_fit(problem: Problem, out, per_vector: int) -> bool:
    """Whether 16-byte vectors of `per_vector` elements fit every row of A, B and C: each leading dimension
    a multiple of it and every base pointer 16-byte aligned (the launchers' test for their VEC variant)."""
    a, b = problem.inputs["A"][0], problem.inputs["B"][0]
    lds = (problem.params["lda"], problem.params["ldb"], problem.params["ldc"])
    return all(ld % per_vector == 0 for ld in lds) and all(x.data.ptr % 16 == 0 for x in (a, b, out))


class GemmFp32Family(Family):
    name = "gemm_fp32"
    title = "SGEMM (C = alpha*A@B + beta*C), float32, row-major"
    metric = "TFLOP/s"
    ceiling_name = "cublas_sgemm"
    ceiling_title = "cuBLAS SGEMM"
    sweep_figure = "throughput"  # compute-bound: TFLOP/s against the side, not GB/s against bytes
    profile_figure = "dram_bytes"  # tiling shows in DRAM bytes against the minimum
    launches = ("tiles", "tiles_vec")  # `geometry` maps them
    rungs = (
        # Launch "tiles" (01-05): grid (ceil(N / BN), ceil(M / BM)) of THREADS threads, the build as defined here.
        _rung("01_naive", "sgemm_naive", "one thread per output, rows across threads", launch="tiles",
              BM=32, BN=32, THREADS=1024),
        _rung("02_coalesced", "sgemm_coalesced", "one thread per output, columns across threads", launch="tiles",
              BM=32, BN=32, THREADS=1024),
        _rung("03_smem_tiled", "sgemm_smem_tiled", "shared-memory tiles", launch="tiles",
              BM=32, BN=32, BK=32, THREADS=1024),
        _rung("04_register_tile_1d", "sgemm_register_tile_1d", "each thread a column of TM outputs", launch="tiles",
              BM=64, BN=64, BK=8, TM=8, THREADS=512),
        _rung("05_register_tile_2d", "sgemm_register_tile_2d", "each thread a TM x TN block", launch="tiles",
              BM=128, BN=128, BK=8, TM=8, TN=8, THREADS=256),
        # Launch "tiles_vec" (06-08): the same tile grid, built with VEC=4 where 16-byte vectors fit (vectors_fit),
        # else VEC=1.
        _rung("06_vectorized", "sgemm_vectorized", "16-byte loads, A transposed in shared memory", launch="tiles_vec",
              BM=128, BN=128, BK=8, TM=8, TN=8, THREADS=256),
        _rung("07_warp_tiled", "sgemm_warp_tiled", "block tile -> warp tile -> thread tile", launch="tiles_vec",
              BM=128, BN=128, BK=16, THREADS=256),
        # Also STAGES-deep dynamic shared memory (dynamic_smem_bytes), opted in above 48 KB.
        _rung("08_multistage", "sgemm_multistage", "STAGES-deep cp.async pipeline", launch="tiles_vec",
              BM=64, BN=128, BK=16, WM=32, WN=64, TM=8, TN=8, STAGES=4, MINB=3, FRAG_DB=1, ORDER=1, THREADS=128),
    )
    VEC_RUNGS = tuple(r.key for r in rungs if r.launch == "tiles_vec")  # for the lessons and scripts

    def dynamic_smem_bytes(self, rung: Rung) -> int:
        return dynamic_smem_bytes(rung)

    # --- problems -------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", M: int = 64, N: int = 64, K: int = 64,
                     alpha: float = 1.0, beta: float = 0.0, pad: int = 0, sets: int = 1) -> Problem:
        """A, B (and C when beta != 0) with leading dimensions width + pad."""
        import cupy as cp

        from lab.measure.check import random_array

        lda, ldb, ldc = K + pad, N + pad, N + pad
        a_sets = [random_array((M, lda), np.float32, seed + 11 * s, dist) for s in range(sets)]
        b_sets = [random_array((K, ldb), np.float32, seed + 11 * s + 1, dist) for s in range(sets)]
        c0 = random_array((M, ldc), np.float32, seed + 7, dist) if beta != 0 else None
        mask = cp.zeros((M, ldc), dtype=bool)
        mask[:, :N] = True
        label = f"M={M} N={N} K={K}" + (f" alpha={alpha:g} beta={beta:g}" if (alpha, beta) != (1, 0) else "") + \
            (f" ld+{pad}" if pad else "")
        params = {"M": M, "N": N, "K": K, "alpha": alpha, "beta": beta, "pad": pad, "lda": lda, "ldb": ldb,
                  "ldc": ldc}
        bytes_moved = 4 * (M * K + K * N + M * N * (2 if beta else 1))
        return Problem(label, {"A": a_sets, "B": b_sets}, (M, ldc), bytes_moved, params=params, out_init=c0,
                       write_mask=mask, flops=2 * M * N * K)

    @staticmethod
    def _operands(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """A (M x K), B (K x N) and, when beta != 0, C0 (M x N) as float64, without the padding."""
        p = problem.params
        a = problem.inputs["A"][0].get()[:, :p["K"]].astype(np.float64)
        b = problem.inputs["B"][0].get()[:, :p["N"]].astype(np.float64)
        c0 = problem.out_init.get()[:, :p["N"]].astype(np.float64) if p["beta"] else None
        return a, b, c0

    def reference(self, problem: Problem) -> np.ndarray:
        p = problem.params
        return padded(product(*self._operands(problem), p["alpha"], p["beta"]), p["ldc"])

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """lab.measure.bounds.matmul_bound with fp32 accumulation and fp32 output; 0 in the padding columns."""
        from lab.measure.bounds import matmul_bound

        p = problem.params
        a, b, c0 = self._operands(problem)
        return padded(matmul_bound(a, b, reference[:, :p["N"]], alpha=p["alpha"], beta=p["beta"], c0=c0,
                                   acc_dtype=np.float32, out_dtype=np.float32), p["ldc"])

    # --- launching ------------------------------------------------------------------------------
    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        p = problem.params
        a = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        if self.launch_scheme(rung) == "tiles_vec":
            rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(VEC=4 if vectors_fit(problem, out, 4) else 1))
        rung = dataclasses.replace(rung, spec=rung.spec.with_knobs(**self.extra_knobs(problem)))
        self._launch_kernel(rung, p["M"], p["N"], p["K"], p["alpha"], a, p["lda"], b, p["ldb"], p["beta"], out,
                            p["ldc"], self.extra_args(problem, out))

    def extra_knobs(self, problem: Problem) -> dict:
        """Knobs a subclass adds per problem (the fused epilogue's); none here."""
        return {}

    def extra_args(self, problem: Problem, out) -> tuple:
        """Kernel arguments a subclass appends per problem (the fused epilogue's); none here."""
        return ()

    @staticmethod
    def geometry(rung: Rung, M: int, N: int) -> tuple[tuple[int, int], tuple[int], int]:
        """(grid, block, dynamic shared memory) of a built rung on an M x N output: both launch schemes share it."""
        k = _knobs(rung)
        return ((N + k["BN"] - 1) // k["BN"], (M + k["BM"] - 1) // k["BM"]), (k["THREADS"],), dynamic_smem_bytes(rung)

    def _launch_kernel(self, rung: Rung, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc, extra: tuple = ()) -> None:
        from lab.core.build import get_kernel

        kernel = get_kernel(rung.spec)
        grid, block, smem = self.geometry(rung, M, N)
        if smem > DEFAULT_SMEM_LIMIT:
            kernel.max_dynamic_shared_size_bytes = smem
        kernel(grid, block,
               (np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), a, np.int32(lda), b, np.int32(ldb),
                np.float32(beta), c, np.int32(ldc)) + extra, shared_mem=smem)

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """cuBLAS SGEMM through CuPy (TF32 stays off unless CUPY_TF32=1 is set, which the lab never does)."""
        import cupy as cp

        p = problem.params
        a = problem.inputs["A"][set_index % len(problem.inputs["A"])][:, :p["K"]]
        b = problem.inputs["B"][set_index % len(problem.inputs["B"])][:, :p["N"]]
        if p["beta"] != 0:
            out[:, :p["N"]] = p["alpha"] * cp.matmul(a, b) + p["beta"] * out[:, :p["N"]]
        elif p["pad"] or p["alpha"] != 1:  # beta == 0 never reads C, as in BLAS: C may hold NaN then
            out[:, :p["N"]] = p["alpha"] * cp.matmul(a, b)
        else:
            cp.matmul(a, b, out=out)

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        return _knobs(rung)["THREADS"], dynamic_smem_bytes(rung)

    def min_dram_bytes(self, params: dict) -> int:
        """4 * (M*K + K*N + M*N) bytes: A and B read once and C written once (C read too when beta != 0)."""
        M, N, K = params["M"], params["N"], params["K"]
        return 4 * (M * K + K * N + M * N * (2 if params.get("beta") else 1))

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple[Rung, ...]:
        """The tail plot is about the register-tiled rungs and later; the slow first rungs skip the
        largest sweep sizes (a naive 8192^3 product takes seconds per launch and teaches nothing new).
        The headline sizes time every rung."""
        limit = SLOW_RUNGS_MAX_SIDE_QUICK if quick else SLOW_RUNGS_MAX_SIDE
        if kind == "tail" or (kind == "sweep" and max(params.get("M", 0), params.get("N", 0)) > limit):
            return tuple(r for r in self.rungs if r.number >= 4)
        return self.rungs

    # --- shape families -------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        cases = [{"M": n, "N": n, "K": n} for n in (1, 2, 16, 64, 128, 256)]
        cases += [{"M": m, "N": m, "K": m} for m in (127, 129, 255, 257, 511, 513)]  # multiples +- 1
        cases += [{"M": 97, "N": 101, "K": 103}, {"M": 919, "N": 257, "K": 131}]  # primes
        cases += [{"M": 1, "N": 300, "K": 77}, {"M": 300, "N": 1, "K": 77}, {"M": 300, "N": 77, "K": 1}]
        cases += [{"M": 2048, "N": 16, "K": 64}, {"M": 16, "N": 2048, "K": 64}]  # tall-skinny, short-wide
        cases += [{"M": 64, "N": 64, "K": 8192}, {"M": 33, "N": 65, "K": 4099}]  # K much larger than M, N
        cases += [{"M": 130, "N": 140, "K": 150, "alpha": 0.5, "beta": -1.5},
                  {"M": 128, "N": 128, "K": 128, "alpha": -2.0, "beta": 1.0}]
        cases += [{"M": 129, "N": 131, "K": 67, "pad": 3}, {"M": 128, "N": 128, "K": 64, "pad": 4},
                  {"M": 100, "N": 100, "K": 100, "pad": 5, "beta": 0.25}]
        return cases

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        return [{"M": n, "N": n, "K": n} for n in (256, 512, 1024, 2048, 3072, 4096, 6144, 8192)]

    def tail_params(self) -> list[dict]:
        # N stepping by 1 across the 4096 and 4224 tile boundaries (BN = 128), M = K = 4096.
        return [{"M": 4096, "N": n, "K": 4096} for n in shapes.tail_range(4090, 140)]

    def headline_params(self) -> list[dict]:
        return [{"M": n, "N": n, "K": n} for n in (4096, 8192, 4095, 4097)]
