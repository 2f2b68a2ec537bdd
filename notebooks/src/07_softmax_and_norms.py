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
# # 07 — Softmax, RMSNorm and LayerNorm: a reduction at the speed of a copy
#
# Softmax, RMSNorm and LayerNorm each reduce a row to one or two statistics (a max and a sum; a mean square; a
# mean and a variance), then rewrite the row with them. Per element they do a handful of flops on two to four
# bytes, far below what the GPU computes per byte it moves: they are **memory-bound**, and the most any of them
# can reach is what a copy of the same bytes reaches. So each ladder is measured against the device copy, timed
# on the same bytes in the same run, and against CuPy's own operations composed as a user writes them
# (`cupy_composed`).
#
# The ladders climb towards one read and one write per element:
#
# - **softmax** (fp32 or fp16 in and out, fp32 statistics, an optional mask): three passes over the row; the
#   online normalizer (max and sum in one read); the row held in registers (one read); then specialized by row
#   length (a warp per short row, a block per long one);
# - **RMSNorm** and **LayerNorm** (fp16 or bf16, fp32 statistics), one source per rung for both: two reads with
#   2-byte accesses; one read into registers in 16-byte packs; then specialized by row length.
#
# For each: what every rung changes (its header), the numerics that make the statistics trustworthy, the
# bandwidth of every rung at each headline row length, the tail over row lengths around powers of two, and each
# header's prediction against the measurement. Every measured figure is computed in a cell from records; none is
# typed in. Ideas from: Milakov & Gimelshein, "Online normalizer calculation for softmax" (2018); Welford (1962)
# and Chan, Golub & LeVeque (1983) on running variances; Zhang & Sennrich, "Root mean square layer normalization"
# (2019); Ba, Kiros & Hinton, "Layer normalization" (2016); the masked-row convention of FlashAttention (Dao et
# al., 2022).

# %%
from lab import lessons
from lab.lessons import fusion as lesson
from lab.lessons import plots

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks each ladder and measures its headline and tail problems now, with shorter timings,
# shown first; the reference GPU's full records are replayed beside them, labelled as such. REPLAY (no GPU) shows
# only the records, and says so.

# %%
MODE = lessons.mode()
print(lesson.banner(MODE, lesson.ROW_FAMILIES))

# %%
print(lesson.live_plan_text(lesson.ROW_FAMILIES))

# %%
LIVE = {name: lesson.live_records(MODE, name) for name in lesson.ROW_FAMILIES}
print("\n".join(lesson.live_note(LIVE[name], MODE, name) for name in lesson.ROW_FAMILIES))

# %% [markdown]
# ---
# ## 1. The three ladders
#
# ### Softmax
#
# Each rung's header says what it changes against the rung before, why that should be faster (a prediction in
# numbers), what it requires, and its knobs. The definitions every rung follows (masks, rows of `-inf`, NaN) are
# in rung 01's header.

# %%
print(lesson.rung_list("softmax"))

# %%
lesson.rung_headers("softmax")

# %% [markdown]
# ### RMSNorm and LayerNorm
#
# One source per rung serves both: a template on whether the row is centred, with two entry points. LayerNorm
# adds the mean (and, in rung 01, Welford's running variance) and a bias `b`; otherwise the ladders are the same.

# %%
print(lesson.rung_list("rmsnorm"))
print(lesson.rung_list("layernorm"))
print(lesson.shared_sources("rmsnorm", "layernorm"))

# %%
lesson.rung_headers("rmsnorm")

# %% [markdown]
# ---
# ## 2. Numerics
#
# ### Why the online softmax
#
# Softmax subtracts the row's max before `exp`, or a row of large values overflows (`exp(89)` is already past
# fp32's range) and `inf / inf` gives NaN. The textbook way reads the row once for the max and again for the sum.
# The online normalizer keeps both in one read: a running max `m` and a running sum `d` of `exp(x - m)`, with
# `d` rescaled by `exp(m_old - m_new)` whenever the max rises. On the CPU, in fp32, element by element, against
# the two-read computation in float64, and what the unshifted `exp` does to the same row shifted up:

# %%
print(lesson.online_softmax_demo())

# %% [markdown]
# ### Why fp32 statistics
#
# The data may be fp16 or bf16, but a row's statistics are sums of thousands of terms. In fp16 a sum of squares
# overflows at 65504 and loses its low bits long before; RMSNorm's mean square is exactly that sum:

# %%
print(lesson.fp16_statistics_demo())

# %% [markdown]
# Even in fp32 the formula matters. LayerNorm's variance as `E[x^2] - E[x]^2` subtracts two large, nearly equal
# numbers when the row's mean is large against its spread, and the difference keeps mostly their rounding
# errors. Rung 01 keeps Welford's running mean and sum of squared deviations instead; rungs 02 and 03, which hold
# the row in registers, take the centered two-pass sum at no extra memory traffic:

# %%
print(lesson.variance_demo())

# %% [markdown]
# ### Rows of `-inf`: the convention
#
# A row whose every element is masked or `-inf` has no max to subtract: `x - max` is `-inf - (-inf)`, NaN. The
# kernels follow the convention of attention kernels instead: such a row outputs zeros (shift 0, sum 0, and 1/0
# taken as 0), while a NaN or `+inf` among a row's elements still makes the row NaN. The softmax family's special
# rows, through its own float64 reference on the CPU, beside a naive softmax:

# %%
lesson.special_rows_demo()

# %% [markdown]
# ---
# ## 3. Softmax, measured
#
# `lab bench softmax` times every rung, the device copy of the same bytes and `cupy_composed` at the headline row
# lengths (each array far past the L2, cold L2), in fp16 and fp32. The table gives each target's fraction of the
# device copy timed on the same problem, and the path the last rung's launcher took for that length.

