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
# # 08 — Shape specialization and dispatch: `lab.ops` on a serving trace
#
# Notebooks 03 to 07 built kernels that are each fast on some shapes: the persistent TMA GEMM on large square
# ones, split-K when K is long and the output small, the decode GEMV when M is a handful of tokens, the portable
# cp.async GEMM where TMA cannot read the operands. A model does not call "a kernel"; it calls `matmul` thousands of
# times per second with shapes that change every step. This notebook is about the layer that sits between the two:
# which kernel a call gets, who decides, what the decision costs, and whether it pays.
#
# `lab.ops` is that layer, and the questions come in this order:
#
# 1. **what `lab.ops` is**, in six lines (run live on a GPU);
# 2. **the trace**: a Llama-like layer served for a thousand steps, and where its shapes and its GPU time fall;
# 3. **the dispatch table**: the rules, why each boundary is where it is, and which path each shape of the trace took;
# 4. **autotune** per bucket: every candidate checked, then timed; the winner stored;
# 5. **compile time and cache growth** as variants multiply (measured on the development machine's CPU);
# 6. **the first request**: cold caches, warm caches, and a warm-up manifest;
# 7. **the trace's result** against cuBLAS alone and against one generic kernel;
# 8. **hot versus cold**: the hot shape's choice forced on every shape, and where the decode GEMV stops paying;
# 9. **dispatch overhead**: what deciding costs on the host per call;
# 10. **when specialization is worth it**: the course's checklist, filled in with this trace's numbers;
# 11. **against PyTorch**: the shape-class sweep that wrote the dispatch table, `lab.ops` under that table against
#     PyTorch shape by shape, two models' layers on a serving trace (eager and as CUDA graphs), the host's cost per
#     call, and the row operations round to round.
#
# Every measured figure is computed in a cell from records (`python -m lab.studies.ops_study`, `lab tune --table`,
# `python -m lab.studies.ops_compare` and the others each section names, made on a GPU); none is typed in. Ideas from:
# Triton's `autotune` (a cache of the best configuration keyed on the arguments that change it); cuBLASLt's
# heuristic query (an ordered list of algorithms per problem description); the start-up pass of serving engines
# such as vLLM over the batch sizes they expect (capturing a CUDA graph for each), so that no user request pays for
# a capture; and the course text this lab follows, on shape specialization and its costs.

# %%
from lab import lessons
from lab.lessons import ops as lesson
from lab.lessons import ops_torch, plots

# %% [markdown]
# ## Live or replay
#
# The studies this notebook reads take minutes of GPU time each (the autotune of every bucket, a thousand steps
# timed six ways, fresh processes for the latency), so every section replays their records, in both modes. LIVE (a
# GPU here) adds section 1: `lab.ops` called now. The box lists every record with the device, date and commit it
# was made on, or that it is missing and the command that makes it (section 11 lists its own records the same way).

# %%
MODE = lessons.mode()
FILES = lesson.replayed()
print(lesson.banner(MODE, FILES))
GPU = lesson.gpu_of(FILES)
print(lesson.targets_text())

# %% [markdown]
# ---
# ## 1. What `lab.ops` is
#
# The runtime a practitioner imports: one call per operation (`matmul`, `softmax`, `rmsnorm`, `layernorm`), and
# underneath it, for every call:
#
# - **validate** the arrays once per combination of shapes, strides and types (one clear sentence per misuse);
# - **classify** the shape: its family (decode, small, unaligned, K-heavy, ragged last wave, square) for the
#   counters, and its **bucket** for the tune cache: M (the dimension that changes from step to step) rounded up to
#   a power of two, N and K (the model's fixed weight sizes) exact;
# - **decide** the path and its configuration: the **tune cache** where it holds the bucket (under this machine's
#   environment key: GPU, NVRTC, driver, a hash of the kernel sources), else the first rule of the **dispatch
#   table** that matches and whose path can serve the shape, else **cuBLAS**. A shape is decided once per process;
# - **compile once**: the build cache on disk holds one cubin per kernel variant (source, headers, knobs, arch);
# - **prepare once**: the first call on given addresses runs the family's host work and records the launches; later
#   calls replay them;
# - **count** everything it decided: calls, decision-cache hits and misses, paths, fallbacks, compiles.
#
# The six lines, run when a GPU is here (a decode-sized GEMM with a fused residual):

