"""The decode ladder: Y = X @ W^T for a handful of tokens against a large weight, the GEMM of LLM decoding.
X is M x K row-major (M tokens, 1 to 128 in the headline; more run per 128-token chunk), W is N x K row-major
(a linear layer's weight, the "TN" layout of gemm_tc), Y is M x N row-major; fp16 or bf16 in and out, fp32
accumulation, Y rounded once. No alpha or beta: plain Y = X W^T. Any M, N, K >= 1, leading dimensions at
least the widths, any element alignment.

The time is reading W once, so the metric is GB/s of the minimum DRAM bytes (W, X and Y once each:
`min_dram_bytes`), against the device copy of the same number of bytes in the same run (`launch_ceiling`:
half of them read from W's buffer, half written to a scratch buffer), and beside cuBLAS in the same type and
layout (`baselines`: cupy.matmul(x, w.T) for fp16, cublasGemmEx for bf16 and for padded or offset operands).

Storage: as gemm_tc (lab/families/gemm_tc.py, whose helpers this module uses): bf16 arrays are uint16 arrays
of bf16 bit patterns, fp16 arrays float16. A problem's padding columns (k >= K of X and W) and the elements
before an offset start hold NaN, so a kernel that reads past K, or a straddling 16-byte chunk it forgot to
mask, turns its outputs into NaN instead of passing by luck.

Every rung has one signature:
    decode_<name>(int M, int N, int K, const uint16* X, int ldx, const uint16* W, int ldw, uint16* Y, int ldy)
and 1-D blocks on a 1-D grid over W's rows. The launcher (`launch_plan`) compiles per M bucket (MT = 1, 2, 4,
8, 16 n-tiles of 8 tokens), picks the rows per warp (RT) and the chunks per k-block (CHUNKS) by bucket, the
warps per block (WARPS: 8 when a single wave of 8-warp blocks fits the GPU, by their occupancy, else 4), and
VEC = 8 (16-byte loads) when X and W are 16-byte aligned with leading dimensions that are multiples of 8,
VEC = 1 (element loads) otherwise; M > 128 runs as one launch per 128-token chunk. `launch_notes` records which
path and knobs ran.

Error bound: lab.measure.bounds.tensor_core_matmul_bound, as gemm_tc (fp32 accumulation on tensor cores, truncating
per k-step, output rounded once); a split of K across warps only shortens each accumulator's chain.

STATUS: tests/test_gpu_decode.py passed on the H200 at 8b8c2d1 (both rungs, every check case, half-bound margins);
compute-sanitizer memcheck clean on both rungs (results/h200/sanitize_split_k_decode_grouped/, 27d1d24). In the
catalogue. Records: results/h200/decode.json (384ca0b; the kernels are unchanged since), decode_knobs.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.families.gemm import padded
from lab.families.gemm_split_k import GemmSplitKFamily
from lab.families.gemm_tc import STORAGE, bfloat16_bits_to_float32, input_scale, to_float32, to_storage
from lab.measure.bounds import BFLOAT16

DTYPES = ("float16", BFLOAT16)
MIN_ARCH = 80  # mma.sync m16n8k16 for fp16 and bf16, createpolicy
MAX_TOKENS = 128  # tokens per launch: M beyond it runs in 128-token chunks
INT32_MAX = 2**31 - 1
DEFAULT_SM_COUNT = 132  # the H200's, for plans made with no GPU to ask (CPU tests, compile reports)
BF16_NAN_BITS = 0x7FC0  # a quiet NaN as a bf16 bit pattern

# Per M bucket (MT n-tiles of 8 tokens): (RT 16-row tiles per warp, CHUNKS 32-k chunks per k-block). RT = 2
# from 9 tokens keeps X's re-reads at <= half of W's bytes up to M = 16 (X is read once per block of 16 * RT
# rows); CHUNKS shrinks as the tiles grow so that the loads of a k-block (CHUNKS * (2 RT + MT) 16-byte chunks
# per lane) and the accumulators (4 RT MT) fit ~128 registers: 3-4 blocks of 4 warps per SM.
BUCKET_SHAPES = {1: (1, 8), 2: (2, 4), 4: (2, 2), 8: (2, 1), 16: (1, 1)}
WARPS_WIDE, WARPS_NARROW = 8, 4  # warps per block: 8 when a single wave of them fits the GPU, else 4
STATIC_SMEM_LIMIT = 48 * 1024  # the kernel's partial tiles are static shared memory (its static_assert)

HEADLINE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)
HEADLINE_SIDES = (4096, 8192)
README_TOKENS = (1, 16)  # the targets' two ends (M <= 16); the records hold every headline M
SWEEP_TOKENS = (1, 16)
SWEEP_SIDES = (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
TAIL_SIDE = 8192
TAIL_TOKENS = tuple(range(1, 21))


SPLIT_K_FAMILY = GemmSplitKFamily()
SPLIT_K = SPLIT_K_FAMILY.rung("08_split_k")
SPLIT_K_RUNG = "02_split_k_gemm"  # its key (the GPU tests and records name it)


def _rung(key: str, entry: str, title: str, *, launch: str, **knobs: int) -> Rung:
    spec = KernelSpec(f"decode/{key}.cu", entry, tuple(sorted(knobs.items())), min_arch=MIN_ARCH)
    return Rung("decode", key, spec, title, launch)


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def n_tiles(tokens: int) -> int:
    """MT for a launch of `tokens` (1..128) tokens: ceil(tokens / 8) rounded up to a power of two (one build
    per bucket: 1-8, 9-16, 17-32, 33-64, 65-128 tokens)."""
    tiles = -(-tokens // 8)
    return 1 << (tiles - 1).bit_length()


def token_chunks(M: int) -> list[tuple[int, int]]:
    """(first token, tokens) of each launch: one for M <= 128, else one per 128-token chunk."""
    return [(first, min(MAX_TOKENS, M - first)) for first in range(0, M, MAX_TOKENS)]


def partial_tile_bytes(warps: int, rt: int, mt: int) -> int:
    """Static shared memory of the rung's cross-warp sum: WARPS x (RT x MT tiles of 16 x 8 fp32 values)."""
    return warps * rt * mt * 16 * 8 * 4


