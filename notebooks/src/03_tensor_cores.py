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
# # 03 — Tensor cores: from one `mma.sync` to a warp-specialized Hopper GEMM
#
# The same product as notebook 02, `C = alpha * A @ B + beta * C`, but with A and B in fp16 or bf16 and the
# multiply-adds on tensor cores, accumulating in fp32; C is written in the input type. A is `M × K`
# row-major; B is either `K × N` row-major ("NN") or `N × K` row-major ("TN", how a linear layer stores its
# weight). The yardstick is **cuBLAS in the same type and layout**, timed on the same problem in the same
# run.
#
# A tensor-core instruction is not a per-thread instruction: a whole warp (or, on Hopper, a warpgroup of
# four warps) issues it together, and each lane holds a fixed piece of each operand. So the ladder is about
# *getting operands to the tensor cores in the shape they want, fast enough*:
#
# - **rung 01**: `mma.sync.m16n8k16` with every fragment element loaded from global memory: the fragment
#   layout lesson;
# - **rung 02**: block tiles in shared memory, read with `ldmatrix` (one instruction hands a warp a whole
#   fragment), rows padded against bank conflicts;
# - **rung 03**: no padding but an XOR swizzle, and a multi-stage `cp.async` pipeline;
# - **rungs 04 on** (Hopper, `sm_90a`): TMA copies, `mbarrier` pipelines, warpgroup MMA (`wgmma`), and warp
#   specialization. These cells are written over `family.rungs`, so a rung added to the family appears
#   below without editing the notebook.
#
# Pictures of layouts and schedules are computed from the same index formulas the kernels use
# (`lab.lessons.layouts`, which restates `kernels/common/lab_mma.cuh` and `lab_swizzle.cuh`); every
# measured figure is computed from records in a cell, none is typed in. Primary sources for the ideas: the
# PTX ISA (<https://docs.nvidia.com/cuda/parallel-thread-execution/>), the CUDA C++ Programming Guide,
# the NVIDIA Hopper Tuning Guide (<https://docs.nvidia.com/cuda/hopper-tuning-guide/>), and CUTLASS/CuTe
# (<https://github.com/NVIDIA/cutlass>); each section below names the part it draws on.

# %%
from lab import lessons
from lab.families import get_family
from lab.families.gemm_tc import dynamic_smem_bytes
from lab.lessons import diagrams, knob_records, layouts, plots
from lab.measure import bench

# %% [markdown]
# ## Live or replay

# %%
MODE = lessons.mode()
print(lessons.mode_banner("gemm_tc", current=MODE))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for the reference GPU's
# arch (`lab.core.device.REFERENCE_ARCH`, the H200's) otherwise. A rung that needs a newer arch than the GPU here
# (the Hopper rungs need `sm_90a`) is compiled for the arch it needs and shown compile-only.

# %%
ARCH = lessons.compile_arch(MODE)
print(f"compile reports for sm_{ARCH}")

# %%
TC = get_family("gemm_tc")
print(lessons.rung_listing(TC, MODE))

# %% [markdown]
# In LIVE mode the measurement plan is kept short (a few minutes on an H200; `lab bench gemm_tc` runs the
# full plan): every headline size with shorter timings, the square sweep with cold L2 only and quick
# timings, and the tail sizes with `N` stepping by one but quick timings. A rung this GPU cannot run is
# left out of the measurements (`lab.measure.bench` skips it and says why).

# %%
PLANS = (bench.BenchPlan(kinds=("headline",), min_time_ms=10.0),
         bench.BenchPlan(kinds=("sweep",), quick=True, sweep_step=1, l2_modes=("cold",)),
         bench.BenchPlan(kinds=("tail",), quick=True, min_time_ms=6.0, tail_step=1))
print("LIVE plans:", *PLANS, sep="\n  ")

