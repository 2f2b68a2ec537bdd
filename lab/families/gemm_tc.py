"""The tensor-core GEMM ladder: C = alpha * A @ B + beta * C with A and B in fp16 or bf16, fp32 accumulation,
C in the input type. A is M x K row-major; B is K x N row-major ("NN") or N x K row-major ("TN", a linear
layer's weight). Any M, N, K >= 1, leading dimensions at least the widths. Measured against cuBLAS in the
same type and layout, timed on the same problem in the same run.

Storage: CuPy has float16 but (without ml_dtypes) no bfloat16, so bf16 arrays are uint16 arrays of bf16 bit
patterns; `to_float32` widens either exactly, `round_to_bfloat16_bits` rounds float32 to bf16 (nearest,
ties to even). The kernels see raw 16-bit values either way and take the type as the BF16 knob.

Every rung has one signature:
    gemm_tc_<name>(int M, int N, int K, float alpha, const uint16* A, int lda, const uint16* B, int ldb,
                   float beta, uint16* C, int ldc)
and 1-D blocks of THREADS threads on a grid (ceil(N / BN), ceil(M / BM)) (launch scheme "tiles"). The launcher
passes BF16 and TN (the layout) as knobs, and VEC=8 (16-byte loads) to the rungs that take it (scheme
"tiles_vec") only when every leading dimension is a multiple of 8 and every pointer 16-byte aligned, VEC=1
otherwise: both are correct on any shape. Rungs 06 and 07 run a 1-D grid of at most one block per SM instead
("persistent", "stream_k": `grid`).

The error bound is lab.measure.bounds.tensor_core_matmul_bound: the FP32 family's bound with fp32 accumulation and
the output type's rounding, widened for the truncating accumulation of tensor cores (see lab/measure/bounds.py).

The Hopper rungs (04 on, sm_90a) read A and B through TMA tensor maps instead of pointers:
    gemm_tc_<name>(TensorMap map_a, TensorMap map_b, int M, int N, int K, float alpha, float beta, uint16* C,
                   int ldc)
TMA needs 16-byte-aligned bases and leading dimensions that are multiples of 8 elements (lab/core/tma.py). An
operand that breaks this (4095 x 4095 with no padding, say) is first repacked into a scratch buffer with
its leading dimension rounded up to a multiple of 8, inside the launch and so inside the timing: that is
the generic fallback, and `launch_notes` says which path a launch took (benchmarks store it in each
record's `extra`).

STATUS: every rung verified by tests/test_gpu_gemm_tc.py on the H200: 38 passed at commit 4fdf87d (rungs 01-06 as
they are now; rung 06 gained the RASTER knob at a0a4dd1, its default order unchanged), and rung 07's tests again
(10 passed) at c89eb79, its last code change (the do-while k-loop made the default). Rung 06's epilogue knobs
(c89eb79) leave its default build unchanged; its fused builds are verified by tests/test_gpu_epilogue.py.
Compute-sanitizer memcheck, racecheck and synccheck clean on small odd shapes for rungs 01-06
(results/h200/gemm_tc_sanitize_*.json); rung 07 (its do-while default) memcheck-clean on the same shapes
(gemm_tc_sanitize_07_memcheck.json), not yet under racecheck or synccheck. Rungs 09 (clusters, B multicast) and 10
(TMA-store epilogue) on the H200: 23 GPU tests of both passed at 910e600 (rung 09's last kernel change), and rung
10's 14 again at aa4c585 (its last: C staged in halves). Rung 09 is memcheck-clean
(gemm_tc_sanitize_09_10_memcheck.json); that record's rung 10 failure (a TMA store wrote the padding of a C whose N
is not a multiple of 8) is why such a C takes the register stores now. At 051fee1 on the H200: rung 11's 16 GPU
tests passed (results/h200/gemm_tc_gpu_tests_11.log); rung 11 is memcheck-, racecheck- and synccheck-clean
(gemm_tc_sanitize_11.json), rungs 09 and 10 racecheck- and synccheck-clean (gemm_tc_sanitize_10_race_sync.json),
and rung 10 memcheck-clean (its record was lost; the run's log hopper_pingpong_run_051fee1.log has the line). In
the catalogue.
Rung 10's narrower tile builds (BN = 192 and 128, which `shaped` picks per shape: lab/families/gemm_tc_tiles.py) are
verified by the tile tests of tests/test_gpu_gemm_tc.py (their H200 log: results/h200/gemm_tc_gpu_tests_tiles.log)
and memcheck (results/h200/gemm_tc_sanitize_10_bn*.json).
Records: results/h200/gemm_tc.json; rungs 06, 09, 10, 11 against the library: results/h200/hopper_gemm_study*.json;
rung 10's tile builds: results/h200/hopper_tile_study.json.
Candidate (`candidate_rungs`: the tour, notebooks and README ladder do not walk it; not in the ladder until its GPU
tests pass on the H200): rung 12, stream-K over clusters on rung 10's loop, which `scheduled` (and lab.ops's hopper
path) runs where gemm_tc_tiles.schedule puts it ahead of rung 10's tile. Its GPU tests passed on an H100 at 730294a
(results/h100/new_rungs_run_730294a.log) and again, with rung 10's builds, at ec4fdb8 (36 passed;
results/h100/hopper_sched_run_ec4fdb8.log); memcheck, racecheck and synccheck clean at 730294a
(results/h100/sanitize_new_rungs/); timed by lab.studies.stream_k_cluster_study (results/h100/
stream_k_cluster_study.json, ec4fdb8; stream_k_cluster_study_730294a.json the first run). `scripts/device_run.sh
new-rungs` runs all three.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core import tma
from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.families import gemm_tc_tiles
from lab.families.gemm import DEFAULT_SMEM_LIMIT, padded, product, vectors_fit
from lab.measure import shapes
from lab.measure.bounds import BFLOAT16

DTYPES = ("float16", BFLOAT16)
LAYOUTS = ("NN", "TN")
STORAGE = {"float16": np.dtype(np.float16), BFLOAT16: np.dtype(np.uint16)}
MIN_ARCH = 80  # mma.sync m16n8k16 for fp16 and bf16
HOPPER_ARCH = 90  # TMA, wgmma and setmaxnreg; the last two only in the arch-specific sm_90a target
SLOW_RUNGS_MAX_SIDE = 4096  # rung 01 (scalar fragment loads) leaves sweep sizes past this side and the tail
CLUSTER_LAUNCHES = ("cluster", "cluster_tma_store", "cluster_stream_k")  # clusters of two blocks that share B
TMA_STORE_LAUNCHES = ("cluster_tma_store", "cluster_stream_k")  # C's tensor map and store_by_tma after ldc


def _rung(key: str, entry: str, title: str, *, launch: str, min_arch: int = MIN_ARCH, arch_suffix: str = "",
          **knobs: int) -> Rung:
    spec = KernelSpec(f"gemm_tc/{key}.cu", entry, tuple(sorted(knobs.items())), min_arch=min_arch,
                      arch_suffix=arch_suffix)
    return Rung("gemm_tc", key, spec, title, launch)


def uses_tma(rung: Rung) -> bool:
    """The Hopper rungs: operands through TMA tensor maps (their own launch signature)."""
    return rung.spec.min_arch >= HOPPER_ARCH


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def dynamic_smem_bytes(rung: Rung) -> int:
    """Dynamic shared memory of a multistage rung: STAGES * (BM + BN) * BK two-byte elements (unpadded,
    swizzled A and B tiles; the formula in rung 03's Requires line), plus 1024 bytes on the TMA rungs to
    align the tiles to the 128-byte swizzle's 1024-byte period and, on rungs 10-12, a buffer of 64 x BN / C_PARTS
    for C's staging per consumer warpgroup; 0 for the rungs with static tiles. The kernel traps at entry if it is
    given less."""
    k = _knobs(rung)
    if "STAGES" not in k:
        return 0
    consumers = k.get("CONSUMERS", k["BM"] // 64)
    staging = consumers * 64 * k["BN"] * 2 // k["C_PARTS"] if rung.launch in TMA_STORE_LAUNCHES else 0
    return k["STAGES"] * (k["BM"] + k["BN"]) * k["BK"] * 2 + staging + (1024 if uses_tma(rung) else 0)


def block_tile(rung: Rung) -> tuple[int, int]:
    """(BM, BN): the block's tile of C, from the rung's knobs (rung 01 has one 16x16 tile per warp)."""
    k = _knobs(rung)
    if "BM" in k:
        return k["BM"], k["BN"]
    return 16 * k["WARPS_M"], 16 * k["WARPS_N"]


# --- bf16 as uint16 bit patterns ----------------------------------------------------------------

def round_to_bfloat16_bits(x, xp=np):
    """float32 values -> bf16 bit patterns (uint16), rounded to nearest, ties to even, as the hardware's
    cvt.rn.bf16.f32 does: keep the top 16 bits after adding 0x7FFF plus the lowest kept bit. Values past
    the largest bf16 round to +-inf, subnormals round like any other value, and a NaN stays a (quiet) NaN
    instead of letting the carry turn it into inf."""
    bits = xp.ascontiguousarray(xp.asarray(x, dtype=xp.float32)).view(xp.uint32)
    rounded = (bits + xp.uint32(0x7FFF) + ((bits >> 16) & xp.uint32(1))) >> 16
    nan = (bits & xp.uint32(0x7FFFFFFF)) > xp.uint32(0x7F800000)
    return xp.where(nan, (bits >> 16) | xp.uint32(0x0040), rounded).astype(xp.uint16)


def bfloat16_bits_to_float32(bits, xp=np):
    """bf16 bit patterns -> float32, exactly (bf16 is float32's top half)."""
    return (xp.asarray(bits).astype(xp.uint32) << 16).view(xp.float32)


def to_float32(stored, dtype: str, xp=np):
    """An fp16 array, or a uint16 array of bf16 patterns, as float32 (exact)."""
    return bfloat16_bits_to_float32(stored, xp) if dtype == BFLOAT16 else stored.astype(xp.float32)


def to_storage(x32, dtype: str, xp=np):
    """float32 -> the storage array of `dtype` (fp16: float16; bf16: uint16 patterns), rounded to nearest even."""
    return round_to_bfloat16_bits(x32, xp) if dtype == BFLOAT16 else x32.astype(xp.float16)


def input_scale(dist: str, K: int) -> float:
    """A factor for the inputs that keeps |C| well inside fp16's range (65504) at any K. Only the "wide"
    distribution needs one: its magnitudes reach 10^3, so a single product can reach 10^6, and a sum of K
    of them grows like sqrt(K). Scaling both A and B by 0.1 * K^(-1/4) keeps the largest single product
    below 10^4 / sqrt(K) and the sums' spread near 400 whatever K is. (Small values land among fp16's
    subnormals; the reference is computed from the rounded values, so that costs no accuracy.)"""
    return 0.1 * K ** -0.25 if dist == "wide" else 1.0


def _validate(M: int, N: int, K: int, pad: int, layout: str, dtype: str) -> None:
    if min(M, N, K) < 1 or pad < 0:
        raise LabError(f"gemm_tc needs M, N, K >= 1 and pad >= 0; got M={M} N={N} K={K} pad={pad}.")
    if layout not in LAYOUTS:
        raise LabError(f"gemm_tc layout must be one of {', '.join(LAYOUTS)} (B is K x N or N x K); got {layout!r}.")
    if dtype not in DTYPES:
        raise LabError(f"gemm_tc dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")


class GemmTcFamily(Family):
    name = "gemm_tc"
    title = "Tensor-core GEMM (C = alpha*A@B + beta*C), fp16/bf16 in, fp32 accumulation"
    metric = "TFLOP/s"
    ceiling_name = "cublas_gemm"
    ceiling_title = "cuBLAS (same type and layout)"
    sweep_figure = "throughput"
    profile_figure = "bank_conflicts"  # ldmatrix against padded (and, from rung 03, swizzled) tiles
    # The launch schemes; `grid` maps each to its grid.
    launches = ("tiles", "tiles_vec", "persistent", "stream_k", "cluster", "cluster_tma_store", "cluster_stream_k")
    rungs = (
        # Launch "tiles": grid (ceil(N / BN), ceil(M / BM)) of THREADS threads (BM x BN = 16 WARPS_M x 16 WARPS_N),
        # A and B by pointer.
        _rung("01_mma_global", "gemm_tc_mma_global", "mma.sync, fragments loaded from global memory",
              launch="tiles", BF16=0, TN=0, WARPS_M=2, WARPS_N=2, THREADS=128),
        # Launch "tiles_vec": the tile grid, built with VEC=8 where 16-byte vectors fit every operand, else VEC=1.
        _rung("02_ldmatrix_smem", "gemm_tc_ldmatrix_smem", "padded shared-memory tiles read with ldmatrix",
              launch="tiles_vec", BF16=0, TN=0, BM=128, BN=128, BK=32, WM=64, WN=32, PAD=8, VEC=8, THREADS=256),
        # Launch "tiles_vec", with STAGES-deep dynamic shared memory (dynamic_smem_bytes), opted in above 48 KB.
        _rung("03_swizzled_multistage", "gemm_tc_swizzled_multistage",
              "swizzled shared memory, STAGES-deep cp.async pipeline",
              launch="tiles_vec", BF16=0, TN=0, BM=128, BN=128, BK=32, WM=64, WN=64, STAGES=4, VEC=8, THREADS=128),
        # Launch "tiles": the tile grid, A and B through TMA maps (repacked first where TMA cannot read them), dynamic
        # shared memory for the stages.
        _rung("04_tma_wgmma", "gemm_tc_tma_wgmma", "TMA into swizzled shared memory, mbarrier pipeline, wgmma",
              launch="tiles", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=128, BK=64, STAGES=4,
              THREADS=256),
        # Launch "tiles": the grid of 128 x 256 tiles, A and B through TMA maps (repacked first where TMA cannot read
        # them), dynamic shared memory for the stages.
        _rung("05_warp_specialized", "gemm_tc_warp_specialized",
              "warp-specialized: a TMA producer, two wgmma consumers (setmaxnreg), 128 x 256 tiles",
              launch="tiles", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=256, BK=64, STAGES=4,
              GROUP_M=8, THREADS=384),
        # Launch "persistent": a 1-D grid of min(tiles, SMs) blocks that walk the tiles, A and B through TMA maps,
        # dynamic shared memory for the stages.
        _rung("06_persistent", "gemm_tc_persistent",
              "persistent: one block per SM, the next tile's loads during the stores",
              launch="persistent", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=256, BK=64,
              STAGES=4, RASTER=2, GROUP_M=8, THREADS=384),
        # Launch "stream_k": k-tiles as the unit of work, a 1-D grid of min(tiles x k-tiles, SMs) blocks, and a
        # workspace (a partial tile's slot and a flag per block: stream_k_workspace) after the TMA rungs' arguments.
        _rung("07_stream_k", "gemm_tc_stream_k",
              "stream-K: the last partial wave split along K over every SM, a deterministic fix-up",
              launch="stream_k", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=256, BK=64,
              STAGES=4, RASTER=2, GROUP_M=8, SK_WAVES=1, THREADS=384),
        # Launch "cluster": clusters of two blocks (compiled in), a 1-D grid of 2 x min(pair tiles, the clusters that
        # fit at once) blocks, B's tensor map in boxes of half a tile (each block multicasts its half to both).
        _rung("09_cluster_multicast", "gemm_tc_cluster_multicast",
              "clusters of two: each block loads half of B, TMA multicasts it to both",
              launch="cluster", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=256, BK=64,
              STAGES=4, RASTER=2, GROUP_M=4, THREADS=384),
        # Launch "cluster_tma_store": rung 09's, with C's tensor map and whether to use it (store_by_tma) after ldc,
        # and two staging buffers of 64 x BN / C_PARTS after the stages in dynamic shared memory.
        _rung("10_tma_store", "gemm_tc_tma_store",
              "the epilogue through shared memory and a TMA store, overlapped with the next tile",
              launch="cluster_tma_store", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=256, BK=64,
              STAGES=4, C_PARTS=2, RASTER=2, GROUP_M=4, THREADS=384),
        # Launch "cluster_tma_store" as rung 10; a 64 x BN tile per consumer warpgroup, pair tiles of 2 x 64 rows.
        _rung("11_pingpong", "gemm_tc_pingpong",
              "ping-pong: each consumer warpgroup owns a tile, one's epilogue under the other's k-loop",
              launch="cluster_tma_store", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=64, BN=256, BK=64,
              STAGES=4, C_PARTS=1, CONSUMERS=2, RASTER=2, GROUP_M=8, THREADS=384),
    )
    candidate_rungs = (
        # Launch "cluster_stream_k": rung 10's arguments, then rung 07's workspace (a slot and a flag per block); a 1-D
        # grid of 2 x min(pair tiles x k-tiles, the clusters that fit at once) blocks. Compiled and checked on the CPU
        # (tests/test_gemm_tc_family.py); its GPU tests (tests/test_gpu_gemm_tc.py) have not run yet.
        _rung("12_stream_k_cluster", "gemm_tc_stream_k_cluster",
              "stream-K on rung 10's loop: clusters split the last partial wave of pair tiles along K",
              launch="cluster_stream_k", min_arch=HOPPER_ARCH, arch_suffix="a", BF16=0, TN=0, BM=128, BN=256, BK=64,
              STAGES=4, C_PARTS=2, RASTER=2, GROUP_M=4, SK_WAVES=1, THREADS=384),
    )
    # The rungs of each kind by key, for the lessons, scripts and tests (the launcher reads each rung's launch).
    PERSISTENT_RUNGS = tuple(r.key for r in rungs if r.launch in ("persistent", "stream_k"))  # <= 1 block per SM
    STREAM_K_RUNGS = tuple(r.key for r in rungs if r.launch == "stream_k")
    VEC_RUNGS = tuple(r.key for r in rungs if r.launch == "tiles_vec")

    def __init__(self, accumulation_scale: float = 1.0):
        # The share of the statistical part of the error bound a check allows (lab.measure.bounds.
        # tensor_core_matmul_bound): 1 for the checks, 0.5 for the GPU test of the bound's margin.
        self.accumulation_scale = accumulation_scale

    def _xp(self):
        if self.array_module is not None:
            return self.array_module
        import cupy

        return cupy

    # --- problems -------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", M: int = 64, N: int = 64, K: int = 64,
                     alpha: float = 1.0, beta: float = 0.0, pad: int = 0, layout: str = "TN",
                     dtype: str = "float16", sets: int = 1) -> Problem:
        """A (M x K), B (K x N for NN, N x K for TN) and, when beta != 0, C0, in `dtype`, with leading
        dimensions width + pad. Random values are drawn in float32 and rounded to the type; the reference
        uses the rounded values."""
        from lab.measure.check import random_array

        xp = self._xp()
        _validate(M, N, K, pad, layout, dtype)
        scale = input_scale(dist, K)
        lda, ldc = K + pad, N + pad
        b_shape = (K, N + pad) if layout == "NN" else (N, K + pad)

        def draw(shape, s):
            return to_storage(random_array(shape, np.float32, s, dist, xp=xp) * np.float32(scale), dtype, xp)

        a_sets = [draw((M, lda), seed + 11 * s) for s in range(sets)]
        b_sets = [draw(b_shape, seed + 11 * s + 1) for s in range(sets)]
        c0 = to_storage(random_array((M, ldc), np.float32, seed + 7, dist, xp=xp), dtype, xp) if beta != 0 else None
        mask = xp.zeros((M, ldc), dtype=bool)
        mask[:, :N] = True
        label = (f"M={M} N={N} K={K} {layout} {dtype}"
                 + (f" alpha={alpha:g} beta={beta:g}" if (alpha, beta) != (1, 0) else "")
                 + (f" ld+{pad}" if pad else ""))
        params = {"M": M, "N": N, "K": K, "layout": layout, "dtype": dtype, "alpha": alpha, "beta": beta,
                  "pad": pad, "lda": lda, "ldb": b_shape[1], "ldc": ldc}
        return Problem(label, {"A": a_sets, "B": b_sets}, (M, ldc), self.min_dram_bytes(params), params=params,
                       dtype=STORAGE[dtype], out_init=c0, write_mask=mask, flops=2 * M * N * K)

    @staticmethod
    def _operands(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """A (M x K), B (K x N, whichever way it is stored) and, when beta != 0, C0 (M x N), as float64
        values of the stored (rounded) inputs, without the padding."""
        from lab.measure.check import to_numpy

        p = problem.params
        dtype = p["dtype"]
        a = to_float32(to_numpy(problem.inputs["A"][0])[:, :p["K"]], dtype).astype(np.float64)
        b_stored = to_float32(to_numpy(problem.inputs["B"][0]), dtype).astype(np.float64)
        b = b_stored[:, :p["N"]] if p["layout"] == "NN" else b_stored[:, :p["K"]].T
        c0 = to_float32(to_numpy(problem.out_init)[:, :p["N"]], dtype).astype(np.float64) if p["beta"] else None
        return a, b, c0

    def reference(self, problem: Problem) -> np.ndarray:
        p = problem.params
        return padded(product(*self._operands(problem), p["alpha"], p["beta"]), p["ldc"])

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """lab.measure.bounds.tensor_core_matmul_bound (fp32 accumulation on tensor cores, output rounded to the
        input type); 0 in the padding columns."""
        from lab.measure.bounds import tensor_core_matmul_bound

        p = problem.params
        a, b, c0 = self._operands(problem)
        out_dtype = BFLOAT16 if p["dtype"] == BFLOAT16 else np.float16
        return padded(tensor_core_matmul_bound(a, b, reference[:, :p["N"]], alpha=p["alpha"], beta=p["beta"], c0=c0,
                                               out_dtype=out_dtype, accumulation_scale=self.accumulation_scale),
                      p["ldc"])

    def output_values(self, out):
        """The output as the checks compare it: bf16 patterns widened to float32 (fp16 compares as it is)."""
        if out.dtype == np.uint16:
            return bfloat16_bits_to_float32(out, np if isinstance(out, np.ndarray) else self._xp())
        return out

    # --- launching ------------------------------------------------------------------------------
    def variant(self, rung: Rung, problem: Problem, out=None) -> Rung:
        """The rung built for this problem: its type and layout, and VEC from the alignment where it has one."""
        p = problem.params
        knobs = {"BF16": int(p["dtype"] == BFLOAT16), "TN": int(p["layout"] == "TN")}
        if self.launch_scheme(rung) == "tiles_vec" and out is not None:
            knobs["VEC"] = 8 if vectors_fit(problem, out, 8) else 1
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs, **self.extra_knobs(problem)))

    def shaped(self, rung: Rung, problem: Problem, slots: int | None = None) -> Rung:
        """`rung` built with the tile the family picks for the problem's shape (lab.families.gemm_tc_tiles: a wave
        model over the BNs rung 10 builds), for the rungs that take one (gemm_tc_tiles.TILED_RUNGS); any other rung
        as it is. `slots`: the clusters that fit on the GPU at once (default: the driver's, cluster_slots)."""
        if rung.key not in gemm_tc_tiles.TILED_RUNGS:
            return rung
        p = problem.params
        if slots is None:
            slots = cluster_slots(self.variant(rung, problem))
        bn = gemm_tc_tiles.choose(p["M"], p["N"], p["layout"], slots)
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**gemm_tc_tiles.TILE_KNOBS[bn]))

    def scheduled(self, problem: Problem, slots: int | None = None) -> Rung:
        """The Hopper build the family runs for the problem's shape (gemm_tc_tiles.schedule): rung 12 where its split
        is predicted ahead, else rung 10 with the tile `shaped` picks. lab.ops's "hopper" path launches this."""
        ten = self.rung(gemm_tc_tiles.TILED_RUNGS[0])
        p = problem.params
        if slots is None:
            slots = cluster_slots(self.variant(ten, problem))
        key, _ = gemm_tc_tiles.schedule(p["M"], p["N"], p["K"], p["layout"], slots)
        return self.rung(key) if key == gemm_tc_tiles.STREAM_K_RUNG else self.shaped(ten, problem, slots)

    def extra_knobs(self, problem: Problem) -> dict:
        """Knobs a subclass adds per problem (the fused epilogue's); none here."""
        return {}

    def extra_args(self, problem: Problem, out) -> tuple:
        """Kernel arguments a subclass appends per problem (the fused epilogue's); none here."""
        return ()

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        p = problem.params
        a = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        rung = self.variant(rung, problem, out)
        grid = self.grid(rung, p)
        kernel = get_kernel(rung.spec)
        smem = dynamic_smem_bytes(rung)
        if smem > DEFAULT_SMEM_LIMIT:  # above 48 KB a kernel must opt in to more dynamic shared memory
            kernel.max_dynamic_shared_size_bytes = smem
        if uses_tma(rung):
            (map_a, map_b), a, b = self._tensor_maps(rung, p, a, b)  # a, b: what the maps point at
            args = (map_a, map_b, np.int32(p["M"]), np.int32(p["N"]), np.int32(p["K"]), np.float32(p["alpha"]),
                    np.float32(p["beta"]), out, np.int32(p["ldc"]))
            scheme = self.launch_scheme(rung)
            if scheme in TMA_STORE_LAUNCHES:
                why = c_store_refusal(p, out)
                c_map = tma.TensorMap2D(out.data.ptr, p["N"], p["M"], 2 * p["ldc"], 64, 64)  # boxes of 64 x 64
                args += (map_a if why else tma.encode(c_map), np.int32(why is None))  # map_a: a map never read
            if scheme in ("stream_k", "cluster_stream_k"):
                args += stream_k_workspace(grid[0], *block_tile(rung))
        else:
            args = (np.int32(p["M"]), np.int32(p["N"]), np.int32(p["K"]), np.float32(p["alpha"]), a,
                    np.int32(p["lda"]), b, np.int32(p["ldb"]), np.float32(p["beta"]), out, np.int32(p["ldc"]))
        kernel(grid, (_knobs(rung)["THREADS"],), args + self.extra_args(problem, out), shared_mem=smem)

    def grid(self, rung: Rung, p: dict) -> tuple[int, ...]:
        """The grid of a built rung (`variant`'s) on a problem of params p, by its launch scheme: the tiles of C,
        (ceil(N / BN), ceil(M / BM)), for "tiles" and "tiles_vec"; one block per SM at most, a 1-D grid of
        min(tiles, SMs) for "persistent" and min(tiles x k-tiles, SMs) for "stream_k"; for "cluster" and
        "cluster_tma_store", two blocks for each pair tile (2 BM x BN) up to the clusters that fit on the GPU at once
        (cluster_slots); for "cluster_stream_k", two for each of pair tiles x k-tiles up to the same."""
        bm, bn = block_tile(rung)
        grid = ((p["N"] + bn - 1) // bn, (p["M"] + bm - 1) // bm)
        scheme = self.launch_scheme(rung)
        if scheme in ("tiles", "tiles_vec"):
            return grid
        if scheme in CLUSTER_LAUNCHES:
            pair_tiles = grid[0] * (-(-p["M"] // (CLUSTER * bm)))
            if scheme == "cluster_stream_k":
                return (CLUSTER * min(pair_tiles * -(-p["K"] // _knobs(rung)["BK"]), stream_k_cluster_slots(rung)),)
            return (CLUSTER * min(pair_tiles, cluster_slots(rung)),)
        if scheme not in ("persistent", "stream_k"):
            raise LabError(f"{self.name} rung {rung.key}: launch {scheme!r} has no grid here (GemmTcFamily.grid).")
        from lab.core import device

        work = grid[0] * grid[1] * (-(-p["K"] // _knobs(rung)["BK"]) if scheme == "stream_k" else 1)
        return (min(work, device.current().sm_count),)

    def _tensor_maps(self, rung: Rung, p: dict, a, b):
        """TMA maps of A (M x K, k contiguous; boxes BK x BM) and B (TN: N x K, boxes BK x BN, or BK x BN / 2 where
        the two blocks of a cluster each bring half; NN: K x N, boxes of 64 columns x BK rows), each operand repacked
        first when TMA cannot read it as it is. Returns the maps and the arrays they point at, which the caller keeps
        alive until the kernel is enqueued."""
        k = _knobs(rung)
        a, lda = tma_operand(a, p["M"], p["K"], p["lda"])
        maps = [tma.TensorMap2D(a.data.ptr, p["K"], p["M"], 2 * lda, k["BK"], k["BM"])]
        if p["layout"] == "TN":
            b, ldb = tma_operand(b, p["N"], p["K"], p["ldb"])
            clustered = self.launch_scheme(rung) in CLUSTER_LAUNCHES
            rows = k["BN"] // (CLUSTER if clustered else 1)  # each block's share of B
            maps.append(tma.TensorMap2D(b.data.ptr, p["K"], p["N"], 2 * ldb, k["BK"], rows))
        else:
            b, ldb = tma_operand(b, p["K"], p["N"], p["ldb"])
            maps.append(tma.TensorMap2D(b.data.ptr, p["N"], p["K"], 2 * ldb, 64, k["BK"]))
        # Once the kernel is enqueued, dropping a scratch copy is safe: CuPy's pool hands its memory out
        # again only to work later in the same stream.
        return tuple(tma.encode(m) for m in maps), a, b

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        """Which path a launch of `rung` on `problem` takes, for the records: the TMA rungs say whether they
        read the operands directly or repacked them first (and why); the others which loads they use."""
        p = problem.params
        if uses_tma(rung):
            a, b = problem.inputs["A"][0], problem.inputs["B"][0]
            why = {name: tma.refusal(x.data.ptr, ld) for name, x, ld in (("A", a, p["lda"]), ("B", b, p["ldb"]))}
            repacked = {name: reason for name, reason in why.items() if reason}
            notes = {"path": "tma"} if not repacked else {"path": "repack+tma", "repacked": repacked}
            if self.launch_scheme(rung) in TMA_STORE_LAUNCHES:
                notes["store"] = c_store_refusal(p, out) or "tma"
            return notes
        if self.launch_scheme(rung) == "tiles_vec":
            vec = _knobs(self.variant(rung, problem, out))["VEC"]
            return {"path": "element loads" if vec == 1 else
                    "cp.async 16-byte" if "STAGES" in _knobs(rung) else "16-byte loads"}
        return {"path": "fragments from global memory"}

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """The library in the same type and layout, fp32 accumulation end to end (lab.tools.library_gemm):
        cuBLASLt with a workspace and its heuristic's algorithm where nvmath-python is installed, else cublasGemmEx.
        Shapes with alpha, beta or padding other than 1, 0, 0 (check cases, never timed) call cublasGemmEx with them
        as given (beta = 0 never reads C, as in BLAS)."""
        from lab.tools.library_gemm import gemm_ex, library_call

        p = problem.params
        a = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        if (p["alpha"], p["beta"]) != (1, 0):
            gemm_ex(p, a, b, out)
            return
        key = (a.data.ptr, b.data.ptr, out.data.ptr, p["M"], p["N"], p["K"], p["dtype"], p["layout"], p["lda"],
               p["ldb"], p["ldc"])
        call = self._library_calls.get(key)
        if call is None:
            call = self._library_calls[key] = library_call(p["M"], p["N"], p["K"], p["dtype"], p["layout"],
                                                           a.data.ptr, p["lda"], b.data.ptr, p["ldb"], out.data.ptr,
                                                           p["ldc"])[0]
        call()

    _library_calls: dict = {}  # bound library calls per operand addresses and shape (a timed loop reuses them)
    peer_baselines = ("torch_mm",)  # counted with the ceiling: a record's ceiling is the faster of the two

    def baselines(self) -> dict:
        """torch.mm on the same memory (DLPack, zero-copy), where PyTorch with CUDA is installed: the call a PyTorch
        user makes (cuBLASLt with PyTorch's workspace and heuristic)."""
        from lab.tools.library_gemm import torch_mm_available

        return {"torch_mm": self._launch_torch} if torch_mm_available() else {}

    def _launch_torch(self, problem: Problem, out, set_index: int = 0) -> None:
        from lab.tools.library_gemm import torch_mm

        p = problem.params
        a = problem.inputs["A"][set_index % len(problem.inputs["A"])]
        b = problem.inputs["B"][set_index % len(problem.inputs["B"])]
        torch_mm(p, a, b, out)

    def dynamic_smem_bytes(self, rung: Rung) -> int:
        return dynamic_smem_bytes(rung)

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        return _knobs(rung)["THREADS"], dynamic_smem_bytes(rung)

    def in_readme(self, params: dict) -> bool:
        """The README shows the TN layout (a linear layer's weight), both types; the records hold NN too."""
        return params.get("layout") == "TN"

    def min_dram_bytes(self, params: dict) -> int:
        """2 * (M*K + K*N + M*N) bytes: A and B read once and C written once (C read too when beta != 0)."""
        M, N, K = params["M"], params["N"], params["K"]
        return 2 * (M * K + K * N + M * N * (2 if params.get("beta") else 1))

    def rungs_for(self, kind: str, params: dict, quick: bool = False) -> tuple[Rung, ...]:
        """Rung 01 (the fragment-layout lesson, not a contender) stays out of the tail and of sweep sizes past
        SLOW_RUNGS_MAX_SIDE; the headline sizes time every rung."""
        if kind == "tail" or (kind == "sweep" and max(params.get("M", 0), params.get("N", 0)) > SLOW_RUNGS_MAX_SIDE):
            return tuple(r for r in self.rungs if r.number >= 2)
        return self.rungs

    # --- shape families -------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """The shapes below, each in both layouts and both types."""
        base = [{"M": n, "N": n, "K": n} for n in (1, 2, 16, 64, 128)]
        base += [{"M": m, "N": m, "K": m} for m in (15, 17, 63, 65, 127, 129, 255, 257)]  # multiples +- 1
        base += [{"M": 97, "N": 101, "K": 103}, {"M": 131, "N": 67, "K": 7}, {"M": 61, "N": 59, "K": 53}]  # primes
        base += [{"M": 1, "N": 300, "K": 77}, {"M": 300, "N": 1, "K": 77}, {"M": 300, "N": 77, "K": 1}]
        base += [{"M": 1024, "N": 16, "K": 64}, {"M": 16, "N": 1024, "K": 64}]  # tall-skinny, short-wide
        base += [{"M": 64, "N": 64, "K": k} for k in (8, 9, 24, 33)]  # K below and around one k-tile
        base += [{"M": 64, "N": 64, "K": 4096}, {"M": 33, "N": 65, "K": 4099}, {"M": 16, "N": 24, "K": 65536},
                 {"M": 17, "N": 9, "K": 65535}]  # K much larger than M, N
        base += [{"M": 130, "N": 140, "K": 150, "alpha": 0.5, "beta": -1.5},
                 {"M": 128, "N": 128, "K": 128, "alpha": -2.0, "beta": 1.0}]
        base += [{"M": 129, "N": 131, "K": 67, "pad": 3}, {"M": 128, "N": 128, "K": 64, "pad": 8},
                 {"M": 100, "N": 100, "K": 100, "pad": 5, "beta": 0.25}, {"M": 64, "N": 64, "K": 64, "pad": 1}]
        return [case | {"layout": layout, "dtype": dtype} for case in base for layout in LAYOUTS for dtype in DTYPES]

    def sweep_params(self, max_bytes: int = 0) -> list[dict]:
        return [{"M": n, "N": n, "K": n, "layout": "TN", "dtype": "float16"}
                for n in (256, 512, 1024, 2048, 3072, 4096, 6144, 8192)]

    def tail_params(self) -> list[dict]:
        # N stepping by 1 across 4096 and the next tile boundaries (BN = 128), M = K = 4096, fp16 TN.
        return [{"M": 4096, "N": n, "K": 4096, "layout": "TN", "dtype": "float16"}
                for n in shapes.tail_range(4090, 140)]

    def headline_params(self) -> list[dict]:
        return [{"M": n, "N": n, "K": n, "layout": layout, "dtype": dtype}
                for dtype in DTYPES for layout in ("TN", "NN") for n in (4096, 8192, 4095, 4097)]


def c_store_refusal(p: dict, out) -> str | None:
    """Why rungs 10-12 store C from registers instead of through TMA on this problem (one sentence), or None."""
    if out.dtype.itemsize != 2:
        return "a quantized output (a fused epilogue's) is stored from registers"
    if p["beta"] != 0:
        return "beta != 0 reads C, which the TMA store does not"
    if p["ldc"] != p["N"] and p["N"] % 8:
        # Measured on the H200: a TMA store clips a row's end at a 16-byte boundary, not at the element, so it would
        # write the padding columns after an N that is not a multiple of 8.
        return f"N = {p['N']} is not a multiple of 8, and a TMA store would write the padding after it"
    return tma.refusal(out.data.ptr, p["ldc"])


CLUSTER = 2  # blocks per cluster of the "cluster" launch (rung 09's __cluster_dims__)


def cluster_fit(rung: Rung) -> int | None:
    """How many clusters of `rung` (built; its knobs, its cluster size compiled in) fit on the current GPU at once:
    the driver's cuOccupancyMaxActiveClusters for its threads and shared memory; None where the driver cannot say
    (no cuda-bindings). Not every SM can take part (a cluster's blocks share a GPC, and GPCs have SMs left over), so
    this can be less than SMs / the cluster size."""
    from lab.core.build import get_kernel
    from lab.core.cluster import max_active_clusters

    kernel = get_kernel(rung.spec)
    smem = dynamic_smem_bytes(rung)
    if smem > DEFAULT_SMEM_LIMIT:
        kernel.max_dynamic_shared_size_bytes = smem
    return max_active_clusters(kernel, _knobs(rung)["THREADS"], smem)


def cluster_slots(rung: Rung) -> int:
    """cluster_fit for the clusters of two of rungs 09-12; where the driver cannot say, SMs / 2: a grid larger
    than what fits is still correct, its last clusters just start later."""
    from lab.core import device

    return cluster_fit(rung) or device.current().sm_count // CLUSTER


def stream_k_cluster_slots(rung: Rung) -> int:
    """The clusters rung 12 may launch: all must be on the GPU at once, since a cluster waits for lower-numbered ones
    and CUDA promises no order of dispatch. The driver's count (cluster_fit); where it cannot say, a quarter of the
    SMs, which every GPC's pairs of SMs hold (cluster_slots' half of the SMs need not all fit)."""
    from lab.core import device

    return cluster_fit(rung) or max(device.current().sm_count // (2 * CLUSTER), 1)


REPACK = KernelSpec("common/repack_rows.cu", "lab_repack_rows", min_arch=MIN_ARCH)
REPACK_THREADS = 256


def tma_operand(x, rows: int, cols: int, ld: int):
    """(array, leading dimension) TMA can read for a row-major rows x cols operand: `x` itself when its
    address and stride allow it, else a scratch copy (kernels/common/repack_rows.cu) whose leading dimension
    is `cols` rounded up to a multiple of 8, the extra columns zero (the tensor map's width stays `cols`)."""
    if tma.refusal(x.data.ptr, ld) is None:
        return x, ld
    import cupy as cp

    from lab.core.build import get_kernel

    ld8 = -(-cols // 8) * 8
    packed = cp.empty((rows, ld8), dtype=x.dtype)
    chunks = rows * (ld8 // 8)
    get_kernel(REPACK)(((chunks + REPACK_THREADS - 1) // REPACK_THREADS,), (REPACK_THREADS,),
                       (x, np.int64(ld), packed, np.int64(ld8), np.int32(rows), np.int32(cols)))
    return packed, ld8


_WORKSPACES: dict = {}  # (device id, stream) -> (slots, flags), grown as needed


def stream_k_workspace(blocks: int, bm: int, bn: int) -> tuple:
    """(slots, flags) for a stream-K launch of `blocks` blocks of bm x bn tiles on the current device and stream:
    a float32 slot of bm * bn per block and an int32 flag per block, zero between launches (the kernel clears
    every flag it consumes). Kept per device and stream, because two launches at once on one workspace would
    mix their partial tiles; grown, never shrunk."""
    import cupy as cp

    key = (cp.cuda.Device().id, cp.cuda.get_current_stream().ptr)
    slots, flags = _WORKSPACES.get(key, (None, None))
    if slots is None or slots.size < blocks * bm * bn or flags.size < blocks:  # a flag per block, whatever the tile
        slots = cp.empty(max(blocks * bm * bn, 0 if slots is None else slots.size), dtype=cp.float32)
        flags = cp.zeros(max(blocks, 0 if flags is None else flags.size), dtype=cp.int32)
        _WORKSPACES[key] = (slots, flags)
    return slots, flags


# --- the ceiling's cuBLAS call -------------------------------------------------------------------

