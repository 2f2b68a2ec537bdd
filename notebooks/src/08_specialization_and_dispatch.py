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

# %% [markdown]
# ## What you will learn
#
# - How a **dispatch table** turns "which kernel?" into data: ordered rules, each a condition on the shape, matched
#   first to last, with cuBLAS behind them all; you will load the lab's table, run its matcher by hand and check it
#   against `lab.ops`'s own answer.
# - How **bucketing** (M rounded up to a power of two) turns an open set of batch sizes into a few keys one can tune
#   and warm up ahead of time.
# - How **autotune** picks a kernel per bucket: every candidate checked against float64 first, then timed, the best
#   kept; written out as a loop, and held against what the table alone would have picked.
# - What specialization costs: compile time as variants multiply, the first request of a fresh process, the host's
#   time per call to decide.
# - Where a specialization stops paying: the decode GEMV against the other paths as M grows, read from the sweep.
# - How `lab.ops` compares with cuBLAS alone, with one generic kernel and with PyTorch on a Llama-like serving trace.

# %% [markdown]
# Notebooks 03 to 07 built kernels that are each fast on some shapes: the persistent TMA GEMM on large square
# ones, split-K when K is long and the output small, the decode GEMV when M is a handful of tokens, the portable
# cp.async GEMM where TMA cannot read the operands. A model does not call "a kernel"; it calls `matmul` thousands of
# times per second with shapes that change every step. This notebook is about the layer that sits between the two:
# which kernel a call gets, who decides, what the decision costs, and whether it pays.
#
# `lab.ops` is that layer, and the questions come in this order:
#
# 1. **what `lab.ops` is**, in six lines, checked against float64 and timed against cuBLAS (run live on a GPU);
# 2. **the trace**: a Llama-like layer served for a thousand steps, where its shapes and its GPU time fall, and the
#    byte count that says why small M is a different problem;
# 3. **the dispatch table**: the rules, the matcher, the buckets, and which path each shape of the trace took;
# 4. **autotune** per bucket: the loop written out (every candidate checked, then timed; the winner stored);
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
import dataclasses
import inspect
import json
import math
import timeit

from lab import lessons
from lab.lessons import ops as lesson
from lab.lessons import ops_torch, plots
from lab.lessons.plots import ops as ops_plots
from lab.ops import dispatch, rules, shapes, tune
from lab.ops.paths import PATHS
from lab.ops.shapes import GemmShape
from lab.studies import serving_trace as st

# %% [markdown]
# ## Live or replay
#
# The studies this notebook reads take minutes of GPU time each (the autotune of every bucket, a thousand steps
# timed six ways, fresh processes for the latency), so every section replays their records, in both modes. LIVE (a
# GPU here) adds what a few seconds can measure in this run: section 1's call, checked and timed, and section 4's
# tune loop for one bucket. The box lists every record with the device, date and commit it was made on, or that it
# is missing and the command that makes it (section 11 lists its own records the same way).

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
# The six lines, run when a GPU is here (a decode-sized GEMM with a fused residual), then the same call checked
# element by element against a float64 reference with the error bound `lab.ops.tune` holds every candidate to, and
# timed against what a CuPy user writes (`cupy.matmul` plus the residual: cuBLAS and one elementwise kernel), cold
# L2, in the same run:

