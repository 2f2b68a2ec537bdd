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
# Before any kernel gets faster, we need a measurement we can trust. This notebook shows the rules
# that every number in the lab obeys, and why each rule exists:
#
# 1. what GPU is here (`lab.core.device`), so nothing is sized from hard-coded H200 numbers;
# 2. **CUDA events**, not host clocks, around asynchronous work;
# 3. **warm-up** launches before timing;
# 4. a **cold L2** (flushed before every launch, with a buffer sized from the device's L2) versus a
#    **warm** one, and **rotating input sets** for small problems;
# 5. the **median** of many launches, with the p10–p90 **spread** beside it;
# 6. the **ceiling** each ladder is measured against, in the same run;
# 7. how to read a **record**: the JSON every measurement is stored as, with its provenance.
#
# It runs in one of two modes, chosen once, below: **LIVE** on a machine with a GPU (it measures
# now, with a reduced plan so it finishes in a minute or two) or **REPLAY** on one without (it shows
# the records measured on the reference GPU, and says so loudly). Nothing here re-implements the lab:
# every cell calls `lab/`.

# %%
import dataclasses

from lab import lessons
from lab.core import device
from lab.families import get_family
from lab.lessons import plots
from lab.measure import bench, timing
from lab.studies import anomalies, l2

# %% [markdown]
# ## Live or replay
#
# `lessons.mode()` asks `lab.core.device.gpu_available()` once. Everything below follows from its answer.

# %%
MODE = lessons.mode()
print(lessons.mode_banner("copy", current=MODE))

# %% [markdown]
# ## The records this notebook reads
#
# The copy ladder's records carry the device-copy ceiling measured at every size, cold and warm L2,
# which is what the method needs. LIVE: `lab.measure.bench.run` measures the ceiling and every copy rung now,
# with a reduced plan (headline and sweep, quick: fewer sizes, shorter timings). REPLAY: the reference
# GPU's `copy.json`.

# %%
COPY = get_family("copy")
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
# ## 1. What GPU is this?
#
# `lab.core.device` reads the GPU's properties from the driver: compute capability (the arch the kernels
# are compiled for), SM count (grid sizes), L2 size (the flush), shared memory per block (tile sizes),
# the memory clock and bus width (the datasheet bandwidth). In REPLAY mode the same facts come from
# the records' provenance: they describe the GPU the records were made on, not this machine.

# %%
print(lessons.describe_gpu(MODE, RS))

# %% [markdown]
# ## 2. Why CUDA events, not a host clock
#
# A kernel launch is **asynchronous**: `kernel(...)` puts work on a stream and returns at once. A host
# clock (`time.perf_counter()`) around the call measures how long it took to *queue* the launch, not to
# run it. Adding a synchronize fixes that, but then the number includes Python, the driver's queue and
# the synchronization itself, and it is one noisy sample. CUDA **events** are recorded *on the stream*,
# before and after the kernel, and the GPU timestamps them itself: `lab.measure.timing.measure` times every
# launch between two events. One more detail: it queues a short spin kernel before each start event, so
# that by the time the GPU reaches the start event the timed kernel is already queued behind it, and the
# events bracket the kernel's GPU time rather than the host's launch latency.
#
# LIVE: the same 1 GiB device copy timed the wrong way and the right way.

# %%
if MODE.live:
    import cupy

    demo = COPY.make_problem(seed=0, n=1 << 27)
    demo_out = cupy.empty(demo.out_shape, demo.dtype)
    print(lessons.host_clock_versus_events(lambda i: COPY.launch_ceiling(demo, demo_out, i)))
else:
    print("(LIVE only: needs a GPU to launch on. The rule stands: lab.measure.timing never puts a host clock "
          "around asynchronous work.)")

# %% [markdown]
# ## 3. Warm-up
#
# The first launch of a kernel pays for things that later launches do not: loading the module onto the
# GPU (and compiling it, on a cold cache), first-touch of the buffers, and the GPU's clocks ramping up
# from idle. `lab.measure.timing.measure` launches a few times untimed before it times anything.
#
# LIVE: events around the very first launch of a rung not used yet in this process, against the median
# after warm-up. (The copy rungs above were already launched by the checks, so this uses a fresh knob
# value of rung 04, which is a different binary.)

# %%
if MODE.live:
    rung04 = COPY.rung("04")
    fresh = dataclasses.replace(rung04, spec=rung04.spec.with_knobs(UNROLL=dict(rung04.spec.knobs)["UNROLL"] + 1))
    print(lessons.first_launch_versus_steady(lambda i: COPY.launch(fresh, demo, demo_out, i)))
else:
    print("(LIVE only. The rule stands: every timing starts after warm-up launches.)")

# %% [markdown]
# ## 4. Cold or warm L2, and rotating inputs
#
# The H100/H200 class of GPU has an L2 cache of tens of MiB. A kernel timed again and again on the
# same small inputs reads them from L2, not from DRAM, and looks faster than it will be in a real
# program. So the lab measures both:
#
# - **cold**: before every timed launch, `lab.measure.timing.L2Flusher` writes a buffer of *twice the L2's
#   size*, read from the device rather than assumed, which evicts the inputs;
# - **warm**: no flush, the same inputs again (what a kernel sees when its producer just wrote them).
#
# The flush buffer is sized from this GPU's L2:

# %%
if MODE.live:
    flusher = timing.L2Flusher()
    print(f"L2 of this GPU: {device.current().l2_bytes / 2**20:.1f} MiB; "
          f"flush buffer: {flusher.buffer.nbytes / 2**20:.1f} MiB")
