# ---
# jupyter:
#   jupytext:
#     formats: ipynb,src//py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 — The FP32 GEMM ladder: from one thread per output to a pipelined, warp-tiled SGEMM

# %% [markdown]
# ## What you will learn
#
# - How to count a matrix product before writing it: its FLOPs, the fewest bytes it can move, and how many bytes
#   per FLOP each kernel really asks of the memory system, computed from its tile sizes.
# - Why shared-memory tiles cut the traffic to global memory, and why register tiles then cut the traffic to shared
#   memory, so that each load feeds many FMAs (the `FFMA`-to-`LDS` ratio of the compiled code).
# - How to launch one rung through its family on a shape no tile divides, check it element by element against a
#   float64 reference within each element's own error bound, and time it against cuBLAS in the same run.
# - How registers decide occupancy, and how a `cp.async` pipeline hides global-memory latency.
# - How a knob-tuning loop works (candidates, check, time, keep the best), and how to tell a real gain from noise.

# %% [markdown]
# `C = alpha * A @ B + beta * C` in float32, row-major, any `M, N, K`. A product does `2 M N K` floating-point
# operations on at least `4 (M K + K N + M N)` bytes, so the arithmetic per byte grows with the size: past a few
# hundred on a side it is the arithmetic units, not memory, that can set the limit, and the lesson changes from
# "move bytes well" (notebook 01) to "keep the FMA units fed".
#
# Two yardsticks, both printed next to every measurement:
#
# - **cuBLAS SGEMM** (`cupy.matmul` on float32, TF32 off), the library baseline, timed on the same problem in the
#   same run (`fam.launch_ceiling`);
# - the **FP32 peak**: SMs × FP32 lanes per SM × 2 FLOP per FMA × SM clock (`lab.core.device.fp32_peak`, which
#   says where its clock came from), a true upper bound for any kernel that does not use tensor cores.
#
# Eight rungs, each one change: coalescing, shared-memory tiles, register tiles (1-D, then 2-D), 16-byte loads,
# warp tiling, and a multi-stage `cp.async` pipeline. Rungs 03 (shared-memory tiles) and 05 (register tiles) are
# written out step by step: the count, the diff, the prediction, the compile report, one launch, one check, one
# timing, the records and the figure. The other rungs repeat those steps through one call (`lessons.RungWalk`).
# The approach follows Simon Boehm's worklog "How to optimize a CUDA matmul kernel for cuBLAS-like performance"
# (siboehm.com/articles/22/CUDA-MMM), which the rung headers cite, and CUTLASS's "Efficient GEMM in CUDA". Every
# figure quoted is computed from records in a cell; none is typed in.

# %%
from IPython.display import display

from lab import lessons
from lab.core import device, occupancy
from lab.families import get_family
from lab.families.gemm import dynamic_smem_bytes
from lab.lessons import gemm_fp32_steps as steps
from lab.lessons import knob_tuning, plots
from lab.measure import bench
from lab.studies import report

GEMM = get_family("gemm_fp32")
print(GEMM.title, "|", GEMM.metric, "against", GEMM.ceiling_title)
print("\n".join(f"  {r.key}: {r.title}" for r in GEMM.rungs))

# %% [markdown]
# ## Counting first: FLOPs, bytes, and bytes per FLOP
#
# At the first headline size, the product's FLOPs and the fewest bytes it can move (A and B read once, C written
# once) say how much arithmetic each byte could feed at best. What a kernel actually asks of the memory system
# (L1, L2, DRAM) per FLOP depends on how it reuses what it loads:
#
# - **naive** (rungs 01 and 02): every FMA, two FLOPs, loads one float of `A` and one of `B`;
# - **tiled** (rung 03 on): a block that owns a `BM × BN` tile of `C` loads, per step of `k`, a column of `BM`
#   floats of `A` and a row of `BN` floats of `B`, and does `2 BM BN` FLOPs with them.
#
# The cell computes both from each rung's own tile sizes (its knobs in `lab/families/gemm.py`).

# %%
HEAD = GEMM.headline_params()[0]
M, N, K = HEAD["M"], HEAD["N"], HEAD["K"]
flops = 2 * M * N * K  # one multiply and one add per (i, j, k)
min_bytes = 4 * (M * K + K * N + M * N)  # A and B read once, C written once, 4 bytes a float
print(f"M = N = K = {M}: {flops / 1e9:.1f} GFLOP on at least {min_bytes / 2**20:.0f} MiB "
      f"-> at best {min_bytes / flops:.5f} bytes per FLOP ({flops / min_bytes:.0f} FLOP per byte)")

naive_bytes_per_flop = (4 + 4) / 2  # one float of A and one of B per FMA (2 FLOP)


def tiled_bytes_per_flop(knobs: dict) -> float:
    """Per k step a BM x BN block tile loads BM floats of A and BN floats of B, for 2 * BM * BN FLOP."""
    return 4 * (knobs["BM"] + knobs["BN"]) / (2 * knobs["BM"] * knobs["BN"])


BYTES_PER_FLOP = {}
for key in ("01", "03", "04", "05"):
    knobs = dict(GEMM.rung(key).spec.knobs)
    BYTES_PER_FLOP[key] = tiled_bytes_per_flop(knobs) if "BK" in knobs else naive_bytes_per_flop
    print(f"  rung {key} ({knobs['BM']} x {knobs['BN']} block tile, {GEMM.rung(key).title}): "
          f"{BYTES_PER_FLOP[key]:.4f} bytes per FLOP = {1 / BYTES_PER_FLOP[key]:5.1f} FLOP per byte -> "
          f"{BYTES_PER_FLOP[key] * flops / 2**30:7.1f} GiB requested at {M}^3, "
          f"{BYTES_PER_FLOP[key] * flops / min_bytes:6.0f}x the minimum")

