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

# %% [markdown]
# ## What you will learn
#
# - Why a row softmax or a norm is **memory-bound**: a count of its FLOPs per byte against the GPU's, and why its
#   upper bound is the device copy of the same bytes.
# - How the ladder climbs from three reads of the row to one: the **online softmax** recurrence (a running max and
#   a rescaled sum), written in a few lines of NumPy and checked against the three-pass formula.
# - How to launch a rung through its family on an awkward shape, check it element by element against float64 with
#   its own error bound, and time it against the device copy in the same run.
# - Why the statistics are fp32 and in a form that does not cancel (Welford, the centered sum), and what a row of
#   `-inf` must give.
# - How to read a ladder's bars and its tail: where the row length picks the kernel, and where a vector's width
#   shows up as a sawtooth.

# %% [markdown]
# Softmax, RMSNorm and LayerNorm each reduce a row to one or two statistics (a max and a sum; a mean square; a
# mean and a variance), then rewrite the row with them. Each ladder is measured against the device copy of the same
# bytes, timed on the same problem in the same run, and against CuPy's own operations composed as a user writes
# them (`cupy_composed`, the library baseline).
#
# The ladders climb towards one read and one write per element:
#
# - **softmax** (fp32 or fp16 in and out, fp32 statistics, an optional mask): three passes over the row; the
#   online normalizer (max and sum in one read); the row held in registers (one read); then specialized by row
#   length (a warp per short row, a block per long one);
# - **RMSNorm** and **LayerNorm** (fp16 or bf16, fp32 statistics), one source per rung for both: two reads with
#   2-byte accesses; one read into registers in 16-byte packs; then specialized by row length.
#
# Every measured figure is computed in a cell from records; none is typed in. Ideas from: Milakov & Gimelshein,
# "Online normalizer calculation for softmax" (2018); Welford (1962) and Chan, Golub & LeVeque (1983) on running
# variances; Zhang & Sennrich, "Root mean square layer normalization" (2019); Ba, Kiros & Hinton, "Layer
# normalization" (2016); the masked-row convention of FlashAttention (Dao et al., 2022); the layout of Triton's
# fused-softmax tutorial (`python/tutorials/02-fused-softmax.py`).

# %%
import numpy as np

from lab import lessons
from lab.families import get_family
from lab.lessons import fusion as lesson
from lab.lessons.fusion import clusters
from lab.lessons import plots
from lab.measure import timing, verify

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks each ladder and measures its headline and tail problems in this run, with shorter
# timings, shown first; the reference GPU's full records are replayed beside them, labelled as such. REPLAY (no
# GPU) shows only the records, and says so.

# %%
MODE = lessons.mode()
print(lesson.banner(MODE, lesson.ROW_FAMILIES))

# %%
print(lesson.live_plan_text(lesson.ROW_FAMILIES))

# %%
LIVE = {name: lesson.live_records(MODE, name) for name in lesson.ROW_FAMILIES}
print("\n".join(lesson.live_note(LIVE[name], MODE, name) for name in lesson.ROW_FAMILIES))

# %%
SOFTMAX = lesson.replayed("softmax")
RMSNORM = lesson.replayed("rmsnorm")
LAYERNORM = lesson.replayed("layernorm")

# %% [markdown]
# ---
# ## 1. The count: bytes, FLOPs, and what bounds them
#
# A softmax reads each element, finds the row's max, sums `exp(x - max)`, and writes `exp(x - max) / sum`: a
# handful of FLOPs per element. Against the bytes it must move (the row read once, written once), that is far
# fewer FLOPs per byte than the GPU can do per byte of DRAM bandwidth. The cell takes the GPU's FP32 peak (from
# the records' provenance, or this GPU in LIVE mode) and the device copy's bandwidth (the softmax records'
# own copy of the same bytes).

# %%
flops_per_element = 5            # compare (max), subtract, exp, add (sum), multiply by 1/sum
bytes_per_element = 4 + 4        # fp32: x read once, y written once
intensity = flops_per_element / bytes_per_element
print(f"softmax, fp32: {flops_per_element} FLOP / {bytes_per_element} B = {intensity:.2f} FLOP per byte moved")