# %%
if MODE.live:
    import lab.ops as ops

    x, w, h = lesson.usage_inputs()  # fp16: x is M × K, w a linear layer's weight (N × K), h the residual (M × N)
    y = ops.matmul(x, w, layout="TN", residual=h)  # y = x @ w.T + h, on the path lab.ops picks
    print(lesson.usage_report(x, w, h, y, ops.stats()))
else:
    print("REPLAY: no GPU here, so lab.ops is not called. On a GPU this cell runs ops.matmul(x, w, layout='TN', "
          "residual=h) and prints the decision and ops.stats().")

# %% [markdown]
# ---
# ## 2. The trace
#
# `lab.studies.serving_trace` models one layer of a Llama-like model: two RMSNorms and five GEMMs, each activation `M
# × K`
# against a weight stored `N × K` (layout TN):

# %%
lesson.layer_gemms()

# %% [markdown]
# A step runs the layer for `M` tokens. Most steps are **decode** steps: `M` is the batch, drawn from a skewed law
# (most steps run small batches, a few run large ones). A small share are **prefill** steps: `M` is a prompt's
# length, rounded to a sequence bucket. The trace is regenerated here from the record's seed (CPU only,
# deterministic) and checked against the summary the record keeps:

# %%
TRACE = FILES["ops_trace"]
STEPS = lesson.trace_of(TRACE)
print(lesson.trace_summary(STEPS))

# %% [markdown]
# Left: how many steps have each `M`. Right (from the record's per-step times): each M bucket's share of the steps
# beside its share of `lab.ops`'s GPU time. The two need not agree: a prefill step of thousands of tokens costs as
# much as many decode steps, so a bucket can be rare and still hold much of the time.

# %%
BUCKETS = lesson.bucket_times(TRACE, STEPS)
lessons.figure(plots.trace_shapes(lesson.shape_rows(TRACE, STEPS), BUCKETS, source=lesson.label(TRACE)))

# %%
lesson.time_table(BUCKETS)

# %% [markdown]
# ---
# ## 3. The dispatch table
#
# `lab.ops.rules.DEFAULT`: an ordered list of rules, each a condition on the shape and the path that serves the
# shapes it matches; the first rule that matches and whose path can serve the shape wins. It is data, not code
# (a JSON object, `lab/ops/default_table.json`), so it can be read, diffed, handed in and loaded without running
# anything. `lab tune --table` writes that file from its sweep over shape classes (section 11): one rule per class,
# each with a note saying which path won the class, its score against the library, and the record and commit it
# comes from. The "why" column is each rule's note, read from the file. The last column is computed here: the
# share of the trace's GEMM calls each rule would take if the table alone decided, evaluated for the records' GPU.

# %%
lesson.dispatch_table(STEPS, GPU)

# %% [markdown]
# What `lab.ops` actually decided on the trace, with its tune cache in front of the table: per shape family, the
# path, how many distinct shapes and how many calls (one per GEMM per step), and where the decisions came from
# ("tuned": the tune cache; "rule N": the table; "fallback": no rule, or a path that failed, so cuBLAS).

# %%
lesson.decisions_by_family(TRACE, STEPS)

# %% [markdown]
# The same decisions as a map: one row per M bucket, one column per GEMM of the layer (several paths in a cell when
# the bucket's `M` values went different ways, most common first).

# %%
lesson.decision_map(TRACE)

# %% [markdown]
# And what `lab.ops`'s counters saw when the whole trace ran through it in order, beside the calls per path that
# the decisions imply:

# %%
lesson.counters_table(TRACE, STEPS)

