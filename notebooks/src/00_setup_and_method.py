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
# # 00 — Setup and method: how this lab measures a kernel
#
# Before any kernel gets faster, we need a measurement we can trust. This notebook builds the lab's
# timing method by hand, one rule at a time, then shows the function the lab uses
# (`lab.measure.timing.measure`) and the records every later notebook reads.

# %% [markdown]
# ## What you will learn
#
# - how to read this GPU's properties (`lab.core.device`), and how long a copy *should* take from a byte count;
# - why a host clock around a launch measures the wrong thing, and how **CUDA events** on the stream fix it;
# - why the first launch is slow and every timing starts after **warm-up** launches;
# - how to time a **cold L2** (flush it by writing a buffer larger than the L2) against a **warm** one, and why
#   small problems also **rotate** their inputs;
# - what `lab.measure.timing.measure` adds to the loop you wrote (a spin kernel, repetitions sized by time, the
#   **median** with its p10–p90 **spread**), and how the device copy is timed beside every kernel in the same run;
# - how to read a **record**: the JSON every measurement is stored as, with its provenance.
#
# The notebook runs in one of two modes, chosen once, below: **LIVE** on a machine with a GPU (it measures in
# this run, with a reduced plan so it finishes in a minute or two; the banner says where and when) or
# **REPLAY** on one without (it shows the records measured on the reference GPU, and says so loudly).
# The method cells are written out so you can read them; the rest calls `lab/`.

# %%
import dataclasses
import math
import time

import numpy as np

from lab import lessons
from lab.core import device
from lab.families import get_family
from lab.lessons import plots
from lab.measure import bench, timing
from lab.measure.records import format_bytes
from lab.studies import anomalies, l2

# %% [markdown]
# ## Live or replay
#
# `lessons.mode()` asks `lab.core.device.gpu_available()` once. Everything below follows from its answer.

# %%
MODE = lessons.mode()
print(lessons.mode_banner("copy", current=MODE))
COPY = get_family("copy")
REFERENCE = None if MODE.live else lessons.reference("copy")  # REPLAY: the reference GPU's copy records

# %% [markdown]
# ## 1. What GPU is this?
#
# `lab.core.device` reads the GPU's properties from the driver: compute capability (the arch the kernels
# are compiled for), SM count (grid sizes), L2 size (the flush), shared memory per block (tile sizes),
# the memory clock and bus width (the datasheet bandwidth). In REPLAY mode the same facts come from
# the records' provenance: they describe the GPU the records were made on, not this machine.

# %%
print(lessons.describe_gpu(MODE, REFERENCE))

# %% [markdown]
# **How long should a copy take?** Before timing anything, work out what to expect. A copy of `n` float32
# values reads `4 n` bytes and writes `4 n` bytes; at a bandwidth `B` it cannot take less than
# `bytes_moved / B`. The cell takes `B` from this GPU's datasheet (LIVE) or from the device copy the
# reference GPU's records measured (REPLAY), and does the same sum for the flush buffer of section 4.

# %%
n = 1 << 27  # the copy this notebook times: 2^27 floats, 512 MiB per array
bytes_moved = 2 * 4 * n  # read x once, write y once
if MODE.live:
    gpu = device.current()
    bandwidth_gbs, where = gpu.datasheet_bandwidth_gbs, "the datasheet peak of this GPU"
    l2_bytes = gpu.l2_bytes
else:
    heads = REFERENCE.where(kind="headline", rung=COPY.ceiling_name) if REFERENCE else []
    best = max(heads, key=lambda r: r.bytes_moved) if heads else None
    bandwidth_gbs = best.value if best else math.nan
    where = f"the device copy, {REFERENCE.label()}" if best else "no records"
    l2_bytes = REFERENCE.provenance.get("l2_bytes", 0) if REFERENCE else 0
flush_bytes = 2 * l2_bytes  # section 4: a buffer of twice the L2, written before every cold launch
print(f"bytes moved by the copy: 2 * 4 * {n} = {format_bytes(bytes_moved)}")
if math.isfinite(bandwidth_gbs):
    print(f"at {bandwidth_gbs:.0f} GB/s ({where}): at least {bytes_moved / (bandwidth_gbs * 1e9) * 1e3:.4f} ms")
    print(f"L2: {format_bytes(l2_bytes)}; flush buffer 2 * L2 = {format_bytes(flush_bytes)}, which takes at least "
          f"{flush_bytes / (bandwidth_gbs * 1e9) * 1e3:.4f} ms to write at that bandwidth")