# %% [markdown]
# Read the last column: the naive kernel asks for many times the bytes the product needs, and only the caches
# stand between those requests and DRAM. A shared-memory tile divides the requests by the tile's size; the larger
# block tiles of the register-tiled rungs divide them again. Whether a rung can then be compute-bound depends on
# how many FLOPs the GPU can do per byte its DRAM delivers, which the records below give.

# %% [markdown]
# ## Live or replay

# %%
MODE = lessons.mode()
print(lessons.mode_banner("gemm_fp32", current=MODE))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for the reference GPU's
# arch (`lab.core.device.REFERENCE_ARCH`, the H200's) otherwise.

# %%
ARCH = lessons.compile_arch(MODE)
print(f"compile reports for sm_{ARCH}")

# %% [markdown]
# In LIVE mode the measurement plan is reduced so the notebook runs in a few minutes (`lab bench
# gemm_fp32` runs the full plan): every headline size (the square ones the predictions name and the ones
# one off a tile multiple), every sweep size but cold L2 only (a compute-bound product barely notices a
# warm L2) with `quick` timings, and rungs 01 to 03, which take a good fraction of a second per launch
# at large sizes, left out of the sweep past a side of 2048 (`GemmFp32Family.rungs_for`). The tail
# sizes are taken every third size: a step coprime with both the vector width and the tile width, so
# neither kind of sawtooth can hide. The replayed reference records step by one; the tail cells below
# print which step the records in hand took.

# %%
PLANS = (bench.BenchPlan(kinds=("headline",)),
         bench.BenchPlan(kinds=("sweep",), quick=True, sweep_step=1, l2_modes=("cold",)),
         bench.BenchPlan(kinds=("tail",), min_time_ms=5.0, tail_step=3))
print("LIVE plans:", *PLANS, sep="\n  ")

# %% [markdown]
# ### Correct first
#
# Before anything is timed, every rung runs through `lab.measure.verify.check_rung` on a spread of the family's
# check cases: a 1×1×1 product, tile multiples plus and minus one (the tails), a row vector, a
# tall-skinny and a long-K product, `alpha`/`beta` other than one and zero (C is read), and leading
# dimensions padded past the widths (which also forces the scalar path of the vectorized rungs). Three
# input distributions each, NaN-poisoned outputs, guard zones, a repeat run for races, and a tolerance
# that grows with K (float32 sums against a float64 reference). LIVE only; a failure stops the notebook
# here.

# %%
GEMM_CASES = lessons.few_cases(GEMM, 10)
GEMM_CHECKS = lessons.check_ladder(GEMM, GEMM_CASES) if MODE.live else None
print(f"{len(GEMM_CASES)} cases:", ", ".join(str(c) for c in GEMM_CASES))

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)
#
# One `lab.measure.bench.run` per plan times cuBLAS and the rungs on every problem: the headline sizes (cold
# L2), square sizes from 256 to 8192 on a side, and the tail sizes (`N` across tile boundaries near
# 4096).

# %%
GEMM_RS = lessons.ladder_records(GEMM, MODE, *PLANS)
print(lessons.records_status(GEMM_RS, "gemm_fp32"))

# %% [markdown]
# The FP32 peak of the GPU the numbers come from. `lab.core.device` takes the SM clock from the driver's
# attribute when it reads back a plausible value, and falls back to the datasheet boost clock of the
# arch when it does not (CUDA 13 has been seen to read back nonsense), or when the numbers are replayed
# from records, which do not carry a clock. The line below says which of the two this peak used.

# %%
PEAK = lessons.fp32_peak(MODE, GEMM_RS)
PEAK_TFLOPS = PEAK.tflops if PEAK else None
print(lessons.peak_status(PEAK, MODE))

# %% [markdown]
# cuBLAS itself at the headline sizes, against that peak: the most any FP32 (non-tensor-core) kernel
# can hope to get close to.

# %%
print(lessons.headline_summary(GEMM_RS, GEMM, "ceiling", peak=PEAK_TFLOPS))

# %% [markdown]
# ### How many FLOPs per DRAM byte the GPU needs
#
# The FP32 peak over the DRAM bandwidth (the device copy's, measured on the same GPU, from notebook 01's records)
# is how many FLOPs a kernel must do per byte from DRAM to be able to reach the peak: the ridge of a roofline. The
# cell holds each rung's bytes per FLOP from the count above against it. A rung that asks for more than that must
# have the caches serve most of its requests, or wait for DRAM.

# %%
COPY_BANDWIDTH = lessons.copy_ceiling(GEMM_RS.provenance.get("device") if GEMM_RS else None)
if PEAK_TFLOPS and COPY_BANDWIDTH:
    copy_gbs, copy_where = COPY_BANDWIDTH
    ridge = PEAK_TFLOPS * 1e12 / (copy_gbs * 1e9)  # FLOP per DRAM byte at which the two limits meet
    print(f"FP32 peak {PEAK_TFLOPS:.1f} TFLOP/s / DRAM {copy_gbs:.0f} GB/s ({copy_where})\n"
          f"  = {ridge:.1f} FLOP per byte, i.e. at most {1 / ridge:.4f} bytes per FLOP from DRAM")
    for key, per_flop in BYTES_PER_FLOP.items():
        print(f"  rung {key}: asks {per_flop:.4f} bytes per FLOP = {per_flop * ridge:6.2f}x what DRAM can feed at "
              "the peak")
