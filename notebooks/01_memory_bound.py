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
# # 01 — The memory-bound ladder: copy and transpose
#
# A copy does no arithmetic: its speed is *bytes moved per second*, and the most it can reach is what
# the GPU's memory system delivers. That makes it the cleanest place to learn the habits every fast
# kernel needs (coalescing, wide accesses, enough bytes in flight, shared-memory tiles without bank
# conflicts) before arithmetic gets in the way. Two ladders:
#
# - **copy** (`y = x`, float32, any length and alignment): four rungs from one-thread-per-element to
#   vectorized and unrolled;
# - **transpose** (`out = in.T`, float32, any shape): four rungs from naive to a shared-memory tile
#   that is padded, then swizzled.
#
# Both are measured against the same **ceiling**: the driver's device-to-device copy of the same bytes,
# timed in the same run (notebook 00 explains the method). Each rung goes the same way: what changes
# and why (the kernel's header and the diff from the previous rung), the compile report, the
# correctness check, the measurement, the plots, and what they show against the header's prediction.
# Every figure quoted is computed from the records in a cell; none is typed in.

# %%
from lab import bench, build, lesson, plots, report
from lab.ladder import get_family

# %% [markdown]
# ## Live or replay

# %%
MODE = lesson.mode()
print(lesson.mode_banner("copy", "transpose", current=MODE))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for `sm_90` (the
# reference H200's) otherwise.

# %%
ARCH = lesson.compile_arch(MODE)
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
# Before anything is timed, every rung runs through `lab.verify.check_rung` on a spread of the family's
# check cases (lengths around vector and block boundaries, primes, starts that break 16-byte alignment):
# three input distributions, NaN-poisoned outputs, guard zones around the output, and a repeat run to
# catch races. LIVE only; a failure stops the notebook here, before any measurement.

# %%
COPY_CASES = lesson.few_cases(COPY)
COPY_CHECKS = lesson.check_ladder(COPY, COPY_CASES) if MODE.live else None
print(f"{len(COPY_CASES)} cases:", ", ".join(str(c) for c in COPY_CASES))

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)
#
# One `lab.bench.run` times the ceiling and all four rungs on every problem: the headline sizes (cold
# L2), a sweep of sizes from a few KiB to GiBs (cold and warm L2), and the tail sizes (stepping by one).

# %%
COPY_RS = lesson.ladder_records(COPY, MODE, *PLANS)
print(lesson.records_status(COPY_RS, "copy"))

# %% [markdown]
# ### Rung 01 — naive: one thread per element
#
# The kernel everyone writes first. Each thread copies one float; consecutive threads touch consecutive
# addresses, so every warp's load is one fully used 128-byte request: it is *coalesced*. The header
# states what the rung is, what it needs and what it should reach:

# %%
print(lesson.rung_header(COPY, "01"))
print(lesson.knobs_line(COPY, "01"))

# %%
lesson.show_source(COPY, "01")

# %% [markdown]
# The compile report (`lab.build.compile_report`): registers, static shared memory, spills, and the
# notable SASS instructions in the binary NVRTC built. One 4-byte load (`LDG`) and one store (`STG`).

# %%
COPY_01 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(COPY, "01")]
lesson.md(report.compile_markdown(COPY_01))

# %%
print(lesson.check_summary(COPY_CHECKS, COPY, "01"))

# %% [markdown]
# The measurement at the headline sizes: the median with its p10–p90 spread, the throughput, and the
# fraction of the device copy measured on the same problem in the same run.

# %%
print(lesson.headline_summary(COPY_RS, COPY, "01"))

# %% [markdown]
# Bandwidth against size, cold L2 (blue) and warm L2 (orange), the device copy dotted, the L2 size
# dashed. Read it left to right: **launch-bound** (the time is a constant launch cost, so throughput
# grows with size), **L2-resident** (warm runs read from L2 and can exceed DRAM's rate), **DRAM
# plateau** (cold and warm meet; this is the regime the prediction is about).

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(COPY_RS, COPY, ["01"]), "copy")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(COPY_RS, COPY, "01"), "copy")

# %% [markdown]
# **What it shows against the prediction.** The header predicts a large fraction of the device copy
# already, limited by one 4-byte load in flight per thread and by an enormous grid. The cell prints the
# prediction beside the measured ratio at the headline sizes and across the DRAM regime of the sweep;
# the gap to the ceiling is what the next three rungs try to close.