# %%
if MODE.live:
    import cupy as cp

    import lab.ops as ops
    from lab.lessons.common import run_stamp
    from lab.measure.timing import measure
    from lab.ops import api

    x, w, h = lesson.usage_inputs()  # fp16: x is M × K, w a linear layer's weight (N × K), h the residual (M × N)
    y = ops.matmul(x, w, layout="TN", residual=h)  # y = x @ w.T + h, on the path lab.ops picks
    cp.cuda.get_current_stream().synchronize()
    print(lesson.usage_report(x, w, h, y, ops.stats()))

    # The check against float64, written out: the reference and each element's bound (fp32 accumulation, one
    # rounding to fp16; one more where the path stored the product before adding the residual).
    M, K = x.shape
    N = w.shape[0]
    shape = GemmShape(M, N, K, "float16", "TN", True, "residual", GPU.sm_count)
    exact = api.default_runtime().last_exact  # whether the epilogue read the fp32 product
    ref, bound = tune.reference_and_bound(shape, x, w, None, None, h, rounded_product=not exact)
    err = cp.abs(y.astype(cp.float64) - ref)
    outside = int((~(err <= bound)).sum())  # NaN counts as outside
    print(f"check: largest |y - ref| = {float(err.max()):.3g}, largest bound = {float(bound.max()):.3g}; "
          f"{outside} of {err.size} elements outside the bound")

    # One timing against the library baseline in the same run (median of CUDA-event timings, L2 flushed each time).
    out = cp.empty_like(y)
    mine = measure(lambda i: ops.matmul(x, w, layout="TN", residual=h, out=out), l2="cold")
    lib = measure(lambda i: cp.add(cp.matmul(x, w.T), h, out=out), l2="cold")
    print(f"{run_stamp()}:\n  lab.ops {1e3 * mine.median_ms:.1f} us, cupy.matmul + add {1e3 * lib.median_ms:.1f} us: "
          f"cuBLAS's time / lab.ops's = {lib.median_ms / mine.median_ms:.2f}x")
else:
    print("REPLAY: no GPU here, so lab.ops is not called. On a GPU this cell runs ops.matmul(x, w, layout='TN', "
          "residual=h), prints the decision and ops.stats(), checks the result against float64 and times it against "
          "cupy.matmul; the replayed times of decode-sized shapes are in section 4 (the tune loop) and section 11.")

# %% [markdown]
# ---
# ## 2. The trace
#
# `lab.studies.serving_trace` models one layer of a Llama-like model: two RMSNorms and five GEMMs, each
# activation `M × K` against a weight stored `N × K` (layout TN):

# %%
lesson.layer_gemms()

# %% [markdown]
# **The count that motivates everything below.** A GEMM reads its activation (`M × K`) and its weight (`N × K`)
# and writes its output (`M × N`); it does `2·M·N·K` FLOPs. At small M the weight is almost all of the bytes, and it
# does not shrink with M: the time to read it is a floor that does not move until the FLOPs catch up. The cell
# counts both for the fused QKV projection, and the FLOPs per byte (the arithmetic intensity) that follow:

# %%
name, N, K, epi = st.GEMMS[0]  # the fused QKV projection: M x N x K, its weight N x K
print(f"{name}: N = {N}, K = {K}, fp16 (2 bytes per element)")
print(f"{'M':>6} {'GFLOP':>9} {'MB moved':>9} {'weight share':>13} {'FLOP per byte':>14}")
for M in (1, 8, 16, 64, 512, 4096):
    flops = 2 * M * N * K
    bytes_moved = 2 * (M * K + N * K + M * N)  # read x and w once, write y once
    print(f"{M:>6} {flops / 1e9:>9.3f} {bytes_moved / 1e6:>9.1f} {2 * N * K / bytes_moved:>13.1%} "
          f"{flops / bytes_moved:>14.1f}")
sweep = lesson.boundary(FILES["ops_trace"]) or {}
if sweep.get("us", {}).get("decode"):
    M, us = sweep["M"][0], sweep["us"]["decode"][0]
    bytes_moved = 2 * (M * K + N * K + M * N)
    print(f"the decode GEMV at M = {M} on this GEMM ({lesson.label(FILES['ops_trace'])}): {us:.1f} us, so "
          f"{bytes_moved / (us * 1e-6) / 1e12:.2f} TB/s of the weight streamed from memory")

# %% [markdown]
# Read the last column: a handful of tokens does about as many FLOPs per byte as tokens per step, far below what
# tensor cores need to be busy, so the fastest kernel for small M is the one that streams the weight at the memory's
# speed (the decode GEMV of notebook 05), and the fastest for large M is the tiled tensor-core GEMM. Somewhere in
# between the two cross; where, for each GEMM of the layer, is what the dispatch table has to encode.

# %% [markdown]
# A step runs the layer for `M` tokens. Most steps are **decode** steps: `M` is the batch, drawn from a skewed law
# (most steps run small batches, a few run large ones). A small share are **prefill** steps: `M` is a prompt's
# length, rounded to a sequence bucket. The trace is regenerated here from the record's seed (CPU only,
# deterministic) and checked against the summary the record keeps:

