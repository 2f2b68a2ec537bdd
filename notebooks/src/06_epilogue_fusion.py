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
# # 06 — Epilogue fusion: computing on the way to memory
#
# A linear layer is rarely a bare GEMM. Its output gets a bias, maybe a per-row or per-column scale, an
# activation (ReLU, GELU, SiLU), a clamp, a residual, and before the next layer perhaps a quantization to int8 or
# fp8. Written as library calls, each of those is one more kernel that reads the GEMM's output `C` from memory
# and writes it back, with one more intermediate array in between. Yet every value they need is already in the
# GEMM's registers, one instruction before the store: applying them there, in the GEMM's **epilogue**, removes
# the extra kernels and the extra passes over `C`.
#
# This notebook follows that idea through the lab's code and its records:
#
# 1. why the write-back matters: the bytes a separate pass adds, before anything is measured;
# 2. the functor chain of `kernels/common/lab_epilogue.cuh`: the ops, their code, and what fusing them does to
#    rung 06's compiled kernel;
# 3. correctness: what the checks cover, and the quantizers on their special values;
# 4. time: the fused rung against the same rung without an epilogue, and against two library paths;
# 5. DRAM bytes, fused and unfused, against the minimum;
# 6. the optimization checklist: library calls, graph-level fusion, Triton, the lab's own CUDA, side by side
#    in time, bytes and lines of code;
# 7. what rung 06's header predicted, against what was measured.
#
# The fused kernels are gemm_tc rung 06 (the persistent Hopper GEMM) and gemm_fp32 rung 08, built with the chain
# (families `gemm_tc_epilogue` and `gemm_fp32_epilogue` in `lab/families/gemm_epilogue.py`). Every measured figure
# is computed in a cell from records; none is typed in. Ideas from: CUTLASS's epilogue functors and its
# epilogue visitor trees (Chen et al., "EVT", ASPLOS 2024), Triton's matrix-multiplication tutorial (an activation
# fused into the GEMM), and Micikevicius et al., "FP8 formats for deep learning" (2022) for e4m3.

# %%
from lab import lessons
from lab.lessons import fusion as lesson
from lab.lessons import plots

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks the fused rungs and measures a short plan now, shown first; the reference GPU's full
# records are replayed beside it, labelled as such. REPLAY (no GPU) shows only the records, and says so. The box
# lists every record file this notebook reads, with the device, date and commit it was made on.

# %%
MODE = lessons.mode()
print(lesson.banner(MODE, lesson.EPILOGUE_FAMILIES, checklist=True))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for the reference GPU's
# otherwise (rung 06 needs `sm_90a` whatever is here). The LIVE plan, kept to seconds:

# %%
ARCH = lessons.compile_arch(MODE)
print(f"compile reports for sm_{ARCH}")
print(lesson.live_plan_text(lesson.EPILOGUE_FAMILIES))

# %% [markdown]
# ---
# ## 1. Why the write-back matters
#
# A fp16 GEMM of `M × N × K` reads `A` and `B` once and writes `C` once, at best. A separate elementwise pass
# over `C` (the bias and GELU as one generated kernel: the best a library can do without entering the GEMM)
# reads `C` back and writes it again. Written op by op, as `y = y + bias` then the GELU's expression, each
# operation is such a pass, and CuPy widens to fp32 on the way, so the passes move twice the bytes of `C`.
#
# The model below counts bytes only: the family's minimum (`min_dram_bytes`: `A`, `B` and the bias read once,
# `C` written once) against the same plus one pass over `C`. It is arithmetic, not a measurement.

# %%
print(lesson.traffic_model())

# %% [markdown]
# What one pass costs in time follows from two measurements: the device copy's bandwidth (the copy records)
# and the plain GEMM's time (the epilogue records), if both were made on the same GPU. It is a lower bound on an
# unfused epilogue's overhead: the pass alone, at the copy's speed, ignoring its launch.

