# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 — The FP32 GEMM ladder: from one thread per output to a pipelined, warp-tiled SGEMM
#
# `C = alpha * A @ B + beta * C` in float32, row-major, any `M, N, K`. A product does `2 M N K` floating-
# point operations on `4 (M K + K N + M N)` bytes, so the arithmetic per byte grows with the size: past
# a few hundred on a side it is the arithmetic units, not memory, that set the limit, and the lesson
# changes from "move bytes well" (notebook 01) to "keep the FMA units fed".
#
# Two yardsticks, both printed next to every measurement:
#
# - **cuBLAS SGEMM** (`cupy.matmul` on float32, TF32 off), timed on the same problem in the same run: the
#   ceiling the ladder is measured against;
# - the **FP32 peak**: SMs × FP32 lanes per SM × 2 FLOP per FMA × SM clock (`lab.device.fp32_peak`,
#   which says where its clock came from).
#
# Eight rungs, each one change: coalescing, shared-memory tiles, register tiles (1-D, then 2-D),
# 16-byte loads, warp tiling, and a multi-stage `cp.async` pipeline. For each: what changes and why
# (the kernel's header, the diff from the previous rung), the compile report (registers, shared memory,
# spills, and the SASS instruction mix, where the ratio of `FFMA` to shared loads `LDS` tells most of
# the story), the correctness check, the measurement, and the header's prediction held against the
# records. Every figure quoted is computed from records in a cell; none is typed in.

# %%
from lab import bench, build, lesson, plots, report
from lab.families.gemm import dynamic_smem_bytes
from lab.ladder import get_family

# %% [markdown]
# ## Live or replay

# %%
MODE = lesson.mode()
print(lesson.mode_banner("gemm_fp32", current=MODE))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for `sm_90` (the
# reference H200's) otherwise.

# %%
ARCH = lesson.compile_arch(MODE)
print(f"compile reports for sm_{ARCH}")

# %% [markdown]
# In LIVE mode the measurement plan is reduced so the notebook runs in a couple of minutes (`lab bench
# gemm_fp32` runs the full plan): the first headline size only, every sweep size but cold L2 only (a
# compute-bound product barely notices a warm L2) with `quick` timings, and rungs 01 to 03, which take
# a good fraction of a second per launch at large sizes, left out of the sweep past a side of 2048
# (`GemmFp32Family.rungs_for`). The tail sizes are taken every third size: a step coprime with both the
# vector width and the tile width, so neither kind of sawtooth can hide.

# %%
PLANS = (bench.BenchPlan(kinds=("headline", "sweep"), quick=True, sweep_step=1, l2_modes=("cold",)),
         bench.BenchPlan(kinds=("tail",), min_time_ms=5.0, tail_step=3))
print("LIVE plans:", *PLANS, sep="\n  ")

# %%
GEMM = get_family("gemm_fp32")
print(GEMM.title, "|", GEMM.metric, "against", GEMM.ceiling_name)
print("\n".join(f"  {r.key}: {r.title}" for r in GEMM.rungs))

# %% [markdown]
# ### Correct first
#
# Before anything is timed, every rung runs through `lab.verify.check_rung` on a spread of the family's
# check cases: a 1×1×1 product, tile multiples plus and minus one (the tails), a row vector, a
# tall-skinny and a long-K product, `alpha`/`beta` other than one and zero (C is read), and leading
# dimensions padded past the widths (which also forces the scalar path of the vectorized rungs). Three
# input distributions each, NaN-poisoned outputs, guard zones, a repeat run for races, and a tolerance
# that grows with K (float32 sums against a float64 reference). LIVE only; a failure stops the notebook
# here.

# %%
GEMM_CASES = lesson.few_cases(GEMM, 10)
GEMM_CHECKS = lesson.check_ladder(GEMM, GEMM_CASES) if MODE.live else None
print(f"{len(GEMM_CASES)} cases:", ", ".join(str(c) for c in GEMM_CASES))

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)
#
# One `lab.bench.run` per plan times cuBLAS and the rungs on every problem: the headline sizes (cold
# L2), square sizes from 256 to 8192 on a side, and the tail sizes (`N` stepping across tile
# boundaries near 4096).

