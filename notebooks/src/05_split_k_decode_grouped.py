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
# # 05 — Shapes that do not fill the GPU: split-K, decode, grouped GEMM
#
# Notebooks 03 and 04 made a GEMM fast when its output has many tiles: one block per tile, every SM busy, the
# same work repeated wave after wave. Much real traffic does not look like that. This notebook takes three shapes
# that a square-tile GEMM serves badly, and for each one asks the same questions in the same order:
#
# 1. **the shape**, and why the plain kernel (gemm_tc rung 06, notebook 04's persistent GEMM) leaves most of the
#    GPU idle on it: too few tiles for the SMs, tiles that are mostly empty rows, or one launch per small problem;
# 2. **the prediction**: the kernel header's, written before any GPU run, and one computed here from the shape,
#    the family's own launch arithmetic and two measurements of other ladders (the device copy's time against
#    bytes, and rung 06's time per k-step of a tile);
# 3. **the measurement**, from records (a short plan runs live on a GPU), and **the plot**;
# 4. **what the plot shows against the prediction**, including where the lesson's target is missed and why.
#
# The three: **split-K** (`gemm_split_k`, gemm_tc rung 08: long K, few output tiles), **decode**
# (`decode`, rung 01: a handful of tokens against a large weight), and **grouped GEMM** (`grouped_gemm`, rung 01:
# a mixture-of-experts layer's uneven experts in one launch). Every measured figure is computed in a cell from
# records; none is typed in. Ideas from: CUTLASS's split-K GEMMs (a workspace and a reduction kernel, or
# semaphores) and its sm90 grouped GEMM (a problem table walked by a persistent tile scheduler); Osama et al.,
# "Stream-K" (PPoPP 2023), on the fix-up that any split along K needs; the "swap AB" small-M GEMMs of vLLM and
# TensorRT-LLM (the weight in the wide MMA slot); Volkov's thesis on Little's law for bytes in flight; MegaBlocks
# (Gale et al., MLSys 2023) on why mixture-of-experts wants one kernel over uneven experts.

# %%
from lab import lessons
from lab.lessons import plots
from lab.lessons import underfill as lesson

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks and measures a short plan now, shown first; the reference GPU's full records are
# replayed beside it, labelled as such. REPLAY (no GPU) shows only the records, and says so. The box lists every
# record file this notebook reads, with the device, date and commit it was made on, or that it is missing.

# %%
MODE = lessons.mode()
FILES = lesson.replayed()
print(lesson.banner(MODE, FILES))

# %% [markdown]
# The predictions need the SM count (LIVE: this GPU's; REPLAY: the records' GPU) and two measured facts, both
# from other ladders' records: the device copy's time against the bytes it moves (the fastest any kernel can move
# those bytes, timed the same way, fixed cost included), and rung 06's time per k-step of one tile on one SM.

# %%
GPU = lesson.gpu_facts(MODE, FILES)
COPY = lesson.copy_model(FILES["copy"])
RATE = lesson.tile_rate(FILES["gemm_tc"])
print("GPU:", GPU)
print(lesson.prediction_inputs(COPY, RATE))

# %% [markdown]
# The LIVE plan, kept to a few minutes on an H200 (compiling and checking included):

# %%
print(lesson.live_plan_text())

# %% [markdown]
# ---
# ## 1. Split-K: long K, few output tiles
#
# ### The shape
#
# The lesson's two K-heavy shapes: `M × N × K` = 256 × 256 × 65536 and 128 × 128 × 131072 in fp16. They are
# the weight-gradient GEMMs of training and the long reductions of some attention variants: a small output and a
# very long sum per element. Rung 06 gives each output tile to one block. The table counts the tiles, the SMs they
# keep busy, and how long each tile's k-loop is; then what the split-K launcher makes of it: `S` splits of K per
# tile, so that `tiles × S` units of work fill one wave of SMs.

# %%
print(lesson.split_shapes(GPU.sm_count))

# %% [markdown]
# Two or four SMs out of all of them, each walking a thousand k-steps or more: rung 06 cannot be fast here
# whatever its tile does. Split-K (gemm_tc rung 08) cuts K into `S` ranges, computes each (tile, split) unit on
# its own SM, and sums the `S` partial tiles afterwards. Three ways to sum them: (a) each unit stores an fp32
# slice into a workspace and a second kernel adds the slices in a fixed order; (b) the same slices, summed inside
# the same kernel after a barrier across the grid; (c) fp32 atomic adds in L2, the last unit to arrive storing
# `C`. The header's prediction, as written before any GPU run:

# %%
print(lesson.header_prediction("gemm_split_k", "08_split_k"))

# %% [markdown]
# ### The prediction, computed
#
# Two limits, whichever is slower. **Compute**: the busiest SM runs `ceil(units / SMs)` rounds of
# `ceil(k-steps / S)` k-steps, each at rung 06's time per k-step (measured at 4096³, scaled by tile area).
# **Bytes**: the shape's arithmetic intensity is low (the FLOP/byte column above), so even with every SM busy
# the GEMM must read A and B once from DRAM; at the device copy's speed for those bytes that takes a fixed time,
# and the workspace's slices (modes a and b) add `S × M × N` fp32 values written and read back, unless they
# stay in the L2. The range below is "slices in L2" to "slices through DRAM".

# %%
print(lesson.split_prediction_table(GPU.sm_count, COPY, RATE))

# %% [markdown]
# So the prediction is a bandwidth-bound GEMM once split: at the launcher's `S` the compute time falls well
# below the time to read A and B, and the split factor only has to be large enough to get there. More splits
# beyond that only add slices.
#
# ### Measurement
#
# `lab.studies.split_k.split_factor_study` (`lab study splitk`): every mode checked against the float64 reference on
# shapes whose split factors do not divide the k-steps, then timed on a cold L2 beside cuBLAS and rung 06 in the
# same run: at the launcher's own `S`, then at every `S` of a sweep. LIVE first (one shape, fewer factors):

# %%
LIVE_SPLIT = lesson.live_split_k(MODE)
print(lesson.live_note(LIVE_SPLIT, MODE, "split_k_factors (live)"))

# %%
if LIVE_SPLIT:
    print(lesson.split_auto_table(LIVE_SPLIT, "split_k_factors (live)"))
    live_curves = lesson.split_predicted_curves(GPU.sm_count, COPY, RATE, lesson.LIVE_FACTORS, LIVE_SPLIT)
    lessons.figure(plots.split_factors(LIVE_SPLIT, live_curves))
    print(lesson.determinism_table(LIVE_SPLIT, "split_k_factors (live)"))

# %% [markdown]
# The reference GPU's study (replayed): each split rung and knob variant at the launcher's own `S`, against
# cuBLAS and rung 06 timed in the same run, and with rows padded past a power-of-two pitch.

# %%
FACTORS = FILES["split_k_factors"]
REF_SMS = lesson.sm_count_of(FACTORS, GPU)
print(lesson.split_auto_table(FACTORS))

# %% [markdown]
# The lesson's target for split-K, held against these records:

# %%
print(lesson.split_targets(FACTORS))

# %% [markdown]
# ### TFLOP/s against the split factor
#
# One line per reduction mode (and per knob variant the study timed), cuBLAS dashed, rung 06 dotted, the
# prediction above as a grey band (computed for the tile the records' workspace mode ran).

# %%
PREDICTED = lesson.split_predicted_curves(REF_SMS, COPY, RATE, payload=FACTORS)
lesson.show(plots.split_factors, FACTORS, lesson.SPLIT_FACTORS, predicted=PREDICTED)

# %%
print(lesson.best_factors(FACTORS))

# %% [markdown]
# `lab bench gemm_split_k` on the family's four headline shapes, fp16 and bf16 (the launcher's `S` in each
# entry), for the shapes between these two and the squares:

# %%
print(lesson.split_bench_table(FILES["gemm_split_k"]))

# %% [markdown]
# ### The same bits on every run?
#
# The workspace and in-kernel modes add the slices in the order `s = 0 .. S-1`, whoever finished first: their
# output is the same bits on every run (and the same as each other's). The atomic mode adds partial tiles in the
# order they arrive, and floating-point addition is not associative, so its low bits change from run to run.
# Each mode was run many times on the same inputs and compared bit for bit with its first run:

# %%
print(lesson.determinism_table(FACTORS))

# %% [markdown]
# ### Where the time goes: Nsight Compute
#
# `scripts/split_k_ncu.py` profiles every kernel a launch runs: for the workspace mode, the split kernel (its
# mainloop, and the slice stores) and the reduction kernel apart. The bytes the split kernel reads are set beside
# the bytes A and B hold, the reduction's beside the slices its `S` writes. Never measured live (one `ncu`
# process, minutes long).