# %% [markdown]
# ### Correct first
#
# LIVE only: every rung this GPU can run (the others are named and skipped) goes through
# `lab.measure.verify.check_rung` on a spread of the family's check cases (tiles plus and minus one, primes, `K` far
# larger than `M` and `N`, `alpha`/`beta`, padded leading dimensions, in both layouts and both types), three
# input distributions each, NaN-poisoned outputs, guard zones, a repeat run. The tolerance is
# `lab.measure.bounds.tensor_core_matmul_bound`: fp32 accumulation that the tensor cores may truncate, then one
# rounding to fp16 or bf16. A failure stops the notebook here.

# %%
TC_CASES = lessons.few_cases(TC, 12)
TC_CHECKS = lessons.check_ladder(TC, TC_CASES) if MODE.live else None
print(f"{len(TC_CASES)} cases:", ", ".join(str(c) for c in TC_CASES))

# %% [markdown]
# How close the rungs came to that bound on the reference GPU (`scripts/gemm_tc_margin.py`: the largest
# share of the bound's statistical part any output element used, over the check cases):

# %%
print(knob_records.margin_table())

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)
#
# One `lab.measure.bench.run` per plan times cuBLAS and the rungs on every problem. The second line says which
# kinds of measurement the records in hand hold: the sections that plot a kind the records lack say so and
# show nothing, rather than inventing it.

# %%
TC_RS = lessons.ladder_records(TC, MODE, *PLANS)
print(lessons.records_status(TC_RS, "gemm_tc"))

# %%
print(lessons.kinds_status(TC_RS, TC))

# %% [markdown]
# Nsight Compute counters: shared-memory bank conflicts (plain loads and, where the profile has them,
# `ldmatrix`), DRAM bytes and the L2 hit rate for one launch of each rung at the first headline size. LIVE
# with `ncu` installed: measured now. Otherwise the reference GPU's profile
# (`results/h200/gemm_tc_profile.json`, written by `lab profile gemm_tc --json ...`) is replayed if it
# exists; if it does not, the line below says so and the counter cells stay empty.

# %%
TC_PROFILE = lessons.profile_records(TC, MODE)
print(lessons.profile_status(TC_PROFILE, "gemm_tc"))

# %% [markdown]
# Every rung below goes through the same walk: the diff from the previous rung (or the source), the
# prediction and knobs, the compile report (registers, shared memory, spills, SASS), the tensor-core
# instructions against what feeds them (`HMMA` per `ldmatrix`, the copies, `HGMMA`), the checks, the
# measurement at every headline size, the bank conflicts from the profile, the climb so far, and each
# numeric range of the prediction against the records.

# %%
WALK = lessons.RungWalk(TC, ARCH, TC_RS, TC_CHECKS, profile=TC_PROFILE, mma_mix=True, mode=MODE)

# %% [markdown]
# ---
# ## The instruction: `mma.sync.aligned.m16n8k16`
#
# One warp multiplies a 16×16 tile of A by a 16×8 tile of B and adds a 16×8 tile of fp32 accumulators.
# No lane holds a row or a column: with `g = lane / 4` and `t = lane % 4`, lane `(g, t)` holds A at rows `g`
# and `g + 8`, columns `2t, 2t+1` and `2t+8, 2t+9` (four 32-bit registers of two halves each), B at column
# `g`, rows `2t, 2t+1` and `2t+8, 2t+9` (two registers), and C at rows `g` and `g + 8`, columns `2t, 2t+1`
# (four fp32 registers). The figure is drawn from those formulas (PTX ISA, "Matrix Fragments for
# mma.m16n8k16 with floating point type"); each cell shows the lane and the register.

# %%
lessons.figure(diagrams.fragment_figure())

# %% [markdown]
# The same table read the other way: the elements one lane holds, in register order. Lane `(g, t)`'s A
# elements sit in the rows of C it owns, and its B elements in the column `g`: every lane multiplies only
# values it holds.

# %%
for operand in "ABC":
    print(f"{operand}: lane 5 holds (row, column)", layouts.lane_elements(operand, 5))

