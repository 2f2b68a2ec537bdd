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
# # 09 — Attention: the softmax that never reaches memory

# %% [markdown]
# ## What you will learn
#
# - Why attention written as its definition is **memory-bound** and the flash form is **compute-bound**: a count of
#   its FLOPs against the bytes of Q, K, V and O, and against the bytes of the score matrix it never needs to store.
# - The **online softmax** over tiles of keys, in a few lines of NumPy: a running max, a running sum and an output
#   accumulator, rescaled when the max moves, equal to the softmax of the whole row; and why a row with no visible
#   key gives 0, not NaN.
# - How the ladder climbs from a query row at a time to FlashAttention-2 on tensor cores and on towards Hopper's
#   instructions: the rungs' headers and diffs, and the tiles each block keeps in flight (shared memory from the
#   knobs, registers from the compile report).
# - How to launch a rung on an awkward shape (an odd length, grouped-query heads, causal), check it element by
#   element against float64 with its own error bound, and time it against PyTorch's SDPA in the same run.
# - How to read the ladder against SDPA, the head dimension, the sequence length and one decode step.

# %% [markdown]
# Attention computes, for every query row, `softmax(scale * q K^T) V` with `scale = 1/sqrt(D)`: a score against every
# key, a softmax over them, and the average of the value rows under those weights. The family
# (`lab/families/attention.py`) takes Q of shape (B, H, S_q, D) and K, V of shape (B, H_kv, S_k, D) in fp16 or bf16,
# with grouped-query heads (H a multiple of H_kv) and an optional causal mask, bottom-right aligned.
#
# The ladder is measured against PyTorch's `scaled_dot_product_attention` (SDPA) on the same memory, timed in the
# same run: a library baseline a user would otherwise call, not a hardware ceiling. Ideas from: Milakov &
# Gimelshein, "Online normalizer calculation for softmax" (2018); Dao et al., "FlashAttention" (2022) and Dao,
# "FlashAttention-2" (2023), whose recurrence and work split rungs 02 and up follow; Shah et al., "FlashAttention-3"
# (2024), whose Hopper pieces rungs 04-05 take (TMA, wgmma, a producer warpgroup, ping-pong); the layout of Triton's
# fused-attention tutorial (`python/tutorials/06-fused-attention.py`). Every measured figure is computed in a cell
# from records.

# %%
import numpy as np

from lab import lessons
from lab.families import get_family
from lab.lessons import attention as lesson
from lab.lessons.plots import attention as figures
from lab.measure import timing

ATT = get_family("attention")

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks and times one problem in this run, shown first; the reference GPU's records are replayed
# beside it, labelled as such. REPLAY (no GPU) shows only the records, and says so. `lab bench attention --json`
# records every kind (headline problems, a sequence-length sweep, a tail); a run with `--kinds` records one.

# %%
MODE = lessons.mode()
RECORDS = lesson.replayed_all()
print(lesson.banner(MODE, RECORDS))

# %% [markdown]
# ---
# ## 1. The count: FLOPs, bytes, and the matrix in between
#
# Per head and per (query, key) pair, attention does a dot product of length D for the score and adds D products
# to the output: `4 * S_q * S_k * D` FLOPs a head. The bytes it must move are only Q, K and V read once and O
# written once. Written as its definition, though, it stores the S_q x S_k scores, reads them back for the softmax,
# stores the probabilities P, and reads them again for P V. The count for one head of the headline problems, and
# the GPU's balance point from the records (the baseline's best TFLOP/s, a floor under the tensor cores' peak, over
# the device copy's bandwidth):

# %%
print(lesson.count_text(RECORDS["headline"]))

# %% [markdown]
# So the score matrix is the whole problem: kept in memory, its traffic dwarfs Q, K, V and O and the GPU waits on
# it; kept on chip, tile by tile, the same FLOPs come with so few bytes that only the tensor cores can set the time.
# Keeping it on chip needs a softmax that does not see the whole row at once.
#
# ---
# ## 2. The online softmax over tiles, in NumPy
#
# A block of the flash kernels sees the keys a tile at a time. It keeps, per query row, the largest score so far
# `m`, the sum `l` of `exp(s_j - m)` so far, and the unnormalized output `o = sum_j exp(s_j - m) v_j`. When a tile
# raises the max from `m_old` to `m_new`, everything summed so far was shifted by the old max, so `l` and `o` are
# both multiplied by the rescale factor `exp(m_old - m_new)`; at the end, `o / l`. The function, as the lessons
# module has it:

# %%
lesson.show_function(lesson.online_attention)

# %% [markdown]
# One row whose scores drift upwards (so the max moves in several tiles), a length that is not a multiple of the
# tile, against the definition `softmax(s) v` of the whole row, both in float64:

# %%
demo = lesson.recurrence_demo()
print(lesson.recurrence_text(demo))

# %% [markdown]
# A factor of exactly 1 is the common case once the row's largest scores have been seen: rung 02's header explains
# why the kernels keep it exactly 1 (the max stored as the same fp32 product every tile), so the rescales telescope
# over any number of tiles. The first tile's factor multiplies an empty sum.
#
# A causal row with `S_q > S_k` can see no key at all: every score is `-inf`. The definition divides 0 by 0; the
# recurrence shifts such a row by 0 instead of `-inf` (`-inf - -inf` would be NaN) and outputs 0, as FlashAttention
# does and as the family's float64 reference says:

# %%
print(lesson.empty_row_text())

# %% [markdown]
# ---
# ## 3. The ladder
#
# Each rung's header says what it changes against the rung before, why that should be faster (a prediction in
# numbers), what it requires, and its knobs.

# %%
print(lesson.rung_list())

# %%
lessons.md("\n\n".join(f"**{key}**\n\n```text\n{lessons.rung_header(ATT, key)}\n```" for key in lesson.rung_keys()))

# %% [markdown]
# Rung 02 against rung 01 changes nearly everything (a block of query rows instead of one, tensor cores, the
# recurrence of section 2), so its whole source reads better than a diff. Each later rung is shown as a diff
# against the one before it (the change its header names), or whole where most of its lines are new.

# %%
for key in lesson.rung_keys()[1:]:
    if lessons.mostly_rewritten(ATT, key):
        print(f"{key}: most of the previous rung's lines change; its source follows.")
        display(lessons.show_source(ATT, key))  # noqa: F821 - IPython's display
    else:
        print(f"{key}: the diff against the rung before it.")
        display(lessons.show_diff(ATT, key))  # noqa: F821 - IPython's display

# %% [markdown]
# ---
# ## 4. The tiles in flight
#
# A flash block holds its query rows' Q tile (in shared memory, or as tensor-core fragments after one pass
# through it), a K tile and a V tile per stage (a rung with a STAGES knob keeps that many in flight; the others
# one), and the scores of a 16-row slice per warp in registers. The byte counts below come from each tiled rung's
# knobs at D = 128; the shared memory and registers from the compile report (NVRTC, for the reference GPU's arch
# when there is none here); the blocks per SM from the occupancy arithmetic (`lab/core/occupancy.py`). The last
# line of each is why the rows a block owns matter: every K/V tile a block copies feeds all of them.

# %%
arch = lessons.compile_arch(MODE)       # this GPU's arch (LIVE), else the reference GPU's
budgets = [lesson.tile_budget(rung, D=128, arch=arch) for rung in lesson.tiled_rungs()]
print(lesson.tiles_text(budgets))

# %% [markdown]
# What feeds the tensor cores, from the SASS of each tiled rung (static counts: `HMMA` is `mma.sync`, `LDSM` is
# `ldmatrix`, `LDGSTS` an asynchronous global-to-shared copy, `HGMMA` a warpgroup MMA, `UTMALDG` a TMA copy):

# %%
for rung in lesson.tiled_rungs():
    print(lessons.mma_mix(lessons.compile_pair(ATT, rung.key, arch)[-1:]))

# %% [markdown]
# And what changed between consecutive tiled rungs, as the ladder builds them (its default knobs, D = 64):
# registers, shared memory, spills and the notable opcodes.