# %% [markdown]
# ---
# ## 4. Autotune per bucket
#
# The table's rules are good guesses with a record behind each; the tune cache replaces the guess with a
# measurement. For one bucket, `lab.ops.tune` takes the bucket's largest `M`, draws random operands (never zeros),
# runs every path and configuration that can serve the shape, **checks** each output element by element against a
# float64 reference with the tensor-core error bound, and only then **times** it (cold L2, median, launched the way
# `lab.ops` launches it: recorded once, replayed). The fastest is stored under the bucket, with every candidate's
# time or the reason it was rejected.

# %%
TUNE = FILES["ops_tune"]
print(lesson.tune_wins(TUNE))

# %% [markdown]
# One panel per GEMM: every candidate's time over the winner's, per M bucket (the winner sits on the line at one;
# a candidate rejected by its check has no point there).

# %%
lesson.show(plots.autotune_candidates, lesson.tune_rows(TUNE), "ops_tune", source=lesson.label(TUNE))

# %% [markdown]
# Every bucket: the winner, the runner-up and by how much, cuBLAS and the generic path against the winner, and the
# rejected candidates with the reason their check gave.

# %%
lesson.tune_table(TUNE)

# %% [markdown]
# ---
# ## 5. Compile time and cache growth as variants multiply
#
# Every specialization is a kernel variant: a tile, a pipeline depth, an epilogue, a data type, an arch. Each one
# is a separate NVRTC compile and a separate cubin in the cache, and the variants multiply: two tiles times two
# stage counts times six epilogues times two types is already dozens of kernels for one rung.
# `lab.studies.compile_study` builds such a grid one variant at a time into an empty cache, timing each miss (the key,
# the
# NVRTC compile, writing the cubin) and then each hit (the lookup). The growth curve adds one axis at a time; every
# point is a sum of measured compiles, not an extrapolation.
#
# **This record was measured on the development machine's CPU (NVRTC compiles on the host), with no GPU.** Compile
# time is host CPU time: on another machine the seconds scale with its CPU, the shape of the growth does not.

# %%
COMPILE = FILES["compile_variants"]
print(lesson.compile_summary(COMPILE))

# %%
lesson.show(plots.compile_growth, COMPILE, "compile_variants")

# %%
lesson.show(plots.compile_time_per_variant, COMPILE, "compile_variants")

# %% [markdown]
# ---
# ## 6. The first request: cold, warm, and a warm-up manifest
#
# A compile happens the first time a process needs a variant that is not in the cache, that is on the first
# request that brings a new shape: exactly the request a user is waiting on. `lab.studies.ops_study` starts three fresh
# processes, each serving the same stream of requests (the trace's steps in order, the longest prefills left out;
# one layer per request), and times every request from its first call to its result:
#
# - **empty caches**: the build cache and CuPy's cache are empty, so the first requests compile;
# - **warm caches**: a second process on the caches the first one filled;
# - **empty caches with a manifest**: before the first request, `lab.ops.warmup` runs every shape the stream will
#   use once (the list a service would declare), so the compiles move out of the requests into a warm-up.
#
# "Compiles by the first result" counts the process's NVRTC compiles until the first request returns, the
# manifest's included; the next column keeps only those the first request made itself.

# %%
LATENCY = FILES["ops_latency"]
lesson.latency_table(LATENCY)

# %% [markdown]
# The warm-cache target, held against the record (its first request's time; the time from process
# start, imports included, is printed beside it):

# %%
print(lesson.latency_target(LATENCY))

# %%
lesson.show(plots.first_request_latency, lesson.latency_rows(LATENCY), "ops_latency",
            target_ms=lesson.TARGETS["warm_first_ms"], source=lesson.label(LATENCY))