else:
    print("(no GPU and no records: no bandwidth to divide by, so no expected time here)")

# %% [markdown]
# ## 2. Why CUDA events, not a host clock
#
# A kernel launch is **asynchronous**: `kernel(...)` puts work on a stream and returns at once. A host
# clock (`time.perf_counter()`) around the call measures how long it took to *queue* the launch, not to
# run it. Adding a synchronize fixes that, but then the number includes Python, the driver's queue and
# the synchronization itself, and it is one noisy sample. CUDA **events** are recorded *on the stream*,
# before and after the kernel, and the GPU timestamps them itself. Here is the whole idea, as a function:

# %%
def one_launch_ms(launch, i=0):
    """One launch between two CUDA events recorded on the stream: the GPU's own time for it, in ms."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)  # the GPU writes a timestamp when it reaches this point of the stream
    launch(i)
    end.record(stream)  # ... and another when the launch before it has finished
    end.synchronize()  # the host waits for the end event, and only then reads the two timestamps
    return cupy.cuda.get_elapsed_time(start, end)


# %% [markdown]
# LIVE: the same 1 GiB device copy (the driver's `cudaMemcpyAsync`, which `COPY.launch_ceiling` calls) timed
# the wrong way twice and then with `one_launch_ms`.

# %%
if MODE.live:
    import cupy

    demo = COPY.make_problem(seed=0, n=n)
    demo_out = cupy.empty(demo.out_shape, demo.dtype)

    def copy_1gib(i):
        COPY.launch_ceiling(demo, demo_out, i)

    stream = cupy.cuda.get_current_stream()
    copy_1gib(0)
    stream.synchronize()
    t0 = time.perf_counter()
    copy_1gib(0)
    queued_ms = (time.perf_counter() - t0) * 1e3  # returns as soon as the copy is queued
    stream.synchronize()
    synced_ms = (time.perf_counter() - t0) * 1e3  # Python, the queue and the synchronize's own cost included
    print(f"host clock, no synchronize : {queued_ms:8.4f} ms  (only the time to queue the copy)")
    print(f"host clock, synchronize    : {synced_ms:8.4f} ms  (one sample, host overheads included)")
    print(f"CUDA events                : {one_launch_ms(copy_1gib):8.4f} ms  (the GPU's own time)")
else:
    print("(On a GPU this cell times one 1 GiB device copy with a host clock, with and without a synchronize, "
          "and with CUDA events. No record keeps host-clock timings; the records' event timings of the device "
          "copy are printed in section 7.)")

# %% [markdown]
# ## 3. Warm-up
#
# The first launch of a kernel pays for things that later launches do not: loading the module onto the
# GPU (and compiling it, on a cold cache), first-touch of the buffers, and the GPU's clocks ramping up
# from idle. So every timing starts with a few untimed launches.
#
# LIVE: `one_launch_ms` around the very first launch of a kernel not used yet in this process, against the
# median of twenty launches after three warm-up launches. The kernel is copy rung 04 with one more `UNROLL`
# than the ladder uses: a different binary, so it is compiled (or loaded from the disk cache) and loaded onto
# the GPU inside the first timed launch.

# %%
if MODE.live:
    rung04 = COPY.rung("04")
    fresh = dataclasses.replace(rung04, spec=rung04.spec.with_knobs(UNROLL=dict(rung04.spec.knobs)["UNROLL"] + 1))

    def fresh_copy(i):
        COPY.launch(fresh, demo, demo_out, i)

    first_ms = one_launch_ms(fresh_copy)
    for i in range(3):  # the warm-up: untimed
        fresh_copy(i)
    steady_ms = float(np.median([one_launch_ms(fresh_copy, i) for i in range(20)]))
    print(f"first launch: {first_ms:.4f} ms; after warm-up: median {steady_ms:.4f} ms "
          f"-> the first launch took {first_ms / steady_ms:.1f}x the steady time")
else:
    print("(On a GPU this cell times the first launch of a freshly built kernel against its median after "
          "warm-up. No record keeps first launches: every recorded time starts after warm-up.)")

# %% [markdown]
# ## 4. Cold or warm L2, and rotating inputs
#
# The H100/H200 class of GPU has an L2 cache of tens of MiB. A kernel timed again and again on the
# same small inputs reads them from L2, not from DRAM, and looks faster than it will be in a real
# program. So the lab measures both:
#
# - **cold**: before every timed launch, write a buffer of *twice the L2's size* (read from the device,
#   never assumed), which evicts the inputs;
# - **warm**: no flush, the same inputs again (what a kernel sees when its producer just wrote them).
#
# The flush, written out: a buffer of `2 * l2_bytes` as int32 words, filled with a value that changes every
# time (so no write can be skipped as redundant). With it, the whole timing loop: warm-up, then one launch
# between two events per repetition, a flush before each when cold, and the median and p10–p90 of the times.

# %%
def make_flush(l2_bytes):
    """A function that evicts the L2 by writing a buffer of twice its size, and the buffer."""
    import cupy

    scratch = cupy.empty(2 * l2_bytes // 4, dtype=cupy.int32)  # 4 bytes per int32 word
    state = {"value": 0}

    def flush():
        state["value"] ^= 1  # a different value each time
        scratch.fill(state["value"])

    return flush, scratch


def events_time_ms(launch, *, reps=20, warmup=3, flush=None):
    """(median, p10, p90) in ms of `launch(i)`, timed one launch at a time between two CUDA events."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    for i in range(warmup):  # section 3: untimed launches first
        launch(i)
    stream.synchronize()
    pairs = []
    for i in range(reps):
        if flush is not None:  # cold L2: evict the inputs before each timed launch, outside the events
            flush()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)  # section 2: events on the stream
        launch(i)
        end.record(stream)
        pairs.append((start, end))
    end.synchronize()  # one wait, for the last end event
    times = np.array([cupy.cuda.get_elapsed_time(s, e) for s, e in pairs])
    return float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90))