# %%
for rung in lesson.tiled_rungs()[1:]:
    print(lessons.instruction_delta(lessons.compile_pair(ATT, rung.key, arch)))

# %% [markdown]
# ---
# ## 5. One launch, written out
#
# The rung `lab.ops.attention` would pick for this call (the fastest this GPU runs, as measured) on B = 1, H = 8
# query heads on H_kv = 2 key/value heads (grouped-query attention), S = 1000 (no tile boundary falls on the
# sequence's end), D = 128, causal. The
# family makes the problem (fresh random inputs, never zeros), its float64 reference and each element's error bound
# (`error_bound`). With no GPU here the family makes them on the host, so the reference and the bound are computed
# in either mode.

# %%
if not MODE.live:
    ATT.array_module = np          # no GPU: the problem and its float64 reference are made on the host
rung = lesson.live_rung(MODE)                        # lab.ops's pick: the fastest tiled rung this GPU runs
problem = ATT.make_problem(seed=0, **lesson.LIVE_PROBLEM)
ref = ATT.reference(problem)                        # float64, from the stored fp16 inputs
bound = ATT.error_bound(problem, ref)               # each element's allowed |error|
scale = np.abs(ref).max()
grid = ATT.grid(rung, problem.params)
print(f"{problem.label}: rung {rung.key}, grid {grid} = {int(np.prod(grid))} blocks, against "
      f"{lesson.gpu_sms(MODE, RECORDS['headline'])}; {ATT.flops(problem.params) / 1e9:.2f} GFLOP (causal: the "
      "visible pairs only)")
print(f"the bound: median {np.median(bound) / scale:.1e}, largest {bound.max() / scale:.1e} of max |O|")

# %% [markdown]
# **Predict first.** The rung's header predicts its speed at the headline size; at this much smaller problem (a
# single batch and 8 heads: compare the grid printed above with the GPU's SM count) expect less of it, and a
# larger share of SDPA's time to be launch and copy overhead:

# %%
print(f"{rung.key}: {lessons.prediction(ATT, rung.key)}")

# %% [markdown]
# On a GPU: the output in a guarded buffer (guard zones before and after it, the output poisoned with NaN so an
# element the kernel forgets stays NaN), the launch, a synchronize, the guard zones checked, then the largest error
# against its bound; then the rung and SDPA, each timed with `lab.measure.timing.measure` (CUDA events, cold L2, a
# median over repetitions) on the same problem in the same run. `lab check attention` runs the family's whole case
# list (primes, 1 and 17, S_q > S_k with rows that see no key, large logits) before anything is measured.

# %%
if MODE.live:
    import cupy as cp

    from lab.core.errors import LabError
    from lab.measure.check import GuardedBuffer

    buf = GuardedBuffer(problem.out_shape, problem.dtype)
    rung, refusals = lesson.runnable(rung, problem, buf.out)  # a rung that refuses says why; the one before runs
    print("\n".join(refusals + [f"launching rung {rung.key}"]))
    buf.poison()
    ATT.launch(rung, problem, buf.out)
    cp.cuda.get_current_stream().synchronize()
    print("guard zones and coverage:", "; ".join(buf.problems()) or "intact, every element written")
    got = cp.asnumpy(ATT.output_values(buf.out)).astype(np.float64)
    err = np.abs(got - ref)
    print(f"unwritten or NaN: {int(np.count_nonzero(np.isnan(got)))} of {got.size}")
    print(f"largest |error| {np.nanmax(err):.2e}; largest |error| / bound {np.nanmax(err / bound):.3f} (1 or less "
          "passes)")
    t_rung = timing.measure(lambda i: ATT.launch(rung, problem, buf.out), l2="cold")
    print(f"rung {rung.key}: {t_rung.median_ms:.4f} ms = {ATT.throughput(problem, t_rung.median_ms):.1f} TFLOP/s "
          "(measured in this run, cold L2, median)")
    try:
        t_sdpa = timing.measure(lambda i: ATT.launch_ceiling(problem, buf.out), l2="cold")
        print(f"{lesson.BASELINE}: {t_sdpa.median_ms:.4f} ms = {ATT.throughput(problem, t_sdpa.median_ms):.1f} "
              f"TFLOP/s -> rung {rung.key} takes {t_rung.median_ms / t_sdpa.median_ms:.2f} times its time")
    except LabError as why:
        print(why)