# %%
GEMM_RS = lesson.ladder_records(GEMM, MODE, *PLANS)
print(lesson.records_status(GEMM_RS, "gemm_fp32"))

# %% [markdown]
# The FP32 peak of the GPU the numbers come from. The driver's SM-clock attribute cannot be trusted
# under CUDA 13 (it reads back nonsense on the H200), so `lab.device` falls back to the datasheet boost
# clock of the arch and says so.

# %%
PEAK = lesson.fp32_peak(MODE, GEMM_RS)
PEAK_TFLOPS = PEAK.tflops if PEAK else None
print(lesson.peak_status(PEAK, MODE))

# %% [markdown]
# cuBLAS itself at the headline sizes, against that peak: the most any FP32 (non-tensor-core) kernel
# can hope to get close to.

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "ceiling", peak=PEAK_TFLOPS))

# %% [markdown]
# How many bytes each rung really pulls from DRAM is the other half of the story of tiling, and time
# cannot show it: Nsight Compute's counters can. LIVE with `ncu` installed: one launch of each rung at
# the first headline size is profiled now (a few seconds per rung). Otherwise the reference GPU's
# profile (`gemm_fp32_profile.json`) is replayed, if present.

# %%
GEMM_PROFILE = lesson.profile_records(GEMM, MODE)
print(lesson.profile_status(GEMM_PROFILE, "gemm_fp32"))

# %% [markdown]
# ---
# ## Rung 01 — naive: one thread per element of C
#
# Each thread runs one whole dot product straight from global memory. The mapping of threads to
# elements is deliberately the wrong one: the 32 threads of a warp take 32 consecutive *rows* of one
# column, so every load of `A` touches 32 different cache lines. The header states what the rung is,
# what it needs and what it should reach:

# %%
print(lesson.rung_header(GEMM, "01"))
print(lesson.knobs_line(GEMM, "01"))

# %%
lesson.show_source(GEMM, "01")

# %% [markdown]
# The compile report: registers, static shared memory, spills, and the notable SASS instructions. The
# line under it counts `FFMA` against the loads that feed them: here no shared memory at all, and more
# global loads than FMAs (each FMA needs one value of `A` and one of `B`).

# %%
GEMM_01 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "01")]
lesson.md(report.compile_markdown(GEMM_01))

# %%
print(lesson.operand_mix(GEMM_01))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "01"))

# %% [markdown]
# The measurement at the headline sizes: the median with its p10–p90 spread, TFLOP/s, the fraction of
# cuBLAS measured on the same problem in the same run, and the fraction of the FP32 peak. Then the DRAM
# traffic of one launch, against the fewest bytes the product can move (A and B read once, C written
# once).

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "01", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "01"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "01"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** The header models the rung as limited by L1 wavefronts
# (one per row touched), not by arithmetic, and predicts a tiny fraction of the peak. The cell checks
# each numeric range of the prediction against the records.

# %%
print("Predicted:", lesson.prediction(GEMM, "01"))
print(lesson.prediction_check(GEMM_RS, GEMM, "01"))

# %% [markdown]
# ## Rung 02 — coalesced: neighbouring threads walk along a row of C
#
# Only the two lines that map a thread to its element change: the 32 threads of a warp now take 32
# consecutive *columns* of one row. Per `k`, the warp's load of `A` is one address (a broadcast) and its
# load of `B` is 128 contiguous bytes: one L1 wavefront each, instead of 32 for `A`.

# %%
lesson.show_diff(GEMM, "02")

# %%
print("Predicted:", lesson.prediction(GEMM, "02"))
print(lesson.knobs_line(GEMM, "02"))

# %% [markdown]
# The binary is the same instruction for instruction: only the index arithmetic moved. The difference
# is entirely in how the memory system serves the same loads.

# %%
GEMM_02 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "02")]
lesson.md(report.compile_markdown(GEMM_02))

# %%
print(lesson.instruction_delta(GEMM_02))
print(lesson.operand_mix(GEMM_02[-1:]))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "02"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "02", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "02"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "02"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** A large step over rung 01 for an unchanged instruction
# count: the cost of an uncoalesced access, measured.

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "02"))

