"""The normalization ladders: RMSNorm and LayerNorm over the rows of a row-major rows x n matrix.

    rmsnorm:   y = x * rsqrt(mean(x^2) + eps) * w
    layernorm: y = (x - mean) * rsqrt(var + eps) * w + b        (biased variance, as torch.nn.LayerNorm)

x, w, b and y are fp16 or bf16, stored as gemm_tc stores them (bf16 as uint16 bit patterns; lab.families.gemm_tc's
helpers convert); the statistics are fp32 and eps is a kernel argument. Any rows >= 1 and n >= 1. (fp32
statistics hold sums of x^2 up to ~3e38: bf16 rows with |x| past ~1e19 / sqrt(n) overflow them, as they would in
any norm with fp32 statistics; the checks' largest values are fp16's, ~6e4.) Rows longer than a rung's registers
hold (rung 02: 8192 values, rung 03: 32768) take the two-read path of rung 01 in 16-byte packs: correct at any n.

One source per rung serves both ladders: kernels/norms/NN_<what>.cu is a template on LAYER with two extern "C"
entries, rmsnorm_<what> and layernorm_<what>, of one signature:
    rmsnorm_<what>(const uint16* x, const uint16* w, uint16* y, int rows, int n, float eps)
    layernorm_<what>(const uint16* x, const uint16* w, const uint16* b, uint16* y, int rows, int n, float eps)
so the two families are one class here (NormFamily) that differs in `centered` (LayerNorm subtracts the mean and
adds b). The launcher passes BF16 as a knob, and to rungs 02 and 03 VEC (16-bit values per access) as the widest
of 8, 4, 2, 1 that divides n and to which x, y, w and b are all aligned: VEC = 8 is the 16-byte path, odd n runs
with 2-byte accesses. Rung 03 also gets WARP_ROW (a warp per row when n <= 32 * ELEMS, else a block per row) and
its block size from n; `launch_notes` says which path a launch took (benchmarks store it in each record's extra).

Metric: GB/s of x read once plus y written once (4 bytes per value), against the device copy of x (the same
bytes), timed in the same run. w and b (n values each, read by every row through the cache) are left out of the
bytes moved and counted in min_dram_bytes.

STATUS: rungs 01-03: tests/test_gpu_norms.py passed on the H200 at 5a65fcb, the kernels' version here (a later
attempt on rung 03 was measured and reverted: its header says why); compute-sanitizer memcheck clean on every rung and
racecheck on rung 03 (results/h200/sanitize_fusion/, run on this version). Records: results/h200/rmsnorm.json and
layernorm.json (5a65fcb); notebook 07 holds the headers' predictions against them. Rung 04 (sm_90, clusters): its GPU
tests (every check case, forced cluster shapes with both exchanges and, for LayerNorm, both STATS builds, the path
notes) passed on an H100 at 5b68074 (results/h100/norms_gpu_tests_5b68074.log; LayerNorm's default was STATS = 1
then, STATS = 2 since, the same source). compute-sanitizer: memcheck (RMSNorm), racecheck and synccheck (LayerNorm)
clean at dc9f18b, whose LayerNorm build is today's STATS = 2 (the same SASS, scripts/same_sass.py); memcheck and
racecheck clean on LayerNorm's STATS = 1 at 5b68074 (results/h100/sanitize_cluster_rows/). Measured by
lab.studies.cluster_rows_study (results/h100/cluster_rows_study_5b68074.json, 5b68074: LayerNorm's "04_cluster" rows
there are STATS = 1, its "04 STATS=2" rows today's default; results/h100/cluster_rows_study.json again at 730294a)
and `lab bench --kinds headline` (results/h100/*_headline.json, ed5f671); not yet on an H200.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.families.gemm_tc import STORAGE, bfloat16_bits_to_float32, to_float32, to_storage
from lab.measure import shapes
from lab.measure.bounds import BFLOAT16, SAFETY, half_subnormal_spacing, unit_roundoff

DTYPES = ("float16", BFLOAT16)
# How a problem's x is drawn: the distribution's values ("random"); each row one value repeated ("constant":
# LayerNorm's variance is 0 and eps alone keeps rsqrt finite); magnitudes in [1.5e4, 6e4) ("large": x^2
# overflows fp16, not the fp32 statistics); values ~2^-12, some fp16 subnormals ("tiny": mean(x^2) ~ 2^-24 is
# far below eps = 1e-5, so eps sets the scale); 300 + noise of std ~1 ("offset": |mean| >> std, where
# E[x^2] - E[x]^2 in fp32 loses the variance).
VALUES = ("random", "constant", "large", "tiny", "offset")
DEFAULT_EPS = 1e-5
MIN_ARCH = 80  # cvt.rn.bf16.f32
CLUSTER_MIN_ARCH = 90  # thread-block clusters and distributed shared memory
CLUSTER_SIZES = (1, 2, 4, 8)  # the portable cluster sizes
HEADLINE_ARRAY_BYTES = 256 << 20  # each of x and y: far past the H200's 50 MB L2
TAIL_BYTES = 256 << 20  # x and y together, for the tail's sizes
REQUIRED_N = (1, 2, 3, 7, 31, 32, 33, 127, 128, 129, 1000, 1023, 1024, 1025, 4095, 4096, 4097, 8191, 8193, 16384,
              16385, 32768, 32769, 65536, 65544, 131073)
# Past rung 04's registers (8 blocks of 1024 threads of 32 values): its slices are read again.
STREAMED_N = 300007


def _rungs(family: str) -> tuple[Rung, ...]:
    def rung(key: str, title: str, *, launch: str, min_arch: int = MIN_ARCH, **knobs: int) -> Rung:
        entry = f"{family}_{key.split('_', 1)[1]}"
        return Rung(family, key, KernelSpec(f"norms/{key}.cu", entry, tuple(sorted(knobs.items())), min_arch=min_arch),
                    title, launch)

    return (
        # Launch "block_per_row" (geometry): a grid of one block per row, THREADS threads each.
        rung("01_two_read", "a block per row, statistics then a second read, 2-byte accesses",
             launch="block_per_row", BF16=0, THREADS=256),
        rung("02_single_read", "the row read once into registers, 16-byte packs", launch="block_per_row", BF16=0,
             THREADS=256, VEC=8, ELEMS=32),
        # Launch "warp_or_block_per_row": built with WARP_ROW = 1 where a row fits a warp's registers (n <= 32 ELEMS),
        # then blocks of WARPS warps striding over the rows, at most as many blocks as the GPU holds at once; else a
        # block per row of min(1024, 32 ceil(n / (32 ELEMS))) threads (`threads`).
        rung("03_specialized", "a warp per short row, a block sized to a long one", launch="warp_or_block_per_row",
             BF16=0, VEC=8, ELEMS=32, WARP_ROW=0, WARPS=4),
        # Launch "cluster_per_row": a row split over a cluster of CLUSTER blocks of THREADS threads (both set per n by
        # `variant`: cluster_shape), grid rows * CLUSTER.
        # LayerNorm's STATS: its exchanges a row (2: the mean, then the squares about it; 1: each block's sum and
        # squares about its own mean, merged: slower as measured). RMSNorm exchanges its squares once, no such knob.
        rung("04_cluster", "a long row split over a thread-block cluster, sums through distributed shared memory",
             launch="cluster_per_row", min_arch=CLUSTER_MIN_ARCH, BF16=0, VEC=8, ELEMS=32, BLOCK=256, CLUSTER=1,
             THREADS=256, EXCHANGE=1, **({"STATS": 2} if family == "layernorm" else {})),
    )


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def _ptr(a) -> int:
    """An array's address: CuPy's device pointer, or NumPy's host one (the CPU tests' arrays)."""
    data = a.data
    return data.ptr if hasattr(data, "ptr") else a.ctypes.data


def _validate(rows: int, n: int, dtype: str, eps: float, values: str, x_offset: int, out_offset: int) -> None:
    if rows < 1 or n < 1 or rows * n >= 2**40 or n >= 2**31 or rows >= 2**31:
        raise LabError(f"norms need 1 <= rows < 2^31 and 1 <= n < 2^31; got rows={rows} n={n}.")
    if dtype not in DTYPES:
        raise LabError(f"norms dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    if not (math.isfinite(eps) and eps > 0 and np.float32(eps) > 0):
        raise LabError(f"norms need eps > 0 (and representable in fp32); got eps={eps!r}.")
    if values not in VALUES:
        raise LabError(f"norms values must be one of {', '.join(VALUES)}; got {values!r}.")
    if x_offset < 0 or out_offset < 0:
        raise LabError(f"norms offsets are element counts >= 0; got x_offset={x_offset} out_offset={out_offset}.")


def norm_error_bound(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, eps: float, reference: np.ndarray,
                     out_dtype, centered: bool) -> np.ndarray:
    """Each output's allowed |error| against the float64 reference, from its own row and its own w, b:
    A = norm_fp32_error_bound(...), what the fp32 result may be off by, plus its one rounding to `out_dtype`:
        bound = A + u_out (|ref| + A) + half the output type's subnormal spacing.
    (Rounding an fp32 value y to fp16 / bf16 errs by at most u_out |y|, or half a subnormal spacing, and |y| <=
    |ref| + A. A correct kernel's output is one such rounding, so where A is small its error reaches ~1.0 of the
    bound by construction; the margin is asked of A instead: tests/test_norms_family.py holds fp32 models of the
    rungs' arithmetic, before rounding, to half of A.)
    """
    u_out = unit_roundoff(out_dtype)
    fp32_part = norm_fp32_error_bound(x, w, b, eps, centered)
    return fp32_part + u_out * (np.abs(reference) + fp32_part) + half_subnormal_spacing(out_dtype)


def norm_fp32_error_bound(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, eps: float, centered: bool,
                          safety: float = SAFETY) -> np.ndarray:
    """A: how far a norm computed in fp32 (before its output is rounded to 16 bits) may sit from the float64
    reference, element by element, from the element's own row and its own w, b.

    `x` (rows x n), `w`, `b` (n, or None) are the stored values in float64, `eps` the fp32 value the kernel gets,
    `centered` True for LayerNorm. With u the fp32 unit roundoff (2^-24) and g = safety * u * sqrt(n), the
    statistical growth of an n-term fp32 sum with lab.measure.bounds' argument and margin (safety = SAFETY = 8):
    rounding
    errors that behave like independent variables. That holds for the kernels' sums (runs of at most n / threads
    terms per thread, then a tree) on any rows, and for any order on varied rows; it does not for one sequence of
    thousands of equal terms (a constant row's x^2 summed by a single thread), whose errors do not cancel.

    Row statistics. The mean: mu = sum(x) / n, computed with |mu^ - mu| <= E_mu = g * (|sum x| + sqrt(sum x^2)) /
    n + 4u|mu| (the sum's drift and spread, as lab.measure.bounds' |P| + S; the division, __fdividef, errs 2 ulp = 4u).
    RMSNorm has no mean: mu = 0, E_mu = 0. The second moment about it: v = sum((x - mu)^2) / n (RMSNorm: the
    mean square), computed from fp32 deviations d_j = x_j - mu^ whose squares are summed:
        E_v = (g + 6u) * v + 5 E_mu^2 + (g |mu| + 4 E_mu) * sqrt(v)
    (g + 6u) v: the sum of n non-negative terms, each deviation rounded once and squared; E_mu^2 because sum (x -
    mu^)^2 = n v + n (mu^ - mu)^2 exactly; the sqrt(v) term covers Welford's update (rungs 01 and the two-read
    fallback), whose error is first order in |mu| / std (Chan, Golub and LeVeque 1983: the updating algorithm's
    bound grows with kappa = sqrt(1 + mu^2 / v), the two-pass one with kappa^2 only at second order), and the
    combination of per-thread means. E[x^2] - E[x]^2 in fp32 errs by ~g (v + mu^2): on rows with |mu| >> std it
    fails this bound, by design (tests/test_norms_family.py shows it).

    rsqrt. r = v + eps; r^ = r + E_r with |E_r| <= E_v + 6u r (the division by n at 4u, the addition of eps). rsqrtf
    errs 2 ulp (4u), so rho^ = rsqrt(r^) is within a relative e_rho = sqrt(r / max(r - E_r, r / 4)) - 1 + 4u of
    rho = r^-1/2 (the max() keeps the bound finite when E_r rivals r, which only degenerate rows reach).

    Each element. The kernel computes fl(fl(fl(x - mu^) * rho^) * w) (+ b): the centered value is off by D =
    E_mu (1 + u) + u |d| (d = x - mu); with P = |d| rho |w| (the scaled term's size),
        A = (1 + 3u) (1 + e_rho) |w| rho D  +  P (e_rho + 3u (1 + e_rho))  +  u (P + |b|)
    (the mean's error carried through, rho's error, three roundings, and the addition of b). norm_error_bound adds
    the output's rounding.

    How tight. Where A is small (it is, except on rows whose statistics are ill-conditioned: |mean| >> std, or a
    constant row, where eps alone sets rho and a mean error is multiplied by 1 / sqrt(eps)) the whole bound is
    about half an output ulp of |ref| plus a few fp32 ulps: an output two ulps off fails, and so does a wrong weight
    index (|w| in [0.5, 2): tens of percent). A missing eps shows where eps matters: "constant" rows (LayerNorm:
    0 * inf, a NaN), "tiny" rows (eps ~ 170 times mean(x^2): y off by ~13x) and cases with a large eps. A missing
    bias is off by |b|. tests/test_norms_family.py checks each, and that fp32 NumPy models of the rungs' two-pass
    and Welford statistics (per-thread runs and trees of 32 to 1024 threads) stay within A at safety = SAFETY / 2:
    the statistics use at most half of their allowance.
    """
    u = unit_roundoff(np.float32)
    n = x.shape[1]
    g = safety * u * math.sqrt(n)
    if centered:
        total = x.sum(axis=1, keepdims=True)
        mean = total / n
        e_mean = g * (np.abs(total) + np.sqrt(np.square(x).sum(axis=1, keepdims=True))) / n + 4 * u * np.abs(mean)
        d = x - mean
        var = np.square(d).mean(axis=1, keepdims=True)
        e_var = (g + 6 * u) * var + 5 * e_mean**2 + (g * np.abs(mean) + 4 * e_mean) * np.sqrt(var)
    else:
        e_mean = np.zeros((x.shape[0], 1))
        d = x
        var = np.square(x).mean(axis=1, keepdims=True)
        e_var = (g + 6 * u) * var
    r = var + eps
    e_r = e_var + 6 * u * r
    e_rho = np.sqrt(r / np.maximum(r - e_r, r / 4)) - 1 + 4 * u
    rho = 1 / np.sqrt(r)
    aw = np.abs(w)[None, :]
    centered_error = e_mean * (1 + u) + u * np.abs(d)
    scaled = np.abs(d) * rho * aw
    bias = np.abs(b)[None, :] if b is not None else 0.0
    return ((1 + 3 * u) * (1 + e_rho) * aw * rho * centered_error + scaled * (e_rho + 3 * u * (1 + e_rho))
            + u * (scaled + bias))


def norm_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, eps: float, centered: bool) -> np.ndarray:
    """RMSNorm (centered False) or LayerNorm of the rows of x, in float64 from float64 inputs."""
    mean = x.mean(axis=1, keepdims=True) if centered else 0.0
    d = x - mean
    rho = 1 / np.sqrt(np.square(d).mean(axis=1, keepdims=True) + eps)
    return d * rho * w[None, :] + (b[None, :] if b is not None else 0.0)


class NormFamily(Family):
    """What RMSNorm and LayerNorm share: everything but `centered` (subtract the mean, add b) and the names."""

    centered: bool = False
    metric = "GB/s"
    ceiling_name = "cupy_device_copy"
    ceiling_title = "the device copy"
    launches = ("block_per_row", "warp_or_block_per_row", "cluster_per_row")  # `geometry` maps them
    WARP_ROW_RUNGS = tuple(r.key for r in _rungs("rmsnorm") if r.launch == "warp_or_block_per_row")  # by key

    def _xp(self):
        if self.array_module is not None:
            return self.array_module
        import cupy

        return cupy

    # --- problems -------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", rows: int = 1, n: int = 1, dtype: str = "float16",
                     eps: float = DEFAULT_EPS, values: str = "random", x_offset: int = 0, out_offset: int = 0,
                     sets: int = 1) -> Problem:
        """x (`sets` input sets, each shifted `x_offset` elements from its allocation's start), w (|w| in
        [0.5, 2), random signs: never ones, which would hide a missing multiply) and, for LayerNorm, b (normal),
        drawn in float32 and rounded to `dtype`; the reference uses the rounded values."""
        from lab.measure.check import random_array

        _validate(rows, n, dtype, eps, values, x_offset, out_offset)
        xp = self._xp()

        def draw_x(s: int):
            shape = (rows * n + x_offset,)
            if values == "constant":
                row = random_array((rows, 1), np.float32, s, dist, xp=xp)
                flat = xp.concatenate([xp.ones(x_offset, np.float32), xp.broadcast_to(row, (rows, n)).ravel()])
            elif values == "large":
                flat = random_array(shape, np.float32, s, "uniform", xp=xp) * np.float32(3.0e4)
            elif values == "tiny":
                flat = random_array(shape, np.float32, s, dist, xp=xp) * np.float32(2.0**-12)
            elif values == "offset":
                flat = np.float32(300) + random_array(shape, np.float32, s, "normal" if dist == "wide" else dist, xp=xp)
            else:
                flat = random_array(shape, np.float32, s, dist, xp=xp)
            return to_storage(flat, dtype, xp)[x_offset:].reshape(rows, n)

        xs = [draw_x(seed + 101 * s) for s in range(sets)]
        inputs = {"x": xs, "w": to_storage(random_array((n,), np.float32, seed + 7, "uniform", xp=xp), dtype, xp)}
        if self.centered:
            inputs["b"] = to_storage(random_array((n,), np.float32, seed + 13, "normal", xp=xp), dtype, xp)
        params = {"rows": rows, "n": n, "dtype": dtype}
        params |= {"eps": eps} if eps != DEFAULT_EPS else {}
        params |= {"values": values} if values != "random" else {}
        params |= {k: v for k, v in (("x_offset", x_offset), ("out_offset", out_offset)) if v}
        label = (f"{rows}x{n} {dtype}" + (f" {values}" if values != "random" else "")
                 + (f" eps={eps:g}" if eps != DEFAULT_EPS else "")
                 + (f" x+{x_offset}" if x_offset else "") + (f" y+{out_offset}" if out_offset else ""))
        return Problem(label, inputs, (rows, n), 4 * rows * n, out_offset, params, dtype=STORAGE[dtype])

    def _operands(self, problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, float]:
        """x (set 0), w, b (None for RMSNorm) as float64 values of the stored inputs, and eps as the kernel sees it
        (rounded to fp32)."""
        from lab.measure.check import to_numpy

        dtype = problem.params["dtype"]

        def values(a):
            return to_float32(to_numpy(a), dtype).astype(np.float64)

        b = values(problem.inputs["b"]) if self.centered else None
        eps = float(np.float32(problem.params.get("eps", DEFAULT_EPS)))
        return values(problem.inputs["x"][0]), values(problem.inputs["w"]), b, eps

    def reference(self, problem: Problem) -> np.ndarray:
        x, w, b, eps = self._operands(problem)
        return norm_reference(x, w, b, eps, self.centered)

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """norm_error_bound (see there for the derivation)."""
        x, w, b, eps = self._operands(problem)
        out_dtype = BFLOAT16 if problem.params["dtype"] == BFLOAT16 else np.float16
        return norm_error_bound(x, w, b, eps, reference, out_dtype, self.centered)

    def output_values(self, out):
        """The output as the checks compare it: bf16 patterns widened to float32 (fp16 compares as it is)."""
        if out.dtype == np.uint16:
            return bfloat16_bits_to_float32(out, np if isinstance(out, np.ndarray) else self._xp())
        return out

    # --- launching ------------------------------------------------------------------------------
    def vector_width(self, problem: Problem, out=None, set_index: int = 0) -> int:
        """VEC: the widest of 8, 4, 2, 1 values that divides n and to which x (this set's), w, b and (when given)
        the output are all aligned, 2 * VEC bytes."""
        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        arrays = [x, problem.inputs["w"]] + ([problem.inputs["b"]] if self.centered else [])
        arrays += [out] if out is not None else []
        n = problem.params["n"]
        return next(v for v in (8, 4, 2, 1) if n % v == 0 and all(_ptr(a) % (2 * v) == 0 for a in arrays))

    def variant(self, rung: Rung, problem: Problem, out=None, set_index: int = 0) -> Rung:
        """The rung built for this problem: its type; VEC from n and the alignments (rungs 02 and 03); a warp or a
        block per row (rung 03)."""
        knobs = {"BF16": int(problem.params["dtype"] == BFLOAT16)}
        defaults = _knobs(rung)
        if "VEC" in defaults:
            knobs["VEC"] = self.vector_width(problem, out, set_index)
        if self.launch_scheme(rung) == "warp_or_block_per_row":
            knobs["WARP_ROW"] = int(problem.params["n"] <= 32 * defaults["ELEMS"])
        if self.launch_scheme(rung) == "cluster_per_row":
            cluster, threads = cluster_shape(problem.params["n"], knobs["VEC"], defaults["ELEMS"], defaults["BLOCK"])
            knobs |= {"CLUSTER": cluster, "THREADS": threads}
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(**knobs))

    @staticmethod
    def threads(built: Rung, n: int) -> int:
        """Threads per block of a built variant (`variant`'s result) on rows of n values."""
        k = _knobs(built)
        if "WARP_ROW" not in k:
            return k["THREADS"]  # rungs 01, 02, and 04 as `variant` built it
        if k["WARP_ROW"]:
            return 32 * k["WARPS"]
        return min(1024, 32 * -(-n // (32 * k["ELEMS"])))

    @staticmethod
    def registers_hold(built: Rung, n: int) -> bool:
        """Whether a row of n values fits the registers of a built variant's block (else: two reads)."""
        k = _knobs(built)
        if "ELEMS" not in k:
            return False  # rung 01 always reads twice
        if "CLUSTER" in k:  # rung 04: each block's slice of whole packs
            vec, cluster = k["VEC"], k["CLUSTER"]
            return -(-(n // vec) // cluster) * vec <= k["THREADS"] * k["ELEMS"]
        group = 32 if k.get("WARP_ROW") else NormFamily.threads(built, n)  # the threads that share a row
        return n <= group * k["ELEMS"]

    def geometry(self, built: Rung, rows: int, n: int) -> tuple[tuple[int], tuple[int]]:
        """(grid, block) of a built variant (`variant`'s) on rows x n, by its launch scheme: a block per row, or
        for "warp_or_block_per_row" built with WARP_ROW, warps striding over the rows, as many blocks as are
        resident at once, at most."""
        threads = self.threads(built, n)
        k = _knobs(built)
        grid = rows
        if self.launch_scheme(built) == "warp_or_block_per_row" and k["WARP_ROW"]:
            grid = min(-(-rows // k["WARPS"]), _resident_blocks(built.spec, threads))
        if self.launch_scheme(built) == "cluster_per_row":
            grid = rows * k["CLUSTER"]
            if grid >= 2**31:
                raise LabError(f"{self.name} rung {built.key} launches {k['CLUSTER']} blocks a row, {grid} in all, "
                               "past a grid's 2^31 - 1: split the rows into several calls.")
        return (grid,), (threads,)

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        p = problem.params
        rows, n = p["rows"], p["n"]
        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        built = self.variant(rung, problem, out, set_index)
        kernel = get_kernel(built.spec)
        grid, block = self.geometry(built, rows, n)
        args = (x, problem.inputs["w"]) + ((problem.inputs["b"],) if self.centered else ())
        args += (out, np.int32(rows), np.int32(n), np.float32(p.get("eps", DEFAULT_EPS)))
        kernel(grid, block, args)

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        """How a launch of `rung` on `problem` runs: the path (a warp or a block per row, one read or two), the
        access width and the block size."""
        n = problem.params["n"]
        built = self.variant(rung, problem, out)
        k = _knobs(built)
        vec = k.get("VEC", 1)
        reads = "one read" if self.registers_hold(built, n) else "two reads"
        shape = "warp per row" if k.get("WARP_ROW") else "block per row"
        notes = {"vec": vec, "threads": self.threads(built, n)}
        if "CLUSTER" in k:
            cluster = k["CLUSTER"]
            shape = f"cluster of {cluster} blocks per row" if cluster > 1 else "block per row"
            if not self.registers_hold(built, n):
                reads = f"{3 if self.centered else 2} reads"  # one per sum, one for the output
            notes["cluster"] = cluster
        return {"path": f"{shape}, {reads}, {2 * vec}-byte accesses"} | notes

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        x = problem.inputs["x"][set_index % len(problem.inputs["x"])]
        out.data.copy_from_device_async(x.data, x.nbytes)  # cudaMemcpyAsync of x's bytes: what a norm reads and writes

    def baselines(self) -> dict:
        """CuPy's own operations composed as a user would write them: widen to float32, the statistics with
        cupy.mean, 1/sqrt, the products, round back (bf16 through the lab's bit-pattern helpers)."""
        import cupy as cp

        def cupy_composed(problem: Problem, out, set_index: int = 0) -> None:
            dtype = problem.params["dtype"]
            eps = np.float32(problem.params.get("eps", DEFAULT_EPS))
            x = to_float32(problem.inputs["x"][set_index % len(problem.inputs["x"])], dtype, cp)
            w = to_float32(problem.inputs["w"], dtype, cp)
            if self.centered:
                d = x - x.mean(axis=1, keepdims=True)
                y = d / cp.sqrt((d * d).mean(axis=1, keepdims=True) + eps) * w + to_float32(problem.inputs["b"],
                                                                                          dtype, cp)
            else:
                y = x * (1 / cp.sqrt((x * x).mean(axis=1, keepdims=True) + eps)) * w
            cp.copyto(out, to_storage(y, dtype, cp))

        return {"cupy_composed": cupy_composed}

    def block_resources(self, rung: Rung) -> tuple[int, int] | None:
        """(threads, 0) for rungs 01 and 02; None for rungs 03 and 04, whose block size follows n."""
        k = _knobs(rung)
        return (k["THREADS"], 0) if "THREADS" in k and "CLUSTER" not in k else None

    def min_dram_bytes(self, params: dict) -> int:
        """x read once, y written once, w (and b) read once: 2 bytes a value."""
        return 2 * (2 * params["rows"] * params["n"] + params["n"] * (2 if self.centered else 1))

    # --- shape families -------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """Every length of REQUIRED_N (warp, vector and block boundaries +- 1, past the registers) on a few row
        counts; the special value kinds, other eps, misaligned x or y, and more rows than the GPU holds at once;
        each in both types."""
        base = []
        for n in REQUIRED_N:
            row_counts = (1, 3, 37) if n <= 1025 else (1, 3)
            base += [{"rows": r, "n": n} for r in row_counts]
        for values in ("constant", "large", "tiny", "offset"):
            base += [{"rows": r, "n": n, "values": values} for r, n in ((5, 1), (4, 33), (3, 1024), (2, 4097),
                                                                       (2, 32768))]
        base += [{"rows": 3, "n": 1000, "eps": 0.5}, {"rows": 7, "n": 33, "eps": 1e-2}, {"rows": 2, "n": 8192,
                                                                                        "eps": 1e-6}]
        base += [{"rows": 2, "n": STREAMED_N}, {"rows": 2, "n": 65536, "values": "offset"}]
        base += [{"rows": 3, "n": 1024, "out_offset": 1}, {"rows": 3, "n": 1024, "x_offset": 4, "out_offset": 4},
                 {"rows": 2, "n": 4096, "x_offset": 3}, {"rows": 3, "n": 1026, "x_offset": 2, "out_offset": 2}]
        # More warp rows than an H200 holds at once (132 SMs x 16 blocks x 4 warps): rung 03's warps stride over rows.
        base += [{"rows": 20000, "n": 32}, {"rows": 9000, "n": 7}]
        return [case | {"dtype": dtype} for case in base for dtype in DTYPES]

    def sweep_params(self, max_bytes: int) -> list[dict]:
        """Rows of 4096 fp16 values, from one row to `max_bytes` moved."""
        seen, params = set(), []
        for b in shapes.byte_sweep(1 << 14, max_bytes):
            rows = max(1, b // (4 * 4096))
            if rows not in seen:
                seen.add(rows)
                params.append({"rows": rows, "n": 4096, "dtype": "float16"})
        return params

    def tail_params(self) -> list[dict]:
        """n stepping by 1 across 1024, 2048 and 4096 (fp16), rows for ~TAIL_BYTES moved: past the L2."""
        return [{"rows": TAIL_BYTES // (4 * n), "n": n, "dtype": "float16"}
                for base in (1024, 2048, 4096) for n in shapes.tail_range(base - 8, 16)]

    def headline_params(self) -> list[dict]:
        """n = 512 (for contrast), 1024, 4096, 8192, 16384, 32768 and 65536 in both types, each array
        HEADLINE_ARRAY_BYTES."""
        return [{"rows": HEADLINE_ARRAY_BYTES // (2 * n), "n": n, "dtype": dtype}
                for dtype in DTYPES for n in (512, 1024, 4096, 8192, 16384, 32768, 65536)]

    def in_readme(self, params: dict) -> bool:
        """The README shows fp16 at n = 1024, 4096, 32768 and 65536; the records hold the rest."""
        return params.get("dtype") == "float16" and params.get("n") in (1024, 4096, 32768, 65536)


def cluster_shape(n: int, vec: int, elems: int, block: int) -> tuple[int, int]:
    """Rung 04's (CLUSTER, THREADS) for rows of n values in packs of `vec`: the fewest blocks of CLUSTER_SIZES whose
    slices (whole packs) fit `block` threads of `elems` values each, else the largest cluster; then the fewest warps
    that hold a slice at `elems` values a thread, at most 1024 (a longer slice is read again: `registers_hold`)."""
    packs, per_thread = n // vec, elems // vec

    def slice_packs(cluster: int) -> int:
        return -(-packs // cluster)

    cluster = next((c for c in CLUSTER_SIZES if slice_packs(c) <= block * per_thread), CLUSTER_SIZES[-1])
    threads = 32 * -(-slice_packs(cluster) // (32 * per_thread))
    return cluster, max(32, min(1024, threads))


@functools.lru_cache(maxsize=64)
def _resident_blocks_on(spec: KernelSpec, threads: int, device_id: int) -> int:
    """Blocks of `threads` threads of `spec` that the whole GPU holds at once (lab.core.occupancy's arithmetic)."""
    from lab.core import device, occupancy
    from lab.core.build import get_kernel

    gpu = device.current()
    kernel = get_kernel(spec)
    if gpu.arch in occupancy.LIMITS:
        per_sm = occupancy.occupancy(gpu.arch, threads, kernel.num_regs, kernel.shared_size_bytes).blocks_per_sm
    else:
        per_sm = max(1, 2048 // threads)
    return max(1, per_sm) * gpu.sm_count


def _resident_blocks(spec: KernelSpec, threads: int) -> int:
    import cupy as cp

    return _resident_blocks_on(spec, threads, cp.cuda.Device().id)


class RMSNormFamily(NormFamily):
    name = "rmsnorm"
    title = "RMSNorm (y = x * rsqrt(mean(x^2) + eps) * w), fp16/bf16, fp32 statistics"
    centered = False
    rungs = _rungs("rmsnorm")


class LayerNormFamily(NormFamily):
    name = "layernorm"
    title = "LayerNorm (y = (x - mean) * rsqrt(var + eps) * w + b), fp16/bf16, fp32 statistics"
    centered = True
    rungs = _rungs("layernorm")
