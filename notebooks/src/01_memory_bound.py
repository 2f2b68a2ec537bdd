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
# timed in the same run (notebook 00 explains the method). Each rung goes the same way: what changes
# and why, then one call (`lessons.RungWalk`) for the steps every rung shares (the kernel's header and
# the diff from the previous rung, the compile report, the correctness check, the measurement, the
# plots, the prediction's ranges against the records), then what they show against the header's
# prediction. Every figure quoted is computed from the records in a cell; none is typed in.

# %%
from lab import lessons
from lab.families import get_family
from lab.lessons import knob_records, plots
from lab.measure import bench
from lab.studies import alignment, anomalies

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
# Every rung below goes through the same walk, one call per rung, in this order: the source (rung 01)
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
# microseconds, so the warm curve stays under the DRAM plateau (notebook 00, section 4b, measures the L2's
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
# The body of the array moves as `float4`: one 16-byte load and one 16-byte store per thread per step,
# instead of four 4-byte ones. A `float4` access must be 16-byte aligned, so the rung copies a short
# scalar head until both pointers are aligned, and a scalar tail of fewer than four elements; when the
# two pointers are misaligned by different amounts it falls back to scalar throughout (correct, slow).
#
# In the SASS the vector body shows up as 128-bit loads and stores (`LDG.128`, `STG.128`); the scalar
# head and tail keep a few 4-byte ones. The checks matter most here: the misaligned starts among the
# cases exercise the head, the tail and the scalar fallback.

# %%
COPY_03 = COPY_WALK("03")

# %% [markdown]
# **What it shows against the prediction.** Fewer memory instructions for the same bytes should help a
# little at DRAM sizes and more where the data sits in L2 (there, instruction issue, not DRAM, is the
# limit). The ratios compare rung 03 with rung 02 in both regimes.

# %%
print(lessons.ratio(COPY_RS, COPY, "03", "02"))
print(lessons.ratio(COPY_RS, COPY, "03", "02", kind="sweep", regime="hbm"))
print(lessons.ratio(COPY_RS, COPY, "03", "02", kind="sweep", l2="warm", regime="l2"))

# %% [markdown]
# ### Rung 04 — unrolled: several 16-byte loads in flight per thread, one pass over the array
#
# Little's law: bandwidth = bytes in flight / latency. DRAM latency is hundreds of nanoseconds, so
# reaching the plateau takes megabytes in flight across the GPU. Rung 03 keeps one `float4` per thread
# in flight; rung 04 issues `UNROLL` independent loads (each still coalesced across the warp) before
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
# (1.000: no zigzag). LIVE: measured now; REPLAY: the reference GPU's `l2_probes.json`.

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
# Compute's counters can. LIVE with `ncu` installed: one launch of each rung is profiled now. Otherwise
# the reference GPU's profile (`transpose_profile.json`) is replayed, if present.

# %%
TRANSPOSE_PROFILE = lessons.profile_records(TRANSPOSE, MODE)
print(lessons.profile_status(TRANSPOSE_PROFILE, "transpose"))

# %% [markdown]
# The transpose rungs go through the same walk as the copy's, with one more line after the
# measurement: the rung's shared-load bank conflicts from that profile, as a share of all its
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
# The block first reads its `TILE × TILE` patch row by row into shared memory (coalesced), waits at a
# barrier, then writes the transposed patch row by row (coalesced too), reading shared memory down a
# column. Global memory is now happy on both sides; shared memory is not. Shared memory has 32 banks,
# one 4-byte word each, and a `float[TILE][TILE]` tile's rows are `TILE` words long, a multiple of 32
# here (the ladder launches it with the knobs printed below): a whole column sits in one bank, so the
# warp's 32 reads down a column are served one after another, a 32-way **bank conflict**.
#
# The compile report now shows the tile as static shared memory, the shared loads and stores (`LDS`,
# `STS`) and the barrier (`BAR`).

# %%
TRANSPOSE_02 = TRANSPOSE_WALK("02")

# %% [markdown]
# **What it shows against the prediction.** The prediction: above rung 01 (full sectors are written
# now), still short of the ceiling (every shared-memory column read is replayed). The profile line above
# counts those replays, the bank conflicts of the shared loads; the ratios below place the rung between
# rung 01 and the ceiling.

# %%
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "01"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "ceiling"))
print(lessons.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "ceiling", kind="sweep", regime="hbm"))

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
# swizzled tile (time at 4 over time at 8: above one, 8 is faster). LIVE: measured now on two shapes;
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
# Next: the GEMM ladders, where the ceiling is cuBLAS (through `cupy.matmul`) and arithmetic, not bytes,
# is the limit.