# %%
TC = lesson.replayed("gemm_tc_epilogue")
print(lesson.unfused_cost(TC))

# %% [markdown]
# ---
# ## 2. The functor chain
#
# `kernels/common/lab_epilogue.cuh` defines the ops once, for every GEMM that wants them. A rung built with
# `EPI_OP1` .. `EPI_OP4` (compile-time knobs, so an unused op costs nothing) computes `v = alpha * acc` (plus
# `beta * C` where `C` is read), applies the ops in that order, each in fp32 on one element, then converts `v`
# to the output type `EPI_OUT`: the GEMM's own, int8, or fp8 e4m3, with one quantization scale for the tensor or
# one per row. `lab/families/epilogue.py` names the same ops for Python; the table checks that both sides agree.

# %%
lesson.ops_table()

# %% [markdown]
# One op, as the header writes it: GELU with the tanh approximation, on the hardware's `tanh.approx`.

# %%
lesson.op_source("gelu_tanh")

# %% [markdown]
# The chain is a template over the four op codes: each call below is resolved at compile time, and an op code of
# 0 compiles to nothing. The residual is read only if some op uses it.

# %%
lesson.function_source("lab_epi_chain")

# %% [markdown]
# And where the tensor-core ladder calls it: the store of two adjacent outputs of one row, which replaces rung
# 06's plain store when any epilogue knob is set (at their defaults the kernel is the plain GEMM, byte for byte).

# %%
lesson.function_source("lab_epi_store_half_pair")

# %% [markdown]
# ### What fusing does to the compiled kernel
#
# Rung 06 compiled three ways: plain, with bias + GELU, and with bias + GELU and an int8 output scaled per row.
# Registers matter most: the consumer warpgroups hold their accumulators in registers, so an epilogue that needed
# many more could spill or lower occupancy. The notable SASS opcodes are static counts (instructions in the
# binary); the fused builds add the bias loads, the GELU's arithmetic and, for int8, byte stores.

# %%
BUILDS = lesson.compile_builds("gemm_tc_epilogue", ARCH, [("bias+gelu_tanh", "same", False),
                                                          ("bias+gelu_tanh", "int8", True)])
lesson.compile_table(BUILDS)

# %%
print(lesson.compile_delta(BUILDS))

# %% [markdown]
# The FP32 ladder's last rung with the same chain, for contrast (fp32 output only):

# %%
FP32_BUILDS = lesson.compile_builds("gemm_fp32_epilogue", ARCH, [("bias+gelu_tanh", "same", False)])
lesson.compile_table(FP32_BUILDS)

# %%
print(lesson.compile_delta(FP32_BUILDS))

# %% [markdown]
# ---
# ## 3. Correct first
#
# A fused epilogue has more ways to be wrong than a plain store: an op applied to the wrong column, a row scale
# read for the wrong row, a tail where a paired store writes one element too many, a quantizer that rounds ties
# the wrong way or turns NaN into garbage. The header fixes the behaviour the tests pin down:

# %%
print(lesson.header_behaviour())

# %% [markdown]
# The families' check cases (`lab.measure.verify.check_rung`, computed from the cases themselves): every op alone and in
# the chains the lessons use, each output type, on shapes whose rows end inside a vector or a tile, in both
# layouts and types.

# %%
print(lesson.check_coverage("gemm_tc_epilogue"))
print(lesson.check_coverage("gemm_fp32_epilogue"))

# %% [markdown]
# Each element is judged against its own bound (`lab.families.epilogue` carries one through every op):

# %%
print(lesson.bounds_doc())

# %% [markdown]
# The quantizers on the values where rounding rules decide: ties, saturation, infinities, NaN, e4m3's
# subnormals. The codes are `lab.families.epilogue`'s references (`quantize_int8`, `quantize_e4m3`), computed here on
# the
# CPU; `tests/test_gpu_epilogue.py` holds the kernels to them bit for bit.

# %%
lesson.quantizer_demo()