# %%
TRACE = FILES["ops_trace"]
STEPS = lesson.trace_of(TRACE)  # regenerated from the record's seed
print(lesson.trace_summary(STEPS))

# %% [markdown]
# Left: how many steps have each `M`. Right (from the record's per-step times): each M bucket's share of the steps
# beside its share of `lab.ops`'s GPU time. The two need not agree: a prefill step of thousands of tokens costs as
# much as many decode steps, so a bucket can be rare and still hold much of the time.

# %%
BUCKETS = lesson.bucket_times(TRACE, STEPS)
lessons.figure(plots.trace_shapes(lesson.shape_rows(TRACE, STEPS), BUCKETS, source=lesson.label(TRACE)))

# %% [markdown]
# What to look at: on the left, how far the decode steps' M values spread (the axis is logarithmic) and how few the
# prefill steps are; on the right, the buckets where the coloured bar (time) stands above the grey one (steps):
# those are the rare steps that cost the most, usually the prefills.

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
# comes from. Load it and print its rules:

# %%
raw = json.loads(rules.DEFAULT_FILE.read_text())  # the file as JSON: a list under "rules"
TABLE = rules.load(rules.DEFAULT_FILE)  # parsed and checked: every condition and setting known
print(f"{rules.DEFAULT_FILE.name}: {len(raw['rules'])} rules, read first to last; cuBLAS serves what none serves")
for i, rule in enumerate(TABLE.rules, 1):
    print(f"  {i}. {rule.describe()}")
print("the table lab.ops runs with by default:", TABLE == rules.DEFAULT)

# %% [markdown]
# **The matcher.** A rule matches when all of its conditions hold; the runtime takes the first rule that matches
# *and* whose path can serve the shape (each path says in one sentence why it refuses one: the decode GEMV refuses
# M above what it was built for, split-K refuses operands TMA cannot read in place). These are `lab.ops`'s own
# lines:

# %%
print(inspect.getsource(rules.Rule.matches))
print(inspect.getsource(dispatch.Runtime.rule_decision))

# %% [markdown]
# The conditions themselves, re-implemented here from the table's format (the docstring of `lab/ops/rules.py`):
# sizes inclusive, tiles of 128 × 128, K over the larger of M and N, the last wave's share of the SMs with the
# persistent kernel's 128 × 256 tiles. `decide` is the runtime's loop above with them.

# %%
def holds(name, value, shape):
    """One condition of a rule."""
    if name in ("min_m", "min_n", "min_k"):
        return getattr(shape, name[-1].upper()) >= value
    if name in ("max_m", "max_n", "max_k"):
        return getattr(shape, name[-1].upper()) <= value
    if name == "min_tiles":
        return shape.tiles >= value  # ceil(M / 128) * ceil(N / 128)
    if name == "max_tiles":
        return shape.tiles <= value
    if name == "min_k_over_mn":
        return shape.K / max(shape.M, shape.N) >= value
    if name == "max_last_wave":
        return shape.last_wave <= value
    if name == "epilogue":
        return (shape.epilogue != "none") == value
    return getattr(shape, name) == value  # aligned, dtype, layout


def decide(table, shape, arch):
    """The first rule that matches and whose path serves the shape, else cuBLAS."""
    for i, rule in enumerate(table.rules, 1):
        if all(holds(n, v, shape) for n, v in rule.when) and PATHS[rule.path].refusal(shape, arch) is None:
            return rule.path, dict(rule.config), f"rule {i}"
    return "cublas", {}, "fallback"

# %% [markdown]
# **Predict first.** For each shape below, which rule takes it? The cell prints what the rules read: the sizes, the
# tiles, how K-heavy it is, the last wave, the alignment and the epilogue. Write your answers down, then run the
# next cell.

# %%
def gemm(M, N, K, aligned=True, epilogue="none"):
    return GemmShape(M, N, K, "float16", "TN", aligned, epilogue, GPU.sm_count)


EXAMPLES = {"qkv, one token": gemm(1, 6144, 4096), "qkv, a batch of 12": gemm(12, 6144, 4096),
            "down, a batch of 300": gemm(300, 4096, 14336, epilogue="residual"),
            "o_proj, a 2048-token prefill": gemm(2048, 4096, 4096, epilogue="residual"),
            "4095 cubed (rows not 16-byte multiples)": gemm(4095, 4095, 4095, aligned=False),
            "K-heavy 256 x 256 x 65536": gemm(256, 256, 65536)}
