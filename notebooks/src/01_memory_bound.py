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
# # 01 — The memory-bound ladder: copy and transpose
#
# A copy does no arithmetic: its speed is *bytes moved per second*, and the most it can reach is what
# the GPU's memory system delivers. That makes it the cleanest place to learn the habits every fast
# kernel needs (coalescing, wide accesses, enough bytes in flight, shared-memory tiles without bank
# conflicts) before arithmetic gets in the way. Two ladders:
#
# - **copy** (`y = x`, float32, any length and alignment): four rungs from one-thread-per-element to
#   vectorized and unrolled;
# - **transpose** (`out = in.T`, float32, any shape): five rungs from naive to a shared-memory tile
#   that is padded, then swizzled, then written in whole 32-byte sectors whatever the row length.
#
# Both are measured against the same **ceiling**: the driver's device-to-device copy of the same bytes,
# timed in the same run (notebook 00 explains the method). Two rungs are written out cell by cell, the first
# time their idea appears: copy's rung 03 (the first vectorized rung) and transpose's rung 02 (the first
# shared-memory tile). For each: the byte count that motivates it, the diff, one launch through the family on
# an odd shape, one check against float64, one timing against the device copy in the same run, a prediction
# before the measured answer, and how to read the plot. The other rungs repeat those steps, so they use one
# call (`lessons.RungWalk`) for them (the kernel's header and the diff from the previous rung, the compile
# report, the correctness check, the measurement, the plots, the prediction's ranges against the records),
# then what they show against the header's prediction. Every figure quoted is computed from the records in a
# cell; none is typed in.

# %% [markdown]
# ## What you will learn
#
# - how to count what a memory-bound kernel must move (`8 n` bytes for a copy, `8 · rows · cols` for a
#   transpose) and what it actually moves (32-byte sectors, memory instructions, bytes in flight);
# - why coalescing, 16-byte `float4` accesses and more bytes in flight per thread (Little's law) bring a copy
#   to the device copy's bandwidth;
# - how a shared-memory tile makes both sides of a transpose coalesced, why its column reads conflict on the
#   32 banks, and how padding or an XOR swizzle removes the conflict;
# - how to launch one rung through its family on an odd shape, check it against float64 and time it against
#   the device copy in the same run;
# - how tails and row alignment (32-byte sectors) show up as a sawtooth, and how writing whole sectors removes it.

# %%
import math

import numpy as np

from lab import lessons
from lab.core import device
from lab.families import copy as copy_family
from lab.families import get_family
from lab.lessons import knob_records, plots
from lab.measure import bench, timing
from lab.studies import alignment, anomalies, report

# %% [markdown]
# ## Live or replay

# %%
MODE = lessons.mode()
print(lessons.mode_banner("copy", "transpose", current=MODE))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for `sm_90` (the
# reference H200's) otherwise.

# %%
ARCH = lessons.compile_arch(MODE)
print(f"compile reports for sm_{ARCH}")

# %% [markdown]
# In LIVE mode the measurement plan is reduced so the notebook runs in a minute or two (`lab bench
# FAMILY` runs the full plan): headline and sweep sizes with `quick` (every third size, shorter
# timings), and the tail sizes at *every* length with a shorter minimum time (the quick plan keeps
# every eighth length only, which would hide a sawtooth whose period is the vector width).

# %%
PLANS = (bench.BenchPlan(kinds=("headline", "sweep"), quick=True),
         bench.BenchPlan(kinds=("tail",), min_time_ms=5.0))
print("LIVE plans:", *PLANS, sep="\n  ")

# %% [markdown]
# ---
# ## Part 1 — copy: `y = x`
#
# Every byte is read once and written once, so `bytes_moved = 8 n` for `n` floats, and a rung can at
# best match the device copy.

# %%
COPY = get_family("copy")
print(COPY.title, "|", ", ".join(f"{r.key}: {r.title}" for r in COPY.rungs))

# %% [markdown]
# ### Correct first
#
# Before anything is timed, every rung runs through `lab.measure.verify.check_rung` on a spread of the family's
# check cases (lengths around vector and block boundaries, primes, starts that break 16-byte alignment):
# three input distributions, NaN-poisoned outputs, guard zones around the output, and a repeat run to
# catch races. LIVE only; a failure stops the notebook here, before any measurement.

# %%
COPY_CASES = lessons.few_cases(COPY)
COPY_CHECKS = lessons.check_ladder(COPY, COPY_CASES) if MODE.live else None
print(f"{len(COPY_CASES)} cases:", ", ".join(str(c) for c in COPY_CASES))

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)
#
# One `lab.measure.bench.run` times the ceiling and all four rungs on every problem: the headline sizes (cold
# L2), a sweep of sizes from a few KiB to GiBs (cold and warm L2), and the tail sizes (stepping by one).

# %%
COPY_RS = lessons.ladder_records(COPY, MODE, *PLANS)
print(lessons.records_status(COPY_RS, "copy"))

# %% [markdown]
# Every rung below but rung 03 (written out cell by cell) goes through the same walk, one call per rung, in
# this order: the source (rung 01)
# or the diff from the previous rung, whose opening comment is the kernel's header (what the rung is,
# what it needs and what it should reach); the header's prediction and the knobs the ladder builds it
# with; the compile report (`lab.core.build.compile_report`: registers, static shared memory, spills, and the
# notable SASS instructions in the binary NVRTC built) and what changed in it; the checks; the
# measurement at the headline sizes (the median with its p10–p90 spread, the throughput, and the
# fraction of the device copy measured on the same problem in the same run); bandwidth against size;
# the ladder so far; and each numeric range of the prediction against the records.
#
# Bandwidth against size: the rung in its colour (solid cold L2, dashed warm L2), the device copy in
# black (dashed cold, dotted warm), the L2 size as a grey dash-dot line. Read it left to right:
# **launch-bound** (the time is a constant launch cost, so throughput grows with size), then the sizes
# that fit in L2, where warm runs read from L2 but one timed launch still carries the fixed cost of a few
# microseconds, so the warm curve stays under the DRAM plateau (notebook 00, section 6b, measures the L2's
# real rate with graph-timed launches), and the **DRAM plateau** (cold and warm meet; this is the regime
# the prediction is about).