# %% [markdown]
# ---
# ## 7. The trace's result
#
# Every distinct GEMM of the trace was first checked through `lab.ops` against float64 (the count of shapes with
# elements outside the bound is printed above the table). Then each distinct step was timed as GPU time (CUDA
# events, the whole step queued behind a spin kernel, L2 flushed) under six methods, and each method's total is
# its per-step time times the number of such steps in the trace, per layer:
#
# - `lab_ops`: `lab.ops` with its tune cache; `lab_ops_table`: the dispatch table alone;
# - `cublas`: cuBLAS for every GEMM, the epilogue as one CuPy elementwise kernel, CuPy's RMSNorm;
# - `generic`: **gemm_tc rung 03** for every GEMM, the portable cp.async + mma.sync kernel (`lab.ops`'s own
#   generic fallback path), epilogue after;
# - `persistent`: **gemm_tc rung 06** for every GEMM, the persistent TMA + wgmma kernel with the epilogue fused:
#   one *tuned* kernel everywhere;
# - `hot_forced`: the hot shape's choice everywhere (section 8).
#
# "One generic kernel" can mean either of rungs 03 and 06, so the target is held against both.

# %%
lesson.totals_table(TRACE)

# %%
print(lesson.trace_targets(TRACE))

# %% [markdown]
# The whole layer holds two RMSNorms besides the GEMMs, and the `cublas` method composes them from CuPy's own
# operations (what a library user writes), while `lab.ops` runs one kernel each. A second record times the GEMMs
# alone (epilogues included) through both, so the GEMMs' share of the ratio above is on record by itself:

# %%
print(lesson.gemm_share(FILES["ops_trace_gemms"], TRACE))

# %% [markdown]
# Per distinct step: how many times faster `lab.ops` is than cuBLAS, rung 03 and rung 06 (above the line it wins),
# decode steps as filled circles, prefill steps as open squares.

# %%
lesson.show(plots.trace_speedups, lesson.speedup_rows(TRACE), "ops_trace", source=lesson.label(TRACE))
print(lesson.speedup_reading(TRACE))

# %% [markdown]
# ---
# ## 8. Hot versus cold
#
# The tempting shortcut: find the hottest shape (the most common step), make its kernel as fast as possible, and
# use that kernel for everything. `hot_forced` does exactly that: the path `lab.ops` chose for the hot shape, forced
# on every shape (cuBLAS where that path cannot serve one at all). The table splits the trace into the hot steps
# and the cold ones (every other `M`), and by step kind.

# %%
lesson.hot_cold_table(TRACE, STEPS)

# %% [markdown]
# Where a specialization stops paying is a measurement, not a guess: the boundary sweep forces each path on one
# GEMM of the layer as `M` grows (decode GEMV, rung 06, split-K, cuBLAS), and the dotted line is where the dispatch
# table currently sends decode-sized shapes to the GEMV.

# %%
lesson.show(plots.decode_boundary, lesson.boundary(TRACE), "ops_trace", rule_max_m=lesson.decode_rule_max_m(),
            source=lesson.label(TRACE))
print(lesson.boundary_reading(TRACE))

# %% [markdown]
# ---
# ## 9. Dispatch overhead
#
# Deciding costs host time on every call, and a decode step's GEMMs are short enough for host time to matter. The
# study makes the GPU work tiny, so that the host is the bottleneck, and times per call: the launches `lab.ops`
# recorded, **replayed raw** (the floor: what the launches alone cost from Python); `lab.ops` with an output given
# (its decision cached, its launches replayed); `lab.ops` allocating its output; and `cupy.matmul`. The overhead is
# `lab.ops` minus the raw replay.

# %%
OVERHEAD = FILES["ops_overhead"]
lesson.overhead_table(OVERHEAD)

# %%
lesson.show(plots.dispatch_overhead, lesson.overhead_rows(OVERHEAD), "ops_overhead",
            target_us=lesson.TARGETS["overhead_us"], source=lesson.label(OVERHEAD))

# %% [markdown]
# ---
# ## 10. When is specialization worth it?
#
# The course text this lab follows sets out when specialized kernel paths earn their keep. Paraphrased: production
# shapes are not a continuum but cluster around a few hot spots, and taking those hot spots is where the gain is;
# it pays only when several conditions hold at once (the operation is a frequent hot spot, the default is clearly
# slow on it, the shape distribution is predictable, the gain outweighs the upkeep, and a profile has located the
# bottleneck first). Its costs are named too: dispatch grows complicated and is itself part of the performance
# (which path a shape takes, whether it hits the compile cache, whether small shapes land in big-shape kernels, how
# often the fallback fires); compiled versions multiply, warm-up grows and first requests stutter; optimizing the
# hot shape can hurt the cold ones; so the boundary of each specialization should be measured and written down,
# with a generic fallback behind it.
#
# Each point, with this trace's numbers from the records above (where a record is missing, the row says which):