# %% [markdown]
# ### `ldmatrix`: a whole fragment in one instruction
#
# `ldmatrix.sync.aligned.m8n8.x4.shared.b16` (PTX ISA, "Warp-level matrix load instruction: ldmatrix")
# loads four 8×8 matrices of 16-bit values from shared memory. Lanes `8i .. 8i+7` each give the address
# of one 16-byte row of matrix `i`; register `i` of every lane then receives matrix `i`, lane `(g, t)`
# getting row `g`, columns `2t, 2t+1` (with `.trans`, the transposed positions). That is exactly the shape
# of an mma fragment. Pointing lanes 0-15 at rows 0-15 of an A tile at k = 0 and lanes 16-31 at the same
# rows at k = 8 loads the matrices in the order of A's registers `a0 .. a3`.

# %%
lessons.figure(diagrams.ldmatrix_figure())

# %%
FROM_LDMATRIX, FROM_MMA = layouts.ldmatrix_x4_a_fragment(), layouts.mma_fragment("A")
same = all((x == y).all() for x, y in zip(FROM_LDMATRIX, FROM_MMA, strict=True))
print("ldmatrix.x4 with the rungs' row addresses delivers exactly the mma A fragment:", same)

# %% [markdown]
# ---
# ## Rung 01 — `mma.sync` with fragments loaded from global memory
#
# One warp owns a 16×16 tile of C (two mma tiles). Per k-step each lane loads exactly the A and B elements
# its fragment needs, two bytes at a time, packs pairs into 32-bit registers and issues two `mma.sync`. The
# compile report shows the story: a handful of `HMMA` against dozens of 2-byte global loads (`LDG.U16`).
# The header expects a small fraction of cuBLAS: the loads, not the tensor cores, set the pace.

# %%
TC_01 = WALK("01")

# %% [markdown]
# ## Rung 02 — shared-memory block tiles read with `ldmatrix`, rows padded
#
# A block of eight warps owns a 128×128 tile of C and walks K in k-tiles of 32: it copies A's and B's
# tiles into shared memory with 16-byte loads, and each warp reads its fragments with `ldmatrix.x4`, one
# instruction per 16×16 A fragment or per pair of 16×8 B fragments. For NN (B stored `K × N`), the tile is
# k-major and `ldmatrix.trans` hands each lane the transposed pairs the mma wants; nothing is transposed in
# memory. The rows are **padded** by 16 bytes, and the next section shows why.

# %%
TC_02 = WALK("02")

# %% [markdown]
# ### Bank conflicts: unpadded, padded and swizzled rows
#
# Shared memory has 32 banks of 4 bytes, so a 128-byte line covers every bank once and a 16-byte chunk
# covers one *group* of four banks. One `ldmatrix` matrix reads one 16-byte chunk from each of 8
# consecutive tile rows; it takes a single pass (one wavefront) only if those 8 chunks lie in 8 different
# bank groups, and as many passes as the most chunks that share a group otherwise. The row lengths below
# are the rungs' own: a k-contiguous tile row of `BK` halves, and NN's B tile row of `BN` halves; the
# padding is rung 02's `PAD`.

# %%
KNOBS_02, KNOBS_03 = dict(TC.rung("02").spec.knobs), dict(TC.rung("03").spec.knobs)
ROW_BYTES = (2 * KNOBS_03["BK"], 2 * KNOBS_03["BN"])  # two bytes per fp16/bf16 element
PAD_BYTES = 2 * KNOBS_02["PAD"]
print(f"tile rows of {ROW_BYTES[0]} bytes (BK={KNOBS_03['BK']}) and {ROW_BYTES[1]} bytes (BN={KNOBS_03['BN']}); "
      f"rung 02 pads each by {PAD_BYTES} bytes")