# %%
print("Predicted:", lesson.prediction(COPY, "01"))
print(lesson.ratio(COPY_RS, COPY, "01", "ceiling"))
print(lesson.ratio(COPY_RS, COPY, "01", "ceiling", kind="sweep", regime="hbm"))

# %% [markdown]
# ### Rung 02 — grid-stride loop
#
# Instead of one thread per element (a grid that grows with `n`), a fixed grid of a few blocks per SM
# loops over the array with a stride of the whole grid. Block launch and retirement are paid a few
# hundred times instead of millions, and the same launch works for any `n`. The diff from rung 01:

# %%
lesson.show_diff(COPY, "02")

# %%
print("Predicted:", lesson.prediction(COPY, "02"))
print(lesson.knobs_line(COPY, "02"))

# %% [markdown]
# The loop costs registers (64-bit indices and the stride) and the compiler unrolls it, so the load and
# store counts in the SASS grow; the work per element does not.

# %%
COPY_02 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(COPY, "02")]
lesson.md(report.compile_markdown(COPY_02))

# %%
print(lesson.instruction_delta(COPY_02))

# %%
print(lesson.check_summary(COPY_CHECKS, COPY, "02"))

# %%
print(lesson.headline_summary(COPY_RS, COPY, "02"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(COPY_RS, COPY, ["02"]), "copy")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(COPY_RS, COPY, "02"), "copy")

# %% [markdown]
# **What it shows against the prediction.** The prediction is about the same as rung 01 at DRAM sizes
# (both keep one 4-byte load in flight per thread) and slightly better in the middle of the range. The
# ratios below compare rung 02 with rung 01 on the same problems: at the headline sizes, across the DRAM
# regime (cold), and across the L2-resident regime (warm), where launch and block-scheduling cost
# matter more.

# %%
print(lesson.ratio(COPY_RS, COPY, "02", "01"))
print(lesson.ratio(COPY_RS, COPY, "02", "01", kind="sweep", regime="hbm"))
print(lesson.ratio(COPY_RS, COPY, "02", "01", kind="sweep", l2="warm", regime="l2"))

# %% [markdown]
# ### Rung 03 — 16-byte vectorized accesses
#
# The body of the array moves as `float4`: one 16-byte load and one 16-byte store per thread per step,
# instead of four 4-byte ones. A `float4` access must be 16-byte aligned, so the rung copies a short
# scalar head until both pointers are aligned, and a scalar tail of fewer than four elements; when the
# two pointers are misaligned by different amounts it falls back to scalar throughout (correct, slow).

# %%
lesson.show_diff(COPY, "03")

# %%
print("Predicted:", lesson.prediction(COPY, "03"))
print(lesson.knobs_line(COPY, "03"))

# %% [markdown]
# In the SASS the vector body shows up as 128-bit loads and stores (`LDG.128`, `STG.128`); the scalar
# head and tail keep a few 4-byte ones.

# %%
COPY_03 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(COPY, "03")]
lesson.md(report.compile_markdown(COPY_03))

# %%
print(lesson.instruction_delta(COPY_03))

# %% [markdown]
# The checks matter most here: the misaligned starts among the cases exercise the head, the tail and
# the scalar fallback.

# %%
print(lesson.check_summary(COPY_CHECKS, COPY, "03"))

# %%
print(lesson.headline_summary(COPY_RS, COPY, "03"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(COPY_RS, COPY, ["03"]), "copy")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(COPY_RS, COPY, "03"), "copy")

# %% [markdown]
# **What it shows against the prediction.** Fewer memory instructions for the same bytes should help a
# little at DRAM sizes and more where the data sits in L2 (there, instruction issue, not DRAM, is the
# limit). The ratios compare rung 03 with rung 02 in both regimes.

# %%
print(lesson.ratio(COPY_RS, COPY, "03", "02"))
print(lesson.ratio(COPY_RS, COPY, "03", "02", kind="sweep", regime="hbm"))
print(lesson.ratio(COPY_RS, COPY, "03", "02", kind="sweep", l2="warm", regime="l2"))

# %% [markdown]
# ### Rung 04 — unrolled: several 16-byte loads in flight per thread, one pass over the array
#
# Little's law: bandwidth = bytes in flight / latency. DRAM latency is hundreds of nanoseconds, so
# reaching the plateau takes megabytes in flight across the GPU. Rung 03 keeps one `float4` per thread
# in flight; rung 04 issues `UNROLL` independent loads (each still coalesced across the warp) before
# any store. It also drops the grid-stride loop: the grid covers the array once, one chunk per block,
# so no last partial round of blocks leaves SMs idle. The header records what the knob sweep on the
# reference GPU found about which of the two changes mattered.