else:
    l2_size = RS.provenance.get("l2_bytes", 0) if RS else 0
    print(f"(no GPU: the records' GPU had {l2_size / 2**20:.1f} MiB of L2; its flush buffer was twice that)"
          if l2_size else "(no GPU and no records: the L2 size is unknown here)")

# %% [markdown]
# For small problems the flush is not the whole story: a cold launch of a 4 KiB copy still finds the
# instruction cache, TLBs and the memory controller's pages warm. `lab.measure.bench` therefore also
# **rotates** through several input sets on cold runs of small problems (up to four, within a budget
# of extra memory), so consecutive launches never read the same buffer:

# %%
print(f"rotation budget: {bench.ROTATION_BUDGET / 2**30:.0f} GiB of extra input sets, at most 4 sets")
if MODE.live:
    rotated = COPY.make_problem(seed=0, n=1 << 12, sets=4)
    print(f"a 16 KiB problem with sets=4 holds {len(rotated.inputs['x'])} input arrays; "
          "launch(i) reads set i mod 4")

# %% [markdown]
# What the difference looks like, size by size, for the ceiling (the driver's device-to-device copy),
# timed as every record is, one launch between two events. Warm runs beat cold ones while the working
# set fits in L2, and past it the two meet at the DRAM plateau; at the smallest sizes both are
# launch-bound. But look at the warm column: it does **not** rise above the DRAM plateau, although an
# L2 delivers far more than DRAM. The next section shows why and measures the L2 properly.

# %%
print(lessons.cold_versus_warm(RS, COPY, "ceiling"))

# %% [markdown]
# The same data as a picture, beside the best copy rung (the rung in its colour, solid cold and dashed
# warm; the device copy in black, dashed cold and dotted warm; the grey dash-dot line marks the L2 size):

# %%
lessons.plot(plots.bandwidth_vs_bytes, lessons.select(RS, COPY, ["04"]), "copy")

# %% [markdown]
# ### 4b. L2-resident bandwidth: amortizing the fixed cost of a timed launch
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
# every figure against the HBM plateau measured in the same run. LIVE: a quick sweep now (about ten
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
# - **the HBM plateau** (grey line): past the knee, graph and event timings agree, because a launch now
#   lasts long enough to hide the fixed cost.
#
# One caveat the records show: the driver's device copy, captured in a graph, runs as a memcpy node, and
# at the largest working set it reads differently from the same copy launched alone; rung 04, a kernel
# node, reads the same either way. Why the memcpy node differs is not established here.

# %%
print(l2.graph_versus_events_at_largest(L2RS))

# %% [markdown]
# ### 4c. Why some rungs run slower warm than cold at large sizes
#
# In the copy records, rungs 02 and 03 read a few % *slower* warm than cold at working sets of 256 MiB
# and more, where neither finds its data in L2. An artefact of the method, or real? `lab.studies.anomalies`
# times the same launches under conditions that separate the candidate causes: warm as usual; warm with a
# ten times longer idle gap before each launch (does idle time matter?); cold with the usual flush, which
# *writes* twice the L2 (the L2 starts full of dirty lines) and with a flush that *reads* it (the L2 starts
# full of clean lines); and back to back in a graph. Each cell: GB/s and, in brackets, the fraction of
# the device copy in the same condition. LIVE: measured now (about twenty seconds); REPLAY: the reference
# GPU's `l2_probes.json`.

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
# ## 5. Median and spread
#
# Each launch is timed on its own, so one run gives a *distribution* of times. The figure reported is
# the **median** (robust to the odd slow launch: a context switch, a clock dip); **p10–p90** says how
# wide the distribution is. Enough repetitions are taken for a minimum measured duration, so a
# microsecond kernel is not one noisy sample. Small sizes, dominated by launch overhead, spread the
# most:

# %%
print(lessons.spread_table(RS, COPY, "ceiling", l2="cold"))

# %% [markdown]
# LIVE: one call of `lab.measure.timing.measure`, the function behind every record, on the 1 GiB copy:

# %%
if MODE.live:
    t = timing.measure(lambda i: COPY.launch_ceiling(demo, demo_out, i), l2="cold", flusher=flusher)
    print(t)
else:
    print("(LIVE only: lab.measure.timing.measure returns a Timing(median_ms, p10_ms, p90_ms, min_ms, reps, l2).)")

# %% [markdown]
# ## 6. The ceilings
#
# A throughput means little alone. Every record carries the **ceiling** measured *in the same run, on
# the same problem*, so a rung is read as a fraction of what this GPU can do today, not of a datasheet.
#
# - **Device copy bandwidth** (this notebook, and the memory-bound ladder of notebook 01): the driver's
#   `cudaMemcpyAsync` device-to-device, which moves the same bytes as a copy kernel. In LIVE mode it is
#   also compared with the datasheet peak computed from the memory clock and bus width.
# - **cuBLAS** (through `cupy.matmul`) is the ceiling of the GEMM ladders that come next; it is not
#   measured here.

# %%
print(lessons.ceiling_summary(RS, COPY, MODE))

# %% [markdown]
# And the copy ladder against that ceiling, at the headline size (the bar labels are GB/s and the
# fraction of the ceiling): notebook 01 climbs it rung by rung.

# %%
lessons.plot(plots.ladder_bars, RS, "copy")

# %% [markdown]
# ## 7. How to read a record
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