for what, s in EXAMPLES.items():
    print(f"{what:42s} M={s.M:<5} N={s.N:<5} K={s.K:<6} tiles={s.tiles:<5} K/max(M,N)={s.K / max(s.M, s.N):<7.2f} "
          f"last wave={s.last_wave:.2f} aligned={s.aligned} epilogue={s.epilogue}")

# %%
for what, s in EXAMPLES.items():
    path, config, why = decide(TABLE, s, GPU.arch)
    assert (path, config, why) == lesson.table_decision(TABLE, s, GPU.arch)  # lab.ops's answer, the same
    assert [all(holds(n, v, s) for n, v in r.when) for r in TABLE.rules] == [r.matches(s) for r in TABLE.rules]
    refused = [f"{r.path} ({PATHS[r.path].refusal(s, GPU.arch)})" for r in TABLE.rules
               if r.matches(s) and PATHS[r.path].refusal(s, GPU.arch)]
    print(f"{what:42s} -> {why}: {lesson.candidate_label(path, config)}"
          + (f"   (matched but refused: {'; '.join(refused)})" if refused else ""))
print("every decision above equals lab.ops's (lab.lessons.ops.table_decision, the runtime's loop without a GPU), "
      "and every condition equals Rule.matches")
print("a refusal, for comparison: decode on", EXAMPLES["down, a batch of 300"].M, "rows:",
      PATHS["decode"].refusal(EXAMPLES["down, a batch of 300"], GPU.arch), "| split_k on 4095 cubed:",
      PATHS["split_k"].refusal(EXAMPLES["4095 cubed (rows not 16-byte multiples)"], GPU.arch))

# %% [markdown]
# **Buckets.** The tune cache cannot hold an entry per M (a serving loop sees every batch size), so it files a
# shape under its bucket: M rounded up to a power of two, N and K exact (they are the model's weight sizes). The
# rounding is one line; here it is on a list of M values, and the key a whole shape gets:

# %%
print(inspect.getsource(shapes.m_bucket))
for M in (1, 2, 3, 5, 8, 9, 12, 16, 17, 24, 33, 100, 129, 300, 4095):
    bits = (M - 1).bit_length()
    print(f"  M = {M:5d}: M - 1 = {M - 1:>13b} in binary, {bits:2d} bits -> bucket M<={shapes.m_bucket(M)} = 2**{bits}")
print("the tune cache's key for qkv at M = 12:", shapes.bucket(gemm(12, 6144, 4096)))

# %%
per_m = STEPS.calls_per_m()
print(f"the trace's {len(per_m)} distinct M values fall into {len({shapes.m_bucket(m) for m in per_m})} M buckets: "
      f"that many tune entries (per GEMM) cover every step")

# %% [markdown]
# The table's rules once more, with each rule's note (the "why" column, read from the file) and the share of the
# trace's GEMM calls each would take if the table alone decided, computed here for the records' GPU:

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
#
# The loop, written out for one bucket: qkv at M = 12, filed under M<=16. The candidates are listed here in both
# modes (it is the paths' own refusals, no GPU needed); the check and the timing need a GPU, so in replay the cell
# reads the rows the same loop wrote into `ops_tune.json` on the records' GPU.
#
# **Predict first.** The table is the prediction: which path does it pick for this bucket, and is it the one the
# loop keeps?

# %%
TUNE = FILES["ops_tune"]
shape = gemm(12, 6144, 4096)
top = dataclasses.replace(shape, M=shapes.m_bucket(shape.M))  # tuned at the bucket's largest M
path, config, why = decide(TABLE, top, GPU.arch)
print(f"{shapes.bucket(top)}: the table alone picks {lesson.candidate_label(path, config)} ({why})")