# %%
lesson.show_diff(COPY, "04")

# %%
print("Predicted:", lesson.prediction(COPY, "04"))
print(lesson.knobs_line(COPY, "04"))

# %% [markdown]
# The values in flight live in registers (`UNROLL` of them per thread): the report shows whether that
# stays free of spills.

# %%
COPY_04 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(COPY, "04")]
lesson.md(report.compile_markdown(COPY_04))

# %%
print(lesson.instruction_delta(COPY_04))

# %%
print(lesson.check_summary(COPY_CHECKS, COPY, "04"))

# %%
print(lesson.headline_summary(COPY_RS, COPY, "04"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(COPY_RS, COPY, ["04"]), "copy")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(COPY_RS, COPY, "04"), "copy")

# %% [markdown]
# **What it shows against the prediction.** The claim is that rung 04 reaches the device copy at large
# sizes, where rung 03 sits a little under it. The cell prints rung 04 against the ceiling and against
# rung 03, on the same problems.

# %%
print(lesson.ratio(COPY_RS, COPY, "04", "ceiling"))
print(lesson.ratio(COPY_RS, COPY, "04", "ceiling", kind="sweep", regime="hbm"))
print(lesson.ratio(COPY_RS, COPY, "04", "03"))

# %% [markdown]
# ### Tails: `n` stepping by one
#
# The tail records time copies of about 2^24 floats (64 MiB per array) at every length across several
# vector and block boundaries (warm L2). A kernel that handles tails badly shows a **sawtooth**: a dip
# at every length that is not a multiple of its vector width. A flat line means the scalar head and
# tail cost nothing measurable.

# %%
lesson.plot(plots.tail, COPY_RS, "copy")

# %%
print(lesson.tail_sawtooth(COPY_RS, COPY))

# %% [markdown]
# ### The copy ladder, all together

# %%
lesson.headline_table(COPY_RS, "copy")

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
TRANSPOSE_CASES = lesson.few_cases(TRANSPOSE)
TRANSPOSE_CHECKS = lesson.check_ladder(TRANSPOSE, TRANSPOSE_CASES) if MODE.live else None
print(f"{len(TRANSPOSE_CASES)} cases:", ", ".join(str(c) for c in TRANSPOSE_CASES))

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)

# %%
TRANSPOSE_RS = lesson.ladder_records(TRANSPOSE, MODE, *PLANS)
print(lesson.records_status(TRANSPOSE_RS, "transpose"))

# %% [markdown]
# Shared-memory **bank conflicts** decide rungs 02 to 04, and time alone cannot show them: Nsight
# Compute's counters can. LIVE with `ncu` installed: one launch of each rung is profiled now. Otherwise
# the reference GPU's profile (`transpose_profile.json`) is replayed, if present.

# %%
TRANSPOSE_PROFILE = lesson.profile_records(TRANSPOSE, MODE)
print(lesson.profile_status(TRANSPOSE_PROFILE, "transpose"))

# %% [markdown]
# ### Rung 01 — naive: straight from global memory
#
# A block of `TILE × BLOCK_ROWS` threads walks a `TILE × TILE` patch. A warp reads one row segment of
# the input (coalesced) and writes it as a column of the output: its stores land in as many different
# output rows, each in its own 32-byte sector of which the warp uses one float.

# %%
print(lesson.rung_header(TRANSPOSE, "01"))
print(lesson.knobs_line(TRANSPOSE, "01"))

# %%
lesson.show_source(TRANSPOSE, "01")

# %%
TRANSPOSE_01 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(TRANSPOSE, "01")]
lesson.md(report.compile_markdown(TRANSPOSE_01))

# %%
print(lesson.check_summary(TRANSPOSE_CHECKS, TRANSPOSE, "01"))

# %%
print(lesson.headline_summary(TRANSPOSE_RS, TRANSPOSE, "01"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(TRANSPOSE_RS, TRANSPOSE, ["01"]), "transpose")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(TRANSPOSE_RS, TRANSPOSE, "01"), "transpose")

# %% [markdown]
# **What it shows against the prediction.** Uncoalesced stores waste most of every sector written, but
# L2 merges part of the waste before it reaches DRAM, so the header predicts a fraction of the copy
# well above the naive sector arithmetic. The warm, L2-resident part of the sweep is where the merging
# helps most; compare the two regimes below.