# %%
NCU = FILES["split_k_ncu"]
print(lesson.ncu_table(NCU, FACTORS, FILES["gemm_split_k"], REF_SMS))

# %%
print(lesson.split_time_shares(NCU))

# %%
lesson.show_kernel_times(NCU, FACTORS)

# %% [markdown]
# ### What it shows
#
# The records against the prediction, shape by shape (computed from the records above):

# %%
print(lesson.split_reading(FACTORS, NCU, COPY, RATE, REF_SMS))

# %% [markdown]
# How to read it. The first half of the prediction holds: splitting K takes rung 06 from a handful of busy SMs
# to all of them, and the throughput climbs with `S` until one wave of units is reached, then flattens or falls.
# The second half, that the split GEMM then runs at the device copy's speed for A and B plus a small reduction,
# is where the records fall short when they do, for two reasons the Nsight Compute table separates:
#
# - **The split kernel itself reads A and B more slowly than the copy does.** Each unit is a short k-loop (the
#   k-steps per unit in the first table), so the pipeline's fill and the partial tile's store are a large share of
#   it, and every SM starts its DRAM stream at the same moment. Compare its time with the copy's time for the same
#   bytes in the reading above.
# - **The reduction is not free.** In the workspace mode it is a second kernel that reads every slice back (and,
#   under Nsight Compute, from DRAM: the profiler flushes the caches between kernels); the in-kernel mode saves the
#   launch but waits at a grid barrier; the atomic mode serializes the additions of many units in the L2, which
#   can make it the slowest of the three despite needing the least workspace.
#
# cuBLAS pays for the same bytes and runs its own split-K; where it is faster, it is faster at the same job, not
# at a different one. Next steps, in the order the records point to: fewer, longer units (the narrow-tile
# variant halves `S` for the same wave, and halves the slices with it), a reduction that overlaps the mainloop's
# tail (stream-K's fix-up, or a reduction through distributed shared memory inside a thread-block cluster), and a
# split GEMM whose loads start staggered. Exercise 07 asks you to write the k-range of a split and the fixed-order
# sum of the slices.

# %% [markdown]
# ---
# ## 2. Decode: a handful of tokens against a large weight
#
# ### The shape
#
# Generating text, a model runs each linear layer on the few tokens of the current step: `Y = X Wᵀ` with `X` of
# `M` tokens by `K`, and the weight `W` of `N × K` (the "TN" layout of a linear layer). With `M` from one to a
# hundred and twenty-eight and `N = K` of a few thousand, the weight is megabytes and the tokens kilobytes. The
# work per byte of `W` is two FLOPs per token, so the time is the time to read `W` once. A square-tile GEMM
# computes `128` rows of the output per tile: at `M = 1` all but one row of every tile is padding, and the few
# tiles there are (`N / 256`) keep a fraction of the SMs reading `W`:

# %%
print(lesson.decode_shapes(GPU.sm_count))

# %% [markdown]
# The decode rung swaps the roles: the weight's rows go into the MMA's wide slot and the tokens into its narrow
# one, a block owns a strip of `W`'s rows and all of `K`, and the warps of a block split `K`. The header's
# prediction:

# %%
print(lesson.header_prediction("decode", "01_mma_gemv"))

# %% [markdown]
# ### The prediction, computed
#
# A decode step cannot be faster than the device copy of the same bytes, timed the same way: that is the target's
# yardstick. At the smaller size the copy itself is far from the bandwidth, because its fixed cost (the time of
# the smallest copy, the same for every timed launch) is a large share of a short run:

# %%
print(lesson.decode_prediction(COPY))

# %% [markdown]
# To stream `W` at that speed, each SM must keep enough bytes in flight to cover the DRAM latency (Little's
# law). The launcher's plan per size and token bucket: blocks over `W`'s rows, warps per block, blocks resident per
# SM (the occupancy of each build, from its NVRTC compile report), and the bytes of `W` each SM has in flight.
# Where that falls below what the law asks, the prediction says the rung falls behind the copy.

# %%
ARCH = lessons.compile_arch(MODE)
print(lesson.decode_plan(GPU.sm_count, ARCH, COPY))