else:
    print("(needs the FP32 peak and the device copy's bandwidth on the same GPU; the records in hand lack one)")

# %% [markdown]
# How many bytes each rung really pulls from DRAM is the other half of the story of tiling, and time
# cannot show it: Nsight Compute's counters can. LIVE with `ncu` installed: one launch of each rung at
# the first headline size is profiled in this run (a few seconds per rung). Otherwise the reference GPU's
# profile (`gemm_fp32_profile.json`) is replayed, if present.

# %%
GEMM_PROFILE = lessons.profile_records(GEMM, MODE)
print(lessons.profile_status(GEMM_PROFILE, "gemm_fp32"))

# %% [markdown]
# Every rung below goes through the same walk, in this order: the source (rung 01) or the diff from
# the previous rung; the header's prediction and the knobs the ladder builds it with; the compile
# report and what changed in it; `FFMA` against the loads that feed them; the checks; the measurement
# at the headline sizes (median with its p10–p90 spread, TFLOP/s, the fraction of cuBLAS on the same
# problem in the same run, the fraction of the FP32 peak); the DRAM traffic of one launch against the
# fewest bytes the product can move (A and B read once, C written once); the ladder so far; and each
# numeric range of the prediction against the records.

# %%
WALK = lessons.RungWalk(GEMM, ARCH, GEMM_RS, GEMM_CHECKS, profile=GEMM_PROFILE, peak=PEAK_TFLOPS,
                        operand_mix=True)

# %% [markdown]
# ---
# ## Rung 01 — naive: one thread per element of C
#
# Each thread runs one whole dot product straight from global memory. The mapping of threads to
# elements is deliberately the wrong one: the 32 threads of a warp take 32 consecutive *rows* of one
# column, so every load of `A` touches 32 different cache lines. The compile report shows no shared
# memory at all, and more global loads than FMAs (each FMA needs one value of `A` and one of `B`). The
# header models the rung as limited by L1 wavefronts (one per row touched), not by arithmetic, and
# predicts a tiny fraction of the peak.

# %%
GEMM_01 = WALK("01")

# %% [markdown]
# ## Rung 02 — coalesced: neighbouring threads walk along a row of C
#
# Only the two lines that map a thread to its element change: the 32 threads of a warp now take 32
# consecutive *columns* of one row. Per `k`, the warp's load of `A` is one address (a broadcast) and its
# load of `B` is 128 contiguous bytes: one L1 wavefront each, instead of 32 for `A`. The binary is the
# same instruction for instruction (the compile report's delta says so): only the index arithmetic
# moved, so the difference in the measurement is entirely how the memory system serves the same loads.

# %%
GEMM_02 = WALK("02")

# %% [markdown]
# ## Rung 03 — shared-memory tiles
#
# The `k` loop walks `K` in steps of `BK`. Each step, the block copies a `BM×BK` tile of `A` and a `BK×BN` tile of
# `B` into shared memory (coalesced), waits at a barrier, and every thread runs `BK` steps of its dot product from
# shared memory. Each element fetched from global memory is now reused by a whole row or column of the block's
# threads instead of being requested again by every warp: the count at the top gives the factor, from the tile's
# sides alone.
#
# ### What changed: the diff from rung 02

# %%
print(lessons.knobs_line(GEMM, "03"))
lessons.show_diff(GEMM, "03")

# %% [markdown]
# ### Predict first
#
# Before looking at any time: rung 02 asked for a float of `A` and one of `B` per FMA, and this tile asks for a
# small fraction of that from global memory. But every FMA still reads two values, now from shared memory, and
# shared memory serves a limited number of wavefronts per clock. Will the step be large or small? Write your guess
# down, then read the header's prediction, written before the rung was ever run:

# %%
print(lessons.prediction(GEMM, "03"))

# %% [markdown]
# ### The compile report
#
# The report shows the tiles (static shared memory), the barriers (`BAR`), and shared loads: the broadcast read of
# `As` is fused four `k` steps at a time into `LDS.128`, the read of `Bs` is a plain `LDS`. The last line counts how
# many FMAs each load instruction feeds, the ratio the register tiles of rungs 04 and 05 will raise.

# %%
REPORTS_03 = lessons.compile_pair(GEMM, "03", ARCH)  # rung 02's, then rung 03's, as the ladder builds them
display(lessons.md(report.compile_markdown(REPORTS_03)))
print(lessons.instruction_delta(REPORTS_03))
print(lessons.operand_mix(REPORTS_03[-1:]))

# %% [markdown]
# ### One launch, on a shape no tile divides
#
# `M, N, K = 1000, 1003, 517`: no side is a multiple of the 32-wide tile, so the last row and column of blocks are
# partial and the last `k` tile is short. The output is filled with NaN first, so an element the kernel never
# writes stays NaN. The launch geometry is arithmetic (grid `ceil(N / BN) × ceil(M / BM)`), printed in both modes;
# the launch itself needs a GPU.

# %%
ODD = dict(steps.ODD_SHAPE)  # M, N, K = 1000, 1003, 517
RUNG_03 = GEMM.rung("03")
grid, block, smem = GEMM.geometry(RUNG_03, ODD["M"], ODD["N"])
knobs_03 = dict(RUNG_03.spec.knobs)
print(f"{RUNG_03.key} on M={ODD['M']} N={ODD['N']} K={ODD['K']}: grid {grid[0]} x {grid[1]} = {grid[0] * grid[1]} "
      f"blocks of {block[0]} threads; the last block column holds {ODD['N'] - (grid[0] - 1) * knobs_03['BN']} of "
      f"{knobs_03['BN']} columns, the last block row {ODD['M'] - (grid[1] - 1) * knobs_03['BM']} of {knobs_03['BM']} "
      f"rows, the last k tile {ODD['K'] % knobs_03['BK'] or knobs_03['BK']} of {knobs_03['BK']} steps")