# %%
print("Predicted:", lesson.prediction(TRANSPOSE, "01"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "01", "ceiling"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "01", "ceiling", kind="sweep", regime="hbm"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "01", "ceiling", kind="sweep", l2="warm", regime="l2"))

# %% [markdown]
# ### Rung 02 — a shared-memory tile
#
# The block first reads its `TILE × TILE` patch row by row into shared memory (coalesced), waits at a
# barrier, then writes the transposed patch row by row (coalesced too), reading shared memory down a
# column. Global memory is now happy on both sides; shared memory is not. Shared memory has 32 banks,
# one 4-byte word each, and a `float[TILE][TILE]` tile's rows are `TILE` words long, a multiple of 32
# here (the ladder launches it with the knobs printed below): a whole column sits in one bank, so the
# warp's 32 reads down a column are served one after another, a 32-way **bank conflict**.

# %%
lesson.show_diff(TRANSPOSE, "02")

# %%
print("Predicted:", lesson.prediction(TRANSPOSE, "02"))
print(lesson.knobs_line(TRANSPOSE, "02"))

# %% [markdown]
# The report now shows the tile as static shared memory, the shared loads and stores (`LDS`, `STS`) and
# the barrier (`BAR`).

# %%
TRANSPOSE_02 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(TRANSPOSE, "02")]
lesson.md(report.compile_markdown(TRANSPOSE_02))

# %%
print(lesson.instruction_delta(TRANSPOSE_02))

# %%
print(lesson.check_summary(TRANSPOSE_CHECKS, TRANSPOSE, "02"))

# %%
print(lesson.headline_summary(TRANSPOSE_RS, TRANSPOSE, "02"))

# %%
print(lesson.profile_value(TRANSPOSE_PROFILE, TRANSPOSE, "02"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(TRANSPOSE_RS, TRANSPOSE, ["02"]), "transpose")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(TRANSPOSE_RS, TRANSPOSE, "02"), "transpose")

# %% [markdown]
# **What it shows against the prediction.** The prediction: above rung 01 (full sectors are written
# now), still short of the ceiling (every shared-memory column read is replayed). The profile line above
# counts those replays, the bank conflicts of the shared loads; the ratios below place the rung between
# rung 01 and the ceiling.

# %%
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "01"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "ceiling"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "02", "ceiling", kind="sweep", regime="hbm"))

# %% [markdown]
# ### Rung 03 — padding: one extra word per tile row
#
# `float tile[TILE][TILE + 1]`: the row stride becomes `TILE + 1` words, one more than a multiple of
# 32, so walking down a column steps through the banks one at a time and the warp's 32 reads land in
# 32 different banks. The cost is one wasted word per tile row of shared memory.

# %%
lesson.show_diff(TRANSPOSE, "03")

# %%
print("Predicted:", lesson.prediction(TRANSPOSE, "03"))
print(lesson.knobs_line(TRANSPOSE, "03"))

# %%
TRANSPOSE_03 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(TRANSPOSE, "03")]
lesson.md(report.compile_markdown(TRANSPOSE_03))

# %%
print(lesson.instruction_delta(TRANSPOSE_03))

# %%
print(lesson.check_summary(TRANSPOSE_CHECKS, TRANSPOSE, "03"))

# %%
print(lesson.headline_summary(TRANSPOSE_RS, TRANSPOSE, "03"))

# %%
print(lesson.profile_value(TRANSPOSE_PROFILE, TRANSPOSE, "03"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(TRANSPOSE_RS, TRANSPOSE, ["03"]), "transpose")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(TRANSPOSE_RS, TRANSPOSE, "03"), "transpose")

# %% [markdown]
# **What it shows against the prediction.** Two claims: the bank conflicts vanish (the profile line
# above, against rung 02's), and the time lands close to the device copy. The remaining gap, if any, is
# the barrier and the short per-thread work.

# %%
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "ceiling"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "ceiling", kind="sweep", regime="hbm"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "03", "02"))

# %% [markdown]
# ### Rung 04 — an XOR swizzle instead of padding
#
# The tile is `float[TILE][TILE]` again, but element `(row, col)` is stored at column `col ^ row`. In a
# row that is a permutation (row writes stay conflict-free); down a column the stored columns are all
# different (column reads are conflict-free too). Same effect as padding, no wasted words, and addresses
# stay 16-byte aligned, which the wide shared-memory accesses of the GEMM ladders will need.