# %% [markdown]
# ## Rung 03 — shared-memory tiles
#
# The `k` loop walks `K` in steps of `BK`. Each step, the block copies a `BM×BK` tile of `A` and a
# `BK×BN` tile of `B` into shared memory (coalesced), waits at a barrier, and every thread runs `BK`
# steps of its dot product from shared memory. Each element fetched from global memory is now reused by
# a whole row or column of the block's threads instead of being requested again by every warp.

# %%
lesson.show_diff(GEMM, "03")

# %%
print("Predicted:", lesson.prediction(GEMM, "03"))
print(lesson.knobs_line(GEMM, "03"))

# %% [markdown]
# The report now shows the tiles (static shared memory), the barriers (`BAR`), and shared loads: the
# broadcast read of `As` is fused four `k` steps at a time into `LDS.128`, the read of `Bs` is a plain
# `LDS`. Count the shared loads against the FMAs in the line under the report: raising that ratio is
# what the next two rungs are for.

# %%
GEMM_03 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "03")]
lesson.md(report.compile_markdown(GEMM_03))

# %%
print(lesson.instruction_delta(GEMM_03))
print(lesson.operand_mix(GEMM_03[-1:]))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "03"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "03", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "03"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "03"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** The header expects a modest gain: by its model the
# shared-memory version has the same ceiling as rung 02 (as many wavefronts per FMA), and Hopper's large
# L1 already served part of rung 02's reuse. The DRAM line above is where tiling shows most clearly.

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "03"))

# %% [markdown]
# ## Rung 04 — a 1-D register tile: each thread computes a column of `TM` outputs
#
# A thread now owns `TM` accumulators (a strip of one column) instead of one. Per `k`, it reads one
# value of `Bs` into a register and reuses it for `TM` FMAs, so shared loads per FMA fall by several
# times. The tile gets taller and thinner in `k` to keep the thread count right.

# %%
lesson.show_diff(GEMM, "04")

# %%
print("Predicted:", lesson.prediction(GEMM, "04"))
print(lesson.knobs_line(GEMM, "04"))

# %% [markdown]
# The FFMA-to-LDS ratio is the number to watch from here on: it is how much arithmetic each shared
# load buys.

# %%
GEMM_04 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "04")]
lesson.md(report.compile_markdown(GEMM_04))

# %%
print(lesson.instruction_delta(GEMM_04))
print(lesson.operand_mix(GEMM_04))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "04"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "04", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "04"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "04"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** More arithmetic per shared load should mean a large step,
# with shared-memory bandwidth still the limit.

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "04"))

# %% [markdown]
# ## Rung 05 — a 2-D register tile: each thread computes a `TM×TN` block
#
# Per `k`, a thread copies `TM` values of `A` and `TN` values of `B` from shared memory into registers,
# then does their outer product, `TM·TN` FMAs, from registers alone. The block tile grows to match. The
# cost is registers: the accumulators and the operand fragments live there, and the register count
# decides how many blocks fit on an SM.

# %%
lesson.show_diff(GEMM, "05")

# %%
print("Predicted:", lesson.prediction(GEMM, "05"))
print(lesson.knobs_line(GEMM, "05"))

# %%
GEMM_05 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "05")]
lesson.md(report.compile_markdown(GEMM_05))

# %%
print(lesson.instruction_delta(GEMM_05))
print(lesson.operand_mix(GEMM_05))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "05"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "05", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "05"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "05"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** The header expects the low end of its range: the register
# count in the report above allows only one block per SM, so nothing hides that block's global loads
# and barriers.

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "05"))

# %% [markdown]
# ## Rung 06 — 16-byte loads, and `A` transposed in shared memory
#
# Global loads move `float4`s (`LDG.128`). `A` is stored transposed in shared memory, so the `TM` values
# a thread needs at one `k` are contiguous: it holds fewer values of `A` at once, which brings the
# register count under the line that lets a second block onto the SM. The launcher picks the 16-byte
# variant (`VEC=4`) only when every leading dimension is a multiple of four and every pointer 16-byte
# aligned, the scalar one (`VEC=1`) otherwise; the compile report below is the 16-byte variant.