# %%
COPY_WALK = lessons.RungWalk(COPY, ARCH, COPY_RS, COPY_CHECKS)

# %% [markdown]
# ### Rung 01 — naive: one thread per element
#
# The kernel everyone writes first. Each thread copies one float; consecutive threads touch consecutive
# addresses, so every warp's load is one fully used 128-byte request: it is *coalesced*. In the compile
# report: one 4-byte load (`LDG`) and one store (`STG`).

# %%
COPY_01 = COPY_WALK("01")

# %% [markdown]
# **What it shows against the prediction.** The header predicts a large fraction of the device copy
# already, limited by one 4-byte load in flight per thread and by an enormous grid. The walk above
# printed the prediction; the cell below gives the measured ratio at the headline sizes and across the
# DRAM regime of the sweep; the gap to the ceiling is what the next three rungs try to close.

# %%
print(lessons.ratio(COPY_RS, COPY, "01", "ceiling"))
print(lessons.ratio(COPY_RS, COPY, "01", "ceiling", kind="sweep", regime="hbm"))

# %% [markdown]
# ### Rung 02 — grid-stride loop
#
# Instead of one thread per element (a grid that grows with `n`), a fixed grid of a few blocks per SM
# loops over the array with a stride of the whole grid. Block launch and retirement are paid a few
# hundred times instead of millions, and the same launch works for any `n`.
#
# The loop costs registers (64-bit indices and the stride) and the compiler unrolls it, so the load and
# store counts in the SASS grow; the work per element does not.

# %%
COPY_02 = COPY_WALK("02")

# %% [markdown]
# **What it shows against the prediction.** The prediction is about the same as rung 01 at DRAM sizes
# (both keep one 4-byte load in flight per thread) and slightly better in the middle of the range. The
# ratios below compare rung 02 with rung 01 on the same problems: at the headline sizes, across the DRAM
# regime (cold), and across the L2-resident regime (warm), where launch and block-scheduling cost
# matter more.

# %%
print(lessons.ratio(COPY_RS, COPY, "02", "01"))
print(lessons.ratio(COPY_RS, COPY, "02", "01", kind="sweep", regime="hbm"))
print(lessons.ratio(COPY_RS, COPY, "02", "01", kind="sweep", l2="warm", regime="l2"))

# %% [markdown]
# ### Rung 03 — 16-byte vectorized accesses
#
# This rung is written out step by step; the walk's one-line call comes back for rung 04.
#
# The body of the array moves as `float4`: one 16-byte load and one 16-byte store per thread per step,
# instead of four 4-byte ones. A `float4` access must be 16-byte aligned, so the rung copies a short
# scalar head until both pointers are aligned, and a scalar tail of fewer than four elements; when the
# two pointers are misaligned by different amounts it falls back to scalar throughout (correct, slow).
#
# **The count that motivates it.** The bytes do not change: a copy of `n` floats moves `8 n` bytes whatever the
# rung. What changes is how many memory instructions carry them, and how many bytes each thread has in flight.
# A warp-wide `LDG` of 4 bytes per thread moves 128 bytes; of 16 bytes per thread, 512. And by Little's law
# (bytes in flight = bandwidth × latency), the bytes the whole GPU has in flight, divided by the bandwidth to
# reach, is how long each load may take to come back. The cell counts both for the larger headline copy, with
# the grid-stride grid of rungs 02 and 03 (`BLOCKS_PER_SM` blocks of `BLOCK` threads on every SM) and the
# header's model of one access in flight per thread (the compiler's unrolling of the loop can add more).

# %%
n_head = 1 << 28  # the larger headline copy: 1 GiB per array
# The SMs of this GPU (LIVE) or of the records' GPU (REPLAY); the device copy's rate from the records.
sm_count = device.current().sm_count if MODE.live else (COPY_RS.provenance.get("sm_count", 0) if COPY_RS else 0)
threads = sm_count * copy_family.BLOCKS_PER_SM * copy_family.BLOCK  # the grid-stride grid, all resident
copy_ceiling = max((r.value for r in COPY_RS.where(kind="headline", rung=COPY.ceiling_name)), default=0.0) \
    if COPY_RS else 0.0
print(f"bytes moved: 2 * 4 * {n_head} = {2 * 4 * n_head / 2**30:.0f} GiB, for every rung")
print(f"threads of the grid-stride grid: {sm_count} SMs * {copy_family.BLOCKS_PER_SM} blocks * "
      f"{copy_family.BLOCK} = {threads}" if sm_count else "(no GPU and no records: the SM count is unknown here)")
for key, access in (("02", 4), ("03", 16)):
    per_warp = 32 * access  # bytes one warp-wide load (or store) moves
    instructions = 2 * (4 * n_head) // per_warp  # warp-wide loads plus stores for the whole array
    line = f"rung {key}: {access:2d} B per thread -> {per_warp} B per warp instruction, {instructions:,} warp-wide " \
           "loads and stores"
    if sm_count:
        in_flight = threads * access  # one access in flight per thread
        line += f" ({instructions // sm_count:,} per SM); {in_flight / 2**20:.1f} MiB in flight"
        if copy_ceiling:
            line += f" -> each load may take {in_flight / (copy_ceiling * 1e9) * 1e9:.0f} ns at the device copy's rate"
    print(line)