peak = lessons.fp32_peak(MODE, SOFTMAX)
copies = [] if SOFTMAX is None else [r for r in SOFTMAX.records if r.kind == "headline" and r.rung == r.ceiling]
if peak is None or peak.tflops is None or not copies:
    print(lesson.status(SOFTMAX, "softmax"))
else:
    copy_gbs = max(copies, key=lambda r: r.bytes_moved).value          # the device copy, GB/s
    balance = peak.tflops * 1e12 / (copy_gbs * 1e9)                    # FLOP the GPU can do per byte it moves
    print(f"the GPU: {peak.tflops:.1f} TFLOP/s FP32 over {copy_gbs:.0f} GB/s of device copy = {balance:.0f} FLOP "
          f"per byte ({SOFTMAX.label()})")
    print(f"-> at the copy's speed a softmax keeps {intensity / balance:.2%} of the FP32 units busy: the bytes, "
          "not the arithmetic, set its time")

# %% [markdown]
# So the most any rung can reach is the device copy's speed on the same bytes, and what separates the rungs is how
# many times they read the row. The count below is for one headline problem of the family; if every read went to
# DRAM, a rung that reads the row `r` times moves `(r + 1)` row-sized transfers where the copy moves two.

# %%
params = get_family("softmax").headline_params()[0]     # a headline problem: arrays far past the L2
rows, n, item = params["rows"], params["n"], np.dtype(params["dtype"]).itemsize
copy_bytes = 2 * rows * n * item                         # x read once and y written once: the device copy's bytes
print(f"{rows} rows × {n} {params['dtype']}: the copy moves {copy_bytes / 2**20:.0f} MiB")
for rung, reads in (("01 three reads", 3), ("02 two reads", 2), ("03, 04 one read", 1)):
    moved = (reads + 1) * rows * n * item
    print(f"  {rung:16s}: {moved / 2**20:5.0f} MiB -> at most {copy_bytes / moved:.2f} of the device copy, "
          "if every read came from DRAM")

# %% [markdown]
# The rungs' headers argue that the re-reads of rungs 01 and 02 mostly hit the L2 (a row read moments ago by the
# same block is still there), so the count above is the pessimistic end; section 5 holds both against the records.
#
# ---
# ## 2. The three ladders
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
# The step from rung 01 to rung 02, as a diff: passes 1 and 2 become one loop that keeps a running max `m` and a
# running sum `d` (`online_add`), and the block combines the threads' pairs. Section 3 writes the same
# recurrence in NumPy.

# %%
lessons.show_diff("softmax", "02")

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
# ## 3. Numerics
#
# ### The online softmax, in NumPy
#
# Softmax subtracts the row's max before `exp`, or a row of large values overflows (`exp(89)` is already past
# fp32's range) and `inf / inf` gives NaN. The three-pass way reads the row once for the max, again for the sum,
# and a third time for the outputs. The online normalizer keeps both statistics in one read: a running max `m`
# and a running sum `d` of `exp(x - m)`, with `d` rescaled by `exp(m_old - m_new)` whenever the max rises. Both,
# element by element in fp32 on one row of odd length, against float64:

# %%
rng = np.random.default_rng(0)
x = (rng.standard_normal(1023) * 3).astype(np.float32)        # one row, an odd length, fp32

# three passes (rung 01): the max, then the sum of exp(x - max), then the outputs
m3 = x.max()
d3 = np.sum(np.exp(x - m3), dtype=np.float32)
y_three = np.exp(x - m3) / d3

# online (rung 02): the max and the sum in one read; the sum so far is rescaled whenever the max rises
m, d = np.float32(-np.inf), np.float32(0.0)
for v in x:
    m_new = max(m, v)
    d = d * np.exp(m - m_new) + np.exp(v - m_new)               # exp(-inf - v) = 0 on the first element
    m = m_new
y_online = np.exp(x - m) / d