# %% [markdown]
# ### Measurement
#
# `lab bench decode`: rung 01, rung 02 (section 1's split-K GEMM on the same operands, for the token counts where
# rung 01 runs out of registers for bytes in flight), cuBLAS (`cupy.matmul(x, w.T)`; cublasGemmEx for bf16) and the
# device copy of the same bytes, each timed on a cold L2 with rotating inputs, in the same run, after the rungs
# passed their checks (every token bucket's edges, prime `N` and `K`, misaligned operands). The targets are judged
# on the fastest rung of each problem (starred), as a dispatch over the ladder would run it. LIVE first:

# %%
LIVE_DECODE = lesson.live_bench(MODE, "decode", lesson.LIVE_DECODE)
print(lesson.live_note(LIVE_DECODE, MODE, "decode (live)"))

# %%
if LIVE_DECODE:
    print(lesson.decode_table(LIVE_DECODE, "decode (live)"))
    lessons.figure(plots.decode_bandwidth(LIVE_DECODE, target=lesson.TARGETS["decode_x_copy"]))

# %% [markdown]
# The reference GPU's records (replayed), and the lesson's targets at the larger size:

# %%
DECODE = FILES["decode"]
print(lesson.decode_table(DECODE))

# %%
print(lesson.decode_targets(DECODE))

# %% [markdown]
# GB/s of `W` against `M`: each rung and cuBLAS, the device copy's own rate for the same bytes (dashed) and the
# target's fraction of it (dotted).

# %%
lesson.show(plots.decode_bandwidth, DECODE, "decode", dtype="float16", target=lesson.TARGETS["decode_x_copy"])

# %%
lesson.show(plots.decode_bandwidth, DECODE, "decode", dtype="bfloat16", target=lesson.TARGETS["decode_x_copy"])

# %% [markdown]
# ### What limits the smaller weight
#
# At `N = K = 4096` the weight is small enough that the fixed cost of a timed launch is a large share of the
# run, for the copy, cuBLAS and the rung alike. Each time below beside that fixed cost, and the rate at which the
# rung reads `W` once the fixed cost is taken out:

# %%
print(lesson.decode_limits(DECODE, COPY))

# %% [markdown]
# ### What it shows
#
# Per type and size, the fastest rung's ratios to the copy and to cuBLAS for few and for many tokens:

# %%
print(lesson.decode_reading(DECODE, COPY))

# %% [markdown]
# How to read it against the prediction. Up to eight tokens rung 01 reads each byte of `W` once, in 16-byte
# loads that stream past L1, with more bytes in flight per SM than Little's law asks: the prediction is that it
# tracks the device copy, and the ratio to the copy says how closely. Where the ratio drops from one token bucket
# to the next, the plan table shows what changed between them: the blocks over `W`'s rows, the warps each SM
# holds, the bytes each SM has in flight. Past that the accumulators and the tokens' chunks crowd the registers,
# the bytes in flight per SM fall (the plan's last column), and `X` is read again from L2 per strip of `W`: the
# header predicts rung 01 to fall behind as `M` grows, and the split-K GEMM (rung 02), which stages `W` through
# shared memory, to take over; cuBLAS, whose tiles fill up as `M` grows, catches up with both. The targets line
# above says where the ladder stands against the lesson's bar. At the smaller size the fixed cost dominates: no
# kernel makes the launch and the DRAM latency's ramp shorter, so the copy itself is slow there, and a ratio to
# the copy near one is the best there is. Splitting `K` across blocks (as FlashDecoding-style kernels split a long
# sequence) adds parallelism only where there are fewer blocks than the SMs can hold: the plan's 'waves' column
# says where that is.

# %% [markdown]
# ---
# ## 3. Grouped GEMM: many small GEMMs of different sizes
#
# ### The shape
#
# A mixture-of-experts layer routes each token to a few of many experts, each a GEMM with its own weight. The
# tokens per expert are uneven and change every step. The family's three cases: **moe** (64 experts, 16384 tokens
# routed with a skewed distribution, `N = K = 4096`), **uniform** (64 experts of 256 tokens each: the shape
# cuBLAS's batched call serves), **small** (128 groups of 32 to 512 rows, `N = K = 1024`). The routing of the moe
# case, and the rows its tiles compute (each expert's last tile-row padded to 128):

# %%
lessons.figure(plots.expert_rows(lesson.case_groups("moe"), title="moe: tokens per expert and the rows their tiles "
                                                                  "compute"))