# %%
lesson.show_diff(GEMM, "06")

# %%
print("Predicted:", lesson.prediction(GEMM, "06"))
print(lesson.knobs_line(GEMM, "06"))

# %%
GEMM_06 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "06")]
lesson.md(report.compile_markdown(GEMM_06))

# %%
print(lesson.instruction_delta(GEMM_06))
print(lesson.operand_mix(GEMM_06))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "06"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "06", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "06"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "06"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** The gain is predicted to come mostly from the second
# resident block (occupancy), not from the wider loads. From here on the predictions are also stated
# against cuBLAS, and at both large headline sizes.

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "06"))

# %% [markdown]
# ## Rung 07 — warp tiling: block tile, warp tile, thread tile
#
# The block tile is cut into warp tiles, and inside a warp tile the lanes form a small grid; each
# thread's results are spread over quadrants of its warp tile (CUTLASS's SIMT hierarchy). The point is
# the shared-memory access pattern: the lanes of a quarter warp now read consecutive `float4`s of `B`
# (no bank conflict) and the same `float4` of `A` (a broadcast), and a warp reads less shared memory
# per `k`. `BK` doubles, halving the barriers per FLOP.

# %%
lesson.show_diff(GEMM, "07")

# %%
print("Predicted:", lesson.prediction(GEMM, "07"))
print(lesson.knobs_line(GEMM, "07"))

# %%
GEMM_07 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "07")]
lesson.md(report.compile_markdown(GEMM_07))

# %%
print(lesson.instruction_delta(GEMM_07))
print(lesson.operand_mix(GEMM_07))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "07"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "07", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "07"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "07"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** The FFMA-to-LDS ratio in the report stays about where rung
# 06 had it (the register tile is the same); what changed is how many wavefronts each load costs, which
# the instruction count cannot show and the timing can.

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "07"))

# %% [markdown]
# ## Rung 08 — a multi-stage `cp.async` pipeline
#
# Shared memory holds `STAGES` k-tiles, filled by `cp.async` (SASS `LDGSTS`): global-to-shared copies
# that bypass registers and do not stall the thread. While the block computes on one tile, the next
# ones are in flight; one barrier per k-tile instead of two; the next k-step's fragments are loaded
# before this one's FMAs. Its tile and stage count were tuned on the H200 (the header records how).
# The tiles live in dynamic shared memory, so the report's static column reads zero; the launcher
# requests:

# %%
print("dynamic shared memory per block:", dynamic_smem_bytes(GEMM.rung("08")), "bytes")

# %%
lesson.show_diff(GEMM, "08")

# %%
print("Predicted:", lesson.prediction(GEMM, "08"))
print(lesson.knobs_line(GEMM, "08"))

# %% [markdown]
# The few scalar `LDS` in this report are never executed (ptxas's `@!PT LDS RZ, [RZ]` fillers beside
# the async copies, as the header explains), so the FFMA-per-LDS figure below slightly understates the
# real ratio.

# %%
GEMM_08 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(GEMM, "08")]
lesson.md(report.compile_markdown(GEMM_08))

# %%
print(lesson.instruction_delta(GEMM_08))
print(lesson.operand_mix(GEMM_08))

# %%
print(lesson.check_summary(GEMM_CHECKS, GEMM, "08"))

# %%
print(lesson.headline_summary(GEMM_RS, GEMM, "08", peak=PEAK_TFLOPS))

# %%
print(lesson.dram_summary(GEMM_PROFILE, GEMM, "08"))

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(GEMM_RS, GEMM, "08"), "gemm_fp32", peak=PEAK_TFLOPS,
            peak_label="FP32 peak")

# %% [markdown]
# **What it shows against the prediction.** The prediction was written before any GPU run; the header's
# "Measured" paragraph records what the tuning rounds on the H200 found: for four rounds no tile shape
# came close to cuBLAS, and Nsight Compute plus the SASS traced the gap to instruction issue (the
# compiler recomputing shared-memory addresses on every access), not to the algorithm; addressing shared
# memory through per-thread 32-bit addresses closed most of it. Here is the ladder's own measurement
# against the prediction:

# %%
print(lesson.prediction_check(GEMM_RS, GEMM, "08"))

# %% [markdown]
# ---
# ## The ladder, all together
#
# Every headline size in the records: the square sizes where the predictions are stated, and the
# sizes one off a multiple of the tile. At those, the leading dimensions are not multiples of four, so
# rungs 06 to 08 run their scalar (`VEC=1`) variant: compare their bars with the square sizes'.

# %%
for params in lesson.headline_sizes(GEMM_RS) or [None]:
    lesson.plot(plots.ladder_bars, GEMM_RS, "gemm_fp32", params=params, peak=PEAK_TFLOPS, peak_label="FP32 peak")

# %%
lesson.headline_table(GEMM_RS, "gemm_fp32")

# %% [markdown]
# ### Throughput against size
#
# Square products from a side of 256 to 8192, cold L2, every rung beside cuBLAS (dashed), and the same
# numbers as a fraction of cuBLAS. Small products cannot fill the GPU: at a side of 256 a 128-wide tile
# gives only a few blocks for more than a hundred SMs, so every kernel, cuBLAS included, is far from its
# plateau. Rungs 01 to 03 stop where they become too slow to time (`rungs_for`).

# %%
lesson.plot(plots.throughput_vs_size, GEMM_RS, "gemm_fp32", peak=PEAK_TFLOPS, peak_label="FP32 peak")

# %% [markdown]
# The best rung against cuBLAS, size by size:

# %%
print(lesson.ratio(GEMM_RS, GEMM, "08", "ceiling", kind="sweep"))
print(lesson.ratio(GEMM_RS, GEMM, "08", "07", kind="sweep"))

# %% [markdown]
# ### Tails: `N` stepping by one across tile boundaries
#
# `M = K = 4096` and `N` stepping by one across two multiples of the tile width, warm L2, rungs 04
# onwards. Two effects can show. **Partial tiles:** one column past a multiple of the tile width adds a
# whole column of blocks that is almost empty, a step down in throughput. **The vector path:** when `N`
# is not a multiple of four, the leading dimensions of `B` and `C` are not either, and the vectorized
# rungs fall back to scalar accesses: a sawtooth with period four. cuBLAS is plotted dotted for
# comparison.

# %%
lesson.plot(plots.tail, GEMM_RS, "gemm_fp32")

# %%
print(lesson.tail_sawtooth(GEMM_RS, GEMM))

# %% [markdown]
# The sawtooth in one table: each target's median at `N` a multiple of four against its median at the
# other sizes. A ratio near one means the tail costs nothing; rungs 06 to 08 are where the scalar path
# can show.

# %%
print(lesson.tail_residues(GEMM_RS, GEMM, 4))

# %% [markdown]
# ### DRAM traffic per rung
#
# Nsight Compute's DRAM bytes (read + written) for one launch of each rung, against the fewest bytes the
# product can move. A and B together are larger than the L2 at the profiled size, so any operand a
# rung fetches more than once without reuse in shared memory or L2 goes back to DRAM. The naive rungs
# lean entirely on the caches; tiling makes the traffic a small multiple of the minimum.

# %%
lesson.dram_table(GEMM_PROFILE, GEMM)

# %%
lesson.dram_plot(GEMM_PROFILE, GEMM)

# %% [markdown]
# ---
# ## What to take away
#
# - GEMM is compute-bound only once the data are reused: coalescing (rung 02) and shared-memory tiles
#   (rung 03) fix how operands arrive, register tiles (rungs 04, 05) make each shared load feed many
#   FMAs; the FFMA-to-LDS ratio in the compile reports tracks the climb.
# - Registers decide occupancy: rung 06's layout change is mostly about fitting a second block per SM.
# - Shared-memory bank conflicts and barriers are the next limits (rung 07), then latency that only a
#   pipeline hides (rung 08).
# - Near the top the instruction stream is the limit: once every FFMA slot counts, a few integer
#   instructions per shared-memory access cost more than any tile shape bought (rung 08's header, from
#   Nsight Compute and the SASS). Tensor cores, the next ladders' subject, change the arithmetic itself.
# - Every prediction above sits next to a number computed from records, so each one can be seen to hold
#   or fail.