if MODE.live:
    import cupy as cp

    fam = get_family("gemm_fp32")
    rung = fam.rung("03")
    problem = fam.make_problem(seed=3, **ODD)  # fresh random A and B, never zeros; beta = 0, so C is not read
    out = cp.full(problem.out_shape, cp.nan, dtype=cp.float32)  # poisoned: an element never written stays NaN
    fam.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()  # a fault in the kernel surfaces here, not in a later cell
    print(f"launched {rung.key} on {problem.label}: {int(cp.isnan(out).sum())} of {out.size} elements still NaN")
else:
    print("On a GPU this cell launches rung 03 once on that shape into a NaN-filled output. The replayed records "
          "hold no launch of this shape; the next cell shows the checks they recorded.")

# %% [markdown]
# ### One check, against float64
#
# The reference is the same product in float64, from the same float32 inputs. A float32 sum of `K` products is not
# exact, so each element gets its own bound (`fam.error_bound`, from `lab.measure.bounds`): it grows with `K` and
# with the sizes of that element's own products. An element passes when its error is at most its bound; the
# largest ratio says how much of the bound the kernel used.

# %%
if MODE.live:
    import numpy as np

    ref = fam.reference(problem)  # float64, M x N (x ldc: the padding columns, none here)
    bound = fam.error_bound(problem, ref)  # each element's allowed |error|
    got = out.get().astype(np.float64)
    err = np.abs(got - ref)
    print(f"{problem.label}: {int(np.isnan(got).sum())} elements NaN; largest |error| {np.nanmax(err):.3g}; "
          f"largest |error| / bound {np.nanmax(err / bound):.3g} (at most 1 passes)")
else:
    print("On a GPU this cell compares that output with the float64 reference, element by element, against "
          "fam.error_bound; replayed here instead are the bound margins recorded on the reference GPU:")
print(steps.bound_margin(GEMM, "03"))

# %% [markdown]
# One shape proves little. `lab.measure.verify.check_rung` (run on every rung at the top of the notebook, LIVE only)
# repeats the same check on the spread of check cases, on three input distributions, with guard zones around the
# output (a write outside it is caught) and a second run with a different poison (a result that moves is a race):

# %%
print(lessons.check_summary(GEMM_CHECKS, GEMM, "03"))

# %% [markdown]
# ### One timing, against cuBLAS in the same run
#
# `lab.measure.timing.measure` times each launch between CUDA events, after warm-up launches, with the L2 flushed
# before every timed launch (cold L2), and returns the median and its spread. cuBLAS is timed the same way, on the
# same problem, right after: the ratio of the two medians is the figure, since both saw the same GPU, clocks and
# temperature.

# %%
if MODE.live:
    from lab.measure import timing

    flusher = timing.L2Flusher()  # a buffer twice the L2's size, written before every timed launch
    mine = timing.measure(lambda i: fam.launch(rung, problem, out, i), l2="cold", flusher=flusher)
    cublas = timing.measure(lambda i: fam.launch_ceiling(problem, out, i), l2="cold", flusher=flusher)
    print(f"{rung.key}: median {mine.median_ms:.4f} ms (p10-p90 {mine.p10_ms:.4f}-{mine.p90_ms:.4f}) = "
          f"{fam.throughput(problem, mine.median_ms):.2f} TFLOP/s\n"
          f"cuBLAS: median {cublas.median_ms:.4f} ms = {fam.throughput(problem, cublas.median_ms):.2f} TFLOP/s\n"
          f"-> {cublas.median_ms / mine.median_ms:.3f}x cuBLAS on {problem.label}, measured in this run")
else:
    print("On a GPU this cell times rung 03 and cuBLAS on the odd shape, cold L2, one after the other. The "
          "replayed records timed both the same way at the headline sizes; their ratio:")
    print(lessons.ratio(GEMM_RS, GEMM, "03", "ceiling"))

# %% [markdown]
# ### The records, and the prediction held against them
#
# The headline records (median, spread, TFLOP/s, the fraction of cuBLAS timed beside it, against rung 02 and
# against the FP32 peak), then the DRAM traffic of one launch from the profile, then the ladder so far as bars.

# %%
print(lessons.headline_summary(GEMM_RS, GEMM, "03", peak=PEAK_TFLOPS))
print(lessons.dram_summary(GEMM_PROFILE, GEMM, "03"))

# %%
lessons.plot(plots.ladder_bars, lessons.so_far(GEMM_RS, GEMM, "03"), "gemm_fp32", peak=PEAK_TFLOPS,
             peak_label="FP32 peak")

# %% [markdown]
# **Reading the figure.** Each bar is one rung at the first headline size, labelled with its TFLOP/s and its
# fraction of cuBLAS; the dashed line is cuBLAS from the same run, the dotted one the FP32 peak. Look at the step
# from rung 02 to rung 03, not at the height of either: the tile cut global requests by the factor the count at the
# top printed, yet the bar grew by much less, and the DRAM bytes in the line above the figure did not fall at all
# (the paragraph after the next cell says why). That gap is the lesson of this rung: the limit moved from global
# memory to shared memory, where each FMA still costs two loads. The check below says whether the header's
# range held.

# %%
print(lessons.prediction_check(GEMM_RS, GEMM, "03"))

