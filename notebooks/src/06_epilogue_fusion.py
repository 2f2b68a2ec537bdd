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

# %% [markdown]
# ## What you will learn
#
# - Why an elementwise op after a GEMM is cheap arithmetic and an expensive pass over memory: the bytes an unfused
#   bias + GELU moves against a fused one, counted from `M`, `N`, `K` and the types.
# - How one header of compile-time ops (`kernels/common/lab_epilogue.cuh`) chains bias, GELU and an int8
#   quantizer onto the persistent GEMM's fp32 accumulator, and what that does to the compiled kernel.
# - How to launch the fused rung through its family on an awkward shape and check it element by element against
#   float64 with its own error bound, then time it against the same rung without the epilogue.
# - How to read the optimization checklist (library calls, graph-level fusion, Triton, the lab's own CUDA) in
#   time, DRAM bytes and lines of code, and when each step pays.

# %% [markdown]
# A linear layer is rarely a bare GEMM. Its output gets a bias, maybe a per-row or per-column scale, an
# activation (ReLU, GELU, SiLU), a clamp, a residual, and before the next layer perhaps a quantization to int8 or
# fp8. Written as library calls, each of those is one more kernel that reads the GEMM's output `C` from memory
# and writes it back, with one more intermediate array in between. Yet every value they need is already in the
# GEMM's registers, one instruction before the store: applying them there, in the GEMM's **epilogue**, removes
# the extra kernels and the extra passes over `C`.
#
# The sections: (1) the bytes a separate pass adds, counted before anything is measured; (2) the functor chain
# and what fusing does to rung 06's compiled kernel; (3) correctness, with one launch written out; (4) time, the
# fused rung against the same rung without an epilogue and against two library paths; (5) DRAM bytes, fused and
# unfused; (6) the optimization checklist; (7) what the headers predicted.
#
# The fused kernels are gemm_tc rung 06 (the persistent Hopper GEMM) and gemm_fp32 rung 08, built with the chain
# (families `gemm_tc_epilogue` and `gemm_fp32_epilogue` in `lab/families/gemm_epilogue.py`). Every measured figure
# is computed in a cell from records; none is typed in. Ideas from: CUTLASS's epilogue functors and its
# epilogue visitor trees (Chen et al., "EVT", ASPLOS 2024), Triton's matrix-multiplication tutorial (an activation
# fused into the GEMM), and Micikevicius et al., "FP8 formats for deep learning" (2022) for e4m3.

# %%
import numpy as np

from lab import lessons
from lab.families import get_family
from lab.lessons import fusion as lesson
from lab.lessons import hopper_schedule, plots
from lab.measure import timing, verify
from lab.studies import checklist as checklist_study

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) checks the fused rungs and measures a short plan in this run, shown first; the reference GPU's full
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
# The count below is arithmetic, not a measurement: the bytes of `Y = GELU_tanh(A @ W.T + bias)` (the operation
# of section 6's checklist) if every array and every intermediate went to DRAM once per kernel that touches it.
# Three ways to compute it: fused (the epilogue in the GEMM: the minimum), one separate elementwise pass (graph-level
# fusion), and one CuPy expression at a time, exactly as `lab.studies.checklist.library` writes it.

# %%
def epilogue_bytes(M: int, N: int, K: int) -> dict:
    """DRAM bytes of Y = GELU_tanh(A @ W.T + bias) per path, if every pass goes to DRAM."""
    fp16, fp32 = 2, 4                               # bytes per element
    gemm_in = fp16 * M * K + fp16 * N * K           # A and W read once
    bias = fp32 * N                                 # read once
    C = fp16 * M * N                                # one fp16 M x N array, written (or read) once
    fused = gemm_in + bias + C                      # the epilogue in the GEMM: Y written once
    one_pass = fused + 2 * C                        # the GEMM writes C; one kernel reads it and writes Y
    # op by op: (bytes read, bytes written) per element of each kernel after the GEMM (its fp16 C is the `C` above)
    steps = [(fp16, fp32),                          # z = C + bias: fp16 in, fp32 out
             (fp32, fp32), (fp32, fp32),            # 0.5 * z; z ** 3
             (fp32, fp32), (2 * fp32, fp32),        # 0.044715 * _; z + _
             (fp32, fp32), (fp32, fp32),            # 0.7978845608 * _; tanh(_)
             (fp32, fp32), (2 * fp32, fp32),        # 1.0 + _; (0.5 * z) * _
             (fp32, fp16)]                          # Y[...] = _ (converted to fp16)
    op_by_op = fused + sum(r + w for r, w in steps) * M * N
    return {"fused (minimum)": fused, "one pass (graph fusion)": one_pass, "op by op (library)": op_by_op,
            "kernels after the GEMM, op by op": len(steps)}