# %%
lesson.checklist(FILES, STEPS)

# %% [markdown]
# ---
# ## 11. Against PyTorch
#
# Sections 7 to 9 held `lab.ops` against the library it falls back to. A practitioner's alternative is PyTorch, so
# the last comparison puts the two side by side, built so that only the kernels differ:
#
# - **the same library underneath.** `lab.ops`'s library path is cuBLASLt, called through nvmath-python with a
#   workspace (PyTorch's size on Hopper) and the first algorithm cuBLASLt's heuristic returns for the shape, the
#   alignments and the epilogue: the library `torch.mm` and `F.linear` call, chosen the way they choose. Where
#   `lab.ops` takes the library path the two should tie, which checks the harness; where it takes one of the lab's
#   kernels, the difference is that kernel's.
# - **the same process, the same memory.** PyTorch runs in the process that runs `lab.ops`, on the same arrays: the
#   CuPy buffers are handed to PyTorch through DLPack (zero copy), so both read the same inputs at the same
#   addresses, on the same stream.
# - **interleaved rounds, per-round ratios.** Each method runs once per round, in an order rotated from round to
#   round, and every figure below is PyTorch's time over `lab.ops`'s *within one round* (above one, `lab.ops` is
#   faster), shown round by round or as the median and range over the rounds, so that a drift of the GPU between
#   rounds cancels instead of deciding the comparison.
#
# Accuracy comes before speed: every output is checked against a float64 reference with the fp32-accumulation error
# bound. PyTorch's defaults let cuBLAS add split-K slices in fp16 or bf16 (its reduced-precision reductions), which
# can leave that bound; the tables name the samples where it did. `lab.ops` limits the library to fp32 reductions.
#
# The records this section reads, each with where it was made (or the command that makes it):

# %%
TORCH = ops_torch.replayed()
print(ops_torch.sources(TORCH))

# %% [markdown]
# ### The sweep: one path per shape class
#
# `lab tune --table` times every path `lab.ops` has against the library on sample shapes of each shape class (the
# classes are the dispatch table's rules, in order), cold L2, in interleaved rounds. A path's score on a class is the
# geometric mean, over the class's samples, of the library's time over the path's: the library scores one, and a
# lab kernel takes a class only where it beats the library on the class as a whole, by the sweep's margin. The
# record keeps every sample where the chosen path still loses to another (a crossover inside the class, which a
# finer rule would serve). The table written from these choices is section 3's; the last line says whether the
# file in force holds it.

# %%
ops_torch.sweep_choices(TORCH["ops_sweep"])

# %% [markdown]
# ### `lab.ops` under that table against PyTorch, sample by sample
#
# Every sample again, now through `lab.ops` with the sweep's table, against what a PyTorch user writes for the same
# call (`torch.mm`; `torch.addmm` for a bias or a residual alone; `F.linear`, then the activation in place, for the
# rest), timed cold and back to back. The last column names the samples whose result left the error bound.

# %%
ops_torch.per_sample(TORCH["ops_sweep"])

# %% [markdown]
# Per class, the median and the range of every per-round ratio of its samples:

# %%
ops_torch.class_summary(TORCH["ops_sweep"])

# %% [markdown]
# The same ratios as a figure: one point per sample (the median of its rounds), the bar its range over the rounds,
# the colour the path `lab.ops` took, an open marker where PyTorch's result left the error bound.

# %%
ops_torch.show(plots.ops_torch_ratios, ops_torch.ratio_rows(TORCH["ops_sweep"]), "ops_sweep",
               source=ops_torch.label(TORCH["ops_sweep"]))

# %% [markdown]
# ### Host time per call
#
# A decode step's GEMMs are short enough for the host's cost per call to set the pace (section 9). Here the GPU's
# work is kept small and the calls are timed on the host: `lab.ops` replaying each path's recorded call (the
# library's too), against `torch.mm` and `F.linear` on the same memory, and `lab.ops.rmsnorm` against
# `F.rms_norm`. The last columns take the path the sweep's table picks for each shape.