# %% [markdown]
# **DRAM traffic does not fall at this rung.** The line below compares rung 02 and rung 03 from the
# profile. Two 1024-thread blocks fill an SM, so at any moment the GPU works on few block rows of `C`,
# and each block's 32-wide tile of `B` is fetched again for every block row: the L2 hit rate shows how
# much of that repeated traffic the L2 stops catching. The tile stops L1 thrashing, not DRAM traffic;
# the larger tiles from rung 04 on are where DRAM traffic comes down (the table near the end).

# %%
print(lessons.dram_change(GEMM_PROFILE, GEMM, "02", "03"))
print(lessons.dram_change(GEMM_PROFILE, GEMM, "03", "04"))

# %% [markdown]
# ## Rung 04 — a 1-D register tile: each thread computes a column of `TM` outputs
#
# A thread now owns `TM` accumulators (a strip of one column) instead of one. Per `k`, it reads one
# value of `Bs` into a register and reuses it for `TM` FMAs, so shared loads per FMA fall by several
# times. The tile gets taller and thinner in `k` to keep the thread count right. The FFMA-to-LDS ratio
# is the number to watch from here on: it is how much arithmetic each shared load buys. More arithmetic
# per shared load should mean a large step, with shared-memory bandwidth still the limit.

# %%
GEMM_04 = WALK("04")

# %% [markdown]
# ## Rung 05 — a 2-D register tile: each thread computes a `TM×TN` block
#
# Per `k`, a thread copies `TM` values of `A` and `TN` values of `B` from shared memory into registers, then does
# their outer product, `TM·TN` FMAs, from registers alone. The block tile grows to match. Rung 03 moved the
# operands from global to shared memory; this rung makes each value read from shared memory feed many FMAs.
#
# ### The count: shared-memory bytes per FLOP, and registers per block
#
# The first lines count what a thread reads from shared memory per FLOP, at rung 03 and here, from the knobs. The
# cost is registers: the accumulators and the operand fragments live there, and the register count decides how many
# blocks fit on an SM. The last lines do that arithmetic from the compile report.

# %%
k03, k05 = dict(GEMM.rung("03").spec.knobs), dict(GEMM.rung("05").spec.knobs)
smem_03 = (4 + 4) / 2  # rung 03: per FMA (2 FLOP), one value of As and one of Bs
smem_05 = 4 * (k05["TM"] + k05["TN"]) / (2 * k05["TM"] * k05["TN"])  # TM + TN values feed TM * TN FMAs
print(f"shared-memory bytes a thread reads per FLOP: rung 03 {smem_03:.3f}, rung 05 {smem_05:.3f} "
      f"(TM={k05['TM']}, TN={k05['TN']}) -> {smem_03 / smem_05:.0f}x fewer")
print(f"  = FFMA per float read from shared memory: rung 03 {4 / (2 * smem_03):.1f}, rung 05 {4 / (2 * smem_05):.1f} "
      "(the compile reports' last line counts the same from the SASS)")
print(f"global bytes per FLOP (the count at the top): rung 03 {BYTES_PER_FLOP['03']:.4f}, "
      f"rung 05 {BYTES_PER_FLOP['05']:.4f} ({k05['BM']} x {k05['BN']} block tile)")

REPORTS_05 = lessons.compile_pair(GEMM, "05", ARCH)  # rung 04's, then rung 05's
rep = REPORTS_05[-1]
registers_per_block = rep.registers * k05["THREADS"]
print(f"rung 05: {rep.registers} registers x {k05['THREADS']} threads = {registers_per_block} registers a block; "
      f"an SM has 65536 -> {65536 // registers_per_block} block(s) by registers alone")
try:  # lab.core.occupancy knows the limits of the archs in its table
    print("lab.core.occupancy, all limits at once:",
          occupancy.occupancy(device.arch_number(rep.arch), k05["THREADS"], rep.registers, rep.smem_static_bytes))
except ValueError as exc:
    print(f"(lab.core.occupancy: {exc})")

# %% [markdown]
# ### What changed: the diff from rung 04

# %%
print(lessons.knobs_line(GEMM, "05"))
lessons.show_diff(GEMM, "05")

# %% [markdown]
# ### Predict first
#
# The count says shared-memory traffic per FLOP fell several times against rung 03; the register arithmetic says
# one block per SM, eight warps, with nothing to run while that block waits on its global loads and barriers. Which
# wins? Guess the step over rung 04, then read the header's prediction:

# %%
print(lessons.prediction(GEMM, "05"))

# %% [markdown]
# ### The compile report
#
# The `FFMA`-to-`LDS` ratio in the last line is the count above, as the compiler emitted it.

# %%
display(lessons.md(report.compile_markdown(REPORTS_05)))
print(lessons.instruction_delta(REPORTS_05))
print(lessons.operand_mix(REPORTS_05[-1:]))

# %% [markdown]
# ### One launch, one check, one timing
#
# The same three steps as rung 03's cells, on the same odd shape, through `lab.lessons.gemm_fp32_steps` (each of its
# functions does what those cells wrote out: a NaN-filled output and one launch; the float64 reference, each
# element's bound and the largest ratio; `timing.measure` on the rung and on cuBLAS, cold L2, in this run).

# %%
if MODE.live:
    problem_05, out_05 = steps.launch_once(GEMM, "05", seed=3, **ODD)
    print(steps.float64_check(GEMM, problem_05, out_05))
    print(steps.time_against_baseline(GEMM, "05", problem_05, out_05), "(measured in this run)")