M = N = K = 4096                                    # the first headline problem
count = epilogue_bytes(M, N, K)
print(f"Y = GELU_tanh(A @ W.T + bias) at {M}^3, fp16 A, W and Y, fp32 bias:")
for path in ("fused (minimum)", "one pass (graph fusion)", "op by op (library)"):
    print(f"  {path:24s} {count[path] / 2**20:8.0f} MiB = {count[path] / count['fused (minimum)']:5.2f}x the minimum")
print(f"  op by op launches {count['kernels after the GEMM, op by op']} kernels after the GEMM, each with an fp32 "
      f"M x N intermediate of {4 * M * N / 2**20:.0f} MiB")

# %% [markdown]
# The same minimum, as the family computes it (`min_dram_bytes`), against one extra pass over `C`, at both
# headline sizes:

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
# ### One launch, written out
#
# Rung 06 with bias + GELU on `M = 1000`, `N = 1023`, `K = 512`: no dimension a multiple of the tiles, and an odd
# `N`, so every row ends without the paired 2-byte store. The family makes the problem (fresh random inputs and
# bias, never zeros), its float64 reference and each element's bound (carried through every op by
# `lab.families.epilogue`). With no GPU here the family makes them on the host (`array_module = np`), so the
# reference and the bound are computed in either mode.

# %%
EPI = get_family("gemm_tc_epilogue")
if not MODE.live:
    EPI.array_module = np           # no GPU: the problem and its float64 reference are made on the host
rung = EPI.rung("06")
problem = EPI.make_problem(seed=0, M=1000, N=1023, K=512, epilogue="bias+gelu_tanh", layout="TN", dtype="float16")
ref = EPI.reference(problem)                      # float64: A @ W.T + bias, then GELU, from the stored fp16 inputs
bound = EPI.error_bound(problem, ref)             # each element's allowed |error|
print(f"{problem.label}: rung {rung.key}, output {problem.out_shape} {problem.dtype}")
print(f"the bound: median {np.median(bound / np.maximum(np.abs(ref), 1e-3)):.1e} of |y| (|y| >= 1e-3), "
      f"largest {bound.max():.1e} in absolute terms")

# %% [markdown]
# On a GPU (an H200: rung 06 needs `sm_90a`): the output allocated and poisoned with NaN, the launch, a
# synchronize, the largest error against its bound. `lab.measure.verify.compare_output` is the same comparison
# with the checks' rules; `lab.measure.verify.check_rung` adds guard zones, three input distributions, a second
# run for races and every case above (the banner's LIVE cell ran it before anything was timed).

# %%
REFUSED = lesson.live_refusal(MODE, "gemm_tc_epilogue")     # why this GPU cannot run rung 06 (None: it can)
if MODE.live and not REFUSED:
    import cupy as cp

    out = cp.full(problem.out_shape, cp.nan, dtype=problem.dtype)     # poisoned
    EPI.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    got = cp.asnumpy(EPI.output_values(out)).astype(np.float64)
    err = np.abs(got - ref)
    print(f"unwritten (still NaN): {int(np.count_nonzero(np.isnan(got)))} of {got.size}")
    print(f"largest |error| {np.nanmax(err):.2e}; largest |error| / bound {np.nanmax(err / bound):.3f} (1 or less "
          "passes)")
    print("lab.measure.verify.compare_output:", verify.compare_output(EPI, problem, out).describe())
elif MODE.live:
    print(f"LIVE, but {REFUSED}")
else:
    print("REPLAY: on a GPU this cell launches rung 06 with the chain into a NaN-poisoned output and prints its "
          "largest error against the bound above; the family's record of its checks on the reference GPU:")
    print(" ", lesson.check_status("gemm_tc_epilogue"))