# %%
ops_torch.host_table(TORCH["ops_host_cost"], TORCH["ops_sweep"])

# %% [markdown]
# ### Two models' layers on a serving trace, eager and graphed
#
# `lab.studies.ops_compare` serves one transformer layer per step of a serving trace (mostly decode steps, a few
# prefills)
# for two model families, one shaped like Llama 3 8B and one like Qwen 2.5 7B (which has a bias on its fused QKV
# projection), in fp16 and in bf16. The PyTorch layer is what a PyTorch user writes: `F.rms_norm` for the two norms,
# `F.linear` for the projections (the bias passed to it), `F.silu` on the gate's `F.linear`, and each residual as
# `torch.addmm(h, x, W.t())` or as `F.linear(x, W) + h`, whichever of the two was faster over the trace (the table
# names it). The `lab.ops` layer calls `lab.ops.rmsnorm` and `lab.ops.matmul` with the bias, the activation and the
# residual as arguments, its outputs preallocated. Both run eager and as CUDA graphs, one graph per distinct M:
# `lab.ops.capture` against `torch.cuda.graph`. Attention itself, and silu(gate) times up, are the same work on
# either side and stay out of both.

# %%
ops_torch.trace_table(TORCH)

# %% [markdown]
# Where the difference comes from: each op kind alone over the same trace (each M weighted by its steps), for one
# of the four traces.

# %%
ops_torch.per_kind_table(TORCH, "ops_vs_torch_llama3_8b_float16")

# %% [markdown]
# And the host's side of the layer: a few of its single ops called back to back, the wall time per call beside the
# GPU time of the same op; the bottleneck is whichever of the two set the pace.

# %%
ops_torch.trace_host_table(TORCH)

# %% [markdown]
# ### Row operations, round to round
#
# Notebook 07's row operations through `lab.ops` (`rmsnorm`, `layernorm`, `softmax`), timed in interleaved rounds
# beside PyTorch's kernels on the same buffers and the device copy of the same bytes (the ceiling). Each way of
# timing is a different suspect for a figure that moves between rounds: a flush that leaves dirty lines in the L2,
# buffers allocated afresh, an allocation per call, one call after the GPU has idled, calls back to back, a CUDA
# graph. The table says which methods moved between rounds and what the study reads into each pattern; the lines
# after it count them over the cases.

# %%
ops_torch.rowops_table(TORCH["rowops_study"])

# %%
print(ops_torch.rowops_reading(TORCH["rowops_study"]))

# %% [markdown]
# ### The targets
#
# The runtime's targets against PyTorch, each held against the records above with the measured value beside it.

# %%
print(ops_torch.targets(TORCH))

# %% [markdown]
# ---
# ## What to take away
#
# - Dispatch is part of the kernel's performance: the best kernel is worth nothing on a shape it is never given,
#   and harmful on one it should not be given. A table of rules, each with the record its boundary comes from, and
#   a tune cache in front of it keyed by bucket and by machine, turn "which kernel?" into data one can read.
# - Where the steps are is not where the time is. Rank buckets by GPU time, not by count, before deciding what to
#   specialize.
# - Every variant is a compile and a cubin. The compile is paid by whoever first needs it, so move it out of the
#   requests: a warm cache, or a manifest of the shapes the service will see, run before the first request.
# - Forcing the hot shape's kernel everywhere is the cost of having no dispatch; the boundary sweep says where each
#   specialization stops paying, and the table should stop there.
# - The host's cost of deciding must stay below the GPU time of the shortest call it decides for; cache the
#   decision and the prepared launch, and measure what is left.
# - Compare against what users call, under the same conditions: the same library underneath, the same process and
#   memory, interleaved rounds, ratios taken within a round. Then the shapes where both call the library check the
#   harness, and what remains (the lab's kernels where the library is weak, the host's cost per call) is the lab's
#   own, held against its targets.