def resident_blocks(spec: KernelSpec) -> int:
    """Blocks of `spec` one SM of this GPU holds at once (lab.core.occupancy, from the loaded kernel's registers and
    static shared memory); 1 for an arch lab.core.occupancy has no limits for."""
    from lab.core import device
    from lab.core.build import get_kernel
    from lab.core.occupancy import occupancy

    kernel = get_kernel(spec)
    try:
        occ = occupancy(device.current().arch, dict(spec.knobs)["THREADS"], kernel.num_regs, kernel.shared_size_bytes)
    except ValueError:
        return 1
    return max(1, occ.blocks_per_sm)


def _address(a) -> int:
    return a.data.ptr if hasattr(a.data, "ptr") else a.ctypes.data


def vectors_fit(x, ldx: int, w, ldw: int) -> bool:
    """Whether the 16-byte (VEC = 8) build can read X and W: both 16-byte aligned, both leading dimensions
    multiples of 8 elements (so every row starts aligned and a chunk straddling K stays inside its row's
    padding). K itself may be anything; Y needs nothing (2-byte stores)."""
    return ldx % 8 == 0 and ldw % 8 == 0 and _address(x) % 16 == 0 and _address(w) % 16 == 0


def _validate(M: int, N: int, K: int, dtype: str, pad: int, offsets: tuple[int, ...]) -> None:
    if min(M, N, K) < 1:
        raise LabError(f"decode needs M, N, K >= 1; got M={M} N={N} K={K}.")
    if max(M, N, K) + pad > INT32_MAX // 2:
        raise LabError(f"decode takes M, N and K (plus padding) below 2^30 (int32 indices); got M={M} N={N} K={K}.")
    if dtype not in DTYPES:
        raise LabError(f"decode dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    if pad < 0 or min(offsets) < 0:
        raise LabError(f"decode needs pad >= 0 and offsets >= 0 (elements); got pad={pad}, offsets {offsets}.")


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a plan: tokens [first, first + tokens) of X and Y, the kernel built for them,
    its grid (blocks over W's rows) and block size."""

    first: int
    tokens: int
    spec: KernelSpec
    grid: int
    threads: int

    @property
    def knobs(self) -> dict:
        return dict(self.spec.knobs)


class DecodeFamily(Family):
    name = "decode"
    title = "Decode GEMM (Y = X @ W^T, 1-128 tokens against an N x K weight), fp16/bf16, fp32 accumulation"
    metric = "GB/s"
    ceiling_name = "cupy_device_copy"
    ceiling_title = "the device copy of the same bytes"
    sweep_figure = "bandwidth"
    profile_figure = "dram_bytes"  # W read once; X's re-reads stay in L2
    launches = ("gemv", "split_k_gemm")
    rungs = (
        # Launch "gemv" (launch_plan): one launch per 128-token chunk, each a 1-D grid of ceil(N / (16 RT)) blocks of
        # 32 WARPS threads over W's rows, built for the chunk's M bucket; no dynamic shared memory.
        _rung("01_mma_gemv", "decode_mma_gemv",
              "tensor-core GEMV: W rows in the mma's M slot, tokens in N, 16-byte loads, K split across warps",
              launch="gemv", BF16=0, VEC=8, MT=1, RT=1, CHUNKS=8, WARPS=4, THREADS=128, L2_PREFETCH=256),
        # Where rung 01 runs out of registers for bytes in flight (M >= 32, its header's "Where it stops"): the
        # split-K GEMM (gemm_tc rung 08, W staged through shared memory by TMA), on the same operands. Launch
        # "split_k_gemm": gemm_split_k's launch of its rung 08 (SPLIT_K) on the problem seen as a TN GEMM (gemm_view).
        Rung("decode", SPLIT_K_RUNG, SPLIT_K.spec,
             "split-K GEMM (gemm_tc rung 08): X and W through TMA and shared memory, K split to fill the SMs",
             "split_k_gemm"),
    )

    def __init__(self, force: dict | None = None, accumulation_scale: float = 1.0):
        # Knobs forced on every launch (a GPU test running the check cases under WARPS = 4 and 8, a tuning
        # study); None: the launcher's own choices.
        self.force = dict(force or {})
        # The share of the statistical part of the error bound a check allows (as gemm_tc's): 1 for the
        # checks, 0.5 for the GPU test of the bound's margin.
        self.accumulation_scale = accumulation_scale
        # Plans by (rung, shape, type, VEC): planning asks the occupancy of a build, and a timed launch must
        # not spend host time that the spin kernel in front of it might not cover.
        self._plans: dict = {}

    def _xp(self):
        if self.array_module is not None:
            return self.array_module
        import cupy

        return cupy

    # --- problems ---------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", M: int = 1, N: int = 4096, K: int = 4096,
                     dtype: str = "float16", pad: int = 0, x_offset: int = 0, w_offset: int = 0, y_offset: int = 0,
                     sets: int = 1) -> Problem:
        """X (M x K) and W (N x K) in `dtype`, leading dimensions K + pad (X, W) and N + pad (Y); X, W and Y
        start x_offset, w_offset and y_offset elements past a 16-byte boundary. Random values are drawn in
        float32, scaled (gemm_tc's input_scale) and rounded to the type; the reference uses the rounded
        values. Padding columns and offset heads hold NaN."""
        _validate(M, N, K, dtype, pad, (x_offset, w_offset, y_offset))
        ldx = ldw = K + pad
        ldy = N + pad
        xs = [self._operand(M, ldx, K, x_offset, seed + 11 * s, dist, dtype) for s in range(sets)]
        ws = [self._operand(N, ldw, K, w_offset, seed + 11 * s + 1, dist, dtype) for s in range(sets)]
        xp = self._xp()
        mask = xp.zeros((M, ldy), dtype=bool)
        mask[:, :N] = True
        params = {"M": M, "N": N, "K": K, "dtype": dtype}
        params |= {k: v for k, v in (("pad", pad), ("x_offset", x_offset), ("w_offset", w_offset),
                                     ("y_offset", y_offset)) if v}
        params |= {"ldx": ldx, "ldw": ldw, "ldy": ldy}
        label = (f"M={M} N={N} K={K} {dtype}" + (f" ld+{pad}" if pad else "")
                 + "".join(f" {name}+{v}" for name, v in (("X", x_offset), ("W", w_offset), ("Y", y_offset)) if v))
        return Problem(label, {"X": xs, "W": ws}, (M, ldy), self.min_dram_bytes(params), out_offset=y_offset,
                       params=params, dtype=STORAGE[dtype], write_mask=mask, flops=2 * M * N * K)

    def _operand(self, rows: int, ld: int, K: int, offset: int, seed: int, dist: str, dtype: str):
        """A rows x ld operand starting `offset` elements into its buffer: random values in [:, :K], NaN in the
        padding columns and in the `offset` elements before it."""
        from lab.measure.check import random_array

        xp = self._xp()
        values = random_array((offset + rows * ld,), np.float32, seed, dist, xp=xp) * np.float32(input_scale(dist, K))
        flat = to_storage(values, dtype, xp)
        flat[:offset] = _nan(dtype)
        operand = flat[offset:].reshape(rows, ld)
        operand[:, K:] = _nan(dtype)
        return operand

    @staticmethod
    def _operands(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        """X (M x K) and W^T (K x N) as float64 values of the stored (rounded) inputs, without the padding."""
        from lab.measure.check import to_numpy

        p = problem.params
        x = to_float32(to_numpy(problem.inputs["X"][0])[:, :p["K"]], p["dtype"]).astype(np.float64)
        w = to_float32(to_numpy(problem.inputs["W"][0])[:, :p["K"]], p["dtype"]).astype(np.float64)
        return x, w.T

    def reference(self, problem: Problem) -> np.ndarray:
        x, wt = self._operands(problem)
        return padded(x @ wt, problem.params["ldy"])

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """lab.measure.bounds.tensor_core_matmul_bound with alpha = 1, beta = 0 and the output rounded to the input
        type; 0 in the padding columns (which must stay untouched)."""
        from lab.measure.bounds import tensor_core_matmul_bound

        p = problem.params
        x, wt = self._operands(problem)
        out_dtype = BFLOAT16 if p["dtype"] == BFLOAT16 else np.float16
        bound = tensor_core_matmul_bound(x, wt, reference[:, :p["N"]], out_dtype=out_dtype,
                                         accumulation_scale=self.accumulation_scale)
        return padded(bound, p["ldy"])

    def output_values(self, out):
        """bf16 patterns widened to float32 for the checks; fp16 compares as it is."""
        if out.dtype == np.uint16:
            return bfloat16_bits_to_float32(out, np if isinstance(out, np.ndarray) else self._xp())
        return out

    # --- launching --------------------------------------------------------------------------------
    def launch_plan(self, rung: Rung, M: int, N: int, K: int, dtype: str, vec: int, sm_count: int = DEFAULT_SM_COUNT,
                    resident: Callable[[KernelSpec], int] | None = None) -> list[Launch]:
        """The launches that compute a problem: one per 128-token chunk, each built for its M bucket (MT, and
        the bucket's RT and CHUNKS), with VEC as given and BF16 from the type. WARPS: 8 when every block of the
        8-warp build is resident at once (a single wave: blocks <= sm_count x `resident(spec)`, the blocks one SM
        holds; one per SM when `resident` is None, as with no GPU to ask) and 8 warps' partial tiles fit static
        shared memory (not at MT = 16); else 4, whose smaller blocks pack 3-4 to an SM. Either way an SM holds
        8-16 warps with a k-block of loads each in flight. Knobs in `force` override the choices."""
        launches = []
        for first, tokens in token_chunks(M):
            mt = n_tiles(tokens)
            rt, chunks = BUCKET_SHAPES[mt]
            rt = self.force.get("RT", rt)
            blocks = -(-N // (16 * rt))
            knobs = {"BF16": int(dtype == BFLOAT16), "VEC": vec, "MT": mt, "RT": rt, "CHUNKS": chunks}
            wide = rung.spec.with_knobs(**(knobs | self.force | {"WARPS": WARPS_WIDE, "THREADS": 32 * WARPS_WIDE}))
            fits = partial_tile_bytes(WARPS_WIDE, rt, mt) <= STATIC_SMEM_LIMIT
            one_wave = fits and blocks <= sm_count * (resident(wide) if resident else 1)
            knobs = knobs | {"WARPS": WARPS_WIDE if one_wave else WARPS_NARROW} | self.force
            knobs["THREADS"] = 32 * knobs["WARPS"]
            launches.append(Launch(first, tokens, rung.spec.with_knobs(**knobs), blocks, knobs["THREADS"]))
        return launches

    def plan_for(self, rung: Rung, problem: Problem) -> list[Launch]:
        """launch_plan for a problem: VEC from its operands' alignment; the SM count and each build's blocks per
        SM (its registers and shared memory, lab.core.occupancy) from this GPU."""
        p = problem.params
        x, w = problem.inputs["X"][0], problem.inputs["W"][0]
        vec = 8 if vectors_fit(x, p["ldx"], w, p["ldw"]) else 1
        key = (rung.spec, p["M"], p["N"], p["K"], p["dtype"], vec)
        if key not in self._plans:
            if self.array_module is not None:  # a NumPy stand-in: no GPU to ask
                self._plans[key] = self.launch_plan(rung, p["M"], p["N"], p["K"], p["dtype"], vec)
            else:
                from lab.core import device

                self._plans[key] = self.launch_plan(rung, p["M"], p["N"], p["K"], p["dtype"], vec,
                                                    device.current().sm_count, resident_blocks)
        return self._plans[key]

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        if self.launch_scheme(rung) == "split_k_gemm":
            return SPLIT_K_FAMILY.launch(SPLIT_K, self.gemm_view(problem, set_index), out)
        p = problem.params
        x = problem.inputs["X"][set_index % len(problem.inputs["X"])]
        w = problem.inputs["W"][set_index % len(problem.inputs["W"])]
        for step in self.plan_for(rung, problem):
            rows = slice(step.first, step.first + step.tokens)
            get_kernel(step.spec)((step.grid,), (step.threads,),
                                  (np.int32(step.tokens), np.int32(p["N"]), np.int32(p["K"]), x[rows],
                                   np.int32(p["ldx"]), w, np.int32(p["ldw"]), out[rows], np.int32(p["ldy"])))

    def gemm_view(self, problem: Problem, set_index: int = 0) -> Problem:
        """The problem as gemm_split_k sees it: A = X (M x K, ldx), B = W in the TN layout (N x K, ldw), C = Y
        (ldy), alpha 1, beta 0; the same arrays, no copy (kept with the problem per input set)."""
        views = problem.__dict__.setdefault("_gemm_views", {})
        i = set_index % len(problem.inputs["X"])
        if i not in views:
            p = problem.params
            params = {"M": p["M"], "N": p["N"], "K": p["K"], "layout": "TN", "dtype": p["dtype"], "alpha": 1.0,
                      "beta": 0.0, "pad": p.get("pad", 0), "lda": p["ldx"], "ldb": p["ldw"], "ldc": p["ldy"],
                      "splits": 0}
            views[i] = Problem(problem.label, {"A": [problem.inputs["X"][i]], "B": [problem.inputs["W"][i]]},
                               problem.out_shape, problem.bytes_moved, params=params, dtype=problem.dtype,
                               flops=problem.flops)
        return views[i]

    def dynamic_smem_bytes(self, rung: Rung) -> int:
        return SPLIT_K_FAMILY.dynamic_smem_bytes(SPLIT_K) if rung.launch == "split_k_gemm" else 0

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        """The load path (16-byte or element loads), the launches (one per 128-token chunk) and the knobs of the
        first one: the records keep them beside each measurement. The split-K rung: its tile and S."""
        if self.launch_scheme(rung) == "split_k_gemm":
            return SPLIT_K_FAMILY.launch_notes(SPLIT_K, self.gemm_view(problem), out)
        plan = self.plan_for(rung, problem)
        first = plan[0].knobs
        return {"path": "16-byte loads" if first["VEC"] == 8 else "element loads", "launches": len(plan),
                "blocks": plan[0].grid} | {k.lower(): first[k] for k in ("MT", "RT", "CHUNKS", "WARPS")}

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        """The device copy (cudaMemcpyAsync) of bytes_moved / 2 bytes from W's buffer into a scratch buffer:
        bytes_moved read plus written, the same DRAM traffic as the problem's minimum. Where W holds fewer
        bytes than that (tiny N with many tokens, never a timed shape), the copy reads a scratch source."""
        half = problem.bytes_moved // 2
        w = problem.inputs["W"][set_index % len(problem.inputs["W"])]
        dst, spare_src = self._copy_buffers(problem, half, w.nbytes < half)
        src = spare_src if spare_src is not None else w
        dst.data.copy_from_device_async(src.data, half)

    @staticmethod
    def _copy_buffers(problem: Problem, nbytes: int, need_source: bool):
        """The ceiling's scratch destination (and source, when W is too small), kept with the problem so that
        timing allocates nothing."""
        buffers = getattr(problem, "_copy_buffers", None)
        if buffers is None:
            import cupy as cp

            buffers = (cp.empty(nbytes, dtype=cp.uint8), cp.zeros(nbytes, dtype=cp.uint8) if need_source else None)
            problem._copy_buffers = buffers
        return buffers

    def baselines(self) -> dict:
        return {"cublas": self.launch_cublas}

    def launch_cublas(self, problem: Problem, out, set_index: int = 0) -> None:
        """cuBLAS in the same type and layout with fp32 accumulation: cupy.matmul(x, w.T) for fp16 with no
        padding or offsets (every timed shape), as a CuPy user writes it; gemm_tc's cublasGemmEx call (W as
        the "TN" B operand) for bf16, which cupy.matmul cannot take without ml_dtypes, and for the rest."""
        import cupy as cp

        from lab.tools.library_gemm import gemm_ex

        p = problem.params
        x = problem.inputs["X"][set_index % len(problem.inputs["X"])]
        w = problem.inputs["W"][set_index % len(problem.inputs["W"])]
        if p["dtype"] == "float16" and p["ldx"] == p["ldw"] == p["K"] and p["ldy"] == p["N"]:
            cp.matmul(x, w.T, out=out)
            return
        gemm = {"dtype": p["dtype"], "layout": "TN", "alpha": 1.0, "beta": 0.0, "M": p["M"], "N": p["N"],
                "K": p["K"], "lda": p["ldx"], "ldb": p["ldw"], "ldc": p["ldy"]}
        gemm_ex(gemm, x, w, out)

    def block_resources(self, rung: Rung) -> tuple[int, int]:
        """(THREADS, 0) at the rung's default knobs (the M <= 8 build); the partial tiles are static shared
        memory, which the compile report shows."""
        return _knobs(rung)["THREADS"], 0

    def min_dram_bytes(self, params: dict) -> int:
        """2 * (N*K + M*K + M*N) bytes: W and X read once, Y written once."""
        M, N, K = params["M"], params["N"], params["K"]
        return 2 * (N * K + M * K + M * N)

    def in_readme(self, params: dict) -> bool:
        """The README shows M = 1 and M = 16 (the target's two ends) at both sizes and types."""
        return params.get("M") in README_TOKENS

    # --- shape families ---------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """Every M bucket's edges (1, 7-9, 15-17, 31-33, 64, 127-129, and 200: two launches) on prime N and K;
        K = 1, 7, 8, 9, 4099 (below, at and across a 16-byte chunk and the k-blocks); N = 1, 17, 4097 (a
        partial row tile) and 20000 (more blocks than one wave of 8-warp blocks: 4 warps per block); padded
        leading dimensions, odd (element loads) and multiples of 8 with K % 8 != 0 (16-byte loads with a
        straddling chunk); X, W and Y misaligned; each in both types."""
        base = [{"M": m, "N": 97, "K": 131} for m in (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 128, 129, 200)]
        base += [{"M": m, "N": 61, "K": k} for m in (1, 5, 16) for k in (1, 7, 8, 9, 4099)]
        base += [{"M": 3, "N": 1, "K": 300}, {"M": 9, "N": 17, "K": 200}, {"M": 2, "N": 4097, "K": 72},
                 {"M": 16, "N": 4097, "K": 40}, {"M": 40, "N": 1, "K": 1}, {"M": 2, "N": 20000, "K": 72}]
        base += [{"M": 8, "N": 64, "K": 1024}, {"M": 16, "N": 64, "K": 512}]  # whole k-blocks, no partial one
        base += [{"M": 7, "N": 50, "K": 100, "pad": 3}, {"M": 9, "N": 50, "K": 100, "pad": 4},
                 {"M": 33, "N": 70, "K": 250, "pad": 6}, {"M": 1, "N": 33, "K": 1001, "pad": 7}]
        base += [{"M": 8, "N": 64, "K": 128, "w_offset": 1}, {"M": 5, "N": 40, "K": 96, "x_offset": 3},
                 {"M": 16, "N": 48, "K": 256, "y_offset": 1}, {"M": 3, "N": 29, "K": 77, "x_offset": 2, "w_offset": 5}]
        return [case | {"dtype": dtype} for case in base for dtype in DTYPES]

    def sweep_params(self, max_bytes: int = 1 << 62) -> list[dict]:
        """M = 1 and 16 over N = K from 1024 to 16384, fp16 (those within max_bytes; the smallest always)."""
        params = [{"M": m, "N": n, "K": n, "dtype": "float16"} for n in SWEEP_SIDES for m in SWEEP_TOKENS]
        return [p for i, p in enumerate(params) if i == 0 or self.min_dram_bytes(p) <= max_bytes]

    def tail_params(self) -> list[dict]:
        """M stepping by 1 from 1 to 20 at N = K = 8192, fp16: across the first two M buckets (8 and 16 tokens)."""
        return [{"M": m, "N": TAIL_SIDE, "K": TAIL_SIDE, "dtype": "float16"} for m in TAIL_TOKENS]

    def headline_params(self) -> list[dict]:
        return [{"M": m, "N": n, "K": n, "dtype": dtype} for dtype in DTYPES for n in HEADLINE_SIDES
                for m in HEADLINE_TOKENS]


def _nan(dtype: str):
    """A NaN as an element of the storage type (a float for fp16, a bit pattern for bf16's uint16)."""
    return float("nan") if dtype == "float16" else BF16_NAN_BITS


# --- a knob study (GPU only; optional, for tuning the bucket table against measurements) ----------------

STUDY_FORCES = (None, {"RT": 2, "CHUNKS": 4}, {"RT": 4, "CHUNKS": 2}, {"CHUNKS": 4}, {"WARPS": 4}, {"WARPS": 8},
                {"L2_PREFETCH": 0})


def knob_study(forces=STUDY_FORCES, tokens=(1, 8, 16), sides=(4096, 8192), dtype: str = "float16",
               min_time_ms: float = 20.0) -> list[dict]:
    """The rung under each knob setting in `forces` (None: the launcher's own choice) beside the device copy and
    cuBLAS, timed in the same run on cold L2 with rotating input sets (as `lab bench` times a headline): one row
    per (M, N, setting) with GB/s and the ratios to both. A setting is timed only after it passed a check on a
    small case with a partial k-block; one that fails gets a row saying so. Needs a GPU; nothing asserts speed.
    Run: .venv/bin/python -c "from lab.families.decode import knob_study; import json; print(json.dumps(knob_study(),
    indent=1))"."""
    import cupy as cp

    from lab.measure import timing
    from lab.measure.bench import ROTATION_BUDGET
    from lab.measure.verify import check_case

    flusher = timing.L2Flusher()
    rows = []
    for n in sides:
        for m in tokens:
            base = DecodeFamily()
            probe = base.make_problem(seed=1, M=m, N=n, K=n, dtype=dtype)
            sets = int(max(1, min(4, ROTATION_BUDGET // probe.bytes_moved)))
            problem = base.make_problem(seed=1, M=m, N=n, K=n, dtype=dtype, sets=sets)
            out = cp.empty(problem.out_shape, problem.dtype)

            def rate(launch, problem=problem, out=out) -> float:
                t = timing.measure(lambda i: launch(problem, out, i), l2="cold", flusher=flusher,
                                   min_time_ms=min_time_ms)
                return problem.bytes_moved / (t.median_ms * 1e-3) / 1e9

            copy, cublas = rate(base.launch_ceiling), rate(base.launch_cublas)
            for force in forces:
                fam = DecodeFamily(force=force)
                rung = fam.rungs[0]
                row = {"M": m, "N": n, "K": n, "dtype": dtype, "force": force or {}}
                # 16-byte loads, a partial k-block and a straddling chunk (K % 8 = 4 inside 8-aligned rows).
                check = check_case(fam, rung, {"M": m, "N": 300, "K": 1044, "pad": 4, "dtype": dtype}, seed=9)
                if not check.passed:
                    rows.append(row | {"failed": check.reasons})
                    continue
                gbs = rate(lambda p, o, i, fam=fam, rung=rung: fam.launch(rung, p, o, i))
                rows.append(row | {"notes": fam.launch_notes(rung, problem, out), "GB/s": round(gbs, 1),
                                   "x_copy": round(gbs / copy, 3), "x_cublas": round(gbs / cublas, 3),
                                   "copy_GB/s": round(copy, 1), "cublas_GB/s": round(cublas, 1)})
            del problem, probe, out
            cp.get_default_memory_pool().free_all_blocks()
    return rows