exact = np.exp(x.astype(np.float64) - x.max())
exact /= exact.sum()
print(f"one row of {x.size} fp32 values, N(0, 9); outputs against float64:")
for name, mm, dd, yy in (("three passes", m3, d3, y_three), ("online      ", m, d, y_online)):
    print(f"  {name}: max {mm:.6f}, sum {dd:.6f}, largest |y - exact| / exact {np.max(abs(yy - exact) / exact):.2e}")
print(f"  relative difference of the two sums: {abs(float(d) - float(d3)) / float(d3):.2e} (both in fp32)")

# %% [markdown]
# And what skipping the shift does to the same row raised by a constant (the softmax is unchanged by it):

# %%
with np.errstate(over="ignore", invalid="ignore"):
    e = np.exp(x + np.float32(100.0))                           # no max subtracted
    naive = e / e.sum()
print(f"x + 100, exp(x) without the shift in fp32: {np.count_nonzero(np.isinf(e))} of {x.size} exponentials "
      f"overflow to inf, {np.count_nonzero(np.isnan(naive))} outputs NaN")

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
# ## 4. One launch, written out
#
# Rung 04 of the softmax family on 1000 rows of 1023 values: an odd length, so no row starts on a 16-byte
# boundary after the first and every row ends inside a vector. The family makes the problem (fresh random inputs,
# never zeros), its float64 reference and each element's error bound (`lab/families/softmax.py`,
# `error_bound`). With no GPU here the family makes them on the host (`array_module = np`), so the reference and
# the bound are computed in either mode; the launch path is pure Python too (`launch_plan`).

# %%
SOFT = get_family("softmax")
if not MODE.live:
    SOFT.array_module = np          # no GPU: the problem and its float64 reference are made on the host
rung = SOFT.rung("04")
problem = SOFT.make_problem(seed=0, rows=1000, n=1023, dtype="float32")
ref = SOFT.reference(problem)                     # float64, from the fp32 inputs
bound = SOFT.error_bound(problem, ref)            # each element's allowed |error|
plan = SOFT.launch_plan(rung, 1000, 1023, "float32")
print(f"{problem.label}: rung {rung.key} takes the path '{plan['path']}' ({plan['spec'].entry}, "
      f"grid {plan['grid']}, block {plan['block']})")
print(f"the bound: median {np.median(bound / ref):.1e} of |y|, largest {np.max(bound / ref):.1e} of |y|")

# %% [markdown]
# On a GPU: the output allocated and poisoned with NaN (an element the kernel forgets stays NaN), the launch, a
# synchronize, then the largest error against its bound. `lab.measure.verify.compare_output` does the same
# comparison with the checks' rules (NaN where the reference is NaN, masks); `lab.measure.verify.check_rung` adds
# guard zones, three input distributions, a second run for races and the whole case list, and the LIVE cell of
# the banner ran it on a spread of cases before anything was timed.

# %%
if MODE.live:
    import cupy as cp

    out = cp.full(problem.out_shape, cp.nan, dtype=problem.dtype)     # poisoned
    SOFT.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    got = cp.asnumpy(SOFT.output_values(out)).astype(np.float64)
    err = np.abs(got - ref)
    print(f"unwritten (still NaN): {int(np.count_nonzero(np.isnan(got)))} of {got.size}")
    print(f"largest |error| {np.nanmax(err):.2e}; largest |error| / bound {np.nanmax(err / bound):.3f} (1 or less "
          "passes)")
    print("lab.measure.verify.compare_output:", verify.compare_output(SOFT, problem, out).describe())
else:
    print("REPLAY: on a GPU this cell launches rung 04 into a NaN-poisoned output and prints its largest error "
          "against the bound above; the family's record of its checks on the reference GPU:")
    print(" ", lesson.check_status("softmax"))

# %% [markdown]
# ### One timing against the device copy, in the same run
#
# The rung and the device copy of the same bytes, each timed with `lab.measure.timing.measure` (CUDA events,
# cold L2, a median over repetitions) on a headline problem, so the two times come from one run on one GPU.