else:
    print(f"REPLAY: on a GPU this cell launches rung {rung.key} into a guarded, NaN-poisoned output, prints its "
          f"largest error against the bound above, and times it and {lesson.BASELINE} on this problem in one run. "
          "The replayed headline records follow in section 6.")

# %% [markdown]
# ---
# ## 6. The ladder against SDPA, measured
#
# `lab bench attention` times every rung and SDPA on the headline problems: B = 2, H = 16, S = 4096, D 128 and 64,
# causal and not, fp16 and bf16, and one decode step (below). TFLOP/s count the visible (query, key) pairs only,
# so a causal problem does about half the FLOPs of a full one.
#
# **Predict first.** Each rung's prediction, from its header, before the numbers:

# %%
print(lesson.predictions_text())

# %%
lesson.ladder_table(RECORDS["headline"])

# %%
lesson.show(figures.ladder_vs_sdpa, RECORDS["headline"], "headline")

# %% [markdown]
# **Reading the bars.** The axis is logarithmic where the rungs span decades: rung 01 is the definition, there to
# check the others against, and sits far below; each step up is the change its header names. The hatched bar is
# SDPA, the library a user would call. Hold each rung's bar against its prediction above, then the share of SDPA
# the best rung reaches:

# %%
print(lesson.best_share(RECORDS["headline"]))

# %% [markdown]
# Each prediction's numeric ranges, held against the record of the problem the header names (its "(where)"):

# %%
print(lesson.predictions_check(RECORDS["headline"]))

# %% [markdown]
# ### The baseline is several kernels
#
# SDPA is a dispatcher: on this GPU it may pick cuDNN's fused attention, the flash backend (FlashAttention-2, the
# algorithm of rungs 02 and 03, written by its authors), or the memory-efficient backend (after Rabe & Staats,
# "Self-attention does not need O(n^2) memory", 2021, as in xFormers). `lab.studies.attention_study` forces each
# backend in turn and times it beside the rungs (and rung 03 with other tile knobs) in interleaved rounds on the
# same inputs. Against the flash backend the question is how well the same algorithm is written; against cuDNN's
# Hopper kernel it is what the asynchronous Hopper instructions add (FlashAttention-3's subject).

# %%
STUDY = lesson.load_study()
print(lesson.study_commit_note(STUDY))

# %%
lesson.study_table(STUDY)

# %%
if STUDY is None:
    print(lesson.study_missing())
else:
    lessons.figure(figures.sdpa_backends(STUDY), "the study holds no rows of SDPA's backends or the rungs")

# %%
print(lesson.study_reading(STUDY))

# %% [markdown]
# ### Causal
#
# A causal problem does about half the FLOPs; a kernel that skips the tiles past the diagonal (rungs 02 and up) and
# masks only the tiles that cross it should take about half the time. Above one half, look first at the tiles that
# cross the diagonal (masked, so they cost a full tile for half its work) and at the uneven blocks: those near the
# top of the sequence have few tiles and finish early, while those near the bottom still run:

# %%
print(lesson.causal_text(RECORDS["headline"]))

# %% [markdown]
# **Who takes the next block.** With a causal mask a query block near the top of the sequence sees one key tile and
# one near the bottom sees all of them, so the end of the run depends on which SM gets which block. An ordinary
# launch hands the next block (in launch order) to whichever SM frees first. Rung 05 has a knob, `PERSISTENT`, that
# launches one block per SM instead; each block then loops over the query blocks of every head, in sections of heads
# whose K and V fit in L2, longest first. It can take its next block either as a fixed share (block b takes b,
# b + 132, ...) or from a counter in global memory, like the hardware's own hand-out. A model that counts only key
# tiles ranks the four ways (its figures are tiles, not times):

# %%
lesson.schedule_table()