# %% [markdown]
# ---
# ## 4. Fused against plain against the library: time
#
# `lab bench gemm_tc_epilogue` times, on each headline problem and in the same run: rung 06 without an
# epilogue (the ceiling, `plain_gemm`), rung 06 with the chain, **cupy_fused** (cuBLAS, then one generated
# elementwise kernel for the whole chain: graph-level fusion) and **cupy_ops** (cuBLAS, then one CuPy
# operation per op, as a user first writes it). The headline problems: bias + GELU at 4096^3 and 8192^3, with a
# fp16 output and with an int8 output scaled per row. LIVE: the first problem, checked and measured now.

# %%
LIVE_TC = lesson.live_records(MODE, "gemm_tc_epilogue")
print(lesson.live_note(LIVE_TC, MODE, "gemm_tc_epilogue"))

# %%
if LIVE_TC:
    print(lesson.epilogue_table(LIVE_TC, "gemm_tc_epilogue"))
    lessons.figure(plots.epilogue_times(LIVE_TC, "gemm_tc_epilogue", target=lesson.TARGETS["fused_over_plain"]))

# %% [markdown]
# The reference GPU's records (replayed): median times (cold L2), the fused rung over the plain one, and how many
# times faster the fused rung is than each library path.

# %%
print(lesson.status(TC, "gemm_tc_epilogue"))
lesson.epilogue_table(TC, "gemm_tc_epilogue")

# %% [markdown]
# Each path's time over the plain GEMM's (the plain GEMM is one; lower is faster), the lesson's target for the
# fused rung dashed:

# %%
lesson.show(plots.epilogue_times, TC, "gemm_tc_epilogue", target=lesson.TARGETS["fused_over_plain"])

# %% [markdown]
# The FP32 ladder's rung 08 with the same chain, against itself without it (no library baseline: CuPy's fp32
# GEMM and cuBLAS's tensor cores would be a different comparison):

# %%
LIVE_FP32 = lesson.live_records(MODE, "gemm_fp32_epilogue")
print(lesson.live_note(LIVE_FP32, MODE, "gemm_fp32_epilogue"))

# %%
FP32 = lesson.replayed("gemm_fp32_epilogue")
print(lesson.status(FP32, "gemm_fp32_epilogue"))
lesson.epilogue_table(FP32, "gemm_fp32_epilogue")

# %%
lesson.show(plots.epilogue_times, FP32, "gemm_fp32_epilogue", target=lesson.TARGETS["fused_over_plain"])

# %% [markdown]
# The lesson's targets, judged on these records: the fused rung within a few per cent of the plain one at
# both sizes, and clearly faster than the op-by-op library path at 4096^3 (the thresholds are printed with the
# verdicts).

# %%
print(lesson.epilogue_targets(TC, FP32))

# %% [markdown]
# An int8 output stores a byte per element instead of two; the arithmetic is the same plus a multiply and a
# conversion. Its time against the fp16 output's, per size:

# %%
print(lesson.int8_against_fp16(TC))

# %% [markdown]
# Across the sweep's sizes: the epilogue's work grows with `M × N` and the mainloop's with `M × N × K`, so at
# small sizes the same epilogue is a larger share of the time.

# %%
print(lesson.sweep_overhead(TC, "gemm_tc_epilogue"))

# %% [markdown]
# **Reading it.** The fused rung's ratio to the plain one is what fusing costs: the epilogue's arithmetic on the
# consumer warpgroups, which rung 06 does not overlap with the next tile's math. The library paths pay for their
# passes over `C` and their launches; the op-by-op path pays once per op, in fp32. A fused ratio close to one
# next to library ratios well above it is the case for fusion; a fused ratio that grows at small sizes says the
# epilogue's arithmetic, not its bytes, is what is left to hide.