else:
    print("On a GPU this cell launches rung 05 on the odd shape, checks it against float64 and times it against "
          "cuBLAS. Replayed here: the recorded bound margins and the headline records' ratio to cuBLAS.")
    print(steps.bound_margin(GEMM, "05"))
    print(lessons.ratio(GEMM_RS, GEMM, "05", "ceiling"))
print(lessons.check_summary(GEMM_CHECKS, GEMM, "05"))

# %% [markdown]
# ### The records, and the prediction held against them

# %%
print(lessons.headline_summary(GEMM_RS, GEMM, "05", peak=PEAK_TFLOPS))
print(lessons.dram_summary(GEMM_PROFILE, GEMM, "05"))

# %%
lessons.plot(plots.ladder_bars, lessons.so_far(GEMM_RS, GEMM, "05"), "gemm_fp32", peak=PEAK_TFLOPS,
             peak_label="FP32 peak")

# %% [markdown]
# **Reading the figure.** Compare the steps rung 03 to 04 and rung 04 to 05 with the step rung 02 to 03. The
# register tiles cut the shared loads per FMA, the quantity the compile reports' last line tracks, and the bars
# follow that quantity more closely than they followed the global-memory count at rung 03. Then look at the step
# from rung 04 to rung 05 against how far it cut shared loads per FMA: one block per SM (the register arithmetic
# above) leaves that block's global loads and barriers exposed, which keeps rung 05 well below cuBLAS; rung 06 goes
# after that cost.

# %%
print(lessons.prediction_check(GEMM_RS, GEMM, "05"))

# %% [markdown]
# ## Rung 06 — 16-byte loads, and `A` transposed in shared memory
#
# Global loads move `float4`s (`LDG.128`). `A` is stored transposed in shared memory, so the `TM` values
# a thread needs at one `k` are contiguous: it holds fewer values of `A` at once, which brings the
# register count under the line that lets a second block onto the SM. The launcher picks the 16-byte
# variant (`VEC=4`) only when every leading dimension is a multiple of four and every pointer 16-byte
# aligned, the scalar one (`VEC=1`) otherwise; the compile report is the 16-byte variant. The gain is
# predicted to come mostly from the second resident block (occupancy), not from the wider loads. From
# here on the predictions are also stated against cuBLAS, and at both large square headline sizes,
# 4096 and 8192 on a side: the check prints each.

# %%
GEMM_06 = WALK("06")

# %% [markdown]
# ## Rung 07 — warp tiling: block tile, warp tile, thread tile
#
# The block tile is cut into warp tiles, and inside a warp tile the lanes form a small grid; each
# thread's results are spread over quadrants of its warp tile (CUTLASS's SIMT hierarchy). The point is
# the shared-memory access pattern: the lanes of a quarter warp now read consecutive `float4`s of `B`
# (no bank conflict) and the same `float4` of `A` (a broadcast), and a warp reads less shared memory
# per `k`. `BK` doubles, halving the barriers per FLOP. The FFMA-to-LDS ratio in the report stays about
# where rung 06 had it (the register tile is the same); what changed is how many wavefronts each load
# costs, which the instruction count cannot show and the timing can.

# %%
GEMM_07 = WALK("07")

# %% [markdown]
# ## Rung 08 — a multi-stage `cp.async` pipeline
#
# Shared memory holds `STAGES` k-tiles, filled by `cp.async` (SASS `LDGSTS`): global-to-shared copies
# that bypass registers and do not stall the thread. While the block computes on one tile, the next
# ones are in flight; one barrier per k-tile instead of two; the next k-step's fragments are loaded
# before this one's FMAs. Its tile and stage count were tuned on the H200: the tuning records are in
# `results/h200/gemm_tuning.json`, summarised in the note `results/h200/gemm_fp32_notes.md` generated
# from them. The few scalar `LDS` in the report are never executed (ptxas's `@!PT LDS RZ, [RZ]` fillers
# beside the async copies, as the header explains), so the FFMA-per-LDS figure slightly understates the
# real ratio. The tiles live in dynamic shared memory, so the report's static column reads zero; the
# launcher requests:

# %%
print("dynamic shared memory per block:", dynamic_smem_bytes(GEMM.rung("08")), "bytes")

# %%
GEMM_08 = WALK("08")

# %% [markdown]
# ### Tuning rung 08's knobs: the loop
#
# Rung 08's tile shape, stage count and register budget are knobs (`-D` defines), and the best values depend on the
# GPU. Finding them is a loop: a list of candidate settings; for each, build it, **check** it (a setting that fails
# a check is dropped, never timed), **time** it beside cuBLAS in the same run, and **keep the best**. The cell below
# is that loop, on four candidates at the first headline size. `scripts/gemm_sweep.py` is the same loop with more
# candidates, four sizes, longer timings and cuBLAS timed at both ends of the round; its rounds are the records
# replayed after it. From `lab.lessons.knob_tuning` the loop takes only `with_knobs` (a rung with knobs changed,
# `THREADS` derived again from the warp tiles) and `changed_knobs` (a setting's name).