# %%
if MODE.live:
    flush, scratch = make_flush(device.current().l2_bytes)
    print(f"L2 of this GPU: {format_bytes(device.current().l2_bytes)}; flush buffer: {format_bytes(scratch.nbytes)}")
else:
    print(f"(On a GPU this cell allocates the flush buffer from the device's L2 size. The records' GPU had "
          f"{format_bytes(l2_bytes)} of L2, so its buffer held {format_bytes(flush_bytes)}.)" if l2_bytes else
          "(no GPU and no records: the L2 size is unknown here)")

# %% [markdown]
# ### Predict first
#
# A copy of `2^22` floats moves 32 MiB (16 MiB read, 16 MiB written), about half this L2. Timed warm, its input
# is still in L2 from the launch before; timed cold, it comes from DRAM. Which is faster, and by how much:
# a few per cent, or enough to matter? And for the 1 GiB copy, far larger than the L2? Write your guess down,
# then run the next cell.

# %%
if MODE.live:
    small = COPY.make_problem(seed=1, n=1 << 22)
    small_out = cupy.empty(small.out_shape, small.dtype)
    for label, launch in (("32 MiB moved", lambda i: COPY.launch_ceiling(small, small_out, i)),
                          ("1 GiB moved", copy_1gib)):
        warm = events_time_ms(launch)
        cold = events_time_ms(launch, flush=flush)
        print(f"device copy, {label:12s}: warm median {warm[0]:.4f} ms (p10-p90 {warm[1]:.4f}-{warm[2]:.4f}), "
              f"cold {cold[0]:.4f} ms ({cold[1]:.4f}-{cold[2]:.4f}) -> warm/cold speed {cold[0] / warm[0]:.2f}x")
else:
    print("(On a GPU this cell times the device copy warm and cold with events_time_ms at 32 MiB and 1 GiB moved. "
          "The replayed answer, from the records, is printed below; every size is in the table of section 6.)")
    for moved in (8 * (1 << 22), bytes_moved):
        found = {r.l2: r for r in (REFERENCE.where(kind="sweep", rung=COPY.ceiling_name) if REFERENCE else [])
                 if r.bytes_moved == moved}
        if {"cold", "warm"} <= set(found):
            print(f"device copy, {format_bytes(moved)} moved ({REFERENCE.label()}): warm {found['warm'].median_ms:.4f} "
                  f"ms, cold {found['cold'].median_ms:.4f} ms -> warm/cold speed "
                  f"{found['cold'].median_ms / found['warm'].median_ms:.2f}x")

# %% [markdown]
# For small problems the flush is not the whole story: a cold launch of a 4 KiB copy still finds the
# instruction cache, TLBs and the memory controller's pages warm. `lab.measure.bench` therefore also
# **rotates** through several input sets on cold runs of small problems (up to four, within a budget
# of extra memory), so consecutive launches never read the same buffer: `launch(i)` reads set `i mod sets`,
# which is why every launch function in the lab takes the repetition index `i`.