if copy_ceiling:
    print(f"(the device copy's rate: {copy_ceiling:.0f} GB/s, its best headline figure, {COPY_RS.label()})")

# %% [markdown]
# A DRAM access takes hundreds of nanoseconds, more under load. Compare that with the last column: with
# 4 bytes per thread in flight the loads would have to come back faster than DRAM answers to keep up with the
# device copy; with 16 bytes, four times more slack. And four times fewer instructions carry the same bytes.
# It is a model, and a generous one: a thread has a load in flight only part of the time (between loads it
# stores and computes the next address), which is why rung 04 puts several loads in flight per thread.
#
# **The diff** from rung 02, header first (the header says what changed, why, and what it should reach):

# %%
lessons.show_diff(COPY, "03")

# %% [markdown]
# In the compile report the vector body shows up as 128-bit loads and stores (`LDG.128`, `STG.128`); the scalar
# head and tail keep a few 4-byte ones. The line under the table is what changed against rung 02's binary.

# %%
COPY_03 = lessons.compile_pair(COPY, "03", ARCH)
print(lessons.instruction_delta(COPY_03))
lessons.md(report.compile_markdown(COPY_03))

# %% [markdown]
# **One launch through the family**, on a prime length: no vector width divides it, so the scalar tail runs.
# The output is allocated full of NaN, so an element the kernel does not write stays NaN. The family's
# `geometry` says how it launches the rung: the grid, the block, and the arguments after `x` and `y`
# (`n` and the scalar head). LIVE only: it needs a GPU.

# %%
COPY_RUNG = COPY.rung("03")
n = 1_000_003
print(f"n = {n} is prime: {all(n % p for p in range(2, math.isqrt(n) + 1))}; n mod 4 = {n % 4}")
if MODE.live:
    import cupy

    copy_problem = COPY.make_problem(seed=3, n=n)
    copy_out = cupy.full(copy_problem.out_shape, cupy.nan, dtype=copy_problem.dtype)  # unwritten stays NaN
    COPY.launch(COPY_RUNG, copy_problem, copy_out)
    cupy.cuda.get_current_stream().synchronize()
    grid, block, args = COPY.geometry(COPY_RUNG, copy_problem.inputs["x"][0], copy_out)
    head = int(args[-1])
    body = (n - head) // 4
    print(f"{COPY_RUNG.key} on {copy_problem.label}: grid {grid}, block {block}; scalar head {head}, "
          f"{body} float4 in the body, scalar tail {n - head - 4 * body}")
else:
    print("(On a GPU this cell launches rung 03 once on this n into a NaN-filled output and prints its grid, "
          "block, head, body and tail. A single launch is not recorded; the rung's recorded timings follow below.)")

# %% [markdown]
# **One check against float64.** The family's reference is the input in float64, and its error bound for a copy
# is zero: every element must come back bit for bit. The cell prints the largest error against the bound.

# %%
if MODE.live:
    ref = COPY.reference(copy_problem)  # float64, on the host
    bound = COPY.error_bound(copy_problem, ref)  # 0.0: data movement is bit-exact
    got = copy_out.get().astype(np.float64)
    error = np.abs(got - ref)
    unwritten = int(np.isnan(got).sum())
    print(f"largest |error| {np.nanmax(error):g} against the bound {np.max(bound):g}; {unwritten} elements still "
          f"NaN -> {'PASS' if unwritten == 0 and np.all(error <= bound) else 'FAIL'}")
else:
    print("(On a GPU this cell compares that output with COPY.reference, element by element. Check results "
          "are not recorded for replay: the next cell says what the ladder's checks do.)")

# %% [markdown]
# That is one case. `lab.measure.verify.check_rung` runs the full list (misaligned starts that exercise the
# head, the tail and the scalar fallback; lengths around vector and block boundaries; guard zones around the
# output; three input distributions; a repeat run to catch races). The checks at the top ran it on a spread
# of those cases:

# %%
print(lessons.check_summary(COPY_CHECKS, COPY, "03"))

# %% [markdown]
# ### Predict first
#
# Before the measurement: how much faster than rung 02 should rung 03 be at DRAM sizes, and how close to the
# device copy? The header's prediction, and the knobs the ladder builds it with:

# %%
print(lessons.prediction(COPY, "03"))
print(lessons.knobs_line(COPY, "03"))

# %% [markdown]
# **One timing against the device copy, in the same run**: `lab.measure.timing.measure` (notebook 00, section 5)
# on rung 02, rung 03 and the device copy, all cold L2, on one problem: a prime length near the smaller
# headline size. LIVE only.

# %%
if MODE.live:
    big_n = 67_108_859  # prime, just under 2^26: 256 MiB per array
    big = COPY.make_problem(seed=4, n=big_n)
    big_out = cupy.empty(big.out_shape, big.dtype)
    flusher = timing.L2Flusher()
    timed = {
        "02_grid_stride": timing.measure(lambda i: COPY.launch(COPY.rung("02"), big, big_out, i), l2="cold",
                                         flusher=flusher),
        "03_vectorized": timing.measure(lambda i: COPY.launch(COPY_RUNG, big, big_out, i), l2="cold",
                                        flusher=flusher),
        "device copy": timing.measure(lambda i: COPY.launch_ceiling(big, big_out, i), l2="cold", flusher=flusher),
    }
    for name, t in timed.items():
        print(f"{name:15s} {big.label}: median {t.median_ms:.4f} ms (p10-p90 {t.p10_ms:.4f}-{t.p90_ms:.4f}) -> "
              f"{big.bytes_moved / (t.median_ms * 1e-3) / 1e9:.0f} GB/s")
    print(f"03 / device copy: {timed['device copy'].median_ms / timed['03_vectorized'].median_ms:.3f}x; "
          f"03 / 02: {timed['02_grid_stride'].median_ms / timed['03_vectorized'].median_ms:.3f}x (same run)")