# %%
CANDIDATES = [{}, {"STAGES": 3}, {"STAGES": 2}, {"BM": 128, "MINB": 2, "STAGES": 3}]  # changes from the defaults
TUNE_CASES = lessons.few_cases(GEMM, 6)
if MODE.live:
    import cupy as cp

    from lab.core.build import compile_report
    from lab.measure import timing
    from lab.measure.verify import check_rung

    base = GEMM.rung("08")
    tune_problem = GEMM.make_problem(seed=5, **HEAD)
    tune_out = cp.empty(tune_problem.out_shape, cp.float32)
    flusher = timing.L2Flusher()
    cublas = timing.measure(lambda i: GEMM.launch_ceiling(tune_problem, tune_out, i), l2="cold", flusher=flusher)
    print(f"cuBLAS on {tune_problem.label}: {GEMM.throughput(tune_problem, cublas.median_ms):.2f} TFLOP/s")
    kept = None
    for change in CANDIDATES:
        candidate = knob_tuning.with_knobs(base, **change)
        name = knob_tuning.changed_knobs(dict(candidate.spec.knobs), dict(base.spec.knobs))
        compiled = compile_report(candidate.spec.with_knobs(VEC=4), ARCH, GEMM.dynamic_smem_bytes(candidate))
        failed = [r.line() for r in check_rung(GEMM, candidate, TUNE_CASES) if not r.passed]
        if failed:  # a wrong kernel is not a fast one: never timed
            print(f"  {name:24s} {len(failed)} check(s) failed, not timed: {failed[0]}")
            continue
        t = timing.measure(lambda i, c=candidate: GEMM.launch(c, tune_problem, tune_out, i), l2="cold",
                           flusher=flusher)
        ratio = cublas.median_ms / t.median_ms
        print(f"  {name:24s} {compiled.registers} registers, {'spills' if compiled.spills else 'no spills'}: "
              f"{GEMM.throughput(tune_problem, t.median_ms):6.2f} TFLOP/s = {ratio:.3f}x cuBLAS")
        if kept is None or ratio > kept[1]:
            kept = (name, ratio)
    print(f"kept: {kept[0]} at {kept[1]:.3f}x cuBLAS (measured in this run)" if kept else "no candidate passed")
else:
    print(f"On a GPU this cell runs that loop: {len(CANDIDATES)} candidates, each checked on {len(TUNE_CASES)} "
          f"cases and timed at M = N = K = {HEAD['M']} beside cuBLAS. Replayed below: the last tuning round, the "
          "same loop as scripts/gemm_sweep.py ran it.")

# %% [markdown]
# The last round of the records, setting by setting, with the one the loop kept. The second line is cuBLAS timed at
# the start and at the end of the same round: how much a figure drifts within one round, the scale against which
# a difference between two settings means anything.

# %%
TUNING = knob_tuning.load()
LAST_ROUND = max((r["round"] for r in TUNING["rounds"]), default=0) if TUNING else 0
print(knob_tuning.round_table(TUNING, LAST_ROUND, "08_multistage", dict(GEMM.rung("08").spec.knobs)))

# %% [markdown]
# **Reading the round.** Read each column on its own: the ranking of the settings need not be the same at every
# size, so "the best" depends on the size the loop ranks by (the first headline size here; the sizes one off a
# multiple of the tile can favour other shapes). The register column shows the price of the taller or wider thread
# tiles (`TM=16`, `TN=16`): more registers a thread, so fewer blocks per SM. When the loop kept a setting other than
# the family's defaults, the last line says by how much it beat them at each size: set that gap against cuBLAS's
# own drift in the second line, and against the same comparison in other rounds (below), before calling it a gain.
#
# The prediction also says how the stage count should matter: `STAGES = 4` no faster than 3, and 2 within a few
# percent. The ladder's records time one stage count only; the tuning rounds timed several with every other knob
# held still, beside cuBLAS in the same round. Here are the groups at rung 07's tile (where the prediction was
# written) and at the family's own default knobs:

# %%
print(knob_tuning.knob_effect(TUNING, "08_multistage", "STAGES", dict(GEMM.rung("08").spec.knobs),
                              like=[dict(GEMM.rung("07").spec.knobs), dict(GEMM.rung("08").spec.knobs)]))

# %% [markdown]
# **Rung 08 moves more DRAM bytes than rung 07.** Its tile is half as tall (`BM` in the knobs above), so
# every tile of `B` is requested by twice as many block rows, and four blocks share an SM instead of
# two. The first line below puts numbers on the change (bytes and L2 hit rate); the next two hold each
# rung's DRAM traffic against its own run time: bytes over the median time at the profiled size is the
# DRAM bandwidth it used, against the device copy's bandwidth measured on the same GPU. A rung that uses
# a small fraction of it cannot be slowed by its DRAM traffic, which is why the extra bytes did not
# stop rung 08 from being the faster rung.

# %%
print(lessons.dram_change(GEMM_PROFILE, GEMM, "07", "08"))
for key in ("07", "08"):
    print(lessons.dram_rate(GEMM_PROFILE, GEMM_RS, GEMM, key, *(COPY_BANDWIDTH or (None, ""))))

# %% [markdown]
# ---
# ## The ladder, all together
#
# Every headline size in the records, one figure each: the square sizes where the predictions are
# stated, and the sizes one off a multiple of the tile. At those, the leading dimensions are not
# multiples of four, so rungs 06 to 08 run their scalar (`VEC=1`) variant.

# %%
for params in lessons.headline_sizes(GEMM_RS) or [None]:
    lessons.plot(plots.ladder_bars, GEMM_RS, "gemm_fp32", params=params, peak=PEAK_TFLOPS, peak_label="FP32 peak")

# %% [markdown]
# **Reading the figures.** Read the bars left to right as the ladder's story: the large steps are the rungs that
# changed what each load feeds (register tiles) or how many blocks share an SM (rung 06), the small ones changed how
# a load is served. Then compare the figures with one another: the cuBLAS line moves between sizes too, so hold each
# bar's fraction of cuBLAS (its second label), not its height, from one size to the next.