# %%
candidates = tune.candidates(top, GPU.arch)  # every path and configuration that can serve the shape
print(f"{len(candidates)} candidates: " + ", ".join(lesson.candidate_label(p, c) for p, c in candidates))
if MODE.live:
    from lab.lessons.common import run_stamp
    from lab.ops import api

    inputs = tune.make_inputs(top, seed=20261130)  # a, b, bias, activation, residual: random, never zeros
    fused = tune.reference_and_bound(top, *inputs)  # float64 result and each element's bound
    expected = (fused, tune.reference_and_bound(top, *inputs, rounded_product=True) if top.epilogue != "none"
                else fused)
    rows = []
    for p, c in candidates:
        why_not = tune.check_candidate(api.default_runtime(), top, p, c, inputs, expected)  # check first ...
        rows.append({"path": p, "config": c, **({"rejected": why_not} if why_not else
                                                {"us": tune.time_candidate(top, p, c, inputs)})})  # ... then time
    where = run_stamp()
else:
    rows = lesson.recorded_candidates(TUNE, shapes.bucket(top))  # the rows the same loop wrote on the records' GPU
    where = lesson.label(TUNE) + " (ops_tune.json)"
timed = [r for r in rows or [] if "us" in r]
if timed:
    best = min(timed, key=lambda r: r["us"])  # keep the best
    print(where + ":")
    for r in sorted(rows, key=lambda r: r.get("us", math.inf)):
        shown = (f"{r['us']:8.2f} us  {r['us'] / best['us']:.2f}x the best" if "us" in r else
                 f"rejected: {r['rejected']}")
        print(f"  {lesson.candidate_label(r['path'], r['config']):30s} {shown}")
    print(f"kept for the bucket: {lesson.candidate_label(best['path'], best['config'])}")
elif rows:
    print("no candidate passed its check: " + "; ".join(f"{r['path']}: {r['rejected']}" for r in rows))
else:
    print(lesson.missing("ops_tune") if TUNE is None else f"ops_tune.json holds no bucket {shapes.bucket(top)}")

# %% [markdown]
# The prediction held against every bucket of the record: the table's pick at each bucket's tuned M against the
# loop's winner, and what the table's pick costs where they differ (from the same record):

# %%
print(lesson.table_against_tune(TUNE, GPU.arch, GPU.sm_count))

# %%
print(lesson.tune_wins(TUNE))

# %% [markdown]
# One panel per GEMM: every candidate's time over the winner's, per M bucket (the winner sits on the line at one;
# a candidate rejected by its check has no point there).

# %%
lesson.show(plots.autotune_candidates, lesson.tune_rows(TUNE), "ops_tune", source=lesson.label(TUNE))

# %% [markdown]
# What to look at: the line at one is whoever won the bucket, so read each panel from left to right and watch which
# curve lies on it. The decode GEMV's curve sits on it at the smallest buckets and leaves it steeply; cuBLAS's stays
# near it everywhere (why it is the table's default); the persistent kernel reaches it only on the largest buckets
# of some GEMMs. The gap between the winner and the runner-up is what tuning buys in that bucket.
#
# Every bucket: the winner, the runner-up and by how much, cuBLAS and the generic path against the winner, and the
# rejected candidates with the reason their check gave.

# %%
lesson.tune_table(TUNE)

# %% [markdown]
# ---
# ## 5. Compile time and cache growth as variants multiply
#
# Every specialization is a kernel variant: a tile, a pipeline depth, an epilogue, a data type, an arch, and for
# attention a head dim, a causal flag and a paged cache. Each one is a separate NVRTC compile and a separate cubin in
# the cache, and the variants multiply. `lab.studies.compile_study`
# builds such a grid one variant at a time into an empty cache, timing each miss (the key, the NVRTC compile,
# writing the cubin) and then each hit (the lookup). The growth curve adds one axis at a time; every point is a sum
# of measured compiles, not an extrapolation.
#
# **This record was measured on the development machine's CPU (NVRTC compiles on the host), with no GPU.** Compile
# time is host CPU time: on another machine the seconds scale with its CPU, the shape of the growth does not.
#
# **Predict first.** The count of variants is the product of the axes' lengths; if every variant cost what the
# first one did, the total would be that product times one compile:

# %%
COMPILE = FILES["compile_variants"]
PREDICTED = {}
if COMPILE:
    for entry in COMPILE["axes"]:
        sizes = {axis: len(values) for axis, values in entry["axes"].items() if len(values) > 1}
        variants = math.prod(sizes.values())
        one = next(g for g in COMPILE["growth"] if (g["family"], g["series"]) == (entry["family"], entry["rung"])
                   and g["variants"] == 1)
        PREDICTED[entry["family"], entry["rung"]] = (variants, variants * one["compile_s"])
        print(f"{entry['family']} {entry['rung']}: " + " x ".join(f"{n} {axis}" for axis, n in sizes.items())
              + f" = {variants} variants; one compiles in {one['compile_s']:.2f} s, so about "
              f"{variants * one['compile_s']:.0f} s for all")
else:
    print(lesson.missing("compile_variants"))

# %%
print(lesson.compile_summary(COMPILE))

# %%
lesson.show_compile(COMPILE, ("gemm_tc",))

# %%
lesson.show_compile(COMPILE, ("gemm_tc",), strip=True)

# %% [markdown]
# Attention multiplies its own axes. `lab.ops.attention` compiles one kernel per head dim it specializes (64, 128),
# causal flag and type, for each rung it may send a call to: the wgmma rung for prefills on sm_90, the cp.async rung
# (prefills before sm_90, or where the wgmma rung refuses a call), and the split-KV decode rung. The same study built each of those variants as the attention
# families themselves configure them (their shared memory sized for the arch), so the count below is at most what
# `lab.ops.attention` adds to a Hopper process's cache (a process compiles only the variants its calls reach),
# beside the GEMM variants above:

# %%
print(lesson.compile_share(COMPILE, ("attention", "attention_decode")))

# %%
lesson.show_compile(COMPILE, ("attention", "attention_decode"))

# %% [markdown]
# What to look at: in the growth figure, whether each solid line (seconds) and its dashed twin (megabytes) keep one
# slope while the axis multiplied in changes: then the cost is linear in the number of variants, and the number of
# variants is a product of the axes. A steeper segment is an axis whose variants each cost more than the first one
# did (a fused epilogue is more code to compile). In the strip figure, the spread inside one strip (the same rung
# with other knobs) and the distance between the misses and the hits: a cache hit costs a lookup, a miss a
# compile, which is what a warm cache buys.
#
# The prediction held against the record (the last point of each growth curve); a ratio above one says the later
# variants cost more to compile than the first:

# %%
for (family, rung), (variants, predicted) in PREDICTED.items():
    last = max((g for g in COMPILE["growth"] if (g["family"], g["series"]) == (family, rung)),
               key=lambda g: g["variants"])
    print(f"{family} {rung}: predicted {predicted:.0f} s for {variants} variants; measured {last['compile_s']:.0f} s "
          f"for {last['variants']} ({last['compile_s'] / predicted:.2f}x the prediction)")

# %% [markdown]
# ---
# ## 6. The first request: cold, warm, and a warm-up manifest
#
# A compile happens the first time a process needs a variant that is not in the cache, that is on the first
# request that brings a new shape: exactly the request a user is waiting on. `lab.studies.ops_study` starts fresh
# processes, each serving the same stream of requests (the trace's steps in order, the longest prefills left out;
# one layer per request), and times every request from its first call to its result:
#
# - **empty caches**: the build cache and CuPy's cache are empty, so the first requests compile;
# - **warm caches**: a second process on the caches the first one filled;
# - **a manifest**: before the first request, `lab.ops.warmup` runs every shape the stream will use once (the list
#   a service would declare), so the compiles move out of the requests into a warm-up; with empty caches and with
#   warm ones.
#
# "Compiles by the first result" counts the process's NVRTC compiles until the first request returns, the
# manifest's included; the next column keeps only those the first request made itself.
#
# **Predict first.** With a warm cache nothing compiles. If compiles were all a first request pays for, the warm
# process's first request would take about what its median request takes:

# %%
LATENCY = FILES["ops_latency"]
warm = next((r for r in lesson.latency_rows(LATENCY) or [] if r["scenario"] == "warm_caches" and "error" not in r),
            None)
print(f"prediction: the warm first request takes about its median, {warm['p50_ms']:.2f} ms ({warm['compiled']} "
      "compiles)" if warm else lesson.missing("ops_latency"))

# %%
lesson.latency_table(LATENCY)

# %% [markdown]
# The warm-cache target, held against the record (its first request's time; the time from process
# start, imports included, is printed beside it):

# %%
print(lesson.latency_target(LATENCY))