else:
    print("(On a GPU this cell times rungs 02 and 03 and the device copy on n = 67108859 in this run. The "
          "replayed headline records of rung 03, each with the device copy timed beside it, are these:)")
    print(lessons.headline_summary(COPY_RS, COPY, "03"))

# %% [markdown]
# **What it shows against the prediction.** Fewer memory instructions for the same bytes should help a
# little at DRAM sizes and more where the data sits in L2 (there, issuing instructions, not DRAM, is the
# limit). The ratios compare rung 03 with rung 02 in both regimes, then the prediction's range is held against
# the headline records.

# %%
print(lessons.ratio(COPY_RS, COPY, "03", "02"))
print(lessons.ratio(COPY_RS, COPY, "03", "02", kind="sweep", regime="hbm"))
print(lessons.ratio(COPY_RS, COPY, "03", "02", kind="sweep", l2="warm", regime="l2"))
print(lessons.prediction_check(COPY_RS, COPY, "03"))

# %% [markdown]
# **Reading the plot.** Bandwidth against bytes moved, rung 03 in its colour and the device copy in black. Look
# at two places. Right of the grey L2 line, where the solid (cold) line of the rung levels off under the black
# dashed one: that gap is what the ratio against the device copy measures, and what rung 04 closes. Left of it,
# the rung's dashed (warm) line tracks the dotted black one: with the data in L2, a single timed launch is
# limited by its fixed cost as much as by the kernel (notebook 00, section 6b), so the gain over rung 02 there is
# small on this scale; the ratio for the L2 regime above gives it as a number. Compare this panel with rung 02's
# above. The bars after it are the ladder so far at the smaller headline size.

# %%
lessons.plot(plots.bandwidth_vs_bytes, lessons.select(COPY_RS, COPY, ["03"]), "copy")

# %%
lessons.plot(plots.ladder_bars, lessons.so_far(COPY_RS, COPY, "03"), "copy")

# %% [markdown]
# ### Rung 04 — unrolled: several 16-byte loads in flight per thread, one pass over the array
#
# Little's law: bandwidth = bytes in flight / latency. DRAM latency is hundreds of nanoseconds, so
# reaching the plateau takes megabytes in flight across the GPU. Rung 03 keeps one `float4` per thread
# in flight; rung 04 starts `UNROLL` independent loads (each still coalesced across the warp) before
# any store. It also drops the grid-stride loop: the grid covers the array once, one chunk per block,
# so no last partial round of blocks leaves SMs idle. Which of the two changes mattered is a question for
# the knob sweep's records, printed after the measurement.
#
# The values in flight live in registers (`UNROLL` of them per thread): the compile report shows whether
# that stays free of spills.

# %%
COPY_04 = COPY_WALK("04")

# %% [markdown]
# **What it shows against the prediction.** The claim is that rung 04 reaches the device copy at large
# sizes, where rung 03 sits a little under it. The cell prints rung 04 against the ceiling and against
# rung 03, on the same problems.

# %%
print(lessons.ratio(COPY_RS, COPY, "04", "ceiling"))
print(lessons.ratio(COPY_RS, COPY, "04", "ceiling", kind="sweep", regime="hbm"))
print(lessons.ratio(COPY_RS, COPY, "04", "03"))

# %% [markdown]
# The knob sweep (`scripts/knob_sweep.py`, recorded in `knobs.json`) timed rung 04 under every combination
# of `UNROLL`, the block size and evict-first hints (`STREAMING`), always with one chunk per block. Read
# down the list: how far apart the `UNROLL` values are at the same block size says how much the extra
# bytes in flight bought, and the rows with `STREAMING=1` what the cache hints cost. The family's
# defaults are the knob line printed above.

# %%
print(knob_records.table("copy", "04_unrolled"))

# %% [markdown]
# ### Tails: `n` stepping by one
#
# The tail records time copies of about 2^24 floats at every length across several vector and block
# boundaries. Each array is 64 MiB, so the working set (input plus output) is 128 MiB, about twice the
# L2: "warm" here means only that nothing is flushed between launches; part of the data may still be in
# L2 from the launch before. A kernel that handles tails badly shows a **sawtooth**: a dip at every
# length that is not a multiple of its vector width. A flat line means the scalar head and tail cost
# nothing measurable.

# %%
lessons.plot(plots.tail, COPY_RS, "copy")

# %%
print(lessons.tail_sawtooth(COPY_RS, COPY))

# %% [markdown]
# The plot shows a small even/odd **zigzag** in rungs 01 and 04, in opposite phases, which no vector
# width explains (rung 01 has none; rung 04's is 4). `lab.measure.bench` allocates a fresh pair of buffers for
# every length, so consecutive lengths also differ in where their buffers lie. `lab.studies.anomalies` times 16
# lengths three ways: in ascending order (as the bench does), in descending order, and with one pair of
# buffers reused for every length. The last column is the median at odd `n` over the median at even `n`
# (1.000: no zigzag). LIVE: measured in this run; REPLAY: the reference GPU's `l2_probes.json`.

# %%
TAIL_PROBES = anomalies.lesson_records(MODE.live, "tail_order")
print(anomalies.tail_parity(TAIL_PROBES))

