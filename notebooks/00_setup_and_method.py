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
# # 00 — Setup and method: how this lab measures a kernel
#
# Before any kernel gets faster, we need a measurement we can trust. This notebook shows the rules
# that every number in the lab obeys, and why each rule exists:
#
# 1. what GPU is here (`lab.device`), so nothing is sized from hard-coded H200 numbers;
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

from lab import bench, device, lesson, plots, timing
from lab.ladder import get_family

# %% [markdown]
# ## Live or replay
#
# `lesson.mode()` asks `lab.device.gpu_available()` once. Everything below follows from its answer.

# %%
MODE = lesson.mode()
print(lesson.mode_banner("copy", current=MODE))

# %% [markdown]
# ## The records this notebook reads
#
# The copy ladder's records carry the device-copy ceiling measured at every size, cold and warm L2,
# which is what the method needs. LIVE: `lab.bench.run` measures the ceiling and every copy rung now,
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
CHECKS = lesson.check_ladder(COPY, lesson.few_cases(COPY)) if MODE.live else None
print(lesson.check_summary(CHECKS, COPY, "04"))

# %%
RS = lesson.ladder_records(COPY, MODE, PLAN)
print(lesson.records_status(RS, "copy"))

# %% [markdown]
# ## 1. What GPU is this?
#
# `lab.device` reads the GPU's properties from the driver: compute capability (the arch the kernels
# are compiled for), SM count (grid sizes), L2 size (the flush), shared memory per block (tile sizes),
# the memory clock and bus width (the datasheet bandwidth). In REPLAY mode the same facts come from
# the records' provenance: they describe the GPU the records were made on, not this machine.

# %%
print(lesson.describe_gpu(MODE, RS))

# %% [markdown]
# ## 2. Why CUDA events, not a host clock
#
# A kernel launch is **asynchronous**: `kernel(...)` puts work on a stream and returns at once. A host
# clock (`time.perf_counter()`) around the call measures how long it took to *queue* the launch, not to
# run it. Adding a synchronize fixes that, but then the number includes Python, the driver's queue and
# the synchronization itself, and it is one noisy sample. CUDA **events** are recorded *on the stream*,
# before and after the kernel, and the GPU timestamps them itself: `lab.timing.measure` times every
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
    print(lesson.host_clock_versus_events(lambda i: COPY.launch_ceiling(demo, demo_out, i)))
else:
    print("(LIVE only: needs a GPU to launch on. The rule stands: lab.timing never puts a host clock "
          "around asynchronous work.)")

# %% [markdown]
# ## 3. Warm-up
#
# The first launch of a kernel pays for things that later launches do not: loading the module onto the
# GPU (and compiling it, on a cold cache), first-touch of the buffers, and the GPU's clocks ramping up
# from idle. `lab.timing.measure` launches a few times untimed before it times anything.
#
# LIVE: events around the very first launch of a rung not used yet in this process, against the median
# after warm-up. (The copy rungs above were already launched by the checks, so this uses a fresh knob
# value of rung 04, which is a different binary.)

# %%
if MODE.live:
    rung04 = COPY.rung("04")
    fresh = dataclasses.replace(rung04, spec=rung04.spec.with_knobs(UNROLL=dict(rung04.spec.knobs)["UNROLL"] + 1))
    print(lesson.first_launch_versus_steady(lambda i: COPY.launch(fresh, demo, demo_out, i)))
else:
    print("(LIVE only. The rule stands: every timing starts after warm-up launches.)")

# %% [markdown]
# ## 4. Cold or warm L2, and rotating inputs
#
# The H100/H200 class of GPU has an L2 cache of tens of MiB. A kernel timed again and again on the
# same small inputs reads them from L2, not from DRAM, and looks faster than it will be in a real
# program. So the lab measures both:
#
# - **cold**: before every timed launch, `lab.timing.L2Flusher` writes a buffer of *twice the L2's
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
    l2 = RS.provenance.get("l2_bytes", 0) if RS else 0
    print(f"(no GPU: the records' GPU had {l2 / 2**20:.1f} MiB of L2; its flush buffer was twice that)"
          if l2 else "(no GPU and no records: the L2 size is unknown here)")