# %%
lesson.show_diff(TRANSPOSE, "04")

# %%
print("Predicted:", lesson.prediction(TRANSPOSE, "04"))
print(lesson.knobs_line(TRANSPOSE, "04"))

# %% [markdown]
# The shared-memory footprint returns to rung 02's; the XOR costs a few integer instructions.

# %%
TRANSPOSE_04 = [build.compile_report(r.spec, ARCH) for r in lesson.rung_pair(TRANSPOSE, "04")]
lesson.md(report.compile_markdown(TRANSPOSE_04))

# %%
print(lesson.instruction_delta(TRANSPOSE_04))

# %%
print(lesson.check_summary(TRANSPOSE_CHECKS, TRANSPOSE, "04"))

# %%
print(lesson.headline_summary(TRANSPOSE_RS, TRANSPOSE, "04"))

# %%
print(lesson.profile_value(TRANSPOSE_PROFILE, TRANSPOSE, "04"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(TRANSPOSE_RS, TRANSPOSE, ["04"]), "transpose")

# %%
lesson.plot(plots.ladder_bars, lesson.so_far(TRANSPOSE_RS, TRANSPOSE, "04"), "transpose")

# %% [markdown]
# **What it shows against the prediction.** The prediction: the same speed as rung 03 within noise, and
# no bank conflicts. "Within noise" is judged against the p10–p90 spreads printed in the two rungs'
# measurement cells: a ratio whose distance from one is smaller than those spreads is no difference at
# all; a larger one is a real gap that the prediction did not expect.

# %%
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "03"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "03", kind="sweep", regime="hbm"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "ceiling"))

# %% [markdown]
# ### Bank conflicts, all rungs
#
# Nsight Compute's count of shared-load bank conflicts for one launch of each rung. Rung 01 uses no
# shared memory; rung 02 is predicted to conflict on every column read, rungs 03 and 04 on none. The
# per-rung lines above give each count as a share of all shared-load wavefronts, which is the figure to
# hold against the prediction: a residue that is a small share is not the 32-way replay of rung 02.

# %%
lesson.profile_plot(TRANSPOSE_PROFILE, "transpose")

# %% [markdown]
# ### Tails: square sizes stepping by one
#
# Sizes across two tile boundaries. Three things can cost at a tail: partial tiles (threads idle at the
# matrix edge); row starts that are not aligned to a 32-byte sector (when the side is not a multiple of
# eight floats, a warp's row segment straddles one more sector than it needs); and sides that are a
# multiple of a large power of two (the strided side keeps hitting the same memory channels). The plot
# shows which of them matters on the GPU the records come from, and the table below how deep the worst
# dip goes for each rung.

# %%
lesson.plot(plots.tail, TRANSPOSE_RS, "transpose")

# %%
print(lesson.tail_sawtooth(TRANSPOSE_RS, TRANSPOSE))

# %% [markdown]
# ### Against the library
#
# CuPy's own transpose-and-copy, measured on the same problems: how the best rung compares, at the
# headline sizes and across the DRAM regime. Its bandwidth panel, for comparison with the rungs':

# %%
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "cupy_transpose"))
print(lesson.ratio(TRANSPOSE_RS, TRANSPOSE, "04", "cupy_transpose", kind="sweep", regime="hbm"))

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(TRANSPOSE_RS, TRANSPOSE, ["cupy_transpose"]), "transpose")

# %% [markdown]
# ### The transpose ladder, all together

# %%
lesson.headline_table(TRANSPOSE_RS, "transpose")

# %% [markdown]
# ---
# ## What to take away
#
# - Coalescing first: copy's rung 01 is coalesced from the start, and its header predicts it near the
#   ceiling; transpose's rung 01 writes uncoalesced, and the ladder exists to fix that.
# - Then fewer, wider instructions and more bytes in flight (copy 03, 04).
# - Shared memory turns a strided global access into a strided *shared* access, which is only cheap
#   when it avoids bank conflicts (transpose 03 and 04); a swizzle does it without wasting space.
# - Every prediction above sits next to a number computed from records, so each one can be seen to
#   hold or to fail; the kernel headers record what the reference GPU showed, including where a
#   prediction was right about the result and wrong about the reason.
#
# Next: the GEMM ladders, where the ceiling is cuBLAS (through `cupy.matmul`) and arithmetic, not bytes,
# is the limit.
