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

# %% [markdown]
# ## What you will learn
#
# - How to count, for any GEMM shape, the output tiles, the waves they make over the SMs and the k-steps each tile
#   walks, and to see from those counts alone when a one-block-per-tile kernel must leave most of the GPU idle.
# - **Split-K** (gemm_tc rung 08): cutting K into `S` ranges so that `tiles × S` units fill the SMs, what the fp32
#   workspace of partial tiles costs in bytes, and why two of the three ways of summing them give the same bits on
#   every run and the third does not.
# - **Decode** (a GEMV against a large weight): why a handful of tokens makes the GEMM a stream of the weight, why
#   its yardstick is the device copy of the same bytes, and how Little's law sizes the bytes each SM keeps in flight.
# - **Grouped GEMM**: one launch over uneven experts against a Python loop of cuBLAS calls; what padding and the
#   last round of tiles cost, and what building the problem table costs on the host.
# - How to write a prediction from the shape and two measured facts, and hold the records against it.

# %% [markdown]
# Notebooks 03 and 04 made a GEMM fast when its output has many tiles: one block per tile, every SM busy, the
# same work repeated wave after wave. Much real traffic does not look like that. This notebook takes three shapes
# that a square-tile GEMM serves badly, and for each one asks the same questions in the same order: **the shape**
# (counted in a cell), **the change** to the kernel, **the prediction** (the kernel header's, written before any
# GPU run, and one computed here), **one launch** on an odd shape checked against float64, **one timing** against
# the library in the same run, then **the records** of the reference GPU and **the reading** of their plots.
#
# Every measured figure is computed in a cell from records; none is typed in. Ideas from: CUTLASS's split-K GEMMs
# (a workspace and a reduction kernel, or semaphores) and its sm90 grouped GEMM (a problem table walked by a
# persistent tile scheduler); Osama et al., "Stream-K" (PPoPP 2023), on the fix-up that any split along K needs;
# the "swap AB" small-M GEMMs of vLLM and TensorRT-LLM (the weight in the wide MMA slot); Volkov's thesis on
# Little's law for bytes in flight; MegaBlocks (Gale et al., MLSys 2023) on why mixture-of-experts wants one kernel
# over uneven experts.

# %%
import numpy as np

from lab import lessons
from lab.families import get_family
from lab.lessons import underfill as lesson
from lab.lessons.plots import underfill as figures
from lab.measure.records import format_bytes

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks and measures a short plan in this run, shown first, and the banner says on which GPU,
# at which commit and when; the reference GPU's full records are replayed beside it, labelled as such. REPLAY (no
# GPU) shows only the records, and says so. The box lists every record file this notebook reads, with the device,
# date and commit it was made on, or that it is missing.

# %%
MODE = lessons.mode()  # LIVE where a GPU is here (unless LAB_NOTEBOOK_MODE=replay), else REPLAY
FILES = lesson.replayed()  # every record file below, replayed from results/h200 (None where one is missing)
print(lesson.banner(MODE, FILES))

# %% [markdown]
# The predictions need the SM count (LIVE: this GPU's; REPLAY: the records' GPU) and two measured facts, both
# from other ladders' records: the device copy's time against the bytes it moves (the fastest any kernel can move
# those bytes, timed the same way, fixed cost included), and rung 06's time per k-step of one tile on one SM.

# %%
GPU = lesson.gpu_facts(MODE, FILES)
COPY = lesson.copy_model(FILES["copy"])
RATE = lesson.tile_rate(FILES["gemm_tc"])
SMS = GPU.sm_count
print("GPU:", GPU)
print(lesson.prediction_inputs(COPY, RATE))

# %% [markdown]
# The LIVE plan, kept to a few minutes on an H200 (compiling and checking included):

# %%
print(lesson.live_plan_text())

# %% [markdown]
# One function this notebook's live cells share: the largest error of one launch against the float64 reference,
# written out here once. `fam.reference` computes the exact product in float64 on the host; `fam.error_bound`
# gives each output element its own allowed error (fp32 accumulation on tensor cores, the output rounded once:
# `lab.measure.bounds`); an element still NaN was never written. The full checks (guard zones around the output,
# three input distributions, a repeat run for races, every tail case) are `lab.measure.verify`'s, which the live
# plan runs before it times anything.