# %%
print(f"rotation budget: {format_bytes(bench.ROTATION_BUDGET)} of extra input sets, at most 4 sets")
if MODE.live:
    rotated = COPY.make_problem(seed=0, n=1 << 12, sets=4)
    print(f"a 16 KiB problem with sets=4 holds {len(rotated.inputs['x'])} input arrays; "
          "launch(i) reads set i mod 4")

# %% [markdown]
# ## 5. The lab's timer: `lab.measure.timing.measure`
#
# `events_time_ms` above is the method. `lab.measure.timing.measure(launch, l2=..., flusher=...)`, the
# function behind every record, is the same loop with three additions:
#
# - its flush is `lab.measure.timing.L2Flusher`, the same write over twice the L2;
# - it queues a short **spin kernel** before each start event, so the timed launch is already queued when the
#   GPU reaches the start event: the events bracket the kernel's GPU time, not the host's launch latency (in
#   `events_time_ms` the GPU may reach the start event before the host has queued the launch, and the gap is
#   timed too; a cold flush before it hides most of that gap, a warm run does not);
# - it sizes the number of repetitions from one timed probe, so that the timed launches last at least a minimum
#   duration (a microsecond kernel is not twenty samples), and returns the median, p10, p90 and minimum.
#
# LIVE: both timers on the same 1 GiB copy, cold, in this run. They should agree within the spread.

# %%
if MODE.live:
    flusher = timing.L2Flusher()
    mine = events_time_ms(copy_1gib, flush=flush)
    theirs = timing.measure(copy_1gib, l2="cold", flusher=flusher)
    print(f"events_time_ms (this notebook): median {mine[0]:.4f} ms (p10-p90 {mine[1]:.4f}-{mine[2]:.4f}, 20 reps)")
    print(f"lab.measure.timing.measure    : {theirs}")
    print(f"-> the two medians differ by a factor {mine[0] / theirs.median_ms:.3f}; at "
          f"{bytes_moved / (theirs.median_ms * 1e-3) / 1e9:.0f} GB/s, against {bandwidth_gbs:.0f} GB/s ({where})")
else:
    print("(On a GPU this cell times the 1 GiB copy with events_time_ms and with lab.measure.timing.measure, "
          "which returns a Timing(median_ms, p10_ms, p90_ms, min_ms, reps, l2). The replayed device copy's "
          "timings, size by size, are in the spread table of section 7.)")

# %% [markdown]
# ## 6. The records this notebook reads
#
# `lab.measure.bench.run` applies that timer to a whole ladder: the device copy and every copy rung, at every
# size, cold and warm L2. LIVE: it runs in this run with a reduced plan (headline and sweep, quick: fewer sizes,
# shorter timings). REPLAY: the reference GPU's `copy.json`.

# %%
PLAN = bench.BenchPlan(kinds=("headline", "sweep"), quick=True)
print(f"{COPY.title}: ceiling {COPY.ceiling_name}; rungs {', '.join(r.key for r in COPY.rungs)}")

# %% [markdown]
# Correct first: in LIVE mode every rung passes a few correctness checks (random inputs, NaN-poisoned
# outputs, guard zones, a repeat run) before anything is timed. A failure stops the notebook here.

# %%
CHECKS = lessons.check_ladder(COPY, lessons.few_cases(COPY)) if MODE.live else None
print(lessons.check_summary(CHECKS, COPY, "04"))

# %%
RS = lessons.ladder_records(COPY, MODE, PLAN)
print(lessons.records_status(RS, "copy"))

# %% [markdown]
# What cold against warm looks like, size by size, for the ceiling (the driver's device-to-device copy),
# timed as every record is, one launch between two events: the whole-range answer to the prediction of
# section 4. Warm runs beat cold ones while the working set fits in L2, and past it the two meet at the
# DRAM plateau; at the smallest sizes both are launch-bound. But look at the warm column: it does **not**
# rise above the DRAM plateau, although an L2 delivers far more than DRAM. Section 6b shows why and measures
# the L2 properly.

# %%
print(lessons.cold_versus_warm(RS, COPY, "ceiling"))

# %% [markdown]
# The same data as a picture, beside the best copy rung (the rung in its colour, solid cold and dashed
# warm; the device copy in black, dashed cold and dotted warm; the grey dash-dot line marks the L2 size).
# **How to read it**: left of the grey line, the gap between a solid and a dashed line of one colour is what
# the L2 gives a single launch; right of it the lines of one colour meet, and the height they meet at is the
# DRAM plateau, the figure the copy ladder of notebook 01 climbs towards. At the far left every line rises
# with size at the same slope: the time is a constant launch cost there, not bandwidth.