# %% [markdown]
# **Reading it.** A fixed share can be worse than the ordinary launch: one block can end up with several of a
# section's longest items. The counter comes closest to the even share, and that is what the kernel uses. The
# model's gain is an upper bound. It leaves out L2, where a section of many heads keeps more K and V in flight than
# an ordinary launch does, and each block's start, which a persistent kernel saves. The study above times both
# builds, in the same rounds:

# %%
lesson.persistent_table(STUDY)

# %% [markdown]
# **Reading it.** Where the persistent build was faster, the family now builds it by default: at D = 128, and at
# D = 64 when causal (`lab.families.attention.persistent_default`). The causal gains are the ones the model points
# at. At D = 256, and at D = 64 without a mask, it was a little slower, so those shapes keep one block a query
# block. The kernel's header gives the prediction that was written before the first run, and the spread over two runs.

# %% [markdown]
# ### The head dimension
#
# At D = 64 a K/V tile carries half the bytes and each score half the FLOPs, while the softmax's work per score
# (an exponential, a max, a sum) stays the same: the softmax's share of a tile's instructions doubles. The bars are
# each rung's share of SDPA at D = 64 beside D = 128:

# %%
lesson.show(figures.head_dims, RECORDS["headline"], "headline")

# %%
print(lesson.head_dim_text(RECORDS["headline"]))

# %% [markdown]
# **Reading it.** Where a rung's TFLOP/s barely move between the head dimensions but SDPA's rise at D = 128, the
# rung is held back by something that does not scale with D (the softmax's instructions, the barriers per tile),
# and SDPA's kernel has hidden it.
#
# ### One decode step
#
# Decoding generates one token at a time: S_q = 1 against a long cache of keys (GQA, 32 query heads on 8 key/value
# heads, S_k = 8192, B = 8). One query row per head cannot fill a tensor-core tile, and the step reads all of K and
# V once: it is memory-bound again, and its measure is bytes over time. A flash rung's block of 64 or 128 query
# rows has a single row of work, and one block per (batch, head) walks the whole cache of keys by itself: the
# launch has only as many blocks as (batch, head) pairs, each latency-bound on its own loop. Splitting the keys
# across blocks (split-KV, as notebook 05 does for GEMMs with split-K) is what a decode kernel does about it.

# %%
print(lesson.decode_text(RECORDS["headline"]))

# %%
lesson.show(figures.decode_times, RECORDS["headline"], "headline")

# %% [markdown]
# ### A decode kernel: the group's rows in one tile, the keys split across blocks
#
# The decode ladder (`kernels/attention_decode/`) takes the two things the flash rungs get wrong here. Rung 01
# packs the query rows that read one key/value head (4 heads of 1 token: 4 of a tile's 16 rows) into one mma tile,
# so K and V are read once for the group, and its 4 warps take 16 keys each of every 64-key tile. Rung 02 cuts a
# head's keys into splits, one block each, and the block that finishes last combines the splits' partial maxima,
# sums and rows in split order (the online softmax's combine rule again; the same bits whichever block is last).
# Its split count fills the GPU's block slots: `split_plan` picks the fewest splits that keep a share `WAVE_SHARE` of
# them busy over the waves (`lab/families/attention_decode.py`).
#
# **Predict first.** The headers' predictions, before the records:

# %%
from lab.lessons import decode_attention as decode
from lab.lessons.predictions import prediction

for key in ("01", "02"):
    print(f"{key}: {prediction('attention_decode', key)}\n")

# %%
DECODE = decode.replayed()
print(decode.split_kv_text(DECODE))

# %%
if DECODE is not None:
    lesson.show(figures.decode_bandwidth, DECODE, "decode_bandwidth")

# %% [markdown]
# The bench times each method once per problem; the study below runs every method in three interleaved rounds and
# reports each ratio within its round, with the spread of the rate over the rounds. Its paged column is a cache of
# 64-key pages in random order against the same values contiguous.

# %%
print(decode.study_text(decode.load_study()))