# %% [markdown]
# ---
# ## 4. Fused against plain against the library: time
#
# `lab bench gemm_tc_epilogue` times, on each headline problem and in the same run: rung 06 without an
# epilogue (`plain_gemm`, what the fused rung is measured against), rung 06 with the chain, **cupy_fused**
# (cuBLAS, then one generated elementwise kernel for the whole chain: graph-level fusion) and **cupy_ops**
# (cuBLAS, then one CuPy operation per op, as a user first writes it). The headline problems: bias + GELU at
# 4096^3 and 8192^3, with a fp16 output and with an int8 output scaled per row.
#
# **Predict first.** Rung 06's header predicts the fused rung's time over the plain one's; section 1's count and
# the cell after it bound what the library paths' extra passes cost at the copy's bandwidth. Read both before the
# measurements:

# %%
print(lesson.fused_prediction("gemm_tc_epilogue"))

# %% [markdown]
# ### One timing against the plain rung, in the same run
#
# The fused rung, the same rung without the epilogue, and the graph-fusion library path (`cupy_fused`: cuBLAS,
# then one generated elementwise kernel), each timed with `lab.measure.timing.measure` (CUDA events, cold L2, a
# median over repetitions) on the first headline problem, so the three times come from one run on one GPU.

# %%
if MODE.live and not REFUSED:
    head = EPI.headline_params()[0]                              # 4096^3 fp16, TN, bias + GELU, fp16 output
    big = EPI.make_problem(seed=0, **head)
    y = cp.empty(big.out_shape, dtype=big.dtype)
    graph_fusion = EPI.baselines()["cupy_fused"]
    t_fused = timing.measure(lambda i: EPI.launch(rung, big, y, i), l2="cold")
    t_plain = timing.measure(lambda i: EPI.launch_ceiling(big, y, i), l2="cold")
    t_graph = timing.measure(lambda i: graph_fusion(big, y, i), l2="cold")
    print(f"{big.label}, measured in this run (cold L2, medians):")
    for name, t in (("plain rung 06", t_plain), ("fused rung 06", t_fused), ("cupy_fused", t_graph)):
        print(f"  {name:14s} {t.median_ms:.4f} ms (p10-p90 {t.p10_ms:.4f}-{t.p90_ms:.4f})")
    print(f"  -> fused / plain = {t_fused.median_ms / t_plain.median_ms:.3f}; "
          f"cupy_fused / fused = {t_graph.median_ms / t_fused.median_ms:.2f}")
else:
    print("REPLAY: on a GPU (sm_90a) this cell times the fused rung, the plain rung and cupy_fused on the first "
          "headline problem in the same run; the replayed times of every headline problem are the table below.")

# %% [markdown]
# The short LIVE plan (`lab bench`'s, on the first headline problem) and then the reference GPU's full records:

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
# Each path's time over the plain GEMM's (the plain GEMM is one; lower is faster), the bar this lesson sets for
# the fused rung dashed:

# %%
lesson.show(plots.epilogue_times, TC, "gemm_tc_epilogue", target=lesson.TARGETS["fused_over_plain"])

# %% [markdown]
# **Reading the bars.** One panel per headline problem; the hatched bar is the plain rung, at one by
# construction. The fused rung's bar is what fusing costs: how far above one it sits is the epilogue's own
# arithmetic and stores. The grey bars are the library paths: their height above the fused bar is the price of
# the extra passes over `C` (and, for `cupy_ops`, of one kernel and one fp32 intermediate per op). Compare the
# fp16-output panels with the int8 ones: the library paths pay their passes either way, the fused rung stores a
# byte instead of two.
#
# The prediction of rung 06's header, held against these records:

# %%
print(lesson.fused_prediction_check(TC, "gemm_tc_epilogue"))

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
# **Reading the bars.** Two bars a panel: with no library path here, the fused bar's height above one is the whole
# story. The chain's instructions per output are the same as on the tensor-core rung, but the SIMT mainloop spends
# far longer on each tile, so the same epilogue is a smaller share of the time: expect this bar closer to one than
# the tensor-core rung's.

# %% [markdown]
# The bars this lesson sets, judged on these records: the fused rung within a few per cent of the plain one at
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
# ### The chain on the fastest main loop
#
# Rung 06 applies the chain in its consumer warpgroups between the last k-tile and the stores, with nothing to hide
# it behind. Notebook 03's rung 10 stores C through shared memory and TMA; gemm_tc_epilogue builds it with the same
# chain applied to the accumulators in registers before they are staged (`lab_epi_apply_wgmma_fragment`), so the
# fused kernel inherits the faster loop. A quantized output (int8 here) or a C that TMA cannot store goes through
# rung 06's register stores instead. The study (`python -m lab.studies.fused_epilogue_study`) times both fused rungs,
# rung 10 without the chain and torch.mm against torch's own `F.gelu(F.linear(x, w, b), approximate="tanh")` (for
# int8, followed by its per-row quantization), all in the same rounds. What to look at: the gap between "10 fused"
# and "10 plain" (what the chain still costs on this loop) against the gap between torch_mm and 1.0 (what torch's
# separate pass costs it).