# %%
if LIVE["softmax"]:
    print(lesson.bandwidth_table(LIVE["softmax"], "softmax"))
    lessons.figure(plots.row_ladder(LIVE["softmax"], "softmax", target=lesson.TARGETS["copy_fraction"],
                                    min_n=lesson.TARGETS["copy_min_n"]))

# %%
SOFTMAX = lesson.replayed("softmax")
print(lesson.status(SOFTMAX, "softmax"))
lesson.bandwidth_table(SOFTMAX, "softmax")

# %%
lesson.show(plots.row_ladder, SOFTMAX, "softmax", target=lesson.TARGETS["copy_fraction"],
            min_n=lesson.TARGETS["copy_min_n"])

# %% [markdown]
# The lesson's target for the memory-bound ladders, judged on the last rung at every headline row length from
# the target's smallest on, both types:

# %%
print(lesson.copy_targets(SOFTMAX, "softmax"))

# %% [markdown]
# ### Tails
#
# Row lengths stepping by one across 1024, 2048 and 4096 (fp16: eight elements per 16-byte vector). A rung whose
# rows are read in vectors pays a scalar head and tail on every row whose length is not a multiple of the
# vector; a sawtooth with that period is the price. Each panel is one run of lengths, the power of two dotted;
# the table after it groups the lengths by `n mod 8` and names the path each launch took.

# %%
if LIVE["softmax"]:
    lessons.figure(plots.tail_by_base(LIVE["softmax"], "softmax"))

# %%
lesson.show(plots.tail_by_base, SOFTMAX, "softmax")

# %%
print(lesson.tail_summary(SOFTMAX, "softmax"))

# %% [markdown]
# ### Predicted against measured
#
# Every numeric range in each rung's prediction, against the headline records at the row lengths it names:

# %%
print(lesson.ladder_predictions(SOFTMAX, "softmax"))

# %% [markdown]
# ---
# ## 4. RMSNorm, measured
#
# The same measurements: the device copy of `x`'s bytes (a norm reads `x` and writes `y`; `w`, read by every
# row, stays in the cache), fp16 and bf16.

# %%
if LIVE["rmsnorm"]:
    print(lesson.bandwidth_table(LIVE["rmsnorm"], "rmsnorm"))

# %%
RMSNORM = lesson.replayed("rmsnorm")
print(lesson.status(RMSNORM, "rmsnorm"))
lesson.bandwidth_table(RMSNORM, "rmsnorm")

# %%
lesson.show(plots.row_ladder, RMSNORM, "rmsnorm", target=lesson.TARGETS["copy_fraction"],
            min_n=lesson.TARGETS["copy_min_n"])

# %%
print(lesson.copy_targets(RMSNORM, "rmsnorm"))

# %%
lesson.show(plots.tail_by_base, RMSNORM, "rmsnorm")

# %%
print(lesson.tail_summary(RMSNORM, "rmsnorm"))

# %%
print(lesson.ladder_predictions(RMSNORM, "rmsnorm"))

# %% [markdown]
# ---
# ## 5. LayerNorm, measured
#
# LayerNorm reads the same bytes as RMSNorm (plus `b`, from the cache) and does a little more arithmetic per
# element: the mean to subtract, and in rung 01 Welford's division per element. On a memory-bound kernel the
# extra arithmetic should cost nothing once the loads are wide and plentiful; the two ladders side by side say
# whether it does.

# %%
if LIVE["layernorm"]:
    print(lesson.bandwidth_table(LIVE["layernorm"], "layernorm"))

# %%
LAYERNORM = lesson.replayed("layernorm")
print(lesson.status(LAYERNORM, "layernorm"))
lesson.bandwidth_table(LAYERNORM, "layernorm")

# %%
lesson.show(plots.row_ladder, LAYERNORM, "layernorm", target=lesson.TARGETS["copy_fraction"],
            min_n=lesson.TARGETS["copy_min_n"])

# %%
print(lesson.copy_targets(LAYERNORM, "layernorm"))

# %%
lesson.show(plots.tail_by_base, LAYERNORM, "layernorm")

# %%
print(lesson.tail_summary(LAYERNORM, "layernorm"))

# %%
print(lesson.ladder_predictions(LAYERNORM, "layernorm"))

# %% [markdown]
# **Reading it.** Each ladder's first rung reads the row more than once and in narrow accesses; the prediction
# ranges say how much of the copy that should still reach, because a row read moments ago is mostly in the L2.
# The single-read rungs should close most of the gap where the row fits in registers, and leave it open at the
# lengths that fall back to two reads or leave most of a block idle; the specialized rungs should close it at
# both ends. Where a measurement falls outside its range, the launch path in the table (and the tail's groups
# by `n mod 8`) is the first place to look.

# %% [markdown]
# ---
# ## Exercise

# %%
print(lesson.exercise_pointer(None, lesson.ROW_FAMILIES))

# %% [markdown]
# ---
# ## What to take away
#
# - A row reduction is a copy with arithmetic on the side: its ceiling is the device copy of the same bytes, and
#   each rung's job is to move the row once, in wide accesses, with enough bytes in flight.
# - One read needs the whole row at hand: in registers when it fits, which makes the row length the parameter
#   that picks the kernel (a warp, a block, or two reads).
# - Statistics in fp32, in a form that does not cancel (the online max and sum; Welford or the centered sum), and
#   conventions decided once and checked everywhere (rows of `-inf` give zeros, NaN stays NaN).
# - The fastest path for one row length is not the fastest for another: the tail and the specialized rung's
#   launch paths show where each choice pays.
