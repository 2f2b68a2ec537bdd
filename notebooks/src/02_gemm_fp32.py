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
# - the **FP32 peak**: SMs × FP32 lanes per SM × 2 FLOP per FMA × SM clock (`lab.core.device.fp32_peak`,
#   which says where its clock came from).
#
# Eight rungs, each one change: coalescing, shared-memory tiles, register tiles (1-D, then 2-D),
# 16-byte loads, warp tiling, and a multi-stage `cp.async` pipeline. For each, one call
# (`lessons.RungWalk`) shows the steps every rung shares: what changed (the kernel's header and the diff
# from the previous rung), the compile report (registers, shared memory, spills, and the SASS
# instruction mix, where the ratio of `FFMA` to shared loads `LDS` tells most of the story), the
# correctness check, the measurement, the DRAM traffic, the climb so far, and the header's prediction
# held against the records. Every figure quoted is computed from records in a cell; none is typed in.

# %%
from lab import lessons
from lab.families import get_family
from lab.families.gemm import dynamic_smem_bytes
from lab.lessons import knob_tuning, plots
from lab.measure import bench

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

# %%
GEMM = get_family("gemm_fp32")
print(GEMM.title, "|", GEMM.metric, "against", GEMM.ceiling_name)
print("\n".join(f"  {r.key}: {r.title}" for r in GEMM.rungs))

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
# How many bytes each rung really pulls from DRAM is the other half of the story of tiling, and time
# cannot show it: Nsight Compute's counters can. LIVE with `ncu` installed: one launch of each rung at
# the first headline size is profiled now (a few seconds per rung). Otherwise the reference GPU's
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
# The `k` loop walks `K` in steps of `BK`. Each step, the block copies a `BM×BK` tile of `A` and a
# `BK×BN` tile of `B` into shared memory (coalesced), waits at a barrier, and every thread runs `BK`
# steps of its dot product from shared memory. Each element fetched from global memory is now reused by
# a whole row or column of the block's threads instead of being requested again by every warp.
#
# The report shows the tiles (static shared memory), the barriers (`BAR`), and shared loads: the
# broadcast read of `As` is fused four `k` steps at a time into `LDS.128`, the read of `Bs` is a plain
# `LDS`. The header expects a modest gain: by its model the shared-memory version has the same ceiling
# as rung 02 (as many wavefronts per FMA), and Hopper's large L1 already served part of rung 02's reuse.

# %%
GEMM_03 = WALK("03")

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
# Per `k`, a thread copies `TM` values of `A` and `TN` values of `B` from shared memory into registers,
# then does their outer product, `TM·TN` FMAs, from registers alone. The block tile grows to match. The
# cost is registers: the accumulators and the operand fragments live there, and the register count
# decides how many blocks fit on an SM. The header expects the low end of its range: the register
# count in the report allows only one block per SM, so nothing hides that block's global loads and
# barriers.

# %%
GEMM_05 = WALK("05")

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
# The prediction also says how the stage count should matter: `STAGES = 4` no faster than 3, and 2
# within a few percent. The ladder's records time one stage count only; the tuning rounds timed several
# with every other knob held still, beside cuBLAS in the same round. Here are the groups at rung 07's
# tile (where the prediction was written) and at the family's own default knobs:

# %%
TUNING = knob_tuning.load()
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
COPY_BANDWIDTH = lessons.copy_ceiling(GEMM_RS.provenance.get("device") if GEMM_RS else None)
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
# The same records as one comparison: each target across the headline sizes, and as a fraction of its
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

# %%
print(lessons.tail_sawtooth(GEMM_RS, GEMM))

# %% [markdown]
# The sawtooth in one table: each target's median at `N` a multiple of four against its median at the
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
# - Every prediction above sits next to a number computed from records, so each one can be seen to hold
#   or fail.