# %%
lessons.plot(plots.bandwidth_vs_bytes, lessons.select(RS, COPY, ["04"]), "copy")

# %% [markdown]
# ### 6b. L2-resident bandwidth: amortizing the fixed cost of a timed launch
#
# An event pair around one launch carries a **fixed cost**: the events themselves and the launch's
# start-up, a few microseconds even for a kernel that does nothing. A working set that fits in L2 is
# copied in about that long, so the fixed cost, not the L2, sets the warm figure. Three ways around it:
#
# - **many launches captured in one CUDA graph**, timed as one (`lab.measure.timing.measure_graph`, through
#   CuPy's stream capture): the event pair's cost is divided by the number of launches, and what is timed
#   is the *unchanged* rung kernel, launched as the family launches it;
# - back-to-back launches between one pair of events: the same idea, but each launch still pays the
#   host's launch cost, which can exceed a short kernel's time and leave gaps on the GPU;
# - repetition inside the kernel: no launch cost at all, but it times a *different* kernel from the rung.
#
# `lab.studies.l2` uses the graph, and measures what it leaves behind, so it can be shown rather than assumed:
# an empty kernel timed between two events (the fixed cost every one-launch record carries) and inside a
# graph (the gap that remains between consecutive kernels of a graph). It sweeps the working set (input
# plus output, in MiB = 2^20 bytes) densely around the L2 size, which it reads from the device, and reads
# every figure against the HBM plateau measured in the same run. LIVE: a quick sweep in this run (about ten
# seconds); REPLAY: the reference GPU's `l2.json`.

# %%
L2RS = l2.lesson_records(MODE.live)
print(l2.summary(L2RS))

# %%
if L2RS is not None:
    lessons.plot(plots.l2_sweep, L2RS, "copy")

# %% [markdown]
# **What the plot shows**, left to right, with the figures printed above:
#
# - **launch-bound** (the first few MiB): even inside a graph every launch pays the graph's gap, so the
#   rate grows with the working set;
# - **the L2 plateau** (solid lines, peaking before the knee): graph-timed, the copy runs well above the
#   HBM plateau. The raw graph figure still includes the graph's per-launch gap; the two lines under it
#   bracket the L2's rate: less that gap (an upper estimate, since part of the gap may overlap the kernel),
#   and from the difference between two working sets on the plateau (any fixed cost cancels). The
#   one-launch-per-event-pair curves (dashed, dotted) never get there: that is the fixed cost, not the L2;
# - **the knee** (shaded): the working set at which the solid curves fall half-way from their peak to the
#   HBM plateau. The printed fraction of the L2 size says where it lies against the device attribute. On
#   the reference H200 it comes well before the full L2 (the grey band lies left of the L2 line). One
#   plausible reason, not measured here: Hopper's L2 is built as two partitions, and data may be held in
#   both, so the capacity a streaming working set sees can be smaller than the attribute;
# - **the HBM plateau** (grey line): past the knee, graph and event timings agree, because a launch there
#   lasts long enough to hide the fixed cost.
#
# One caveat the records show: the driver's device copy, captured in a graph, runs as a memcpy node, and
# at the largest working set it reads differently from the same copy launched alone; rung 04, a kernel
# node, reads the same either way. Why the memcpy node differs is not established here.

# %%
print(l2.graph_versus_events_at_largest(L2RS))

# %% [markdown]
# ### 6c. Why some rungs run slower warm than cold at large sizes
#
# In the copy records, rungs 02 and 03 read a few % *slower* warm than cold at working sets of 256 MiB
# and more, where neither finds its data in L2. An artefact of the method, or real? `lab.studies.anomalies`
# times the same launches under conditions that separate the candidate causes: warm as usual; warm with a
# ten times longer idle gap before each launch (does idle time matter?); cold with the usual flush, which
# *writes* twice the L2 (the L2 starts full of dirty lines) and with a flush that *reads* it (the L2 starts
# full of clean lines); and back to back in a graph. Each cell: GB/s and, in brackets, the fraction of
# the device copy in the same condition. LIVE: measured in this run (about twenty seconds); REPLAY: the
# reference GPU's `l2_probes.json`.