# %%
if MODE.live:
    big = SOFT.make_problem(seed=0, **params)                     # the headline problem of section 1
    y = cp.empty(big.out_shape, dtype=big.dtype)
    t_rung = timing.measure(lambda i: SOFT.launch(rung, big, y, i), l2="cold")
    t_copy = timing.measure(lambda i: SOFT.launch_ceiling(big, y, i), l2="cold")
    print(f"{big.label}, measured in this run (cold L2, medians):")
    print(f"  rung {rung.key}: {t_rung.median_ms:.4f} ms = {SOFT.throughput(big, t_rung.median_ms):.0f} GB/s")
    print(f"  device copy : {t_copy.median_ms:.4f} ms = {SOFT.throughput(big, t_copy.median_ms):.0f} GB/s")
    print(f"  -> rung {rung.key} reaches {t_copy.median_ms / t_rung.median_ms:.3f} of the device copy")
else:
    print("REPLAY: on a GPU this cell times rung 04 and the device copy on the headline problem of section 1 in "
          "the same run; the replayed fractions are the table of section 5.")

# %% [markdown]
# ---
# ## 5. Softmax, measured
#
# `lab bench softmax` times every rung, the device copy of the same bytes and `cupy_composed` at the headline row
# lengths (each array far past the L2, cold L2), in fp16 and fp32. The table gives each rung's and the baseline's
# fraction of the device copy timed on the same problem, and the path the last rung's launcher took for that
# length.
#
# **Predict first.** Each rung's header predicts its fraction of the copy at named row lengths. Read them, and
# the byte count of section 1, before the table:

# %%
for rung in get_family("softmax").rungs:
    print(f"{rung.key[:2]}: {lesson.prediction_text('softmax', rung.key)}\n")

# %%
if LIVE["softmax"]:
    print(lesson.bandwidth_table(LIVE["softmax"], "softmax"))
    lessons.figure(plots.row_ladder(LIVE["softmax"], "softmax", target=lesson.TARGETS["copy_fraction"],
                                    min_n=lesson.TARGETS["copy_min_n"]))

# %%
print(lesson.status(SOFTMAX, "softmax"))
lesson.bandwidth_table(SOFTMAX, "softmax")

# %%
lesson.show(plots.row_ladder, SOFTMAX, "softmax", target=lesson.TARGETS["copy_fraction"],
            min_n=lesson.TARGETS["copy_min_n"])

# %% [markdown]
# **Reading the bars.** Each group is one row length; each bar is a fraction of the device copy timed on the same
# problem, so the solid line at one is the copy's speed and nothing memory-bound can pass it. Look first at rung
# 01 against section 1's count: above that pessimistic bound, its re-reads came from the L2, as its header argues;
# below it, something other than bytes holds it back (scalar 2-byte accesses, three barriers per row). Then at
# where rung 03 drops back to rung 02's height: the lengths whose rows do not fit its registers (the path column
# of the table says which). Then at the short rows on the left, where a block per row leaves most of its threads
# idle and rung 04's warp per row should pay. The dashed line is the bar this lesson sets for the last rung, from
# the row length it is stated for.

# %%
print(lesson.copy_targets(SOFTMAX, "softmax"))

# %% [markdown]
# The predictions of each rung, held against the same records at the row lengths they name:

# %%
print(lesson.ladder_predictions(SOFTMAX, "softmax"))

# %% [markdown]
# ### Tails
#
# Row lengths stepping by one across 1024, 2048 and 4096 (fp16: eight elements per 16-byte vector). A rung whose
# rows are read in vectors pays a scalar head and tail on every row whose length is not a multiple of the
# vector. Each panel is one run of lengths, the power of two dotted; the table after it groups the lengths by
# `n mod 8` and names the path each launch took.

# %%
if LIVE["softmax"]:
    lessons.figure(plots.tail_by_base(LIVE["softmax"], "softmax"))

# %%
lesson.show(plots.tail_by_base, SOFTMAX, "softmax")

# %% [markdown]
# **Reading the tail.** A flat line says the rung does not care where a row ends. A sawtooth with a period of
# eight lengths is the vector's price: the multiples of eight sit on top, the rest pay a scalar head and tail. A
# step at a power of two is a change of path (a warp per row giving way to a block per row): the launch paths
# printed below the table name it.