# %% [markdown]
# How to read it: a zigzag that came from the kernels' tail handling would show the same odd/even ratio in
# every condition and every run. One that follows where the allocator placed each pair of buffers (which
# memory channels and L2 slices they map to) changes with the order of the runs and with reused buffers.
# The line below gives the largest distance from one and where it occurs. On the reference H200 every ratio
# stays close to one, and which conditions show a zigzag, and in which phase, changes from run to run
# (compare the table with the committed `l2_probes.json`, or run the cell twice). A zigzag that changes
# phase between runs over the same lengths is not a property of `n`: it is the size of placement noise,
# and the copy's tail handling itself costs nothing measurable.

# %%
print(anomalies.tail_parity_spread(TAIL_PROBES))

# %% [markdown]
# ### The copy ladder, all together

# %%
lessons.headline_table(COPY_RS, "copy")

# %% [markdown]
# ---
# ## Part 2 — transpose: `out = in.T`
#
# A transpose moves the same bytes as a copy (`bytes_moved = 8 · rows · cols`) and is measured against
# the same device copy, but one side of it walks memory with a stride: reading rows means writing
# columns. The ladder is about making *both* sides coalesced. A library baseline is timed beside it:
# CuPy's own `cp.copyto(out, x.T)`.

# %%
TRANSPOSE = get_family("transpose")
print(TRANSPOSE.title, "|", ", ".join(f"{r.key}: {r.title}" for r in TRANSPOSE.rungs))

# %% [markdown]
# ### Correct first
#
# Shapes with sides of one, tile multiples plus and minus one, primes, skinny matrices: every rung,
# LIVE only.

# %%
TRANSPOSE_CASES = lessons.few_cases(TRANSPOSE)
TRANSPOSE_CHECKS = lessons.check_ladder(TRANSPOSE, TRANSPOSE_CASES) if MODE.live else None
print(f"{len(TRANSPOSE_CASES)} cases:", ", ".join(str(c) for c in TRANSPOSE_CASES))

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)

# %%
TRANSPOSE_RS = lessons.ladder_records(TRANSPOSE, MODE, *PLANS)
print(lessons.records_status(TRANSPOSE_RS, "transpose"))

# %% [markdown]
# Shared-memory **bank conflicts** decide rungs 02 to 04, and time alone cannot show them: Nsight
# Compute's counters can. LIVE with `ncu` installed: one launch of each rung is profiled in this run. Otherwise
# the reference GPU's profile (`transpose_profile.json`) is replayed, if present.

# %%
TRANSPOSE_PROFILE = lessons.profile_records(TRANSPOSE, MODE)
print(lessons.profile_status(TRANSPOSE_PROFILE, "transpose"))

# %% [markdown]
# The transpose rungs but rung 02 (written out cell by cell) go through the same walk as the copy's, with one
# more line after the measurement: the rung's shared-load bank conflicts from that profile, as a share of all its
# shared-load wavefronts.

# %%
TRANSPOSE_WALK = lessons.RungWalk(TRANSPOSE, ARCH, TRANSPOSE_RS, TRANSPOSE_CHECKS, profile=TRANSPOSE_PROFILE)

# %% [markdown]
# ### Rung 01 — naive: straight from global memory
#
# A block of `TILE × BLOCK_ROWS` threads walks a `TILE × TILE` patch. A warp reads one row segment of
# the input (coalesced) and writes it as a column of the output: its stores land in as many different
# output rows, each in its own 32-byte sector of which the warp uses one float.

# %%
TRANSPOSE_01 = TRANSPOSE_WALK("01")

# %% [markdown]
# **What it shows against the prediction.** Uncoalesced stores waste most of every sector written, but
# L2 merges part of the waste before it reaches DRAM, so the header predicts a fraction of the copy
# well above the naive sector arithmetic. The warm, L2-resident part of the sweep is where the merging
# helps most; compare the two regimes below.

# %%
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "01", "ceiling"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "01", "ceiling", kind="sweep", regime="hbm"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "01", "ceiling", kind="sweep", l2="warm", regime="l2"))

# %% [markdown]
# ### Rung 02 — a shared-memory tile
#
# This rung is written out step by step, as copy's rung 03 was; the walk's one-line call comes back for rung 03.
#
# The block first reads its `TILE × TILE` patch row by row into shared memory (coalesced), waits at a
# barrier, then writes the transposed patch row by row (coalesced too), reading shared memory down a
# column. Global memory is happy on both sides in this rung; shared memory is not. Shared memory has 32 banks,
# one 4-byte word each, and a `float[TILE][TILE]` tile's rows are `TILE` words long, a multiple of 32
# here (the ladder launches it with the knobs printed below): a whole column sits in one bank, so the
# warp's 32 reads down a column are served one after another, a 32-way **bank conflict**.
#
# **The count that motivates it.** The bytes a transpose must move are the copy's: `8 · rows · cols`. What rung
# 01 moves through L2 is more: its warp's 32 stores land in 32 output rows, so each 4-byte store occupies a
# 32-byte sector of its own. Rung 02's warp stores 32 consecutive floats of one output row: 128 bytes, four
# whole sectors. The cell does the sums for the first non-square headline shape, then the bank arithmetic of
# the tile: which bank each of a warp's 32 threads reads when it walks down one column of the tile.

# %%
TR_RUNG = TRANSPOSE.rung("02")
tile = dict(TR_RUNG.spec.knobs)["TILE"]
rows, cols = 8191, 8193  # a headline shape: output rows of 8191 floats, not a multiple of 8
useful = 2 * 4 * rows * cols  # read every element once, write it once
sector = 32  # bytes: the unit in which L2 and DRAM move data
rung01_writes = rows * cols * sector  # one sector per 4-byte store
rung02_writes = rows * cols * 4  # whole sectors: 4 bytes per element (plus split sectors at row ends)
print(f"bytes a transpose must move: 2 * 4 * {rows} * {cols} = {useful / 2**20:.0f} MiB")
print(f"sector bytes written, rung 01: {rows} * {cols} * {sector} = {rung01_writes / 2**20:.0f} MiB "
      f"({rung01_writes // (rows * cols * 4)} times the useful {rows * cols * 4 / 2**20:.0f} MiB)")