# %% [markdown]
# **Reading it.** Splitting the keys is the whole difference at small batches: rung 01's grid is one block per
# key/value head, 8 blocks at B = 1, and it runs at a fraction of SDPA; rung 02 fills the GPU and runs level with
# SDPA from B = 1 to 8. From B = 32 rung 01's grid already fills the GPU, the two rungs are level, and both stay a
# few percent under SDPA: the copy is the ceiling there, and neither rung beats it. A paged cache
# costs each row's copy a read of its page number from the block table first; the family builds it with 2 stages
# (three blocks an SM) so that other blocks have copies in flight meanwhile. A varlen batch is where a decode kernel
# pays most: SDPA, padded to the longest sequence and masked, reads every padded key.

# %% [markdown]
# ### A batch of prompts of different lengths
#
# A prefill batch in a server holds prompts of very different lengths. Padded to the longest, every sequence costs
# the longest one's work: with lengths spread over 1 .. 8192 most of a padded launch computes masked or padded
# scores. Packed end to end, (T, H, D) arrays with offsets `cu_seqlens` (as FlashAttention's varlen functions and
# serving engines keep them), each sequence costs its own work. `lab.families.attention_varlen` is rung 05 built with
# `VARLEN = 1`: its tensor maps take tokens as rows and heads as planes, each block adds its sequence's start to the
# rows it loads, and blocks past a short sequence's rows leave at once. The figure that matters is useful TFLOP/s:
# each sequence's own (query, key) pairs over the time, so padding counts as waste.
# `lab.ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=True)` calls it.

# %%
VARLEN = lesson.load_varlen_study()
lesson.varlen_table(VARLEN)

# %%
print(lesson.varlen_reading(VARLEN))

# %% [markdown]
# ---
# ## 7. Sequence length and tails
#
# The sweep holds B * H = 32 and D = 128 and steps S from short to long (fp16, not causal). At short lengths a
# head's query rows make few blocks and each block walks few tiles, so the launch, the first tile's latency and the
# epilogue weigh more; the flash rungs should climb towards their headline speed as S grows.

# %%
lesson.show(figures.sequence_sweep, RECORDS["sweep"], "sweep")

# %%
print(lesson.sweep_text(RECORDS["sweep"]))

# %% [markdown]
# The tail steps S by one across a multiple of both tile sizes: a length one past it adds a tile row of query
# blocks and a K/V tile that are almost all masked. A flat line says the masking costs nothing; a step after the
# multiple says a nearly empty tile costs as much as a full one.

# %%
lesson.show(figures.tail, RECORDS["tail"], "tail")

# %%
print(lesson.tail_text(RECORDS["tail"]))

# %% [markdown]
# ---
# ## What to take away
#
# - Attention's FLOPs grow with S_q * S_k, and so does the score matrix: stored, its bytes dominate and the GPU
#   waits on memory; kept on chip a tile at a time, only Q, K, V and O move and the tensor cores set the time.
# - The online softmax makes the tiles possible: a running max, sum and output, rescaled by `exp(m_old - m_new)`
#   when the max moves, equal to the softmax of the whole row; rows with no visible key give 0 by convention.
# - A block's K/V tile feeds BLOCK_M query rows: the rows a block owns set the FLOPs per byte it copies, and the
#   registers the scores and accumulators need set how many blocks an SM holds.
# - A decode step (S_q = 1) is memory-bound again and wants the keys split across blocks, not a bigger tile: the
#   group's query rows packed into one tile read K and V once, and the splits fill the GPU.
# - On Hopper most of the distance is FlashAttention-3's pieces, which rungs 04-05 take: copies by the tensor memory
#   accelerator that no warp waits for, warp specialization, `wgmma` instead of `mma.sync`. Then the softmax
#   overlapped with the products: between warpgroups (rung 05's ping-pong, which pays only once its loop is peeled:
#   with its products under conditions the compiler serialized them), and inside one, which the ladder does not
#   have yet (a second score accumulator, FlashAttention-3's intra-warpgroup pipelining).
# - A batch of different lengths wants them packed, not padded: the same kernel with per-sequence offsets does only
#   the real work, which on a serving-like mix is a small share of the padded batch's (the table gives it).