# %%
PROBES = anomalies.lesson_records(MODE.live, "warm_cold")
print(anomalies.warm_cold_table(PROBES))

# %% [markdown]
# The three ratios that decide it (1.000: no effect): warm against the usual cold; a long idle gap against
# the usual one; the read flush against the write flush.

# %%
print(anomalies.warm_cold_findings(PROBES))

# %% [markdown]
# **How to read it.** If the long gap changes nothing, idle time (clocks, DRAM refresh) is not the cause.
# If the read flush beats the write flush, what the L2 holds when a launch starts matters: dirty lines
# must be written back to DRAM while the launch runs, and that write-back competes with the launch's own
# traffic. A warm launch starts with the previous launch's output dirty in L2; a cold one with the flush's
# writes dirty in L2. On the reference H200 both hold, so the effect is real, not a timing artefact: it is
# the state the previous work leaves in the L2, and it hits the grid-stride rungs 02 and 03 harder than
# rung 04 or the device copy (why those two are more sensitive is not established here). It also means
# the lab's cold figures include the write-back of the flush's own dirty lines: the read/write column is
# how much that costs at each size. The lab keeps the write flush for its records, so that records stay
# comparable across runs; the read flush is there for experiments (`lab.measure.timing.L2Flusher(by="read")`).

# %% [markdown]
# ## 7. Median and spread
#
# Each launch is timed on its own, so one run gives a *distribution* of times. The figure reported is
# the **median** (robust to the odd slow launch: a context switch, a clock dip); **p10–p90** says how
# wide the distribution is. Enough repetitions are taken for a minimum measured duration, so a
# microsecond kernel is not one noisy sample. **How to read the table**: follow the spread column down.
# Small sizes, dominated by launch overhead, spread the most, and take the most repetitions; at the largest
# sizes the spread is a small share of the median, so a difference between two rungs there that is larger
# than both spreads is real.

# %%
print(lessons.spread_table(RS, COPY, "ceiling", l2="cold"))

# %% [markdown]
# ## 8. The ceiling and the library baselines
#
# A throughput means little alone. Every record carries the **ceiling** measured *in the same run, on
# the same problem*, so a rung is read as a fraction of what this GPU can do in that run, not of a datasheet.
#
# - **Device copy bandwidth** (this notebook, and the memory-bound ladder of notebook 01): the driver's
#   `cudaMemcpyAsync` device-to-device, which moves the same bytes as a copy kernel. No kernel that moves those
#   bytes can beat it by much, which is what makes it a ceiling. In LIVE mode it is also compared with the
#   datasheet peak computed from the memory clock and bus width.
# - **cuBLAS** (through `cupy.matmul`) is the library baseline of the GEMM ladders that come next: a very good
#   implementation, not an upper bound. It is not measured here.

# %%
print(lessons.ceiling_summary(RS, COPY, MODE))

# %% [markdown]
# And the copy ladder against that ceiling, at the headline size (the bar labels are GB/s and the
# fraction of the ceiling): notebook 01 climbs it rung by rung.

# %%
lessons.plot(plots.ladder_bars, RS, "copy")

# %% [markdown]
# ## 9. How to read a record
#
# Every measurement is a `lab.measure.records.Record`: what ran (`family`, `rung`, `kind`, `params`), how much
# it moved (`bytes_moved`), how (`l2`: cold or warm), the timing (`median_ms`, `p10_ms`, `p90_ms`,
# `reps`), the result (`value` in `metric`, from the median) and the ceiling measured beside it
# (`ceiling`, `ceiling_value`; `ratio` = value / ceiling_value). One record, the best rung's headline:

# %%
REC = lessons.one_record(RS, kind="headline", rung=COPY.rung("04").key)
print(lessons.record_fields(REC))

# %% [markdown]
# A record file holds one run, with its **provenance**: which GPU, driver, CUDA, CuPy and NVRTC, which
# commit of this repository, and when. Replayed figures always name it; a figure whose provenance you
# cannot see is not one to trust.

# %%
print(lessons.provenance_fields(RS))

# %% [markdown]
# The same records as the headline table `lab bench copy` prints (`lab.studies.report`):

# %%
lessons.headline_table(RS, "copy")

# %% [markdown]
# To make records of your own on a GPU: `lab bench copy --json my_copy.json` (all kinds, full plan),
# then `lab.measure.records.load("my_copy.json")` gives the `RecordSet` every plot in the lab reads.
# Next: notebook 01 climbs the memory-bound ladders rung by rung.