print(f"sector bytes written, rung 02: {rows} * {cols} * 4 = {rung02_writes / 2**20:.0f} MiB")
# Thread tx of a warp reads tile[tx][k]: the word at tx * row_stride + k, in bank (word mod 32).
for name, row_stride in ((f"rung 02, float[{tile}][{tile}]", tile), (f"rung 03, float[{tile}][{tile} + 1]", tile + 1)):
    banks = {(tx * row_stride + 0) % 32 for tx in range(32)}
    print(f"{name}: a warp's column read touches {len(banks)} distinct bank(s) -> "
          + ("conflict-free" if len(banks) == 32 else f"{32 // len(banks)}-way conflict"))

# %% [markdown]
# So rung 02 removes the write waste of rung 01 and pays for it in shared memory: every column read is
# replayed once per thread of the warp. The padded tile of rung 03 (the second line) is the fix, next.
#
# **The diff** from rung 01, header first:

# %%
lessons.show_diff(TRANSPOSE, "02")

# %% [markdown]
# The compile report shows the tile as static shared memory, the shared loads and stores (`LDS`,
# `STS`) and the barrier (`BAR`):

# %%
TRANSPOSE_02 = lessons.compile_pair(TRANSPOSE, "02", ARCH)
print(lessons.instruction_delta(TRANSPOSE_02))
lessons.md(report.compile_markdown(TRANSPOSE_02))

# %% [markdown]
# **One launch through the family**, on a shape where neither side is a multiple of the tile: the last tile
# row and column are partial, so the bounds checks in both loops matter. The output is allocated full of NaN.
# LIVE only.

# %%
tr_rows, tr_cols = 1000, 1003
grid = (-(-tr_cols // tile), -(-tr_rows // tile))  # ceil(cols / TILE) tile columns, ceil(rows / TILE) tile rows
print(f"{tr_rows}×{tr_cols}: grid {grid} of {tile}x{dict(TR_RUNG.spec.knobs)['BLOCK_ROWS']} threads; the last "
      f"tile column holds {tr_cols - (grid[0] - 1) * tile} of {tile} columns, the last tile row "
      f"{tr_rows - (grid[1] - 1) * tile} of {tile} rows")
if MODE.live:
    import cupy

    tr_problem = TRANSPOSE.make_problem(seed=5, rows=tr_rows, cols=tr_cols)
    tr_out = cupy.full(tr_problem.out_shape, cupy.nan, dtype=tr_problem.dtype)  # unwritten stays NaN
    TRANSPOSE.launch(TR_RUNG, tr_problem, tr_out)
    cupy.cuda.get_current_stream().synchronize()
    print(f"{TR_RUNG.key} on {tr_problem.label}: output shape {tr_out.shape}, launched on the family's grid "
          f"{TRANSPOSE.geometry(TR_RUNG, tr_problem.inputs['x'][0], tr_out)[0]}")
else:
    print("(On a GPU this cell launches rung 02 once on this shape into a NaN-filled output. A single launch is "
          "not recorded; the rung's recorded timings follow below.)")

# %% [markdown]
# **One check against float64**: the reference is the input transposed in float64, and the bound is zero.

# %%
if MODE.live:
    ref = TRANSPOSE.reference(tr_problem)  # (cols, rows), float64, on the host
    bound = TRANSPOSE.error_bound(tr_problem, ref)  # 0.0: data movement is bit-exact
    got = tr_out.get().astype(np.float64)
    error = np.abs(got - ref)
    unwritten = int(np.isnan(got).sum())
    print(f"largest |error| {np.nanmax(error):g} against the bound {np.max(bound):g}; {unwritten} elements still "
          f"NaN -> {'PASS' if unwritten == 0 and np.all(error <= bound) else 'FAIL'}")
else:
    print("(On a GPU this cell compares that output with TRANSPOSE.reference, element by element. Check results "
          "are not recorded for replay: the next cell says what the ladder's checks do.)")

# %% [markdown]
# `lab.measure.verify.check_rung` runs the family's whole case list (sides of one, tile multiples plus and minus
# one, primes, skinny matrices; guard zones; three input distributions; a repeat run). The checks above ran it on
# a spread of those cases:

# %%
print(lessons.check_summary(TRANSPOSE_CHECKS, TRANSPOSE, "02"))

# %% [markdown]
# ### Predict first
#
# Where should rung 02 land: how far above rung 01, how far below the device copy? The header's prediction and
# the knobs:

# %%
print(lessons.prediction(TRANSPOSE, "02"))
print(lessons.knobs_line(TRANSPOSE, "02"))

# %% [markdown]
# **One timing against the device copy, in the same run**: rungs 01 and 02 and the device copy of the same
# bytes, cold L2, on the 8191×8193 headline shape of the count above. LIVE only.

# %%
if MODE.live:
    big = TRANSPOSE.make_problem(seed=6, rows=rows, cols=cols)
    big_out = cupy.empty(big.out_shape, big.dtype)
    flusher = timing.L2Flusher()
    timed = {
        "01_naive": timing.measure(lambda i: TRANSPOSE.launch(TRANSPOSE.rung("01"), big, big_out, i), l2="cold",
                                   flusher=flusher),
        "02_smem_tiled": timing.measure(lambda i: TRANSPOSE.launch(TR_RUNG, big, big_out, i), l2="cold",
                                        flusher=flusher),
        "device copy": timing.measure(lambda i: TRANSPOSE.launch_ceiling(big, big_out, i), l2="cold",
                                      flusher=flusher),
    }
    for name, t in timed.items():
        print(f"{name:14s} {big.label}: median {t.median_ms:.4f} ms (p10-p90 {t.p10_ms:.4f}-{t.p90_ms:.4f}) -> "
              f"{big.bytes_moved / (t.median_ms * 1e-3) / 1e9:.0f} GB/s")
    print(f"02 / device copy: {timed['device copy'].median_ms / timed['02_smem_tiled'].median_ms:.3f}x; "
          f"02 / 01: {timed['01_naive'].median_ms / timed['02_smem_tiled'].median_ms:.3f}x (same run)")
else:
    print("(On a GPU this cell times rungs 01 and 02 and the device copy on 8191x8193 in this run. The replayed "
          "headline records of rung 02, each with the device copy timed beside it, are these:)")
    print(lessons.headline_summary(TRANSPOSE_RS, TRANSPOSE, "02"))

# %% [markdown]
# **What it shows against the prediction.** The prediction: above rung 01 (full sectors are written
# in this rung), still short of the ceiling (every shared-memory column read is replayed). The profile's count of
# those replays, the bank conflicts of the shared loads, comes first; the ratios place the rung between
# rung 01 and the ceiling; the last lines hold the prediction against the headline records.

# %%
if TRANSPOSE_PROFILE is not None:
    print("\n".join(lessons.profile_value(TRANSPOSE_PROFILE, TRANSPOSE, "02", m)
                    for m in lessons.conflict_metrics(TRANSPOSE_PROFILE)))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "01"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "ceiling"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "ceiling", kind="sweep", regime="hbm"))