# %% [markdown]
# What a loop of one call per expert does with it: each call is a launch from Python, and most calls have fewer
# tiles than the GPU has SMs, so each one runs with most of the GPU idle and ends with a tail. The grouped kernel
# makes every tile of every expert one queue over all SMs (gemm_tc rung 06's persistent loop, reading the groups
# from a problem table in device memory): one launch, one tail. The table counts the tiles, the padding, the calls
# of the loop that fill less than a wave, and the TFLOP/s rung 06's per-tile rate predicts for the grouped kernel
# (its rounds of tiles times the k-steps per tile, padding and the last round's idle SMs included):

# %%
print(lesson.grouped_shapes(GPU.sm_count, RATE))

# %% [markdown]
# The header's prediction:

# %%
print(lesson.header_prediction("grouped_gemm", "01_grouped_persistent"))

# %% [markdown]
# ### Measurement
#
# `lab bench grouped_gemm`: the grouped kernel, the loop of cuBLAS calls (the ceiling this family is measured
# against) and, on the uniform case, cuBLAS's strided-batched call, on a cold L2 in the same run, after the kernel
# passed its checks (empty experts first, in the middle and last; one expert with every token; odd `K`; more tiles
# than SMs). LIVE first:

# %%
LIVE_GROUPED = lesson.live_bench(MODE, "grouped_gemm", lesson.LIVE_GROUPED)
print(lesson.live_note(LIVE_GROUPED, MODE, "grouped_gemm (live)"))

# %%
if LIVE_GROUPED:
    print(lesson.grouped_table(LIVE_GROUPED, "grouped_gemm (live)"))
    lessons.figure(plots.grouped_cases(LIVE_GROUPED))

# %%
GROUPED = FILES["grouped_gemm"]
print(lesson.grouped_table(GROUPED))

# %%
print(lesson.grouped_targets(GROUPED))

# %%
lesson.show(plots.grouped_cases, GROUPED, "grouped_gemm")

# %% [markdown]
# ### The host cost of the table
#
# The kernel reads each group's TMA descriptors from the problem table. The family builds that table on the
# host: two tensor maps per expert with tokens, through the driver. A router that changes the token counts every
# step pays this every step, unless the maps are patched on the device (as CUTLASS does). The host time per case,
# beside the kernel's own time on the same case:

# %%
LIVE_COST = lesson.live_table_costs(MODE)
if LIVE_COST:
    print(lesson.table_cost_table(LIVE_COST, LIVE_GROUPED, "grouped_table_cost (live)"))
print(lesson.table_cost_table(FILES["grouped_table_cost"], GROUPED))

# %% [markdown]
# ### What it shows
#
# Per case, the kernel against its predicted TFLOP/s, the loop and cuBLAS batched:

# %%
print(lesson.grouped_reading(GROUPED, RATE, GPU.sm_count))

# %% [markdown]
# How to read it. The prediction counts two losses the grouped kernel cannot avoid: the padding of each expert's
# last tile-row (the "useful" column) and the idle SMs of the last round. Where it reaches the prediction, those
# are the whole story; where it falls short, the rest is what a tile costs when its group changes (a new pair of
# tensor maps to fence and prefetch) and the k-loop's epilogue, which weighs more at `K = 1024`. The loop loses for
# a different reason on each case: on the small case each call's work is close to what a launch from Python
# costs, so the grouped kernel's advantage there is mostly the launches it does not make; on the moe case the
# calls are big enough to hide their launches, but most of them leave SMs idle (the 'calls < 1 wave' column). On the
# uniform case cuBLAS's
# batched call does what the grouped kernel does, with its own tuned tiles; the target asks the grouped kernel to
# come within a small margin of it. The table's host cost is the price of a general problem table: it is paid
# once per routing, and is worth setting beside the kernel's time before calling a grouped GEMM fast.

# %% [markdown]
# ---
# ## What to take away
#
# - A GEMM's speed needs enough independent work for every SM. When `M × N` gives too few tiles, split the long
#   dimension (K) and pay for combining the pieces: a workspace and a reduction (deterministic), or atomics
#   (cheaper in memory, different bits every run).
# - When one operand is tiny (decode), the GEMM is a stream of the weight: the yardstick is the device copy of the
#   same bytes, the tool is Little's law (bytes in flight per SM), and for small weights the fixed cost of a launch,
#   not the kernel, sets the floor.
# - Many small problems want one launch and one queue of tiles over all SMs; what is left is padding per problem,
#   the last round's idle SMs, and the host's cost of describing the problems to the kernel.
# - In all three, the prediction is arithmetic on the shape plus two measured facts (the copy's speed, a tile's
#   time); the records then say which part of the prediction held and which did not.