# %%
print(hopper_schedule.fused_table(hopper_schedule.load(hopper_schedule.FUSED_STUDY)))

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

# %% [markdown]
# **Predict first.** Section 1's count, at the record's sizes: the library level is the op-by-op path, graph
# fusion the one-pass path, Triton and the lab's kernel the fused one.

# %%
LEVEL_PATH = {"library": "op by op (library)", "graph_fusion": "one pass (graph fusion)",
              "triton": "fused (minimum)", "lab_fused": "fused (minimum)"}
for size in (CHECKLIST or {}).get("sizes", []):
    predicted = epilogue_bytes(size["M"], size["N"], size["K"])
    print(f"{size['M']}x{size['N']}x{size['K']}: " + ", ".join(
        f"{level} {predicted[path] / 2**20:.0f} MiB" for level, path in LEVEL_PATH.items()))

# %% [markdown]
# What Nsight Compute measured, one call each (caches flushed first), against the record's minimum:

# %%
print(lesson.checklist_bytes(CHECKLIST))

# %% [markdown]
# And measured against predicted, level by level. The GEMM alone (cuBLAS, no epilogue) already moves more than
# the count's `A` and `W` read once: its tiles re-read them through the L2, and some of those re-reads reach DRAM.
# The cell adds that excess, measured, to each level's count, and divides the measured bytes by the sum.

# %%
if CHECKLIST is None:
    print(lesson.checklist_status(CHECKLIST))
for size in (CHECKLIST or {}).get("sizes", []):
    predicted = epilogue_bytes(size["M"], size["N"], size["K"])
    gemm = checklist_study.dram_bytes(size["gemm"])           # cuBLAS's GEMM alone, measured
    if not gemm:
        print(f"{size['M']}x{size['N']}x{size['K']}: the GEMM alone was not measured; no excess to add")
        continue
    excess = gemm - predicted["fused (minimum)"]               # what the GEMM moves beyond A, W once and Y once
    print(f"{size['M']}x{size['N']}x{size['K']}: the GEMM alone moved {gemm / 2**20:.0f} MiB, "
          f"{excess / 2**20:.0f} MiB more than the count")
    for level, path in LEVEL_PATH.items():
        entry = size["levels"].get(level, {})
        measured = checklist_study.dram_bytes(entry) if entry.get("status") == "ok" else None
        expected = predicted[path] + excess
        shown = "not measured" if not measured else f"{measured / 2**20:6.0f} MiB = {measured / expected:.2f}x"
        print(f"  {level:13s} count {predicted[path] / 2**20:6.0f} MiB + excess = {expected / 2**20:6.0f} MiB; "
              f"measured {shown}")

# %% [markdown]
# **Reading it.** Where measured over expected is close to one, the count explains the level's bytes: each pass
# it named went to DRAM, and nothing else did. Below one, some of a level's passes hit the L2 (an intermediate
# read right after it was written). Above one, the level moves bytes the count does not name; for a fused level
# that is its own GEMM re-reading more of `A` and `W` than cuBLAS's does (other tiles, another tile order:
# notebook 04 measures what the order does to DRAM reads).

# %% [markdown]
# Left: each level's time over the plain GEMM's. Right: its DRAM bytes, the minimum dashed.

# %%
lesson.show_checklist(plots.checklist_levels, CHECKLIST)

# %% [markdown]
# **Reading the panels.** Read the right-hand panel first: the library level's bar towers over the rest, and the
# count of section 1 said by how much before anything ran; graph fusion removes the intermediates but keeps one
# pass over `Y`; the two fused levels sit near the GEMM's own bytes. Then the left-hand panel: time follows the
# bytes only partly. The library level pays for its bytes and its launches; between the fused levels the bytes
# are nearly equal, so what separates their times is the GEMM itself (tiles, pipelining, the epilogue's overlap),
# not the epilogue's memory traffic.

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
# Rung 06's header holds a prediction for the fused epilogue, written before any GPU run; section 4 printed it
# before the measurements and held it against them after.
#
# Section 4 held each range in it against the fused / plain ratio of the fp16-output headline problem at that size.
# The FP32 rung's header:

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