# %% [markdown]
# For small problems the flush is not the whole story: a cold launch of a 4 KiB copy still finds the
# instruction cache, TLBs and the memory controller's pages warm. `lab.bench` therefore also
# **rotates** through several input sets on cold runs of small problems (up to four, within a budget
# of extra memory), so consecutive launches never read the same buffer:

# %%
print(f"rotation budget: {bench.ROTATION_BUDGET / 2**30:.0f} GiB of extra input sets, at most 4 sets")
if MODE.live:
    rotated = COPY.make_problem(seed=0, n=1 << 12, sets=4)
    print(f"a 16 KiB problem with sets=4 holds {len(rotated.inputs['x'])} input arrays; "
          "launch(i) reads set i mod 4")

# %% [markdown]
# What the difference looks like, size by size, for the ceiling (the driver's device-to-device copy):
# while the bytes moved fit in L2, the warm figure can exceed DRAM bandwidth; past it, cold and warm
# meet at the DRAM plateau. At the smallest sizes both are launch-bound.

# %%
print(lesson.cold_versus_warm(RS, COPY, "ceiling"))

# %% [markdown]
# The same data as a picture, beside the best copy rung (solid lines: the rung, dotted: the device
# copy; blue cold, orange warm; the dashed line marks the L2 size):

# %%
lesson.plot(plots.bandwidth_vs_bytes, lesson.select(RS, COPY, ["04"]), "copy")

# %% [markdown]
# ## 5. Median and spread
#
# Each launch is timed on its own, so one run gives a *distribution* of times. The figure reported is
# the **median** (robust to the odd slow launch: a context switch, a clock dip); **p10–p90** says how
# wide the distribution is. Enough repetitions are taken for a minimum measured duration, so a
# microsecond kernel is not one noisy sample. Small sizes, dominated by launch overhead, spread the
# most:

# %%
print(lesson.spread_table(RS, COPY, "ceiling", l2="cold"))

# %% [markdown]
# LIVE: one call of `lab.timing.measure`, the function behind every record, on the 1 GiB copy:

# %%
if MODE.live:
    t = timing.measure(lambda i: COPY.launch_ceiling(demo, demo_out, i), l2="cold", flusher=flusher)
    print(t)
else:
    print("(LIVE only: lab.timing.measure returns a Timing(median_ms, p10_ms, p90_ms, min_ms, reps, l2).)")

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
print(lesson.ceiling_summary(RS, COPY, MODE))

# %% [markdown]
# And the copy ladder against that ceiling, at the headline size (the bar labels are GB/s and the
# fraction of the ceiling): notebook 01 climbs it rung by rung.

# %%
lesson.plot(plots.ladder_bars, RS, "copy")

# %% [markdown]
# ## 7. How to read a record
#
# Every measurement is a `lab.records.Record`: what ran (`family`, `rung`, `kind`, `params`), how much
# it moved (`bytes_moved`), how (`l2`: cold or warm), the timing (`median_ms`, `p10_ms`, `p90_ms`,
# `reps`), the result (`value` in `metric`, from the median) and the ceiling measured beside it
# (`ceiling`, `ceiling_value`; `ratio` = value / ceiling_value). One record, the best rung's headline:

# %%
REC = lesson.one_record(RS, kind="headline", rung=COPY.rung("04").key)
print(lesson.record_fields(REC))

# %% [markdown]
# A record file holds one run, with its **provenance**: which GPU, driver, CUDA, CuPy and NVRTC, which
# commit of this repository, and when. Replayed figures always name it; a figure whose provenance you
# cannot see is not one to trust.

# %%
print(lesson.provenance_fields(RS))

# %% [markdown]
# The same records as the headline table `lab bench copy` prints (`lab.report`):

# %%
lesson.headline_table(RS, "copy")

# %% [markdown]
# To make records of your own on a GPU: `lab bench copy --json my_copy.json` (all kinds, full plan),
# then `lab.records.load("my_copy.json")` gives the `RecordSet` every plot in the lab reads.
# Next: notebook 01 climbs the memory-bound ladders rung by rung.