# %%
print(lesson.tail_summary(SOFTMAX, "softmax"))

# %% [markdown]
# ---
# ## 6. RMSNorm, measured
#
# The same measurements: the device copy of `x`'s bytes (a norm reads `x` and writes `y`; `w`, read by every
# row, stays in the cache), fp16 and bf16. The count of section 1 holds with two reads for rung 01 and one for
# rungs 02 and 03.
#
# **Predict first**, from the headers:

# %%
for rung in get_family("rmsnorm").rungs:
    print(f"{rung.key[:2]}: {lesson.prediction_text('rmsnorm', rung.key)}\n")

# %%
if LIVE["rmsnorm"]:
    print(lesson.bandwidth_table(LIVE["rmsnorm"], "rmsnorm"))

# %%
print(lesson.status(RMSNORM, "rmsnorm"))
lesson.bandwidth_table(RMSNORM, "rmsnorm")

# %%
lesson.show(plots.row_ladder, RMSNORM, "rmsnorm", target=lesson.TARGETS["copy_fraction"],
            min_n=lesson.TARGETS["copy_min_n"])

# %% [markdown]
# **Reading the bars.** Rung 01 reads the row twice in 2-byte accesses; rung 02 once, in 16-byte packs, so the
# gap between them is the wide loads and the saved read together. Where rung 02 stays near rung 01 (the short
# rows, where most of its block idles) or well under rung 03 (the longest rows, past its registers: the fallback),
# rung 03's sizing by row length should close the gap.

# %%
print(lesson.copy_targets(RMSNORM, "rmsnorm"))

# %%
lesson.show(plots.tail_by_base, RMSNORM, "rmsnorm")

# %% [markdown]
# **Reading the tail.** Here the sawtooth is the access width: rungs 02 and 03 take the widest access (2, 4, 8 or
# 16 bytes) that divides the row and its alignment, so an odd length falls to 2-byte accesses and pays the most,
# one a multiple of four to 8-byte ones, and so on. The launch paths below list the width each length got; rung
# 01, always 2-byte, is flat.

# %%
print(lesson.tail_summary(RMSNORM, "rmsnorm"))

# %% [markdown]
# The headers' predictions against the records:

# %%
print(lesson.ladder_predictions(RMSNORM, "rmsnorm"))

# %% [markdown]
# ---
# ## 7. LayerNorm, measured
#
# LayerNorm reads the same bytes as RMSNorm (plus `b`, from the cache) and does a little more arithmetic per
# element: the mean to subtract, and in rung 01 Welford's division per element. On a memory-bound kernel the
# extra arithmetic should cost nothing once the loads are wide and plentiful; the two ladders side by side say
# whether it does.
#
# **Predict first**, from the headers (the same sources as RMSNorm's):

# %%
for rung in get_family("layernorm").rungs:
    print(f"{rung.key[:2]}: {lesson.prediction_text('layernorm', rung.key)}\n")

# %%
if LIVE["layernorm"]:
    print(lesson.bandwidth_table(LIVE["layernorm"], "layernorm"))

# %%
print(lesson.status(LAYERNORM, "layernorm"))
lesson.bandwidth_table(LAYERNORM, "layernorm")

# %%
lesson.show(plots.row_ladder, LAYERNORM, "layernorm", target=lesson.TARGETS["copy_fraction"],
            min_n=lesson.TARGETS["copy_min_n"])

# %% [markdown]
# **Reading the bars.** Compare them with RMSNorm's, rung by rung: where LayerNorm's rung 01 sits lower, the
# per-element division of Welford's update is on the critical path of a rung that is not yet limited by its
# loads; where rungs 02 and 03 match RMSNorm's, the extra arithmetic hides behind the memory traffic.

# %%
print(lesson.copy_targets(LAYERNORM, "layernorm"))