print(lessons.prediction_check(TRANSPOSE_RS, TRANSPOSE, "02"))

# %% [markdown]
# **Reading the plot.** Rung 02 in its colour against the device copy in black. Two things to see. From the L2
# size on, the rung's solid line sits under the black dashed one by a roughly constant factor: a cost paid per
# element, which is what a replayed shared-memory read is, not a cost paid once per launch (that would fade with
# size). And left of the L2 line the rung's warm (dashed) line rises little above its cold one, while the device
# copy gains a lot from a warm L2: where the data comes from is not the limit; something inside the SM is. In
# the bars below, the step from rung 01 up to rung 02 is the write waste removed; the gap left to the device copy
# is the bank conflict, which rung 03 removes.

# %%
lessons.plot(plots.bandwidth_vs_bytes, lessons.select(TRANSPOSE_RS, TRANSPOSE, ["02"]), "transpose")

# %%
lessons.plot(plots.ladder_bars, lessons.so_far(TRANSPOSE_RS, TRANSPOSE, "02"), "transpose")

# %% [markdown]
# ### Rung 03 — padding: one extra word per tile row
#
# `float tile[TILE][TILE + 1]`: the row stride becomes `TILE + 1` words, one more than a multiple of
# 32, so walking down a column steps through the banks one at a time and the warp's 32 reads land in
# 32 different banks. The cost is one wasted word per tile row of shared memory.

# %%
TRANSPOSE_03 = TRANSPOSE_WALK("03")

# %% [markdown]
# **What it shows against the prediction.** Two claims: the bank conflicts vanish (the profile line
# above, against rung 02's), and the time lands close to the device copy. The remaining gap, if any, is
# the barrier and the short per-thread work.

# %%
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "ceiling"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "ceiling", kind="sweep", regime="hbm"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "02"))

# %% [markdown]
# ### Rung 04 — an XOR swizzle instead of padding
#
# The tile is `float[TILE][TILE]` again, but element `(row, col)` is stored at column `col ^ row`. In a
# row that is a permutation (row writes stay conflict-free); down a column the stored columns are all
# different (column reads are conflict-free too). Same effect as padding, no wasted words, and addresses
# stay 16-byte aligned, which the wide shared-memory accesses of the GEMM ladders will need.
#
# In the compile report the shared-memory footprint returns to rung 02's; the XOR costs a few integer
# instructions.

# %%
TRANSPOSE_04 = TRANSPOSE_WALK("04")

# %% [markdown]
# **What it shows against the prediction.** The prediction: the same speed as rung 03 within noise, and
# no bank conflicts. "Within noise" is judged against the p10–p90 spreads printed in the two rungs'
# measurement lines: a ratio whose distance from one is smaller than those spreads is no difference at
# all; a larger one is a real gap that the prediction did not expect.

# %%
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "03"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "03", kind="sweep", regime="hbm"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "ceiling"))

# %% [markdown]
# Rung 04 runs with rung 03's knobs (the knob lines above print both), so the ratios above measure the
# swizzle alone. The knob sweep once chose a different `BLOCK_ROWS` for rung 04; the variant records time
# rung 04 both ways beside rung 03, on the same problems in one run, so that the two causes can be told
# apart: the first ratio is the swizzle at equal knobs, the second what `BLOCK_ROWS = 8` changes for the
# swizzled tile (time at 4 over time at 8: above one, 8 is faster). LIVE: measured in this run on two shapes;
# REPLAY: the reference GPU's `transpose_variants.json`.

# %%
VARIANTS = alignment.lesson_records(MODE.live)
print(alignment.rung04_split(VARIANTS))

# %% [markdown]
# ### Bank conflicts, all rungs
#
# Nsight Compute's count of shared-load bank conflicts for one launch of each rung. Rung 01 uses no
# shared memory; rung 02 is predicted to conflict on every column read, rungs 03 and 04 on none. The
# per-rung lines above give each count as a share of all shared-load wavefronts, which is the figure to
# hold against the prediction: a residue that is a small share is not the 32-way replay of rung 02.