# %%
def largest_error(fam, problem, out) -> str:
    """The worst element of one launch against float64: its |error|, and its error over its own bound."""
    ref = fam.reference(problem)  # float64, the shape of the output (padding columns included)
    bound = fam.error_bound(problem, ref)  # each element's allowed |error|
    got = fam.output_values(out).get().astype(np.float64)
    unwritten = int(np.isnan(got).sum())
    if unwritten == got.size:
        return f"{problem.label}: every element is still NaN: the kernel wrote nothing"
    err = np.abs(got - ref)
    ratio = np.where(err == 0, 0.0, err / np.maximum(bound, 1e-300))
    worst = np.unravel_index(int(np.nanargmax(ratio)), ratio.shape)
    return (f"{problem.label}: largest |error| {np.nanmax(err):.3g}; largest |error| / bound {np.nanmax(ratio):.3f} "
            f"at {tuple(int(i) for i in worst)} (must be <= 1); elements left unwritten (still NaN): {unwritten}")


# %% [markdown]
# ---
# ## 1. Split-K: long K, few output tiles
#
# ### The shape
#
# The weight-gradient GEMMs of training and the long reductions of some attention variants have a small output and
# a very long sum per element. Take `M × N × K` = 256 × 256 × 65536 in fp16 and count what rung 06 (one block
# per 128 × 256 tile, notebook 04's persistent GEMM) does with it:

# %%
M, N, K = 256, 256, 65536
BM, BN, BK = 128, 256, 64  # rung 06's tile and k-step
tiles = -(-M // BM) * -(-N // BN)
waves = tiles / SMS
k_steps = -(-K // BK)
flops = 2 * M * N * K
ab_bytes = 2 * (M * K + N * K + M * N)  # fp16: A and B read once, C written once
print(f"{M} x {N} x {K}: {tiles} tiles of {BM} x {BN} over {SMS} SMs = {waves:.3f} waves: {SMS - tiles} SMs idle")
print(f"each tile walks {k_steps} k-steps of {BK} one after another")
print(f"{flops / 1e9:.1f} GFLOP over {format_bytes(ab_bytes)}: {flops / ab_bytes:.0f} FLOP per byte")

# %% [markdown]
# Split-K cuts K into `S` ranges and makes each (tile, split) pair a unit of work on its own SM. The split-K
# launcher (`lab.families.gemm_split_k`) picks `S` for about one wave of units, on 128 × 128 tiles where the output
# has few tiles. Each unit ends with an fp32 partial tile instead of `C`; in the workspace mode those partial
# tiles go into `S` slices of `M × N` floats that a second kernel sums. The count, and the bytes of that
# workspace:

# %%
S = lesson.launcher_splits({"M": M, "N": N, "K": K}, SMS)
bm, bn = lesson.split_tile(M, N)
split_tiles = -(-M // bm) * -(-N // bn)
units = split_tiles * S
ldw = -(-N // 4) * 4  # the workspace's row pitch: N rounded up to 4 floats
workspace = S * M * ldw * 4  # fp32 slices
print(f"S = {S} on {bm} x {bn} tiles: {split_tiles} tiles x {S} splits = {units} units = {units / SMS:.2f} waves, "
      f"at most {-(-k_steps // S)} k-steps each instead of {k_steps}")
print(f"fp32 workspace: S x M x N x 4 bytes = {S} x {M} x {ldw} x 4 = {format_bytes(workspace)}; written once and "
      f"read back once, {format_bytes(2 * workspace)} beside A and B's {format_bytes(ab_bytes)}")
print(f"the L2 holds {format_bytes(GPU.l2_bytes)}: the slices fit in it "
      f"{'and may never reach DRAM' if workspace < GPU.l2_bytes else 'only in part'}")

# %% [markdown]
# The same counts for both of the lesson's K-heavy shapes, on rung 06's tile and on the launcher's:

# %%
print(lesson.split_shapes(SMS))

# %% [markdown]
# ### What changed from rung 06
#
# Rung 08 keeps rung 06's persistent mainloop and changes what a unit of work is and how it ends. Three ways to
# sum the `S` partial tiles: (a) each unit stores an fp32 slice into a workspace and a second kernel adds the slices
# in a fixed order; (b) the same slices, summed inside the same kernel after a barrier across the grid; (c) fp32
# atomic adds in L2, the last unit to arrive storing `C`. The header says so in words:

# %%
print(lesson.header_field("gemm_split_k", "08_split_k"))

# %% [markdown]
# and the code, against rung 06 (the headers left out; the new helpers, `lab_split_k.cuh`'s k-range and slice
# sums, are in `kernels/common/`):

# %%
lesson.code_diff(("gemm_split_k", "06_persistent"), ("gemm_split_k", "08_split_k"))

# %% [markdown]
# ### Predict first
#
# Before looking at any measurement, write down how fast you expect the workspace mode to be at 256 × 256 × 65536
# against cuBLAS, from the counts above. Then read the header's prediction, written before any GPU run:

# %%
SPLIT = get_family("gemm_split_k")
print(lessons.prediction(SPLIT, "08_split_k"))

# %% [markdown]
# And the prediction computed here. Two limits, whichever is slower. **Compute**: the busiest SM runs
# `ceil(units / SMs)` rounds of `ceil(k-steps / S)` k-steps, each at rung 06's time per k-step (measured at 4096³,
# scaled by tile area). **Bytes**: the shape's arithmetic intensity is low (the FLOP/byte above), so even with every
# SM busy the GEMM must read A and B once from DRAM; at the device copy's speed for those bytes that takes a fixed
# time, and the workspace's slices (modes a and b) add the bytes counted above, unless they stay in the L2. The
# range below is "slices in L2" to "slices through DRAM".

# %%
print(lesson.split_prediction_table(SMS, COPY, RATE))

# %% [markdown]
# So the prediction is a bandwidth-bound GEMM once split: at the launcher's `S` the compute time falls well
# below the time to read A and B, and the split factor only has to be large enough to get there. More splits
# beyond that only add slices.
#
# ### One launch, checked against float64
#
# LIVE: the workspace mode on an odd shape (M and N one off a multiple of the tile, K one short of a power of two,
# so the launcher's `S` divides neither the k-steps nor the tiles evenly), the output poisoned with NaN first.

# %%
if MODE.live:
    import cupy as cp

    rung = SPLIT.rung("08_split_k")
    problem = SPLIT.make_problem(seed=5, M=255, N=257, K=16383, layout="TN", dtype="float16")
    out = cp.full(problem.out_shape, cp.nan, dtype=problem.dtype)
    SPLIT.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    print("launched:", SPLIT.launch_notes(rung, problem, out))
    print(largest_error(SPLIT, problem, out))
else:
    print("(LIVE only: on a GPU this cell launches rung 08 once on 255 x 257 x 16383 and holds it against float64. "
          "The replayed study ran every mode through lab.measure.verify first, on the shapes listed here:)")
    print("  checked:", (FILES["split_k_factors"] or {}).get("checked", lesson.missing("split_k_factors")))

# %% [markdown]
# ### One timing against cuBLAS, in the same run
#
# LIVE: the workspace mode and cuBLAS (`fam.launch_ceiling`: cuBLASLt, or cublasGemmEx) on the same operands, each
# timed by `lab.measure.timing.measure` (CUDA events around each launch, a cold L2 before each one, the median).

# %%
if MODE.live:
    from lab.lessons.common import run_stamp
    from lab.measure import timing

    big = SPLIT.make_problem(seed=1, M=M, N=N, K=K, layout="TN", dtype="float16")
    big_out = cp.empty(big.out_shape, big.dtype)
    t_rung = timing.measure(lambda i: SPLIT.launch(rung, big, big_out, i), l2="cold", min_time_ms=5.0)
    t_lib = timing.measure(lambda i: SPLIT.launch_ceiling(big, big_out, i), l2="cold", min_time_ms=5.0)
    print(run_stamp())
    print(f"08_split_k (S = {SPLIT.splits_for(rung, big)}): {t_rung.median_ms * 1e3:.1f} us = "
          f"{big.flops / t_rung.median_ms / 1e9:.0f} TFLOP/s; cuBLAS {t_lib.median_ms * 1e3:.1f} us = "
          f"{big.flops / t_lib.median_ms / 1e9:.0f} TFLOP/s; cuBLAS's time / the rung's = "
          f"{t_lib.median_ms / t_rung.median_ms:.2f}")
else:
    print("(LIVE only: on a GPU this cell times rung 08 and cuBLAS at 256 x 256 x 65536 in this run. The reference "
          "GPU's timing of the same pair, from the factor study:)")
    print(lesson.replayed_split_timing(FILES["split_k_factors"]))

# %% [markdown]
# ### The records: every mode and variant, in the same run as cuBLAS
#
# `lab.studies.split_k.split_factor_study` (`lab study splitk`): every mode checked against the float64 reference on
# shapes whose split factors do not divide the k-steps, then timed on a cold L2 beside cuBLAS and rung 06 in the
# same run: at the launcher's own `S`, then at every `S` of a sweep. LIVE first (one shape, fewer factors):

# %%
LIVE_SPLIT = lesson.live_split_k(MODE)  # LIVE only: the factor study cut down to one shape; None in REPLAY
print(lesson.live_note(LIVE_SPLIT, MODE, "split_k_factors (live)"))

# %%
if LIVE_SPLIT:  # the same tables and figure as the replayed records below, on this run's numbers
    print(lesson.split_auto_table(LIVE_SPLIT, "split_k_factors (live)"))
    live_curves = lesson.split_predicted_curves(SMS, COPY, RATE, lesson.LIVE_FACTORS, LIVE_SPLIT)
    lessons.figure(figures.split_factors(LIVE_SPLIT, live_curves))
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
lesson.show(figures.split_factors, FACTORS, lesson.SPLIT_FACTORS, predicted=PREDICTED)

# %% [markdown]
# How to read the plot. Start at the left edge: at `S = 1` every line sits on rung 06's dotted line, because
# without a split the kernel is rung 06. Follow a line to the right: each doubling of `S` doubles the units, so
# while the units are fewer than the SMs the throughput should double too; the slope tells you whether it does.
# Find the peak and compare its `S` with the launcher's (the table below): the peak should sit near one wave of
# units. Past it, more splits only add slices to write and sum, and the lines fall. Then compare heights: the gap
# between the peak and the grey band is what the prediction missed, and the gap to the dashed line is what
# cuBLAS, doing the same job in the same run, does better. The dashed line of the atomic mode is the one to watch for
# the cost of contention in L2.

# %%
print(lesson.best_factors(FACTORS))

# %% [markdown]
# `lab bench gemm_split_k` on the family's four headline shapes, fp16 and bf16 (the launcher's `S` in each
# entry), for the shapes between these two and the squares:

# %%
print(lesson.split_bench_table(FILES["gemm_split_k"]))

# %% [markdown]
# ### Summing the splits inside a cluster
#
# The workspace mode writes `S` partial tiles to global memory and a second kernel reads them back. Rung 08's
# cluster mode (`SPLIT_MODE = 3`, the rung `08_split_k_cluster`) runs the splits of a tile as the blocks of
# thread-block clusters instead: each block puts its fp32 partial tile into its own shared memory, and block `r`
# of the cluster sums band `r` of the tile over the cluster's blocks, reading their shared memory directly
# (distributed shared memory). One slice per cluster goes to the workspace, and no second kernel runs. The catch is
# where a cluster may run: its blocks must share one GPC, so fewer clusters of 8 fit at once than SMs / 8, and a
# cluster that does not fit waits for a whole first wave to finish. The launcher asks the driver how many clusters
# of each size fit and picks the size and `S` that keep every cluster in the first wave. The header's prediction:

# %%
print(lesson.header_field("gemm_split_k", "08_split_k_cluster", "Prediction for SPLIT_MODE = 3"))

# %% [markdown]
# The record: both modes beside torch.mm and cuBLASLt in interleaved rounds (`lab study splitk-rounds`), with the
# `S` each ran. It names the commit it ran at; the header's paragraphs after the prediction say which launcher that
# commit had (the first one did not yet ask the driver how many clusters fit).

# %%
print(lesson.cluster_rounds_text())

# %% [markdown]
# Which plan? Counting the SMs a plan keeps busy misses what a plan costs after its main loop: with `G` clusters a
# tile, the tile's last cluster reads the other clusters' slices back and sums them while the rest of the grid has
# left, and a cluster's blocks wait for one another at its barriers. `lab study splitk-plans` times every plan that
# runs in one wave (each cluster size, each number of clusters a tile) in the same rounds, beside the workspace mode
# and the library, with what a block of each plan moves. The launcher's rule comes from these measurements: the
# widest size that keeps every cluster in the first wave and at least three quarters of the blocks the busiest plan
# keeps (`PLAN_BUSY_SHARE` in `lab/families/gemm_split_k.py`; rung 08's header says which run showed each half). The
# study's prediction, written before its first run, is in `lab/studies/split_k_plans.py`; the record, where there is
# one:

# %%
print(lesson.cluster_plans_text())

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
# How to read the bars: each bar is one launch, its blue part the split kernel and its orange part (the workspace
# mode only) the reduction kernel; the black tick is cuBLAS's whole GEMM. A blue part longer than the copy's time
# for A and B's bytes (the reading below prints both) means the split kernel itself streams A and B more slowly
# than the copy does; an orange part is time the other two modes spend inside their single kernel instead, at a
# grid barrier or in L2 atomics.
#
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
# `M` tokens by `K`, and the weight `W` of `N × K` (the "TN" layout of a linear layer). Count the bytes one token
# step reads at `N = K = 8192`, and what they cost at the device copy's speed:

# %%
N = K = 8192
for M in (1, 16):
    w_bytes = 2 * N * K  # fp16 weight: read once per step, whatever M is
    x_bytes, y_bytes = 2 * M * K, 2 * M * N
    step_bytes = w_bytes + x_bytes + y_bytes
    print(f"M = {M:2d}: W {format_bytes(w_bytes)} + X {format_bytes(x_bytes)} + Y {format_bytes(y_bytes)}: "
          f"W is {w_bytes / step_bytes:.2%} of the bytes; {2 * M * N * K / step_bytes:.1f} FLOP per byte")
    if COPY is not None:
        print(f"        the device copy moves {format_bytes(step_bytes)} in {COPY.time_us(step_bytes):.1f} us "
              f"({COPY.gbs(step_bytes):.0f} GB/s, from the copy records): the fastest this step can be")
    tiles = -(-M // 128) * -(-N // 256)
    print(f"        rung 06: {tiles} tiles of 128 x 256 for {SMS} SMs; {M} of each tile's 128 rows "
          f"{'holds' if M == 1 else 'hold'} a token")

# %% [markdown]
# The work per byte of `W` is two FLOPs per token, so the time is the time to read `W` once. A square-tile GEMM
# computes `128` rows of the output per tile: at `M = 1` all but one row of every tile is padding, and the few
# tiles there are (`N / 256`) keep a fraction of the SMs reading `W`. The same counts for both sizes:

# %%
print(lesson.decode_shapes(SMS))

# %% [markdown]
# ### The kernel
#
# The decode rung swaps the roles: the weight's rows go into the MMA's wide slot and the tokens into its narrow
# one, a block owns a strip of `W`'s rows and all of `K`, and the warps of a block split `K`. It is the first rung
# of its own ladder, so there is no previous rung to diff against; its header says what it is and why it should
# be fast:

# %%
print(lesson.header_field("decode", "01_mma_gemv", "What it is"))
print(lesson.header_field("decode", "01_mma_gemv", "Why it should be fast"))

# %% [markdown]
# ### Predict first
#
# Before any measurement: what fraction of the device copy's rate do you expect rung 01 to reach at `M = 1`, and
# at `M = 128`? The header's prediction, written before any GPU run:

# %%
DECODE_FAM = get_family("decode")
print(lessons.prediction(DECODE_FAM, "01_mma_gemv"))

# %% [markdown]
# The prediction computed here. A decode step cannot be faster than the device copy of the same bytes, timed the
# same way: that is the yardstick of every ratio below. At the smaller size the copy itself is far from the
# bandwidth, because its fixed cost (the time of the smallest copy, the same for every timed launch) is a large share
# of a short run:

# %%
print(lesson.decode_prediction(COPY))

# %% [markdown]
# To stream `W` at that speed, each SM must keep enough bytes in flight to cover the DRAM latency (Little's
# law). The launcher's plan per size and token bucket: blocks over `W`'s rows, warps per block, blocks resident per
# SM (the occupancy of each build, from its NVRTC compile report), and the bytes of `W` each SM has in flight.
# Where that falls below what the law asks, the prediction says the rung falls behind the copy.

# %%
ARCH = lessons.compile_arch(MODE)
print(lesson.decode_plan(SMS, ARCH, COPY))

# %% [markdown]
# ### One launch, checked against float64
#
# LIVE: rung 01 on 13 tokens against a weight of a prime number of rows (4099: the last strip of rows is partial),
# the output poisoned with NaN first.

# %%
if MODE.live:
    import cupy as cp

    rung = DECODE_FAM.rung("01_mma_gemv")
    problem = DECODE_FAM.make_problem(seed=7, M=13, N=4099, K=4096, dtype="float16")
    out = cp.full(problem.out_shape, cp.nan, dtype=problem.dtype)
    DECODE_FAM.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    print("launched:", DECODE_FAM.launch_notes(rung, problem, out))
    print(largest_error(DECODE_FAM, problem, out))
else:
    print("(LIVE only: on a GPU this cell launches rung 01 once on M = 13, N = 4099, K = 4096 and holds it against "
          "float64. The live plan below runs lab.measure.verify on a spread of the family's check cases first; the "
          "reference GPU's records were made after every check case passed.)")

# %% [markdown]
# ### One timing against the copy and cuBLAS, in the same run
#
# LIVE: rung 01 at `M = 1`, `N = K = 8192`, beside the device copy of the same bytes (`fam.launch_ceiling`: a true
# upper bound for a kernel that must read `W`) and cuBLAS (`fam.launch_cublas`: the library baseline), each timed by
# `lab.measure.timing.measure` on a cold L2.

# %%
if MODE.live:
    from lab.measure import timing

    step = DECODE_FAM.make_problem(seed=1, M=1, N=8192, K=8192, dtype="float16")
    step_out = cp.empty(step.out_shape, step.dtype)
    t_rung = timing.measure(lambda i: DECODE_FAM.launch(rung, step, step_out, i), l2="cold", min_time_ms=5.0)
    t_copy = timing.measure(lambda i: DECODE_FAM.launch_ceiling(step, step_out, i), l2="cold", min_time_ms=5.0)
    t_lib = timing.measure(lambda i: DECODE_FAM.launch_cublas(step, step_out, i), l2="cold", min_time_ms=5.0)
    gbs = {name: step.bytes_moved / (t.median_ms * 1e6) for name, t in
           (("rung", t_rung), ("copy", t_copy), ("cublas", t_lib))}
    print(f"01_mma_gemv {t_rung.median_ms * 1e3:.1f} us = {gbs['rung']:.0f} GB/s; the device copy of the same bytes "
          f"{t_copy.median_ms * 1e3:.1f} us = {gbs['copy']:.0f} GB/s; rung / copy = {gbs['rung'] / gbs['copy']:.3f}; "
          f"cuBLAS {t_lib.median_ms * 1e3:.1f} us, its time / the rung's = {t_lib.median_ms / t_rung.median_ms:.2f}")
else:
    print("(LIVE only: on a GPU this cell times rung 01, the device copy and cuBLAS at M = 1, N = K = 8192 in this "
          "run. The reference GPU's records of the same three, from one run:)")
    print(lesson.replayed_decode_timing(FILES["decode"]))

# %% [markdown]
# ### The records
#
# `lab bench decode`: rung 01, rung 02 (section 1's split-K GEMM on the same operands, for the token counts where
# rung 01 runs out of registers for bytes in flight), cuBLAS (`cupy.matmul(x, w.T)`; cublasGemmEx for bf16) and the
# device copy of the same bytes, each timed on a cold L2 with rotating inputs, in the same run, after the rungs
# passed their checks (every token bucket's edges, prime `N` and `K`, misaligned operands). The lesson's targets are
# judged on the fastest rung of each problem (starred), as a dispatch over the ladder would run it. LIVE first:

# %%
LIVE_DECODE = lesson.live_bench(MODE, "decode", lesson.LIVE_DECODE)  # LIVE only: checks, then lab bench; None in REPLAY
print(lesson.live_note(LIVE_DECODE, MODE, "decode (live)"))

# %%
if LIVE_DECODE:  # the same table and figure as the replayed records below, on this run's numbers
    print(lesson.decode_table(LIVE_DECODE, "decode (live)"))
    lessons.figure(figures.decode_bandwidth(LIVE_DECODE, target=lesson.TARGETS["decode_x_copy"]))

# %% [markdown]
# The reference GPU's records (replayed), and the lesson's targets at the larger size:

# %%
DECODE = FILES["decode"]
print(lesson.decode_table(DECODE))

# %%
print(lesson.decode_targets(DECODE))

# %% [markdown]
# GB/s of `W` against `M`: each rung and cuBLAS, the device copy's own rate for the same bytes (dashed) and the
# lesson's target, a fraction of it (dotted).

# %%
lesson.show(figures.decode_bandwidth, DECODE, "decode", dtype="float16", target=lesson.TARGETS["decode_x_copy"])

# %%
lesson.show(figures.decode_bandwidth, DECODE, "decode", dtype="bfloat16", target=lesson.TARGETS["decode_x_copy"])

# %% [markdown]
# How to read the plots. The dashed black line is the copy of the same bytes: nothing that reads `W` once can sit
# above it for long, so read every other line as a fraction of it, and the dotted line as the lesson's bar. Follow
# rung 01 from the left: flat while `W` is read once in 16-byte loads with enough bytes in flight, then a step down
# where a token bucket changes the plan (compare the `M` of the step with the plan table's rows). Follow rung 02:
# flat and lower for few tokens (its 128-row tiles are mostly padding), but it does not fall as `M` grows, so the
# two lines cross; the fastest rung of each problem is what a dispatch runs. cuBLAS's dotted grey line is the
# library baseline. Then compare the two panels: the smaller weight's lines all sit lower, the copy's included,
# because the fixed cost of a launch is a larger share of a shorter run (the next table).

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
# shared memory, to take over; cuBLAS, whose tiles fill up as `M` grows, catches up with both. The lesson's targets,
# printed above, say where the ladder stands. At the smaller size the fixed cost dominates: no
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
lessons.figure(figures.expert_rows(lesson.case_groups("moe"), title="moe: tokens per expert and the rows their "
                                                                    "tiles compute"))

# %% [markdown]
# How to read it: each filled bar is one expert's tokens, largest first, and its outline the rows its tiles compute
# (the tokens rounded up to whole tiles of 128 rows). The rows axis is logarithmic where the counts span decades, so
# the space between a bar and its outline reads as a ratio: padding, computed and thrown away. It is largest at the
# right, where an expert with a handful of tokens still costs a whole tile-row, and close to nothing at the left.
# The experts with no bar at all got no tokens and cost no tiles.
#
# What a loop of one library call per expert does with it, counted: each call is a launch from Python with its own
# tiles, most of them fewer than the SMs, so each runs with most of the GPU idle and ends with a tail. One grouped
# launch makes every tile of every expert one queue over all SMs:

# %%
groups = lesson.case_groups("moe")  # (M_g, N, K) per expert, from lab.families.grouped_gemm.route_tokens
BM, BN = 128, 256
calls = [-(-m // BM) * -(-n // BN) for m, n, _ in groups if m]  # tiles of each call of the loop
tile_rows = sum(-(-m // BM) for m, _, _ in groups)
tokens = sum(m for m, _, _ in groups)
total = sum(calls)
print(f"{len(groups)} experts, {sum(1 for m, _, _ in groups if m == 0)} of them empty, {tokens} tokens")
print(f"the loop: {len(calls)} calls, {sum(1 for t in calls if t < SMS)} of them with fewer tiles than the {SMS} SMs "
      f"(the median call has {int(np.median(calls))} tiles)")
print(f"one grouped launch: {total} tiles = {total / SMS:.1f} waves, {-(-total // SMS)} rounds; "
      f"{tokens} tokens in {tile_rows} tile-rows of {BM}: {tokens / (tile_rows * BM):.0%} of the rows computed hold a "
      "token")

# %% [markdown]
# The same counts for all three cases, with the TFLOP/s rung 06's per-tile rate predicts for the grouped kernel
# (its rounds of tiles times the k-steps per tile, padding and the last round's idle SMs included):

# %%
print(lesson.grouped_shapes(SMS, RATE))

# %% [markdown]
# ### What changed from gemm_tc rung 06
#
# The grouped kernel is gemm_tc rung 06's persistent loop reading its problems from a table in device memory:

# %%
print(lesson.header_field("grouped_gemm", "01_grouped_persistent"))

# %%
lesson.code_diff(("gemm_tc", "06_persistent"), ("grouped_gemm", "01_grouped_persistent"))

# %% [markdown]
# ### Predict first
#
# Before any measurement: on which of the three cases do you expect one launch to beat the loop of cuBLAS calls by
# the most, and why? The header's prediction, written before any GPU run:

# %%
GROUPED_FAM = get_family("grouped_gemm")
print(lessons.prediction(GROUPED_FAM, "01_grouped_persistent"))

# %% [markdown]
# ### One launch, checked against float64
#
# LIVE: the grouped kernel on four odd groups (an empty expert first, K not a multiple of 64, N one past a tile),
# the output poisoned with NaN first.

# %%
if MODE.live:
    import cupy as cp

    rung = GROUPED_FAM.rung("01_grouped_persistent")
    problem = GROUPED_FAM.make_problem(seed=3, groups=[(0, 64, 64), (17, 33, 40), (300, 257, 72), (129, 131, 67)],
                                       dtype="float16")
    out = cp.full(problem.out_shape, cp.nan, dtype=problem.dtype)
    GROUPED_FAM.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    print("launched:", GROUPED_FAM.launch_notes(rung, problem, out))
    print(largest_error(GROUPED_FAM, problem, out))
else:
    print("(LIVE only: on a GPU this cell launches the grouped kernel once on four odd groups and holds it against "
          "float64. The live plan below runs lab.measure.verify on a spread of the family's check cases first; the "
          "reference GPU's records were made after every check case passed.)")

# %% [markdown]
# ### One timing against the loop of cuBLAS calls, in the same run
#
# LIVE: the grouped kernel and the loop of cuBLAS calls (`fam.launch_ceiling`, the method every family times its
# records beside; here a baseline, what a user writes without a grouped kernel, not an upper bound) on the small
# case, each timed by `lab.measure.timing.measure` on a cold L2.

# %%
if MODE.live:
    from lab.measure import timing

    small = GROUPED_FAM.make_problem(seed=1, case="small", dtype="float16")
    small_out = cp.empty(small.out_shape, small.dtype)
    t_rung = timing.measure(lambda i: GROUPED_FAM.launch(rung, small, small_out, i), l2="cold", min_time_ms=5.0)
    t_loop = timing.measure(lambda i: GROUPED_FAM.launch_ceiling(small, small_out, i), l2="cold", min_time_ms=5.0)
    print(f"small, fp16: 01_grouped_persistent {t_rung.median_ms * 1e3:.0f} us = "
          f"{small.flops / t_rung.median_ms / 1e9:.0f} TFLOP/s; the loop of cuBLAS calls "
          f"{t_loop.median_ms * 1e3:.0f} us = {small.flops / t_loop.median_ms / 1e9:.0f} TFLOP/s; "
          f"the loop's time / the kernel's = {t_loop.median_ms / t_rung.median_ms:.2f}")
else:
    print("(LIVE only: on a GPU this cell times the grouped kernel and the loop of cuBLAS calls on the small case in "
          "this run. The reference GPU's records of the same pair, from one run:)")
    print(lesson.replayed_grouped_timing(FILES["grouped_gemm"]))

# %% [markdown]
# ### The records
#
# `lab bench grouped_gemm`: the grouped kernel, the loop of cuBLAS calls (the baseline this family is timed
# beside) and, on the uniform case, cuBLAS's strided-batched call, on a cold L2 in the same run, after the kernel
# passed its checks (empty experts first, in the middle and last; one expert with every token; odd `K`; more tiles
# than SMs). LIVE first:

# %%
LIVE_GROUPED = lesson.live_bench(MODE, "grouped_gemm", lesson.LIVE_GROUPED)  # LIVE only; None in REPLAY
print(lesson.live_note(LIVE_GROUPED, MODE, "grouped_gemm (live)"))

# %%
if LIVE_GROUPED:  # the same table and figure as the replayed records below, on this run's numbers
    print(lesson.grouped_table(LIVE_GROUPED, "grouped_gemm (live)"))
    lessons.figure(figures.grouped_cases(LIVE_GROUPED))

# %%
GROUPED = FILES["grouped_gemm"]
print(lesson.grouped_table(GROUPED))

# %%
print(lesson.grouped_targets(GROUPED))

# %%
lesson.show(figures.grouped_cases, GROUPED, "grouped_gemm")

# %% [markdown]
# How to read the bars: per case and type, the light grey bar is the loop of cuBLAS calls, the blue bar the grouped
# kernel (its label: how many times the loop's speed), the dark grey bar cuBLAS's strided-batched call where the
# groups share one shape. Compare the blue bar across cases first: it should sit near the TFLOP/s the shape table
# predicts, lower where padding or the last round costs more. Then compare the loop's bar across cases: look for
# where it is lowest, and whether that is the case whose calls each have the least work (the small case's) and the
# bar with the largest label. On the uniform
# case set the blue bar beside the dark grey one: there cuBLAS has a batched call for the same job.

# %% [markdown]
# ### The host cost of the table
#
# The kernel reads each group's TMA descriptors from the problem table. The family builds that table on the
# host: two tensor maps per expert with tokens, through the driver. A router that changes the token counts every
# step pays this every step, unless the maps are patched on the device (as CUTLASS does). The host time per case,
# beside the kernel's own time on the same case:

# %%
LIVE_COST = lesson.live_table_costs(MODE)  # LIVE only: the host time to build each case's table; None in REPLAY
if LIVE_COST:
    print(lesson.table_cost_table(LIVE_COST, LIVE_GROUPED, "grouped_table_cost (live)"))
print(lesson.table_cost_table(FILES["grouped_table_cost"], GROUPED))

# %% [markdown]
# ### What it shows
#
# Per case, the kernel against its predicted TFLOP/s, the loop and cuBLAS batched:

# %%
print(lesson.grouped_reading(GROUPED, RATE, SMS))

# %% [markdown]
# How to read it. The prediction counts two losses the grouped kernel cannot avoid: the padding of each expert's
# last tile-row (the "useful" column) and the idle SMs of the last round. Where it reaches the prediction, those
# are the whole story; where it falls short, the rest is what a tile costs when its group changes (a new pair of
# tensor maps to fence and prefetch) and the k-loop's epilogue, which weighs more at `K = 1024`. The loop loses for
# a different reason on each case: on the small case each call's work is close to what a launch from Python
# costs, so the grouped kernel's advantage there is mostly the launches it does not make; on the moe case the
# calls are big enough to hide their launches, but most of them leave SMs idle (the 'calls < 1 wave' column). On the
# uniform case cuBLAS's batched call does what the grouped kernel does, with its own tuned tiles; the lesson's target
# asks the grouped kernel to come within a small margin of it. The table's host cost is the price of a general problem
# table: it is paid once per routing, and is worth setting beside the kernel's time before calling a grouped GEMM
# fast.

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
#   the last round's idle SMs, and the host's cost of describing the problems to the kernel. A loop of library calls
#   is the baseline to beat, not a bound.
# - In all three, the prediction is arithmetic on the shape plus two measured facts (the copy's speed, a tile's
#   time); the records then say which part of the prediction held and which did not.