# %% [markdown]
# The picture: for each layout, which logical chunks of rows 0-7 land in which bank group, with the chunk
# one `ldmatrix` matrix reads coloured by row. Unpadded rows put that chunk in few groups (two rows share
# a line when rows are 64 bytes; every row starts in the same group when they are 256 bytes). Padding
# shifts each row by one group; the swizzle instead XORs each chunk's position inside its 128-byte line
# with bits of the row index (`swizzle_chunk` in `kernels/common/lab_swizzle.cuh`, mirrored in Python by
# `lab.lessons.layouts.swizzle_chunk`), which scatters the 8 rows over 8 groups with no extra memory. This
# is the idea CuTe expresses as `Swizzle<B, M, S>` (CUTLASS's `cute/swizzle.hpp` and the CuTe layout
# documentation).

# %%
lessons.figure(diagrams.bank_figure(ROW_BYTES, PAD_BYTES))

# %%
for nbytes in ROW_BYTES:
    waves = {lay: layouts.wavefronts(layouts.ldmatrix_groups(nbytes, lay, pad_bytes=PAD_BYTES))
             for lay in layouts.LAYOUTS}
    print(f"{nbytes}-byte rows, wavefronts per ldmatrix matrix:", ", ".join(f"{k} {v}" for k, v in waves.items()))

# %% [markdown]
# What Nsight Compute counts. Each conflict is one extra shared-memory wavefront, so the counter next to
# the wavefronts it belongs to is the share of passes lost. `ldmatrix` (SASS `LDSM`) is counted apart from
# plain shared loads (`LDS`), where the profile read that counter. When no profile of this family exists
# yet, the cell says so: the counts are never estimated. On the Hopper rungs `wgmma` reads its operands
# from shared memory through the tensor cores' own path, which these load/store-unit counters do not see.

# %%
for metric in lessons.conflict_metrics(TC_PROFILE):
    lessons.profile_plot(TC_PROFILE, "gemm_tc", metric)

# %% [markdown]
# ## Rung 03 — XOR-swizzled tiles and a multi-stage `cp.async` pipeline
#
# Two changes. The tiles are **unpadded and swizzled**, so they are smaller and still conflict-free for
# both the `ldmatrix` reads and the 16-byte copies that write them. And shared memory holds `STAGES`
# k-tiles filled by `cp.async` (PTX ISA, "cp.async"; SASS `LDGSTS`), which copies global memory straight
# into shared memory without passing through registers and without stalling the issuing thread. The warp
# tile grows to 64×64, so each warp issues more mma per `ldmatrix` (the instruction mix below shows it).
# The tiles live in dynamic shared memory; the launcher requests:

# %%
print("dynamic shared memory per block:", dynamic_smem_bytes(TC.rung("03")), "bytes;", lessons.knobs_line(TC, "03"))

# %%
TC_03 = WALK("03")

# %% [markdown]
# ### What is in flight when
#
# The main loop, as `lab.lessons.layouts.pipeline_schedule` restates it: a prologue issues the copies of
# the first `STAGES - 1` k-tiles; iteration `kt` waits until tile `kt` has landed (`cp.async.wait_group`),
# passes one barrier (which also proves every warp is done with tile `kt - 1`), refills the stage that tile
# used with tile `kt + STAGES - 1`, and computes on tile `kt`. So while one tile is computed, the next
# `STAGES - 1` are in flight, and a global-memory latency is hidden as long as it is shorter than that many
# k-tiles of math. The figure uses the rung's own `STAGES`.

# %%
lessons.figure(diagrams.pipeline_figure(k_tiles=2 * KNOBS_03["STAGES"], stages=KNOBS_03["STAGES"]))

# %% [markdown]
# How much the depth matters was measured on the reference GPU with every other knob held still
# (`scripts/gemm_tc_knobs.py`: each setting checked, then timed beside cuBLAS in the same run; "default" is
# the knob line printed above):

# %%
print(knob_records.probe_table())