# %% [markdown]
# The tail, read as RMSNorm's: the same sources pick the same access widths by row length, so the same sawtooth
# should appear; a deeper one here would be LayerNorm's extra arithmetic showing where the loads are narrow.

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
# ## 8. Long rows: one row over a thread-block cluster
#
# At n = 32768 a one-block rung gives a row a whole block (1024 threads for a norm), so an SM holds one row, and
# while that row reduces (shuffles, a block barrier, a second reduction for LayerNorm) nothing on the SM loads. Past
# the registers (n = 65536) it reads the row twice. The cluster rungs (norms 04, softmax 05) split each row over a
# **thread-block cluster** of 2, 4 or 8 blocks: Hopper (sm_90) runs a cluster's blocks at once on one GPC, and each
# block can write the others' shared memory (**distributed shared memory**). Each block holds its slice of the row
# in registers and reduces it as before; then the blocks exchange their partial sums: thread r of every block
# stores the block's partial into slot [own rank] of block r's shared memory, so every block receives all of them,
# and adds the slots in rank order, which gives every block of the row the same bits. Smaller blocks from different
# rows share an SM, so one row's reduction overlaps the others' loads.
#
# The exchange needs a way to know that every partial has landed. Two are built (the knob `EXCHANGE`):
# a **cluster barrier** (`barrier.cluster.arrive.release` / `wait.acquire`) after plain remote stores, or
# **`st.async`** stores that count their bytes on an **mbarrier** in the receiving block, as a TMA load does, so a
# block waits only for its own partials, with no fence. The shared header:

# %%
print(clusters.exchange_source())

# %% [markdown]
# What the two exchanges compile to (the SASS of RMSNorm rung 04 with a cluster of 4, compiled here with NVRTC for
# sm_90: no GPU needed). Count the memory barrier before the arrive and the L1 invalidation after the wait in the
# cluster-barrier build, and the mbarrier operations (`SYNCS`) in the other:

# %%
print(clusters.exchange_sass())

# %% [markdown]
# **Predict first**, from the headers:

# %%
for name, key in (("rmsnorm", "04"), ("softmax", "05")):
    if key in [r.key[:2] for r in get_family(name).rungs]:
        print(f"{name} {key}: {lesson.prediction_text(name, key)}\n")

# %% [markdown]
# The study (`python -m lab.studies.cluster_rows_study`) times, in interleaved rounds on cold L2, the one-block rung,
# the cluster rung as the family builds it, the cluster rung with one knob changed (the other exchange; blocks
# aiming at 128 or 512 threads, so more or fewer blocks a row; for LayerNorm, its two statistics in one exchange or
# two, the STATS knob) and PyTorch's own kernels on the same arrays, each against the device copy timed in the same
# round:

# %%
CLUSTER_STUDY = clusters.load()
print(clusters.cluster_table(CLUSTER_STUDY))

# %%
if CLUSTER_STUDY is not None:
    lessons.figure(clusters.cluster_figure(CLUSTER_STUDY))
    print(clusters.cluster_targets(CLUSTER_STUDY))

# %% [markdown]
# **Reading it.** Where the cluster column passes the one-block column, the split paid for its exchanges; where it
# does not (the shortest rows, a cluster of 2), the one-block rung was already keeping the SM busy. The probe
# columns say whether the defaults are the right ones: a faster probe is a knob to change. `lab.ops` sends rows from
# a length on to the cluster rung where the GPU has clusters (`lab.ops.api.row_rung`), and that threshold comes from
# this table.

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
# - The online softmax turns two reads into one with a rescale: the same statistics, in the same fp32, checked
#   here against the three-pass formula and float64.
# - One read needs the whole row at hand: in registers when it fits, which makes the row length the parameter
#   that picks the kernel (a warp, a block, or two reads).
# - Statistics in fp32, in a form that does not cancel (the online max and sum; Welford or the centered sum), and
#   conventions decided once and checked everywhere (rows of `-inf` give zeros, NaN stays NaN).
# - The fastest path for one row length is not the fastest for another: the tail and the specialized rung's
#   launch paths show where each choice pays.
# - A row too long for one block's registers can be split over a thread-block cluster and still reduced in one
#   kernel: the blocks push their partials into each other's shared memory and add them in one order.