# %% [markdown]
# The same records as one comparison: each kernel across the headline sizes, and as a fraction of its
# own figure at the first size. A size one past a multiple of the tile adds a row and a column of
# nearly empty blocks; a size one short of it keeps the grid but loses the 16-byte path.

# %%
lessons.plot(plots.headline_by_size, GEMM_RS, "gemm_fp32")

# %%
SIZES = lessons.headline_sizes(GEMM_RS)
for key in ("07", "08"):
    print(lessons.size_change(GEMM_RS, GEMM, key, SIZES[0], SIZES[1:]) if SIZES else lessons.missing("gemm_fp32"))

# %%
lessons.headline_table(GEMM_RS, "gemm_fp32")

# %% [markdown]
# ### Throughput against size
#
# Square products from a side of 256 to 8192, cold L2, every rung beside cuBLAS (dashed black), and the
# same numbers as a fraction of cuBLAS. Small products cannot fill the GPU: at a side of 256 a 128-wide
# tile gives only a few blocks for more than a hundred SMs, so every kernel, cuBLAS included, is far
# from its plateau. Rungs 01 to 03 stop where they become too slow to time (`rungs_for`).

# %%
lessons.plot(plots.throughput_vs_size, GEMM_RS, "gemm_fp32", peak=PEAK_TFLOPS, peak_label="FP32 peak")

# %% [markdown]
# **Reading the figure.** Look for where each curve flattens: past that side the GPU is full, and the plateau's
# height is the rung's own limit, the one its section above explained. Left of it, the number of blocks, not the
# kernel, sets the throughput, which is why the small sizes say little about a rung. In the lower panel, a rung
# whose fraction of cuBLAS stays level across the plateau has the same bottleneck at every size.

# %% [markdown]
# The best rung against cuBLAS, size by size (and the sizes where it is the faster of the two), then
# against rung 07:

# %%
print(lessons.ratio_by_size(GEMM_RS, GEMM, "08", "ceiling"))
print(lessons.ratio(GEMM_RS, GEMM, "08", "07", kind="sweep"))

# %% [markdown]
# ### Tails: `N` across tile boundaries
#
# `M = K = 4096` and `N` stepping across two multiples of the tile width, warm L2, rungs 04 onwards
# (the first line says which sizes and which step the records hold). Two effects can show. **Partial
# tiles:** one column past a multiple of the tile width adds a whole column of blocks that is almost
# empty, a step down in throughput. **The vector path:** when `N` is not a multiple of four, the leading
# dimensions of `B` and `C` are not either, and the vectorized rungs fall back to scalar accesses: a
# sawtooth with period four. cuBLAS is the dashed black line.

# %%
print(lessons.tail_steps(GEMM_RS, GEMM))

# %%
lessons.plot(plots.tail, GEMM_RS, "gemm_fp32")

# %% [markdown]
# **Reading the figure.** Look for two patterns along `N`: a step down just past each multiple of the tile width
# (partial tiles), and a repeating pattern of period four on the vectorized rungs (the scalar path). Compare their
# depth with cuBLAS's own wiggles on the same axis: a tail effect smaller than those is not worth a code path.

# %%
print(lessons.tail_sawtooth(GEMM_RS, GEMM))

# %% [markdown]
# The sawtooth in one table: each kernel's median at `N` a multiple of four against its median at the
# other sizes. A ratio near one means the tail costs nothing; rungs 06 to 08 are where the scalar path
# can show.

# %%
print(lessons.tail_residues(GEMM_RS, GEMM, 4))

# %% [markdown]
# ### DRAM traffic per rung
#
# Nsight Compute's DRAM bytes (read + written) for one launch of each rung, against the fewest bytes the
# product can move, with the L2 hit rate. A and B together are larger than the L2 at the profiled size,
# so any operand a rung fetches more than once without reuse in shared memory or L2 goes back to DRAM.
# The naive rungs lean entirely on the caches; the register-tiled rungs bring the traffic down to a
# small multiple of the minimum.

# %%
lessons.dram_table(GEMM_PROFILE, GEMM)

# %%
lessons.dram_plot(GEMM_PROFILE, GEMM)

# %% [markdown]
# **Reading the figure.** Hold each bar against the count at the top of the notebook: the bytes a rung requests per
# FLOP are an upper end, the minimum is the lower end, and where the bar falls between them is how much the L2
# caught. Rung 03 against rung 02 and rung 08 against rung 07 are the two places where the bars rise clearly;
# the sections of those rungs explain why, and the timings show why that did not slow them.

# %% [markdown]
# ---
# ## What to take away
#
# - GEMM is compute-bound only once the data are reused: coalescing (rung 02) fixes how operands
#   arrive, register tiles (rungs 04, 05) make each shared load feed many FMAs; the FFMA-to-LDS ratio in
#   the compile reports tracks the climb. Shared-memory tiles alone (rung 03) bought a modest step and
#   no DRAM saving.
# - Registers decide occupancy: rung 06's layout change is mostly about fitting a second block per SM.
# - Shared-memory bank conflicts and barriers are the next limits (rung 07).
# - Near the top the instruction stream is the limit: once every FFMA slot counts, a few integer
#   instructions per shared-memory access cost more than any tile shape or stage count bought (rung 08's
#   tuning note, from Nsight Compute and the SASS). Tensor cores, the next ladders' subject, change the
#   arithmetic itself.
# - Tuning is a loop with a check inside it: candidates, check, time beside the library baseline in the same run,
#   keep the best; a gain is only one when it is larger than the drift of the same measurement within the round.
# - Every prediction above sits next to a number computed from records, so each one can be seen to hold
#   or fail.