# %% [markdown]
# ---
# ## 5. DRAM bytes: fused against unfused, against the minimum
#
# Time alone does not say *why* a path is slower. `lab study checklist` (`lab.studies.checklist`) runs one
# operation, `Y = GELU_tanh(A @ W.T + bias)` in fp16, through four implementations and reads, for one call of
# each, the DRAM bytes with Nsight Compute (caches flushed first), beside the operation's minimum: `A`, `W` and
# the bias read once, `Y` written once. Replayed only: the study needs Nsight Compute and Triton.

# %%
CHECKLIST = lesson.load_checklist()
print(lesson.checklist_status(CHECKLIST))

# %%
print(lesson.checklist_bytes(CHECKLIST))

# %% [markdown]
# Left: each level's time over the plain GEMM's. Right: its DRAM bytes, the minimum dashed.

# %%
lesson.show_checklist(plots.checklist_levels, CHECKLIST)

# %% [markdown]
# ---
# ## 6. The optimization checklist
#
# The levels, in the order to reach for them:
#
# - **library**: `cupy.matmul`, then the bias and the GELU as CuPy expressions. Reach for it first; it is
#   correct, short, and often fast enough.
# - **graph_fusion**: `cupy.matmul` into `Y`, then one generated elementwise kernel for bias + GELU, in place.
#   Worth it when the intermediates cost memory traffic: it removes them, but not the pass over `Y`.
# - **triton**: one Triton kernel, the GEMM with the epilogue applied to its fp32 accumulator. Worth it when the
#   fused operation is hot and the remaining pass over `Y` matters: it crosses the GEMM's boundary.
# - **lab_fused**: the lab's own CUDA epilogue on its own GEMM. Worth its upkeep only where a measured gap
#   remains after the levels above.
#
# Each level is checked against a float64 reference before it is timed. The table gives time, spread, the
# multiple of the plain GEMM, kernels per call, DRAM bytes and lines of code (counted from the sources by
# `lab.studies.checklist`); the sentences after it are `lab.studies.checklist.verdicts`, derived from the same numbers.

# %%
lesson.checklist_table(CHECKLIST)

# %%
print(lesson.checklist_verdicts(CHECKLIST))

# %% [markdown]
# ---
# ## 7. What was predicted, against what was measured
#
# Rung 06's header holds a prediction for the fused epilogue, written before any GPU run. Quoted from the source:

# %%
print(lesson.fused_prediction("gemm_tc_epilogue"))

# %% [markdown]
# Each range in it against the fused / plain ratio of the fp16-output headline problem at that size:

# %%
print(lesson.fused_prediction_check(TC, "gemm_tc_epilogue"))

# %% [markdown]
# And the FP32 rung's header:

# %%
print(lesson.fused_prediction("gemm_fp32_epilogue"))

# %% [markdown]
# **Reading it.** The prediction's reasoning is a count: instructions per output against the mainloop's time per
# tile, with the consumers' stores not overlapped. A ratio inside its range supports that account; one above it
# says the epilogue costs more than its instruction count (the stores, the bias loads, or registers taken from
# the mainloop: compare the compile reports of section 2); one below it says some of the epilogue hides behind
# work the model counted as exposed.

# %% [markdown]
# ---
# ## Exercise

# %%
print(lesson.exercise_pointer("08", lesson.EPILOGUE_FAMILIES))

# %% [markdown]
# ---
# ## What to take away
#
# - An elementwise op after a GEMM is cheap arithmetic and an expensive pass over memory. Fused into the
#   epilogue, it costs the arithmetic only.
# - A chain of compile-time ops (one header, one knob per op) lets every GEMM of the lab take the same epilogue
#   without copying it, and costs nothing where an op is unused.
# - Fusing moves correctness into the kernel: tails, per-row values, rounding ties, saturation and NaN all have to
#   be pinned down and checked, element by element, against a reference with its own bound.
# - Reach for the levels in order: library calls, graph-level fusion, a compiler like Triton, then hand-written
#   CUDA, and stop where the measured gap closes. The checklist above is that rule, measured on one operation.