# %% [markdown]
# ---
# ## Hopper: TMA, `mbarrier`, `wgmma` and warp specialization
#
# `mma.sync` is Ampere's instruction; on Hopper it runs, but it cannot keep the tensor cores fully busy,
# and every operand still passes through registers via `ldmatrix` that the SM must issue. Hopper adds
# (NVIDIA Hopper Tuning Guide; PTX ISA sections named below):
#
# - **TMA**, the Tensor Memory Accelerator (`cp.async.bulk.tensor`): one thread hands the copy engine a
#   *tensor map* (built on the host with `cuTensorMapEncodeTiled`: the matrix's base, sizes, strides, the
#   box to copy and the swizzle) and box coordinates; the engine copies the whole box into shared memory,
#   applies the 128-byte swizzle as it writes, and fills out-of-range elements with zeros, so tails need
#   no code. TMA requires 16-byte aligned bases and strides that are multiples of 16 bytes: an operand
#   that breaks this needs a fallback (this family repacks it first, and its records say which path each
#   launch took).
# - **`mbarrier`**, a barrier object in shared memory with a phase bit and a transaction count: TMA
#   completes a stage's "full" barrier when its bytes have landed, and the threads that read the stage
#   arrive on its "empty" barrier when they are done. Waiting on a phase replaces `__syncthreads()`.
# - **`wgmma.mma_async`** (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): four warps
#   (a warpgroup) issue one large MMA, up to 64×256×16, whose A and B the tensor cores read straight from
#   shared memory through matrix descriptors; only the fp32 accumulators live in registers. It is
#   asynchronous: a warpgroup commits groups of them and waits only for older groups.
# - **warp specialization** with **`setmaxnreg`**: instead of every warp both copying and computing, one
#   producer warp (or warpgroup) does nothing but issue TMA copies, waiting on "empty" barriers, while
#   consumer warpgroups do nothing but `wgmma`, waiting on "full" barriers. The producer needs few
#   registers and the consumers many accumulators, so `setmaxnreg` moves registers from one role to the
#   other. This is the structure of CUTLASS's warp-specialized SM90 kernels ("Efficient GEMM in CUDA" in
#   CUTLASS's documentation).
#
# The timeline below is a *schematic*: a small simulation of those rules with assumed durations (a copy
# taking a few times as long as one k-tile of math), not a measurement. The producer runs ahead until every
# stage is full; each consumer starts a k-tile as soon as its "full" barrier flips; a stage is refilled as
# soon as both consumers have released it. With too few stages the consumers wait (grey); with enough, the
# copies are hidden behind the math.

# %%
HOPPER_STAGES = dict(TC.rungs[-1].spec.knobs).get("STAGES", KNOBS_03["STAGES"])
lessons.figure(diagrams.roles_figure(k_tiles=10, stages=2))
lessons.figure(diagrams.roles_figure(k_tiles=10, stages=HOPPER_STAGES))

# %% [markdown]
# ### The Hopper rungs of the family
#
# Every rung after rung 03, whatever the family holds when this runs: each with its header as its author
# wrote it, then the same walk as above (the whole source where it rewrites most of the previous rung). On
# a machine without `sm_90`, these rungs are compiled for `sm_90a` and shown compile-only, and a sentence
# says so; in REPLAY their numbers are the reference GPU's records, where those hold them.

# %%
LATER = [rung.key for rung in TC.rungs if rung.number > 3]
print("rungs after 03:", ", ".join(LATER) if LATER else "none in the family yet")

# %%
LATER_REPORTS = {key: WALK.chapter(key) for key in LATER}

# %% [markdown]
# ---
# ## The ladder, all together
#
# Every headline record, one panel per type and layout: cuBLAS hatched, each rung labelled with its
# fraction of cuBLAS in the same run. The square sizes are where the predictions are stated; the sizes one
# off a multiple of the tile (and of 8) are where alignment decides which path every kernel, cuBLAS
# included, can take.

# %%
lessons.plot(plots.ladder_grid, TC_RS, "gemm_tc")

# %%
lessons.headline_table(TC_RS, "gemm_tc")