# %%
lesson.show(ops_plots.first_request_latency, lesson.latency_rows(LATENCY), "ops_latency",
            target_ms=lesson.TARGETS["warm_first_ms"], source=lesson.label(LATENCY))

# %% [markdown]
# What to look at: in each group, the first-request bar against the median bar, on a log axis, and both against
# the dashed target. With empty caches the first request pays for compiling. With a warm cache nothing compiles,
# so where the first-request bar still stands far above the median bar the prediction fails: the first request
# pays for something other than NVRTC. The groups with a manifest show whether running the shapes once before the
# first request removes that cost too.
#
# The prediction held against the record, and where the warm process's first request went (the study's profile of
# it):

# %%
if warm:
    print(f"predicted about {warm['p50_ms']:.2f} ms; measured {warm['first_ms']:.1f} ms, "
          f"{warm['first_ms'] / warm['p50_ms']:.0f}x the median request, with {warm['compiled']} compiles")
print(lesson.first_request_profile(LATENCY, "warm_caches"))

# %% [markdown]
# Read the profile from the top: the outermost call first, then what it spent its time in. Where the library's
# first call (cuBLAS loading its kernels and setting itself up) and the first imports of the modules a call needs
# hold most of it, that cost is paid once per process, cache or no cache, and only a warm-up before the first
# request moves it out of a user's way.

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
# "One generic kernel" can mean either of rungs 03 and 06, so the runtime's target for the trace is held against
# both.
#
# **Predict first.** The tune record alone predicts the GEMMs' part of the answer: weight each bucket's winner and
# cuBLAS by the trace's calls in that bucket (each bucket was timed at its largest M, so this leans towards the
# slower end of each bucket):

# %%
by_bucket = {(r["gemm"], r["m_bucket"]): r for r in lesson.tune_rows(TUNE) or []}
lab_us = cublas_us = 0.0
for M, calls in per_m.items():
    for gemm_name, *_ in st.GEMMS:
        r = by_bucket.get((gemm_name, shapes.m_bucket(M)))
        if r and "cublas" in r["candidates"]:
            lab_us += calls * r["winner_us"]
            cublas_us += calls * r["candidates"]["cublas"]
if lab_us:
    print(f"predicted from ops_tune.json: the GEMMs under lab.ops {lab_us / 1e3:.1f} ms, under cuBLAS "
          f"{cublas_us / 1e3:.1f} ms per layer over the trace: cublas / lab_ops = {cublas_us / lab_us:.2f}x")
else:
    print(lesson.missing("ops_tune"))

# %%
lesson.totals_table(TRACE)

# %%
print(lesson.trace_targets(TRACE))

# %% [markdown]
# The whole layer holds two RMSNorms besides the GEMMs, and the `cublas` method composes them from CuPy's own
# operations (what a library user writes), while `lab.ops` runs one kernel each. A second record times the GEMMs
# alone (epilogues included) through both, so the GEMMs' share of the ratio above is on record by itself, and the
# prediction above can be held against it:

# %%
print(lesson.gemm_share(FILES["ops_trace_gemms"], TRACE))
gemm_totals = (FILES["ops_trace_gemms"] or {}).get("totals_us") or {}
if lab_us and gemm_totals.get("lab_ops") and gemm_totals.get("cublas"):
    measured = gemm_totals["cublas"]["total_us"] / gemm_totals["lab_ops"]["total_us"]
    print(f"the prediction from the tune record, {cublas_us / lab_us:.2f}x, against the GEMMs timed on the trace, "
          f"{measured:.2f}x")

# %% [markdown]
# Per distinct step: how many times faster `lab.ops` is than cuBLAS, rung 03 and rung 06 (above the line it wins),
# decode steps as filled circles, prefill steps as open squares.

# %%
lesson.show(plots.trace_speedups, lesson.speedup_rows(TRACE), "ops_trace", source=lesson.label(TRACE))
print(lesson.speedup_reading(TRACE))