# %%
lessons.profile_plot(TRANSPOSE_PROFILE, "transpose")

# %% [markdown]
# ### Tails: square sizes stepping by one
#
# Square sides stepping by one from 8184 (each matrix about 256 MiB, far past the L2). The plot shows a
# sawtooth in rungs 03 and 04 with a period of **eight** floats, the floats in one 32-byte sector: it is
# about **row alignment**. An output row is `rows` floats long, so when `rows` is a multiple of 8 every
# output row starts on a sector boundary; when it is 4 mod 8, every other row does; 2 or 6 mod 8, every
# fourth; odd, every eighth. A tile's row segment that does not start on a boundary shares its first and
# last sectors with the neighbouring tiles, which write them at other times: those sectors reach L2 (and
# DRAM) in pieces. The table groups the tail sizes by that class, as the fraction of the device copy.

# %%
lessons.plot(plots.tail, TRANSPOSE_RS, "transpose")

# %%
print(alignment.by_alignment(TRANSPOSE_RS))

# %%
print(lessons.tail_sawtooth(TRANSPOSE_RS, TRANSPOSE))

# %% [markdown]
# In rungs 03 and 04 the fraction falls with the share of rows that start on a sector boundary: the
# sawtooth is row alignment, on the output (write) side. The variant records say which side: a matrix
# whose output rows are aligned and input rows are not (8192x8193) against the reverse (8193x8192).

# %%
print(alignment.table(VARIANTS))

# %% [markdown]
# ### Rung 05 — sector-aligned writes: every output sector written whole, whatever the row length
#
# Rung 05 keeps rung 03's padded tile and changes which elements a block writes. Instead of a square
# patch of the matrix, each block writes, in each output row, the run of `TILE` elements that starts at
# the first sector boundary of its column range. When the output rows are not a multiple of 8 floats
# long, each row starts at a different offset within a sector, so the patch's left edge becomes ragged
# (shifted left by up to 7 elements per row): the block stages 8 more input rows to cover it, and the
# last block of each row writes up to the row's end. Every sector is then written by one block, whole.
# When the output rows are aligned the kernel takes a path with no halo, rung 03's square patch. The
# walk shows its whole source (`source=True`): the diff against rung 04's swizzle would mostly show the
# swizzle going away.
#
# The halo costs shared memory (8 more tile rows) and the ragged edge a few integer instructions per row;
# the two paths (aligned, ragged) are two copies of the loops in the binary. The checks include outputs
# that start off a 32-byte boundary (the launcher passes the real address's offset, so alignment is
# judged where the bytes land), besides the family's sides of one, primes and tile multiples plus or
# minus one.

# %%
TRANSPOSE_05 = TRANSPOSE_WALK("05", source=True)

# %% [markdown]
# **What it shows against the prediction.** Two claims: sides that are not a multiple of 8 close most of
# their gap to the aligned ones, and aligned sides run as rung 03 does. The first table compares rung 03
# and rung 05 by alignment class over the tail sizes; the second, rung 05 against rung 03 on the
# non-square shapes of the variant records (time of rung 03 over time of rung 05: above one, rung 05 is
# faster); the last lines, rung 05 against rung 03 at the headline sizes (aligned).

# %%
print(alignment.by_alignment(TRANSPOSE_RS, ("03_padded", "05_sector_aligned")))

# %%
print(alignment.rung05_against_03(VARIANTS))

# %%
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "05", "03"))

# %% [markdown]
# On the reference H200 the first claim holds: rung 05's fraction of the copy is nearly the same in every
# alignment class, the sawtooth is gone, and misaligned shapes gain the most. The second does not fully
# hold: on aligned sides rung 05 runs a few % under rung 03, although its aligned path does rung 03's
# work; the larger shared-memory tile and the two code paths are candidates, not established causes. The
# ladder's story on tails therefore ends with a dispatch still to write: rung 03 for aligned output rows,
# rung 05 for the others.

# %% [markdown]
# ### Against the library
#
# CuPy's own transpose-and-copy, measured on the same problems: how rungs 03 and 05 compare, at the
# headline sizes and across the DRAM regime. Its bandwidth panel, for comparison with the rungs':

# %%
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "cupy_transpose"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "05", "cupy_transpose"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "05", "cupy_transpose", kind="sweep", regime="hbm"))

# %%
lessons.plot(plots.bandwidth_vs_bytes, lessons.select(TRANSPOSE_RS, TRANSPOSE, ["cupy_transpose"]), "transpose")

# %% [markdown]
# ### The transpose ladder, all together

# %%
lessons.headline_table(TRANSPOSE_RS, "transpose")

# %% [markdown]
# ---
# ## What to take away
#
# - Coalescing first: copy's rung 01 is coalesced from the start, and its header predicts it near the
#   ceiling; transpose's rung 01 writes uncoalesced, and the ladder exists to fix that.
# - Then fewer, wider instructions and more bytes in flight (copy 03, 04).
# - Shared memory turns a strided global access into a strided *shared* access, which is only cheap
#   when it avoids bank conflicts (transpose 03 and 04); a swizzle does it without wasting space.
# - Tails are about alignment as much as about edges: a transpose whose output rows do not start on a
#   32-byte sector writes sectors in pieces from two blocks; writing whole sectors (transpose 05) removes
#   the sawtooth.
# - Every prediction above sits next to a number computed from records, so each one can be seen to
#   hold or to fail, including where a prediction was right about the result and wrong about the reason.
#
# Next: the GEMM ladders, where the library baseline is cuBLAS (through `cupy.matmul`) and arithmetic, not bytes,
# is the limit.