# %% [markdown]
# The best rung of the records (by its median fraction of cuBLAS over the headline sizes), and what a size
# one off a multiple of 8 does to it and to cuBLAS, fp16 TN:

# %%
BEST = lessons.best_rung(TC_RS, TC)
TN16 = lessons.headline_sizes(TC_RS, layout="TN", dtype="float16")
print(lessons.size_change(TC_RS, TC, BEST, TN16[0], TN16[1:]) if BEST and TN16 else lessons.missing("gemm_tc"))

# %% [markdown]
# ### Throughput against size
#
# Square products from a side of 256 to 8192 (fp16 TN, cold L2), every rung beside cuBLAS (dashed black),
# and the same as a fraction of cuBLAS. Small products give too few 128-wide tiles to fill the GPU's SMs, so
# everything, cuBLAS included, is far from its plateau there.

# %%
print(lessons.kinds_status(TC_RS, TC, ("sweep",)))
lessons.plot(plots.throughput_vs_size, TC_RS, "gemm_tc")

# %%
print(lessons.ratio_by_size(TC_RS, TC, BEST, "ceiling") if BEST else lessons.missing("gemm_tc"))

# %% [markdown]
# ### Tails: `N` stepping by one around 4096
#
# `M = K = 4096`, fp16 TN, `N` stepping by one across 4096 and the next tile boundaries (warm L2). When `N`
# is not a multiple of 8, C's rows are not 16-byte aligned: **cuBLAS** falls off a cliff there (its fast
# kernels want aligned leading dimensions), and the **lab's rungs** take their fallback: element loads
# instead of 16-byte copies for rungs 02 and 03; the Hopper rungs repack an operand TMA cannot read as it
# is. In this TN tail only C's rows move off alignment (A and B keep `K` as their leading dimension), so
# whether a TMA rung needs its repack path here is for the records to say. The tables after the plot put
# numbers on both: each target's median at `N` a multiple of 8 against the others, and which path each
# rung's launch took (the family notes it in every record).

# %%
print(lessons.kinds_status(TC_RS, TC, ("tail",)))
print(lessons.tail_steps(TC_RS, TC))

# %%
lessons.plot(plots.tail, TC_RS, "gemm_tc")

# %%
print(lessons.tail_residues(TC_RS, TC, 8))

# %%
print(lessons.tail_sawtooth(TC_RS, TC))

# %%
print(lessons.launch_paths(TC_RS, TC))

# %% [markdown]
# ### DRAM traffic per rung
#
# Nsight Compute's DRAM bytes (read + written) for one launch of each rung against the fewest bytes the
# product can move (`GemmTcFamily.min_dram_bytes`: A and B read once, C written once), with the L2 hit
# rate. Larger block tiles mean fewer re-reads of A and B; an L2-aware order of the blocks (not in these
# rungs) would cut them further.

# %%
lessons.dram_table(TC_PROFILE, TC)

# %%
lessons.dram_plot(TC_PROFILE, TC)

# %% [markdown]
# ---
# ## What to take away
#
# - A tensor-core instruction belongs to a warp (or a warpgroup): the fragment layout decides who loads
#   what, and `ldmatrix` exists to hand a warp a whole fragment from shared memory in one instruction.
# - Shared-memory layouts are designed against the 8-row read pattern of `ldmatrix`: padding or an XOR
#   swizzle, the swizzle costing no memory; the bank-group pictures follow from the index formulas alone.
# - A multi-stage pipeline hides global-memory latency behind math only with enough stages in flight; the
#   knob probe shows where more stages stop paying.
# - On Hopper the instruction set changes the design: TMA moves tiles without the threads, `mbarrier`
#   phases replace block-wide barriers, `wgmma` reads operands from shared memory, and warp specialization
#   gives copying and computing to different warps.
# - Alignment is a property of the shape as much as of the kernel: sizes one off a multiple of 8 cost
#   cuBLAS and the rungs alike, each through its own fallback.