# %% [markdown]
# What to look at: whether any marker falls below the black line (a step `lab.ops` loses), and how the three
# colours order themselves. Against cuBLAS the points sit in a narrow band; the record of the GEMMs alone says how
# much of that band the RMSNorms make. Against the generic kernel the points fall as M grows, where the tiled
# tensor-core kernels use their tiles fully; the lines under the figure count the step sizes `lab.ops` loses.

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
#
# **Predict first.** Section 2's count says the GEMV's time is flat while the weight dominates the bytes; the
# table's decode rule is the lab's prediction of where the flat part ends:

# %%
i = [r.path for r in TABLE.rules].index("decode")
print(f"the table sends M <= {lesson.decode_rule_max_m()} to the decode GEMV (rule {i + 1}: "
      f"{TABLE.rules[i].describe()})")

# %%
lesson.show(plots.decode_boundary, lesson.boundary(TRACE), "ops_trace", rule_max_m=lesson.decode_rule_max_m(),
            source=lesson.label(TRACE))
print(lesson.boundary_reading(TRACE))

# %% [markdown]
# What to look at: the decode GEMV's curve against the lowest of the others at each M. It lies under them at the
# smallest M, then the curves cross; read the first crossing, not the last win. Between the first crossing and the
# steep rise the curves are nearly tied, and the lines printed under the figure name every M where decode is ahead
# again: a win that small at one M of the sweep is within what a rule per range can ignore, while the steep rise
# after it is where the GEMV stops being a candidate at all.

# %% [markdown]
# ---
# ## 9. Dispatch overhead
#
# Deciding costs host time on every call, and a decode step's GEMMs are short enough for host time to matter. The
# study makes the GPU work tiny, so that the host is the bottleneck, and times per call: the launches `lab.ops`
# recorded, **replayed raw** (the floor: what the launches alone cost from Python); `lab.ops` with an output given
# (its decision cached, its launches replayed); `lab.ops` allocating its output; and `cupy.matmul`. The overhead is
# `lab.ops` minus the raw replay.
#
# **Predict first.** With an output given, `lab.ops`'s fast path builds one flat key from the call's addresses,
# shapes and strides and looks it up in a dictionary. That much is measured here, on this machine's CPU, in this
# run (a tuple of the same length, one dictionary lookup):

# %%
fast = {tuple(range(19)): "replay"}
n = 200_000
seconds = timeit.timeit(lambda: fast.get(tuple([1, 2, 3, 4, 5, (8, 4096), (8192, 2), (4096, 4096), (8192, 2),
                                                (8, 4096), (8192, 2), "e", "e", "TN", None, None, None, None,
                                                None])), number=n)
print(f"measured in this run on this machine's CPU: {1e6 * seconds / n:.2f} us per key built and looked up (the "
      f"runtime's target for its whole overhead: {lesson.TARGETS['overhead_us']:g} us per call)")

# %%
OVERHEAD = FILES["ops_overhead"]
lesson.overhead_table(OVERHEAD)

# %%
lesson.show(plots.dispatch_overhead, lesson.overhead_rows(OVERHEAD), "ops_overhead",
            target_us=lesson.TARGETS["overhead_us"], source=lesson.label(OVERHEAD))

# %% [markdown]
# What to look at: the first two bars of each group (the raw replay and `lab.ops` with an output given) and the
# dashed line above the first one, the runtime's target. The step between the two bars is all that deciding costs
# once a shape is known, and the prediction above says how much of it one key and one lookup explain; the third bar
# is the same call allocating its output, and the fourth what a library call from Python costs on the host.

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
# **Predict first.** Where the table sends a class to the library, `lab.ops` and PyTorch call the same cuBLASLt
# algorithm on the same memory, so the ratio there should be a tie; the lab's own kernels are where it can differ:

# %%
print("classes served by the library (predicted: a tie): "
      + ", ".join(n.split(":")[0] for n, r in zip(TABLE.notes, TABLE.rules, strict=True) if r.path == "cublas"))
print("classes served by a lab kernel (predicted: the kernel's gain or loss): "
      + ", ".join(f"{n.split(':')[0]} ({r.path})" for n, r in zip(TABLE.notes, TABLE.rules, strict=True)
                  if r.path != "cublas"))

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
# What to look at: the grey-coloured points (the library path) should hug the tie line, which checks the harness,
# and their bars say how much two identical calls vary from round to round; the points of the lab's kernels are
# where the comparison says something, and an open marker is a sample where PyTorch was fast but left the error
# bound.

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
