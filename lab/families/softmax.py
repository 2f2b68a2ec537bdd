"""The softmax ladder: y = softmax(x) over each row of a row-major rows x n matrix, fp32 or fp16 in and out,
fp32 statistics, with an optional key-padding mask (a valid length per row).

Definitions (the kernels' headers say the same; `reference` computes them in float64):
- `mask="lengths"`: an int32 array with one entry per row; row i's elements j >= lengths[i] (the length
  clamped to 0..n) are masked: they count as -inf and their outputs are exactly 0.
- A row whose unmasked elements are all -inf, or that has none (length 0), outputs zeros, not NaN (as
  flash-attention kernels do): its shift is 0 instead of -inf, its sum 0, and 1/0 is taken as 0.
- A NaN or a +inf among a row's unmasked elements makes all its unmasked outputs NaN (what IEEE arithmetic
  gives: NaN - m, inf - inf); its masked outputs stay 0.

Every rung has one signature:
    softmax_<name>(const T* x, T* y, const int* lengths, int rows, int n)
T is float or fp16 (raw 16-bit patterns), picked by the HALF knob per problem (as gemm_tc passes BF16);
`lengths` is a null pointer without a mask. The launcher picks the kernel and the block for the shape:
rung 03 falls back to rung 02's kernel for rows longer than its registers hold (or x and y that differ mod
16), rung 04 picks a warp per row, a block per row, or a two-read block per row by n, and rung 05 (sm_90) splits a
row over a thread-block cluster of 1, 2, 4 or 8 blocks sized by n (`cluster_shape`) (`launch_plan`; `launch_notes`
records the choice).

The ceiling is the device copy of the same bytes (x read, y written), the baseline CuPy's own operations
composed as a user would write them (`cupy_composed`). Error bounds: `error_bound` below.

STATUS: rungs 01-04: tests/test_gpu_softmax.py passed on the H200 at 5a65fcb and again at c89eb79 (the kernels
unchanged since 5a65fcb); compute-sanitizer memcheck clean on every rung and racecheck on rung 04 (results/h200/
sanitize_fusion/). Records: results/h200/softmax.json (5a65fcb). The rung headers hold the predictions; notebook
07 holds them against the records. Rung 05 (sm_90, clusters): its GPU tests passed on an H100 at ed5f671 and, after
its fp32 load order changed (the header says why), again at dc9f18b (results/h100/cluster_rungs_run_dc9f18b.log);
compute-sanitizer memcheck, racecheck and synccheck clean at dc9f18b (results/h100/sanitize_cluster_rows/); measured
there (results/h100/cluster_rows_study_dc9f18b.json), at 5b68074 (results/h100/cluster_rows_study_5b68074.json) and
at 730294a (results/h100/cluster_rows_study.json); not yet on an H200. Later, the storage type and definitions every
rung repeated moved into kernels/common/lab_softmax.cuh; every rung's SASS stayed the same on sm_80 and sm_90 (both
types, rung 05's cluster sizes 1, 2 and 4: scripts/same_sass.py), and no GPU has run the rungs since.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lab.core.build import KernelSpec
from lab.core.errors import LabError
from lab.core.ladder import Family, Problem, Rung
from lab.measure import shapes
from lab.measure.bounds import SAFETY, unit_roundoff

DTYPES = ("float32", "float16")
MASKS = ("none", "lengths")
VEC_ELEMS = {"float32": 4, "float16": 8}  # elements in one 16-byte vector
MAX_BLOCK = 1024
CHECK_ROW_LENGTHS = (1, 2, 7, 31, 32, 33, 127, 128, 129, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096,
                     4097, 32767, 32768, 32769)
SPECIAL_ROW_LENGTHS = (1, 2, 33, 1000, 4097)
HEADLINE_BYTES = 256 << 20  # each array of a headline or tail problem: past the H200's L2 several times over
HEADLINE_ROW_LENGTHS = (4096, 1024, 32768)  # the targets' sizes (the README's rows), then the contrast below
CONTRAST_ROW_LENGTHS = (128, 512)
LONG_ROW_LENGTHS = (16384, 65536)  # the rows rung 05 splits over a cluster (32768 is among the targets above)
# One row length for the bytes sweep: lab.lessons.plots.bandwidth_vs_bytes draws each rung as one line over bytes, so
# a second length (or dtype) would interleave with the first along the same line.
SWEEP_ROW_LENGTH, SWEEP_DTYPE = 4096, "float16"
TAIL_BASES = (1024, 2048, 4096)  # the tail steps n by 1 across each of these (fp16: 8-element vectors)
TAIL_HALF_SPAN = 8

# The error model's constants (error_bound's docstring derives them).
EXP_CONST, EXP_SLOPE = 8.0, 4.0  # exp(z) within (EXP_CONST + EXP_SLOPE * |z|) * u32, shift and rescale included
NORMALIZE_ULPS = 4.0  # rcp.approx (1 ulp) and the product e * (1/sum) (half an ulp), in units of u32
FTZ_FLOOR = 2.0 ** -126  # exponentials below fp32's smallest normal are flushed to 0 (ex2.approx.ftz)

CLUSTER_MIN_ARCH = 90  # thread-block clusters and distributed shared memory
CLUSTER_SIZES = (1, 2, 4, 8)  # the portable cluster sizes
# A row length past what rung 05's largest cluster holds in registers in either dtype (8 blocks of 1024 threads of 8
# vectors: 262144 fp32, 524288 fp16), so its slices are read twice; off every vector boundary (a head and a tail).
STREAMED_N = 600007


def _rung(key: str, entry: str, title: str, *, launch: str, min_arch: int | None = None, **knobs: int) -> Rung:
    spec = KernelSpec(f"softmax/{key}.cu", entry, tuple(sorted(({"HALF": 0} | knobs).items())))
    if min_arch is not None:
        spec = dataclasses.replace(spec, min_arch=min_arch)
    return Rung("softmax", key, spec, title, launch)


def _knobs(rung: Rung) -> dict:
    return dict(rung.spec.knobs)


def _validate(rows: int, n: int, dtype: str, mask: str) -> None:
    if rows < 1 or n < 1:
        raise LabError(f"softmax needs rows >= 1 and n >= 1; got rows={rows} n={n}.")
    if rows >= 2**31 or n >= 2**31:  # int32 kernel arguments (row offsets are 64-bit)
        raise LabError(f"softmax takes rows and n below 2^31; got rows={rows} n={n}.")
    if dtype not in DTYPES:
        raise LabError(f"softmax dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
    if mask not in MASKS:
        raise LabError(f"softmax mask must be one of {', '.join(MASKS)}; got {mask!r}.")


def rows_for_bytes(n: int, dtype: str, array_bytes: int = HEADLINE_BYTES) -> int:
    """Rows of length n whose array (x, or y) holds about `array_bytes`."""
    return max(1, array_bytes // (n * np.dtype(dtype).itemsize))


# --- special rows ------------------------------------------------------------------------------------
# The rows a check with special=1 overwrites at its top (row r gets kind r, while rows last): each a case
# the definitions above decide, or one where fp32 statistics matter.
SPECIAL_KINDS = ("all -inf", "one -inf", "huge", "tiny spread", "one NaN", "one +inf", "constant",
                 "one finite, rest -inf", "NaN, rest -inf", "all +inf", "all huge negative")


def _special_row(kind: str, row, n: int, dtype: str, rng: np.random.Generator, xp):
    """Row `row` (an array of the row's dtype, modified in place) made into the special case `kind`."""
    inf = float("inf")
    half = dtype == "float16"
    if kind == "all -inf":
        row[...] = -inf
    elif kind == "one -inf":
        row[n // 2] = -inf
    elif kind == "huge":
        if half:  # fp16's largest values, with ties at the max (65472 is one fp16 step below 65504)
            choices = np.array([65504.0, 65472.0, -65504.0, 60000.0], np.float32)
            row[...] = xp.asarray(rng.choice(choices, n).astype(np.float16))
        else:
            row[...] = xp.asarray((rng.standard_normal(n) * 1e30).astype(np.float32))
    elif kind == "tiny spread":  # neighbours of 1.0: the outputs differ in their last few bits
        step = 2.0 ** -10 if half else 2.0 ** -22
        row[...] = xp.asarray((1.0 + step * rng.integers(0, 4, n)).astype(dtype))
    elif kind == "one NaN":
        row[n // 3] = float("nan")
    elif kind == "one +inf":
        row[(2 * n) // 3] = inf
    elif kind == "constant":
        row[...] = -2.5
    elif kind == "one finite, rest -inf":
        row[...] = -inf
        row[n - 1] = 0.75
    elif kind == "NaN, rest -inf":
        row[...] = -inf
        row[0] = float("nan")
    elif kind == "all +inf":
        row[...] = inf
    elif kind == "all huge negative":
        row[...] = -65504.0 if half else -1e30
    else:
        raise ValueError(f"unknown special row {kind!r}")


def _lengths(rows: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """A length per row: random in 0..n, with every fourth row full (n), every fourth (from 1) empty (0), and
    a few out of range, which clamp (-2 -> 0, n + 5 -> n)."""
    lengths = rng.integers(0, n + 1, rows)
    lengths[0::4] = n
    lengths[1::4] = 0
    lengths[2::8] = min(1, n)
    lengths[3::8] = n + 5
    lengths[7::8] = -2
    return lengths.astype(np.int32)


# --- the float64 reference and its pieces ---------------------------------------------------------------

def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _row_view(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x as float64, valid mask, bad rows, shift per row) of the problem's first input set: `valid` marks
    the unmasked elements, `bad` the rows with a NaN or +inf among them, `shift` each row's max over its
    valid elements (NaN ignored), or 0 where that max is -inf."""
    p = problem.params
    x = _host(problem.inputs["x"][0]).astype(np.float64)
    n = p["n"]
    lengths = problem.inputs.get("lengths")
    if lengths is None:
        valid = np.ones(x.shape, dtype=bool)
    else:
        valid = np.arange(n)[None, :] < np.clip(_host(lengths).astype(np.int64), 0, n)[:, None]
    bad = np.any(valid & (np.isnan(x) | np.isposinf(x)), axis=1)
    considered = np.where(valid & ~np.isnan(x), x, -np.inf)
    m = considered.max(axis=1)
    shift = np.where(np.isneginf(m), 0.0, m)
    return x, valid, bad, shift


def softmax_reference(x: np.ndarray, valid: np.ndarray, bad: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """The definitions in the module docstring, in float64."""
    with np.errstate(invalid="ignore", over="ignore"):
        z = np.where(valid & ~bad[:, None], x - shift[:, None], -np.inf)  # bad rows: filled in below
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        y = np.where(s > 0, e / np.where(s > 0, s, 1.0), 0.0)
    y = np.where(bad[:, None] & valid, np.nan, y)
    # Values below 2^-200 become 0: no fp32 or fp16 output can hold them (fp32's smallest is 2^-149) and every
    # bound is >= 2^-126, but squaring them in the checks' normwise statistic makes float64 subnormals, which
    # cost CPUs seconds per check run.
    return np.where(valid & ~(np.abs(y) < 2.0**-200), y, 0.0)


class SoftmaxFamily(Family):
    name = "softmax"
    title = "Softmax over rows (fp32 or fp16 in and out, fp32 statistics)"
    profile_figure = "dram_bytes"  # rungs 01-02 re-read x; 03-05 read it once (short enough rows)
    # The launch schemes (Rung.launch) launch_plan maps to a kernel, a grid and a block, and the path the records name
    # for each scheme that has one.
    launches = ("three_pass", "two_pass", "registers", "specialized", "cluster")
    PATHS = {"three_pass": "block per row, three reads", "two_pass": "block per row, two reads",
             "registers": "block per row, registers"}
    rungs = (
        # Launch "three_pass": a block of THREADS threads per row (grid: rows).
        _rung("01_three_pass", "softmax_three_pass", "block per row: max, sum, output (three reads)",
              launch="three_pass", THREADS=256),
        # Launch "two_pass": a block of THREADS threads per row (grid: rows).
        _rung("02_online_two_pass", "softmax_online_two_pass", "online max and sum in one read, then the output",
              launch="two_pass", THREADS=256),
        # Launch "registers": a block of THREADS threads per row (grid: rows) where the row fits its registers
        # (row_capacity) and x and y agree mod 16; else the "two_pass" rung's kernel and block.
        _rung("03_single_pass", "softmax_single_pass", "the row in registers, 16-byte vectors: one read",
              launch="registers", THREADS=256, VECS=8),
        # Launch "specialized": by n, one of the source's three kernels (SPECIALIZED_ENTRIES): a warp per row
        # (WARP_ROWS rows a block, ceil(rows / WARP_ROWS) blocks), a block per row sized to hold it in registers
        # (block_threads), or a two-read block of LONG_THREADS per row.
        _rung("04_specialized", "softmax_specialized_warp",
              "specialized by n: warp per row, block per row, or two reads for long rows",
              launch="specialized", WARP_ROWS=8, WARP_VECS=8, BLOCK_VECS=8, LONG_THREADS=1024),
        # Launch "cluster": a row split over a cluster of CLUSTER blocks of THREADS threads (both set per n by
        # launch_plan: cluster_shape), grid rows * CLUSTER; sm_90 on.
        _rung("05_cluster", "softmax_cluster",
              "a long row split over a thread-block cluster, max and sum through distributed shared memory",
              launch="cluster", min_arch=CLUSTER_MIN_ARCH, VECS=8, BLOCK=256, CLUSTER=1, THREADS=256, EXCHANGE=1),
    )
    # Rung 04's kernels, by path: all in its one source file.
    SPECIALIZED_ENTRIES = {"warp": "softmax_specialized_warp", "block": "softmax_specialized_block",
                           "long": "softmax_specialized_long"}

    def __init__(self, statistical_scale: float = 1.0):
        # The share of the error model's relative part (the bracket in error_bound) a check allows: 1 for the
        # checks; the GPU tests and the CPU model tests check again at 0.5, to show the bound is not flaky.
        self.statistical_scale = statistical_scale

    def _xp(self):
        if self.array_module is not None:
            return self.array_module
        import cupy

        return cupy

    # --- problems ---------------------------------------------------------------------------------
    def make_problem(self, seed: int = 0, dist: str = "normal", rows: int = 1, n: int = 1, dtype: str = "float32",
                     mask: str = "none", special: int = 0, x_offset: int = 0, sets: int = 1) -> Problem:
        """x (rows x n, `dtype`, random of `dist`), a length per row when mask="lengths", and with special=1
        the top rows overwritten with SPECIAL_KINDS. x_offset shifts x's start by that many elements from a
        16-byte boundary (the output stays aligned): x and y then differ mod 16."""
        from lab.measure.check import random_array

        xp = self._xp()
        _validate(rows, n, dtype, mask)
        rng = np.random.default_rng(seed + 7919)
        xs = []
        for s in range(sets):
            base = random_array((rows * n + x_offset,), np.dtype(dtype), seed + s, dist, xp=xp)
            x = base[x_offset:].reshape(rows, n)
            if special:
                for r, kind in enumerate(SPECIAL_KINDS[:rows]):
                    _special_row(kind, x[r], n, dtype, rng, xp)
            xs.append(x)
        lengths = xp.asarray(_lengths(rows, n, rng)) if mask == "lengths" else None
        params = {"rows": rows, "n": n, "dtype": dtype}
        params |= ({"mask": mask} if mask != "none" else {}) | ({"special": special} if special else {})
        params |= {"x_offset": x_offset} if x_offset else {}
        label = (f"{rows}x{n} {dtype}" + (" masked" if mask != "none" else "") + (" special rows" if special else "")
                 + (f" x+{x_offset}" if x_offset else ""))
        return Problem(label, {"x": xs, "lengths": lengths}, (rows, n), self.min_dram_bytes(params), params=params,
                       dtype=np.dtype(dtype))

    def reference(self, problem: Problem) -> np.ndarray:
        return softmax_reference(*_row_view(problem))

    def error_bound(self, problem: Problem, reference: np.ndarray) -> np.ndarray:
        """Each output's allowed |error|, from its own row, with u = 2^-24 (fp32's unit roundoff):

            y_j = exp(z_j) / S,   z_j = x_j - shift,   S = sum_k exp(z_k)   (valid k)

        exp(z): the kernels compute 2^(fl(fl(x - shift) * fl(log2 e))) with ex2.approx, so the exponent reaches
            the SFU with a relative error of ~3u, an absolute error of ~3u|z|, which is a relative error of
            ~3u|z| in the result; ex2.approx itself is within 2 ulps (4u; the CUDA C++ Programming Guide's
            __expf entry: 2 + floor(|1.173 z|) ulps). The rungs that rescale (02's online sum, 04's long path)
            reach exp(z) as exp(x - m_t) * exp(m_t - shift), two such factors with |x - m_t| + |m_t - shift|
            = |z|. Hence (EXP_CONST + EXP_SLOPE * |z|) u, with EXP_CONST = 8 and EXP_SLOPE = 4.
        S: its terms carry those errors, weighted by their share y_k of the sum: sum_k (8 + 4|z_k|) u y_k.
            Summing n positive terms in fp32 adds rounding errors that grow like sqrt(n) u (lab.measure.bounds'
            probabilistic argument, with its SAFETY = 8). The online rescales are roundings of the same kind,
            at most n / threads per thread, which 8 sqrt(n) covers for n up to 4 threads^2 even on a sorted row.
        1/S and the product e * (1/S): rcp.approx (1 ulp) and one rounding: NORMALIZE_ULPS = 4 (u).
        So
            E_j = scale * |y_j| * u * [(8 + 4|z_j|) + sum_k (8 + 4|z_k|) y_k + 8 sqrt(n_valid) + 4] + 2^-126
        where the last term covers exponentials flushed to 0 below fp32's smallest normal (ex2.approx.ftz;
        S >= 1) and scale = statistical_scale (1 for the checks). fp16 outputs are rounded once more, by at
        most half an fp16 ulp of the fp32 value, whose magnitude is at most |y_j| + E_j: the bound adds
        half_ulp_fp16(|y_j| + E_j) (half the fp16 spacing in that binade; 2^-25 among the subnormals).

        The flush and the fp16 rounding are single roundings that a correct kernel can use in full, so no
        margin can be asked of them; it is asked of the bracket instead: tests/test_softmax_family.py (NumPy
        models of the kernels, SFU errors as large as assumed) and tests/test_gpu_softmax.py (the rungs) check
        again at statistical_scale = 0.5. Masked elements must be exactly +0 (bound 0); NaN outputs must be
        NaN (no bound).

        How tight: in fp32 the bracket is ~8 sqrt(n) + 40 (~300 u, 2e-5 relative, at n = 1000), so
        - a term missing from S moves every output of its row by its share y_k: caught unless y_k is below
          ~(8 sqrt(n) + 40) u (the smallest terms of a long row);
        - one element computed with its shift one ulp off (2u|m| in z) is caught where |m| exceeds about
          4 sqrt(n) + 20 (and z_j is near 0);
        - an fp16 output one ulp further from the reference than the correctly rounded value is ~2x its
          bound, unless it sits within E_j of the top of its binade; two ulps always fail.
        tests/test_softmax_family.py shows each on a NumPy model of the kernels.
        """
        x, valid, bad, shift = _row_view(problem)
        u = unit_roundoff(np.float32)
        y = np.abs(np.nan_to_num(reference, nan=0.0))
        ok = valid & ~bad[:, None] & np.isfinite(x)
        with np.errstate(invalid="ignore"):
            z = np.where(ok, np.abs(x - shift[:, None]), 0.0)
        per_element = EXP_CONST + EXP_SLOPE * z
        shares = np.sum(np.where(y > 0, per_element * y, 0.0), axis=1, keepdims=True)
        n_valid = np.maximum(valid.sum(axis=1, keepdims=True), 1)
        bracket = per_element + shares + SAFETY * np.sqrt(n_valid) + NORMALIZE_ULPS
        bound = self.statistical_scale * u * bracket * y + FTZ_FLOOR
        if problem.params["dtype"] == "float16":
            bound += half_ulp_fp16(y + bound)
        return np.where(valid, bound, 0.0)

    # --- launching --------------------------------------------------------------------------------
    def _variant(self, rung: Rung, dtype: str) -> Rung:
        return dataclasses.replace(rung, spec=rung.spec.with_knobs(HALF=int(dtype == "float16")))

    def launch_plan(self, rung: Rung, rows: int, n: int, dtype: str, together: bool = True) -> dict:
        """How `rung` runs on a rows x n problem: the kernel (`spec`, with HALF set), `grid`, `block`, and the
        `path` taken, a short name the records keep. `together`: x and y agree mod 16 (vectors serve both)."""
        scheme = self.launch_scheme(rung)
        k = _knobs(rung)
        if scheme == "cluster":
            return self._cluster_plan(rung, rows, n, dtype, together)
        if scheme == "registers" and not (together and n <= row_capacity(rung, dtype)):
            # Too long for the registers, or no common vector alignment: the two-pass rung's kernel.
            rung = next(r for r in self.rungs if r.launch == "two_pass")
            k = _knobs(rung)
            path = f"rung {rung.number:02d}'s kernel (row longer than registers hold)" if together else \
                f"rung {rung.number:02d}'s kernel (x and y differ mod 16)"
            return {"spec": self._variant(rung, dtype).spec, "grid": (rows,), "block": (k["THREADS"],), "path": path}
        if scheme != "specialized":
            return {"spec": self._variant(rung, dtype).spec, "grid": (rows,), "block": (k["THREADS"],),
                    "path": self.PATHS[scheme]}
        spec = self._variant(rung, dtype).spec
        if together and n <= warp_capacity(rung, dtype):
            return {"spec": dataclasses.replace(spec, entry=self.SPECIALIZED_ENTRIES["warp"]),
                    "grid": (-(-rows // k["WARP_ROWS"]),), "block": (32 * k["WARP_ROWS"],), "path": "warp per row"}
        if together and n <= row_capacity(rung, dtype):
            return {"spec": dataclasses.replace(spec, entry=self.SPECIALIZED_ENTRIES["block"]), "grid": (rows,),
                    "block": (block_threads(n, dtype, k["BLOCK_VECS"]),), "path": "block per row, registers"}
        return {"spec": dataclasses.replace(spec, entry=self.SPECIALIZED_ENTRIES["long"]), "grid": (rows,),
                "block": (k["LONG_THREADS"],),
                "path": "block per row, two reads" + ("" if together else " (x and y differ mod 16)")}

    def _cluster_plan(self, rung: Rung, rows: int, n: int, dtype: str, together: bool) -> dict:
        """Rung 05: CLUSTER and THREADS from n (cluster_shape), a cluster of blocks per row; the slices held in
        registers where they fit and x and y agree mod 16, else read twice (the kernel decides the same way)."""
        k = _knobs(rung)
        cluster, threads = cluster_shape(n, dtype, k["VECS"], k["BLOCK"])
        grid = rows * cluster
        if grid >= 2**31:
            raise LabError(f"softmax rung {rung.key} launches {cluster} blocks a row, {grid} in all, past a grid's "
                           "2^31 - 1: split the rows into several calls.")
        spec = self._variant(rung, dtype).spec.with_knobs(CLUSTER=cluster, THREADS=threads)
        shape = f"cluster of {cluster} blocks per row" if cluster > 1 else "block per row"
        held = together and cluster_holds(n, dtype, cluster, threads, k["VECS"])
        reads = "registers" if held else "re-read" + ("" if together else " (x and y differ mod 16)")
        return {"spec": spec, "grid": (grid,), "block": (threads,), "path": f"{shape}, {reads}", "cluster": cluster}

    @staticmethod
    def _together(x, out) -> bool:
        return (x.data.ptr - out.data.ptr) % 16 == 0

    def _inputs(self, problem: Problem, set_index: int):
        xs = problem.inputs["x"]
        return xs[set_index % len(xs)], problem.inputs.get("lengths")

    def launch(self, rung: Rung, problem: Problem, out, set_index: int = 0) -> None:
        from lab.core.build import get_kernel

        p = problem.params
        x, lengths = self._inputs(problem, set_index)
        plan = self.launch_plan(rung, p["rows"], p["n"], p["dtype"], self._together(x, out))
        lengths_arg = lengths if lengths is not None else np.uint64(0)  # a null pointer: no mask
        get_kernel(plan["spec"])(plan["grid"], plan["block"],
                                 (x, out, lengths_arg, np.int32(p["rows"]), np.int32(p["n"])))

    def launch_notes(self, rung: Rung, problem: Problem, out) -> dict:
        """The path the launcher took for this shape (rung 04: warp per row, block per row, or two reads; rung
        03: its own kernel or rung 02's; rung 05: the cluster's size, and registers or a re-read), the kernel and its
        block size (and rung 05's cluster size)."""
        p = problem.params
        x, _ = self._inputs(problem, 0)
        plan = self.launch_plan(rung, p["rows"], p["n"], p["dtype"], self._together(x, out))
        notes = {"path": plan["path"], "kernel": plan["spec"].entry, "threads": plan["block"][0]}
        return notes | ({"cluster": plan["cluster"]} if "cluster" in plan else {})

    def launch_ceiling(self, problem: Problem, out, set_index: int = 0) -> None:
        x, _ = self._inputs(problem, set_index)
        out.data.copy_from_device_async(x.data, x.nbytes)  # the same bytes read and written

    def baselines(self) -> dict:
        def cupy_composed(problem: Problem, out, set_index: int = 0) -> None:
            """CuPy's own operations, as a user writes a masked softmax: fp32 math (fp16 cast up and back),
            the max, exp of the difference, the sum, the division; the same definitions as the kernels (a
            -inf max shifts by 0, an empty sum gives 0, masked outputs 0)."""
            import cupy as cp

            x, lengths = self._inputs(problem, set_index)
            x32 = x.astype(cp.float32, copy=False)
            valid = None
            if lengths is not None:
                n = problem.params["n"]
                valid = cp.arange(n, dtype=cp.int32)[None, :] < cp.clip(lengths, 0, n)[:, None]
                x32 = cp.where(valid, x32, cp.float32(-cp.inf))
            m = x32.max(axis=1, keepdims=True)  # NaN propagates: a NaN row stays NaN
            m = cp.where(m == -cp.inf, cp.float32(0), m)
            e = cp.exp(x32 - m)
            s = e.sum(axis=1, keepdims=True)
            y = cp.where(s == 0, cp.float32(0), e / s)
            if valid is not None:
                y = cp.where(valid, y, cp.float32(0))
            out[...] = y.astype(out.dtype)

        return {"cupy_composed": cupy_composed}

    def block_resources(self, rung: Rung) -> tuple[int, int] | None:
        """(threads, 0) for rungs 01-03; None for rungs 04 and 05, whose block size depends on n (launch_plan)."""
        k = _knobs(rung)
        return (k["THREADS"], 0) if "THREADS" in k and self.launch_scheme(rung) != "cluster" else None

    # --- shape families ---------------------------------------------------------------------------
    def check_cases(self) -> list[dict]:
        """Row lengths at vector, warp, block and register-capacity boundaries, both dtypes, with and without
        a mask; the special rows; rung 03's, 04's and 05's path boundaries (each cluster size, past the cluster's
        registers); x misaligned against y."""
        cases = []
        kinds = len(SPECIAL_KINDS)
        for dtype in DTYPES:
            for mask in MASKS:
                for i, n in enumerate(CHECK_ROW_LENGTHS):
                    many, few = (67, (1, 3)[i % 2]) if n <= 1025 else (19, (1, 3)[i % 2]) if n <= 4097 else (3, 1)
                    cases += [{"rows": r, "n": n, "dtype": dtype, "mask": mask} for r in (many, few)]
                cases += [{"rows": kinds + 2, "n": n, "dtype": dtype, "mask": mask, "special": 1}
                          for n in SPECIAL_ROW_LENGTHS]
                # Each side of the register paths' capacities (rung 03's block, rung 04's warp and block, rung 05's
                # cluster sizes and its largest cluster's registers, past which it reads twice).
                edges = {row_capacity(self.rung("03"), dtype), warp_capacity(self.rung("04"), dtype),
                         row_capacity(self.rung("04"), dtype)} | set(cluster_edges(self.rung("05"), dtype))
                cases += [{"rows": 2, "n": n, "dtype": dtype, "mask": mask} for edge in sorted(edges)
                          for n in (edge, edge + 1) if n not in CHECK_ROW_LENGTHS]
                cases += [{"rows": 2, "n": n, "dtype": dtype, "mask": mask} for n in (65536, 65537, 131072)
                          if not {n, n - 1} & edges]
            # The special rows on a long row (rung 04's long path in fp32, its block path in fp16; a cluster of 4 or
            # 2 blocks in rung 05), on a row every block of rung 05's largest cluster holds a slice of (masked too),
            # and on a row past its registers (read twice).
            cases.append({"rows": kinds, "n": 32769, "dtype": dtype, "special": 1})
            cases.append({"rows": kinds + 2, "n": 65537, "dtype": dtype, "mask": "lengths", "special": 1})
            cases.append({"rows": kinds, "n": STREAMED_N, "dtype": dtype, "special": 1})
            cases += [{"rows": r, "n": n, "dtype": dtype, "x_offset": 1} for r, n in ((3, 7), (3, 1024), (3, 4097),
                                                                                    (1, 40000))]
            cases.append({"rows": 3, "n": 65537, "dtype": dtype, "mask": "lengths", "x_offset": 1})
        return cases

    def sweep_params(self, max_bytes: int) -> list[dict]:
        per_row = 2 * SWEEP_ROW_LENGTH * np.dtype(SWEEP_DTYPE).itemsize
        seen, params = set(), []
        for b in shapes.byte_sweep(1 << 14, max_bytes):
            rows = max(1, b // per_row)
            if rows not in seen:
                seen.add(rows)
                params.append({"rows": rows, "n": SWEEP_ROW_LENGTH, "dtype": SWEEP_DTYPE})
        return params

    def tail_params(self) -> list[dict]:
        # fp16 (8-element vectors: the sawtooth's period) across 1024 (rung 04's warp path), 2048 (warp to
        # block) and 4096, ~256 MiB arrays.
        return [{"rows": rows_for_bytes(n, "float16"), "n": n, "dtype": "float16"}
                for base in TAIL_BASES for n in shapes.tail_range(base - TAIL_HALF_SPAN, 2 * TAIL_HALF_SPAN)]

    def headline_params(self) -> list[dict]:
        return [{"rows": rows_for_bytes(n, dtype), "n": n, "dtype": dtype}
                for n in HEADLINE_ROW_LENGTHS + CONTRAST_ROW_LENGTHS + LONG_ROW_LENGTHS
                for dtype in ("float16", "float32")]

    def in_readme(self, params: dict) -> bool:
        """The README shows the target sizes; n = 128 and 512 stay in the records."""
        return params.get("n") in HEADLINE_ROW_LENGTHS

    def min_dram_bytes(self, params: dict) -> int:
        """x read once and y written once, plus the lengths when masked."""
        elements = params["rows"] * params["n"]
        extra = 4 * params["rows"] if params.get("mask", "none") != "none" else 0
        return 2 * elements * np.dtype(params["dtype"]).itemsize + extra


def half_ulp_fp16(v: np.ndarray) -> np.ndarray:
    """Half the spacing of fp16 numbers at |v| (the largest error of rounding a value of magnitude <= |v| to
    fp16, nearest even): 2^(e - 11) for |v| in [2^e, 2^(e+1)), and 2^-25 below 2^-14 (the subnormals)."""
    magnitude = np.maximum(np.abs(np.asarray(v, dtype=np.float64)), 2.0**-24)  # 0 is among the subnormals
    _, exponent = np.frexp(magnitude)  # magnitude = m * 2^exponent, m in [0.5, 1)
    return np.ldexp(1.0, np.maximum(exponent - 1, -14) - 11)


def row_capacity(rung: Rung, dtype: str) -> int:
    """The longest row (elements) `rung` holds in registers: rung 03's THREADS * VECS vectors (a block), rung 04's
    1024 * BLOCK_VECS (a block), rung 05's 8 * 1024 * VECS (a cluster of the largest blocks); 0 for the rungs that
    hold no row (01, 02)."""
    k = _knobs(rung)
    if "CLUSTER" in k:
        return CLUSTER_SIZES[-1] * MAX_BLOCK * k["VECS"] * VEC_ELEMS[dtype]
    if "VECS" in k:
        return k["THREADS"] * k["VECS"] * VEC_ELEMS[dtype]
    if "BLOCK_VECS" in k:
        return MAX_BLOCK * k["BLOCK_VECS"] * VEC_ELEMS[dtype]
    return 0


def warp_capacity(rung: Rung, dtype: str) -> int:
    """The longest row rung 04's warp path holds: 32 lanes * WARP_VECS vectors (0 for the other rungs)."""
    k = _knobs(rung)
    return 32 * k["WARP_VECS"] * VEC_ELEMS[dtype] if "WARP_VECS" in k else 0


def block_threads(n: int, dtype: str, vecs: int) -> int:
    """Rung 04's block path: the fewest threads that hold the row at `vecs` (BLOCK_VECS) vectors each, rounded
    up to a warp, 32 to 1024. The registers are allocated for BLOCK_VECS vectors whatever the block uses, so
    filling them puts the most bytes in flight per SM (n = 4096 fp32: 128 threads, ~8 blocks per SM)."""
    vectors = -(-n // VEC_ELEMS[dtype])
    threads = -(-vectors // vecs)
    return min(MAX_BLOCK, max(32, -(-threads // 32) * 32))


def cluster_shape(n: int, dtype: str, vecs: int, block: int) -> tuple[int, int]:
    """Rung 05's (CLUSTER, THREADS) for rows of n elements: the fewest blocks of CLUSTER_SIZES whose slices of the
    row's ceil(n / VEC_ELEMS) vectors fit `block` threads of `vecs` vectors each, else the largest cluster; then the
    fewest warps that hold a slice at `vecs` vectors a thread, 32 to 1024 (a longer slice is read twice:
    `cluster_holds`). The kernel splits each row's own vectors (after its scalar head), never more than these."""
    vectors = -(-n // VEC_ELEMS[dtype])

    def slice_vectors(cluster: int) -> int:
        return -(-vectors // cluster)

    cluster = next((c for c in CLUSTER_SIZES if slice_vectors(c) <= block * vecs), CLUSTER_SIZES[-1])
    threads = 32 * -(-slice_vectors(cluster) // (32 * vecs))
    return cluster, max(32, min(MAX_BLOCK, threads))


def cluster_edges(rung: Rung, dtype: str) -> tuple[int, ...]:
    """The longest rows rung 05 gives each cluster size at its BLOCK (n + 1 takes the next size, or more threads
    past the largest), and the longest its largest cluster holds in registers (n + 1 is read twice)."""
    k = _knobs(rung)
    per_block = k["BLOCK"] * k["VECS"] * VEC_ELEMS[dtype]
    return tuple(c * per_block for c in CLUSTER_SIZES) + (row_capacity(rung, dtype),)


def cluster_holds(n: int, dtype: str, cluster: int, threads: int, vecs: int) -> bool:
    """Whether rung 05 built with (cluster, threads) holds each slice of a row of n elements in registers (where x
    and y agree mod 16): the kernel's own test, on the same ceil(n / VEC_ELEMS) vectors."""
    vectors = -(-n // VEC_ELEMS[dtype])
    return -(-vectors // cluster) <= threads * vecs
