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
# # 03 — Tensor cores: from one `mma.sync` to a warp-specialized Hopper GEMM
#
# The same product as notebook 02, `C = alpha * A @ B + beta * C`, but with A and B in fp16 or bf16 and the
# multiply-adds on tensor cores, accumulating in fp32; C is written in the input type. A is `M × K`
# row-major; B is either `K × N` row-major ("NN") or `N × K` row-major ("TN", how a linear layer stores its
# weight). The yardstick is **cuBLAS in the same type and layout**, the library baseline, timed on the same
# problem in the same run.

# %% [markdown]
# ## What you will learn
#
# - How a warp-wide tensor-core instruction (`mma.sync.m16n8k16`) spreads its operands over the 32 lanes, and
#   why `ldmatrix` hands a warp a whole fragment from shared memory in one instruction.
# - How to count what a tile of C costs: FLOPs against the bytes of A and B it reads, and how that ratio,
#   set against what the tensor cores consume per clock, predicts each rung before it runs.
# - Why shared-memory tiles are padded or XOR-swizzled (bank groups of an 8-row `ldmatrix` read), and how a
#   multi-stage `cp.async` pipeline hides the latency of global memory.
# - What Hopper changes: TMA copies, `mbarrier` phases, warpgroup MMA (`wgmma`) reading shared memory
#   directly, and warp specialization.
# - How to launch a rung on an awkward shape, check it against float64, and time it against cuBLAS in the
#   same run, and why sizes one off a multiple of 8 cost cuBLAS and the rungs alike.
#
# A tensor-core instruction is not a per-thread instruction: a whole warp (or, on Hopper, a warpgroup of
# four warps) executes it together, and each lane holds a fixed piece of each operand. So the ladder is about
# *getting operands to the tensor cores in the shape they want, fast enough*:
#
# - **rung 01**: `mma.sync.m16n8k16` with every fragment element loaded from global memory: the fragment
#   layout lesson;
# - **rung 02**: block tiles in shared memory, read with `ldmatrix` (one instruction hands a warp a whole
#   fragment), rows padded against bank conflicts;
# - **rung 03**: no padding but an XOR swizzle, and a multi-stage `cp.async` pipeline;
# - **the Hopper rungs** (`sm_90a`): TMA copies, `mbarrier` pipelines, warpgroup MMA (`wgmma`), and warp
#   specialization. These cells are written over `family.rungs`, so a rung added to the family appears
#   below without editing the notebook.
#
# Pictures of layouts and schedules are computed from the same index formulas the kernels use
# (`lab.lessons.layouts`, which restates `kernels/common/lab_mma.cuh` and `lab_swizzle.cuh`); every
# measured figure is computed from records in a cell, none is typed in. Primary sources for the ideas: the
# PTX ISA (<https://docs.nvidia.com/cuda/parallel-thread-execution/>), the CUDA C++ Programming Guide,
# the NVIDIA Hopper Tuning Guide (<https://docs.nvidia.com/cuda/hopper-tuning-guide/>), the NVIDIA H100
# Tensor Core GPU Architecture whitepaper, and CUTLASS/CuTe (<https://github.com/NVIDIA/cutlass>); each
# section below names the part it draws on. The structure of each rung's section (a count, the kernel, a
# launch on an odd shape, a check, a benchmark, the plot) follows the Triton tutorials
# (<https://triton-lang.org/main/getting-started/tutorials/03-matrix-multiplication.html>).

# %%
import numpy as np

from lab import lessons
from lab.core import device
from lab.families import gemm_tc_tiles, get_family
from lab.families.gemm_tc import block_tile, dynamic_smem_bytes, uses_tma
from lab.lessons import diagrams, hopper_techniques, hopper_tiles, knob_records, layouts, plots
from lab.lessons.nsight import WAVEFRONTS
from lab.lessons.plots import ladders as ladder_plots
from lab.measure import bench
from lab.measure.records import describe_params
from lab.studies import report

# %% [markdown]
# ## Live or replay

# %%
MODE = lessons.mode()
print(lessons.mode_banner("gemm_tc", current=MODE))

# %% [markdown]
# Compile reports need no GPU: NVRTC compiles for this GPU's arch in LIVE mode, for the reference GPU's
# arch (`lab.core.device.REFERENCE_ARCH`, the H200's) otherwise. A rung that needs a newer arch than the GPU here
# (the Hopper rungs need `sm_90a`) is compiled for the arch it needs and shown compile-only.

# %%
ARCH = lessons.compile_arch(MODE)
print(f"compile reports for sm_{ARCH}")

# %%
TC = get_family("gemm_tc")
print(lessons.rung_listing(TC, MODE))

# %% [markdown]
# In LIVE mode the measurement plan is kept short (a few minutes on an H200; `lab bench gemm_tc` runs the
# full plan): every headline size with shorter timings, the square sweep with cold L2 only and quick
# timings, and the tail sizes with `N` stepping by one but quick timings. A rung this GPU cannot run is
# left out of the measurements (`lab.measure.bench` skips it and says why).

# %%
PLANS = (bench.BenchPlan(kinds=("headline",), min_time_ms=10.0),
         bench.BenchPlan(kinds=("sweep",), quick=True, sweep_step=1, l2_modes=("cold",)),
         bench.BenchPlan(kinds=("tail",), quick=True, min_time_ms=6.0, tail_step=1))
print("LIVE plans:", *PLANS, sep="\n  ")

# %% [markdown]
# ### Correct first
#
# LIVE only: every rung this GPU can run (the others are named and skipped) goes through
# `lab.measure.verify.check_rung` on a spread of the family's check cases (tiles plus and minus one, primes, `K` far
# larger than `M` and `N`, `alpha`/`beta`, padded leading dimensions, in both layouts and both types), three
# input distributions each, NaN-poisoned outputs, guard zones, a repeat run. The tolerance is
# `lab.measure.bounds.tensor_core_matmul_bound`: fp32 accumulation that the tensor cores may truncate, then one
# rounding to fp16 or bf16. A failure stops the notebook here. Each rung's section below also writes one such
# check out by hand.

# %%
TC_CASES = lessons.few_cases(TC, 12)
TC_CHECKS = lessons.check_ladder(TC, TC_CASES) if MODE.live else None
print(f"{len(TC_CASES)} cases:", "; ".join(describe_params(c) for c in TC_CASES))

# %% [markdown]
# How close the rungs came to that bound on the reference GPU (`scripts/gemm_tc_margin.py`: the largest
# share of the bound's statistical part any output element used, over the check cases):

# %%
print(knob_records.margin_table())

# %% [markdown]
# ### Measure (LIVE) or replay (no GPU)
#
# One `lab.measure.bench.run` per plan times cuBLAS and the rungs on every problem. The second line says which
# kinds of measurement the records in hand hold: the sections that plot a kind the records lack say so and
# show nothing, rather than inventing it. The third says which of the family's rungs the records hold: a rung
# added after the records were made has none yet.

# %%
TC_RS = lessons.ladder_records(TC, MODE, *PLANS)
print(lessons.records_status(TC_RS, "gemm_tc"))

# %%
print(lessons.kinds_status(TC_RS, TC))

# %%
RECORDED = {r.rung for r in TC_RS.records} if TC_RS is not None else set()
WITH = [r.key for r in TC.rungs if r.key in RECORDED]
WITHOUT = [r.key for r in TC.rungs if r.key not in RECORDED]
print(f"the family has {len(TC.rungs)} rungs; these records hold {len(WITH)} of them"
      + (f" ({', '.join(WITH)})" if WITH else "")
      + (f"; none for {', '.join(WITHOUT)}, whose measurement cells say so" if WITHOUT else ""))

# %% [markdown]
# Nsight Compute counters: shared-memory bank conflicts (plain loads and, where the profile has them,
# `ldmatrix`), DRAM bytes and the L2 hit rate for one launch of each rung at the first headline size. LIVE
# with `ncu` installed: measured in this run. Otherwise the reference GPU's profile
# (`results/h200/gemm_tc_profile.json`, written by `lab profile gemm_tc --json ...`) is replayed if it
# exists; if it does not, the line below says so and the counter cells stay empty.

# %%
TC_PROFILE = lessons.profile_records(TC, MODE)
print(lessons.profile_status(TC_PROFILE, "gemm_tc"))

# %% [markdown]
# Rungs 01, 02 and the first Hopper rung are taken apart below step by step. Rung 03 and the later Hopper rungs
# go through `lessons.RungWalk`, one call for the steps every rung repeats: the diff from the previous rung (or
# the source), the prediction and knobs, the compile report (registers, shared memory, spills, SASS), the
# tensor-core instructions against what feeds them (`HMMA` per `ldmatrix`, the copies, `HGMMA`), the checks,
# the measurement at every headline size, the bank conflicts from the profile, the climb so far, and each
# numeric range of the prediction against the records.

# %%
WALK = lessons.RungWalk(TC, ARCH, TC_RS, TC_CHECKS, profile=TC_PROFILE, mma_mix=True, mode=MODE)

# %% [markdown]
# ---
# ## The instruction: `mma.sync.aligned.m16n8k16`
#
# One warp multiplies a 16×16 tile of A by a 16×8 tile of B and adds a 16×8 tile of fp32 accumulators.
# No lane holds a row or a column: with `g = lane / 4` and `t = lane % 4`, lane `(g, t)` holds A at rows `g`
# and `g + 8`, columns `2t, 2t+1` and `2t+8, 2t+9` (four 32-bit registers of two halves each), B at column
# `g`, rows `2t, 2t+1` and `2t+8, 2t+9` (two registers), and C at rows `g` and `g + 8`, columns `2t, 2t+1`
# (four fp32 registers). The figure is drawn from those formulas (PTX ISA, "Matrix Fragments for
# mma.m16n8k16 with floating point type"); each cell shows the lane and the register.

# %%
lessons.figure(diagrams.fragment_figure())

# %% [markdown]
# The same table read the other way: the elements one lane holds, in register order. Lane `(g, t)`'s A
# elements sit in the rows of C it owns, and its B elements in the column `g`: every lane multiplies only
# values it holds.

# %%
for operand in "ABC":
    print(f"{operand}: lane 5 holds (row, column)", layouts.lane_elements(operand, 5))

# %% [markdown]
# ### `ldmatrix`: a whole fragment in one instruction
#
# `ldmatrix.sync.aligned.m8n8.x4.shared.b16` (PTX ISA, "Warp-level matrix load instruction: ldmatrix")
# loads four 8×8 matrices of 16-bit values from shared memory. Lanes `8i .. 8i+7` each give the address
# of one 16-byte row of matrix `i`; register `i` of every lane then receives matrix `i`, lane `(g, t)`
# getting row `g`, columns `2t, 2t+1` (with `.trans`, the transposed positions). That is exactly the shape
# of an mma fragment. Pointing lanes 0-15 at rows 0-15 of an A tile at k = 0 and lanes 16-31 at the same
# rows at k = 8 loads the matrices in the order of A's registers `a0 .. a3`.

# %%
lessons.figure(diagrams.ldmatrix_figure())

# %%
FROM_LDMATRIX, FROM_MMA = layouts.ldmatrix_x4_a_fragment(), layouts.mma_fragment("A")
same = all((x == y).all() for x, y in zip(FROM_LDMATRIX, FROM_MMA, strict=True))
print("ldmatrix.x4 with the rungs' row addresses delivers exactly the mma A fragment:", same)

# %% [markdown]
# ---
# ## What the tensor cores consume, and the shape every rung is tested on
#
# Two numbers frame the whole ladder. The tensor cores of one Hopper SM finish a fixed number of fp16 FLOPs per
# clock, and shared memory (like L1) hands an SM a fixed number of bytes per clock. Their quotient is the
# arithmetic intensity (FLOP per byte read) below which feeding the tensor cores from shared memory, not the
# tensor cores, sets the pace. The constants are the hardware's, from the NVIDIA H100 architecture whitepaper
# (the H200 has the same SM); they are the only typed numbers in the counts, and they are printed, not hidden.

# %%
TC_FLOP_PER_CLOCK = 4 * 512 * 2  # per SM: 4 tensor cores x 512 dense fp16 FMA per clock x 2 FLOP per FMA
SMEM_BYTES_PER_CLOCK = 32 * 4  # per SM: 32 banks x 4 bytes per clock, shared memory and L1 alike
NEEDED_INTENSITY = TC_FLOP_PER_CLOCK / SMEM_BYTES_PER_CLOCK
print(f"tensor cores: {TC_FLOP_PER_CLOCK} FLOP per clock per SM; shared memory: {SMEM_BYTES_PER_CLOCK} B per "
      f"clock per SM -> an operand read from shared memory (or L1) must carry at least "
      f"{NEEDED_INTENSITY:.0f} FLOP per byte to keep the tensor cores busy")

# %% [markdown]
# Every rung below is launched once on the same awkward product, chosen so that no dimension is a friendly
# multiple: M is not a multiple of a block tile's rows, N is odd (so C's rows are not 16-byte aligned, and the
# rungs with 16-byte copies must take their element-by-element path), and K is not a multiple of a k-tile. The
# cell prints those remainders and how many block tiles the product makes against the SMs.

# %%
SHAPE = {"M": 1000, "N": 1003, "K": 520, "layout": "TN", "dtype": "float16"}
SMS = device.current().sm_count if MODE.live else (TC_RS.provenance.get("sm_count") if TC_RS else None)
print(f"{describe_params(SHAPE)}: {2 * SHAPE['M'] * SHAPE['N'] * SHAPE['K'] / 1e9:.3f} GFLOP; "
      f"M mod 128 = {SHAPE['M'] % 128}, N mod 8 = {SHAPE['N'] % 8}, K mod 32 = {SHAPE['K'] % 32}, "
      f"K mod 64 = {SHAPE['K'] % 64}")
for key in ("01", "02", "03"):
    bm, bn = block_tile(TC.rung(key))  # the block's tile of C, from the rung's knobs
    tiles = -(-SHAPE["M"] // bm) * -(-SHAPE["N"] // bn)  # ceil(M / BM) * ceil(N / BN)
    print(f"  {TC.rung(key).key:24s} {bm}x{bn} block tiles: {tiles}" + (f" = {tiles / SMS:.2f} per SM" if SMS else ""))

# %% [markdown]
# In REPLAY the launch, check and timing cells below say what they do on a GPU, and the timing cells print the
# records' numbers instead: each rung against cuBLAS at the headline sizes, fp16 TN, the two of them timed in
# the same run. This helper only reads records; the live cells do not use it.

# %%
def replayed_timings(key: str) -> str:
    """The records' fp16 TN headline timings of one rung beside cuBLAS's (each pair from the same run)."""
    if TC_RS is None:
        return lessons.missing("gemm_tc")
    rung_key = TC.rung(key).key
    lines = [f"{rung_key} against cuBLAS, fp16 TN headline sizes ({TC_RS.label()}):"]
    for params in lessons.headline_sizes(TC_RS, layout="TN", dtype="float16"):
        mine = lessons.one_record(TC_RS, kind="headline", rung=rung_key, params=params)
        if mine is None:
            lines.append(f"  {describe_params(params)}: no record of {rung_key}")
            continue
        lib = lessons.one_record(TC_RS, kind="headline", rung=mine.ceiling, params=params, l2=mine.l2)
        lib_ms = f"{lib.median_ms:.4f} ms" if lib is not None else "?"
        lines.append(f"  {describe_params(params)}, {mine.l2} L2: {mine.median_ms:.4f} ms = {mine.value:.1f} "
                     f"{mine.metric}; cuBLAS {lib_ms} = {mine.ceiling_value:.1f} {mine.metric} -> "
                     f"{mine.ratio:.3f}x cuBLAS's speed")
    return "\n".join(lines)


# %% [markdown]
# ---
# ## Rung 01 — `mma.sync` with fragments loaded from global memory
#
# One warp owns a 16×16 tile of C (two mma tiles). Per k-step each lane loads exactly the A and B elements
# its fragment needs, two bytes at a time, packs pairs into 32-bit registers and executes two `mma.sync`.
#
# ### The count
#
# Per k-step of 16, the warp's 16×16 tile of C costs `2 * 16 * 16 * 16` FLOPs and reads a 16×16 piece of A and
# a 16×16 piece of B. No other warp shares what this warp loads, so those bytes come from L1 or L2 every time.
# The number of loads follows from the fragment layout above: each lane holds its A elements and, for each of
# the two 16×8 mma tiles, its B elements, one two-byte load each.

# %%
warp_flops = 2 * 16 * 16 * 16  # one k-step of a 16x16 tile of C: 16 x 16 outputs, 16 multiply-adds each
warp_bytes = 2 * (16 * 16 + 16 * 16)  # the 16x16 pieces of A and B it reads, two bytes an element
loads_per_lane = len(layouts.lane_elements("A", 0)) + 2 * len(layouts.lane_elements("B", 0))
intensity_01 = warp_flops / warp_bytes
print(f"per warp and k-step: {warp_flops} FLOP for {warp_bytes} B = {intensity_01:.0f} FLOP per byte, "
      f"against the {NEEDED_INTENSITY:.0f} the tensor cores need from L1")
print(f"  even at full L1 bandwidth: at most {intensity_01 / NEEDED_INTENSITY:.0%} of the tensor cores' rate")
print(f"  loads: {loads_per_lane} two-byte loads per lane per k-step, each a warp-wide instruction moving "
      f"{32 * 2} B of the {SMEM_BYTES_PER_CLOCK} an L1 access could -> {loads_per_lane} load instructions per "
      f"{warp_flops} FLOP, {warp_flops / loads_per_lane:.0f} FLOP per load instruction")

# %% [markdown]
# So rung 01 cannot come near the tensor cores whatever the tensor cores do: a quarter of the rate at best by
# bytes, and far less in practice, because each load instruction moves only two bytes per lane. The compile
# report says the same in instructions: a handful of `HMMA` against dozens of two-byte loads (`LDG.U16`; the
# count in the binary also holds the loads of C that `beta` needs).
#
# ### The kernel
#
# The first rung of the ladder, so its whole source (the header states what it does, its prediction and what
# it requires):

# %%
lessons.show_source(TC, "01")

# %% [markdown]
# ### Predict first
#
# Before any number: the rung's header states what it expects. Read it, then decide for yourself what fraction
# of cuBLAS this rung reaches at the headline sizes, from the count above.

# %%
print(lessons.prediction(TC, "01"))

# %% [markdown]
# The compile report: registers, shared memory, and the tensor-core instructions against the loads that feed
# them, read from the SASS.

# %%
REPORTS_01 = lessons.compile_pair(TC, "01", ARCH)
lessons.md(report.compile_markdown(REPORTS_01))

# %%
print(lessons.mma_mix(REPORTS_01))

# %% [markdown]
# ### One launch on the odd shape
#
# Through the family, as every driver of the lab launches a rung: the problem (fresh random fp16 inputs, never
# zeros), an output poisoned with NaN so that an element the kernel forgets to write stays visible, the launch,
# and a synchronize so that a fault surfaces here. The family builds the rung for the problem's type and layout
# and says which path the launch took.

# %%
if MODE.live:
    import cupy

    rung = TC.rung("01")
    PROBLEM = TC.make_problem(seed=3, **SHAPE)
    out = cupy.empty(PROBLEM.out_shape, PROBLEM.dtype)
    out.view(cupy.uint16).fill(0x7FC1)  # a NaN in fp16 and in bf16: an element never written stays NaN
    TC.launch(rung, PROBLEM, out)
    cupy.cuda.get_current_stream().synchronize()
    built = TC.variant(rung, PROBLEM, out)
    print(f"{rung.key} on {PROBLEM.label}: grid {TC.grid(built, PROBLEM.params)} of "
          f"{dict(built.spec.knobs)['THREADS']} threads, path: {TC.launch_notes(rung, PROBLEM, out)['path']}")
else:
    print(f"(On a GPU this cell launches {TC.rung('01').key} once on {describe_params(SHAPE)} into a NaN-poisoned "
          "output. Without one, nothing is launched here; the reference GPU's checks and timings are replayed "
          "in the cells below.)")

# %% [markdown]
# ### Checked against float64
#
# The reference is the product of the stored (already rounded) fp16 inputs in float64; the bound is each
# element's own allowed error (`fam.error_bound`: fp32 accumulation on tensor cores, then one rounding to fp16).
# The largest error is printed against its bound. `lab.measure.verify.check_rung` adds what this cell leaves
# out (guard zones around the output, three input distributions, a repeat run against races): in LIVE mode it
# ran over every rung in "Correct first" above, and its summary follows.

# %%
if MODE.live:
    REF = TC.reference(PROBLEM)  # float64, (M, ldc)
    BOUND = TC.error_bound(PROBLEM, REF)  # each element's allowed |error|
    N = SHAPE["N"]
    got = TC.output_values(out).get().astype(np.float64)[:, :N]
    err = np.abs(got - REF[:, :N])
    share = err / np.maximum(BOUND[:, :N], np.finfo(np.float64).tiny)
    worst = np.unravel_index(int(np.nanargmax(np.where(np.isnan(share), np.inf, share))), share.shape)
    print(f"{rung.key}: {int(np.isnan(got).sum())} elements still NaN; largest |error| {np.nanmax(err):.3g}; "
          f"worst against its bound at {worst}: |error| {err[worst]:.3g}, bound {BOUND[:, :N][worst]:.3g} "
          f"({share[worst]:.2f} of it)")
    assert not np.isnan(got).any() and (err <= BOUND[:, :N]).all(), f"{rung.key} is wrong on {PROBLEM.label}"
else:
    print("(On a GPU this cell compares the launch above with fam.reference in float64, element by element "
          "against fam.error_bound. Replayed: how close the rungs came to the bound on the reference GPU is the "
          "margin table in 'Correct first'.)")
print(lessons.check_summary(TC_CHECKS, TC, "01"))

# %% [markdown]
# ### Timed against cuBLAS, in the same run
#
# `lab.measure.timing.measure` times each launch between two CUDA events with a cold L2 (flushed before every
# launch), and reports the median; cuBLAS (`fam.launch_ceiling`, the library baseline) is timed the same way on
# the same problem right after, so the two numbers share one GPU state.

# %%
if MODE.live:
    from lab.measure import timing

    FLUSHER = timing.L2Flusher()
    LIB_OUT = cupy.empty(PROBLEM.out_shape, PROBLEM.dtype)
    t_rung = timing.measure(lambda i: TC.launch(rung, PROBLEM, out, i), l2="cold", flusher=FLUSHER)
    t_lib = timing.measure(lambda i: TC.launch_ceiling(PROBLEM, LIB_OUT, i), l2="cold", flusher=FLUSHER)
    print(f"{rung.key}: median {t_rung.median_ms:.4f} ms = {TC.throughput(PROBLEM, t_rung.median_ms):.1f} TFLOP/s; "
          f"cuBLAS: {t_lib.median_ms:.4f} ms = {TC.throughput(PROBLEM, t_lib.median_ms):.1f} TFLOP/s; "
          f"{rung.key} runs at {t_lib.median_ms / t_rung.median_ms:.3f}x cuBLAS's speed (measured in this run, "
          f"{PROBLEM.label}, cold L2)")
else:
    print(f"(On a GPU this cell times {TC.rung('01').key} and cuBLAS on {describe_params(SHAPE)}, cold L2. "
          "Replayed instead:)")
    print(replayed_timings("01"))

# %% [markdown]
# ### The answer, against the prediction
#
# Each numeric range the header states, held against the records at the sizes it names:

# %%
print(lessons.prediction_check(TC_RS, TC, "01"))

# %% [markdown]
# Rung 01's bar beside cuBLAS's at the first headline size. What to look at: how short the bar is next to the
# dashed line. cuBLAS runs close to the tensor cores' rate, so rung 01's fraction of cuBLAS is close to its
# fraction of the tensor cores: set it against the bound the count gave (a quarter, by bytes alone). The count
# assumed full-width loads and rung 01's move two bytes per lane, so the rung lands far under that bound; the
# loads, not the tensor cores, set the pace.

# %%
lessons.plot(plots.ladder_bars, lessons.so_far(TC_RS, TC, "01"), "gemm_tc")

# %% [markdown]
# ---
# ## Rung 02 — shared-memory block tiles read with `ldmatrix`, rows padded
#
# A block of eight warps owns a 128×128 tile of C and walks K in k-tiles of 32: it copies A's and B's
# tiles into shared memory with 16-byte loads, and each warp reads its fragments with `ldmatrix.x4`, one
# instruction per 16×16 A fragment or per pair of 16×8 B fragments. For NN (B stored `K × N`), the tile is
# k-major and `ldmatrix.trans` hands each lane the transposed pairs the mma wants; nothing is transposed in
# memory. The rows are **padded** by 16 bytes, and the section after this one shows why.
#
# ### The count
#
# The same ratio at two levels. A tile of C of `m × n` computed over a slice of k costs `2 * m * n * k` FLOPs and
# reads `2 * (m + n) * k` bytes of A and B, so its intensity is `m * n / (m + n)` FLOP per byte, whatever k is.
# From L2, the tile is the block's (the bytes are copied once into shared memory); from shared memory, it is
# each warp's (every warp reads its own fragments with `ldmatrix`).

# %%
def flop_per_byte(m: int, n: int) -> float:
    """An m x n tile of C over k: 2*m*n*k FLOP for 2*(m + n)*k bytes of two-byte A and B."""
    return (2 * m * n) / (2 * (m + n))


k02 = dict(TC.rung("02").spec.knobs)
block_02, warp_02 = flop_per_byte(k02["BM"], k02["BN"]), flop_per_byte(k02["WM"], k02["WN"])
print(f"block tile {k02['BM']}x{k02['BN']}: {block_02:.0f} FLOP per byte from L2 "
      f"(rung 01's warp tile: {intensity_01:.0f})")
print(f"warp tile {k02['WM']}x{k02['WN']}: {warp_02:.1f} FLOP per byte from shared memory, against the "
      f"{NEEDED_INTENSITY:.0f} the tensor cores need -> at most {min(1, warp_02 / NEEDED_INTENSITY):.0%} of their "
      "rate from the ldmatrix reads alone (the tile's copies into shared memory cost shared-memory cycles too)")

# %% [markdown]
# ### The diff from rung 01

# %%
lessons.show_diff(TC, "02")

# %% [markdown]
# ### Predict first

# %%
print(lessons.prediction(TC, "02"))

# %%
REPORTS_02 = lessons.compile_pair(TC, "02", ARCH)
lessons.md(report.compile_markdown(REPORTS_02))

# %%
print(lessons.instruction_delta(REPORTS_02))
print(lessons.mma_mix(REPORTS_02[-1:]))

# %% [markdown]
# ### One launch on the odd shape, checked, and timed against cuBLAS
#
# The same problem as rung 01's. `N` odd means C's rows are not 16-byte aligned, so the family builds rung 02
# with `VEC=1` (element loads) here: the path line says so.

# %%
if MODE.live:
    rung = TC.rung("02")
    out.view(cupy.uint16).fill(0x7FC1)  # poisoned again: rung 01's answer must not count for rung 02
    TC.launch(rung, PROBLEM, out)
    cupy.cuda.get_current_stream().synchronize()
    built = TC.variant(rung, PROBLEM, out)
    print(f"{rung.key} on {PROBLEM.label}: grid {TC.grid(built, PROBLEM.params)} of "
          f"{dict(built.spec.knobs)['THREADS']} threads, VEC={dict(built.spec.knobs)['VEC']}, "
          f"path: {TC.launch_notes(rung, PROBLEM, out)['path']}")
    got = TC.output_values(out).get().astype(np.float64)[:, :N]
    err = np.abs(got - REF[:, :N])
    share = err / np.maximum(BOUND[:, :N], np.finfo(np.float64).tiny)
    print(f"  {int(np.isnan(got).sum())} elements still NaN; largest |error| {np.nanmax(err):.3g}; the closest "
          f"element came to {np.nanmax(share):.2f} of its bound")
    assert not np.isnan(got).any() and (err <= BOUND[:, :N]).all(), f"{rung.key} is wrong on {PROBLEM.label}"
    t_rung = timing.measure(lambda i: TC.launch(rung, PROBLEM, out, i), l2="cold", flusher=FLUSHER)
    t_lib = timing.measure(lambda i: TC.launch_ceiling(PROBLEM, LIB_OUT, i), l2="cold", flusher=FLUSHER)
    print(f"  median {t_rung.median_ms:.4f} ms = {TC.throughput(PROBLEM, t_rung.median_ms):.1f} TFLOP/s; cuBLAS "
          f"{t_lib.median_ms:.4f} ms -> {t_lib.median_ms / t_rung.median_ms:.3f}x cuBLAS's speed (measured in this "
          "run, cold L2)")
else:
    print(f"(On a GPU this cell launches {TC.rung('02').key} on {describe_params(SHAPE)} into a poisoned output, "
          "checks it against the float64 reference and its bound, and times it beside cuBLAS. Replayed instead:)")
    print(replayed_timings("02"))
print(lessons.check_summary(TC_CHECKS, TC, "02"))

# %% [markdown]
# ### The answer, against the prediction

# %%
print(lessons.prediction_check(TC_RS, TC, "02"))

# %% [markdown]
# The climb so far. What to look at: the step from rung 01 to rung 02 (the block tile's reuse from L2 and
# whole fragments per instruction), then the gap that remains to the dashed cuBLAS line, which the count above
# already puts on shared memory: the warp tile reads fewer FLOPs' worth per byte than the tensor cores consume.
# Rung 03 widens the warp tile and pipelines the copies.

# %%
lessons.plot(plots.ladder_bars, lessons.so_far(TC_RS, TC, "02"), "gemm_tc")


# %% [markdown]
# ### Bank conflicts: unpadded, padded and swizzled rows
#
# Shared memory has 32 banks of 4 bytes, so a 128-byte line covers every bank once and a 16-byte chunk
# covers one *group* of four banks. One `ldmatrix` matrix reads one 16-byte chunk from each of 8
# consecutive tile rows; it takes a single pass (one wavefront) only if those 8 chunks lie in 8 different
# bank groups, and as many passes as the most chunks that share a group otherwise. The row lengths below
# are the rungs' own: a k-contiguous tile row of `BK` halves, and NN's B tile row of `BN` halves; the
# padding is rung 02's `PAD`.

# %%
KNOBS_02, KNOBS_03 = dict(TC.rung("02").spec.knobs), dict(TC.rung("03").spec.knobs)
ROW_BYTES = (2 * KNOBS_03["BK"], 2 * KNOBS_03["BN"])  # two bytes per fp16/bf16 element
PAD_BYTES = 2 * KNOBS_02["PAD"]
print(f"tile rows of {ROW_BYTES[0]} bytes (BK={KNOBS_03['BK']}) and {ROW_BYTES[1]} bytes (BN={KNOBS_03['BN']}); "
      f"rung 02 pads each by {PAD_BYTES} bytes")

# %% [markdown]
# The picture: for each layout, which logical chunks of rows 0-7 land in which bank group, with the chunk
# one `ldmatrix` matrix reads coloured by row. Unpadded rows put that chunk in few groups (two rows share
# a line when rows are 64 bytes; every row starts in the same group when they are 256 bytes). Padding
# shifts each row by one group; the swizzle instead XORs each chunk's position inside its 128-byte line
# with bits of the row index (`swizzle_chunk` in `kernels/common/lab_swizzle.cuh`, mirrored in Python by
# `lab.lessons.layouts.swizzle_chunk`), which scatters the 8 rows over 8 groups with no extra memory. This
# is the idea CuTe expresses as `Swizzle<B, M, S>` (CUTLASS's `cute/swizzle.hpp` and the CuTe layout
# documentation). What to look at: in each panel, whether the coloured cells (one per row) sit in one column
# each, which is one wavefront, or pile up in a few columns.

# %%
lessons.figure(diagrams.bank_figure(ROW_BYTES, PAD_BYTES))

# %%
for nbytes in ROW_BYTES:
    waves = {lay: layouts.wavefronts(layouts.ldmatrix_groups(nbytes, lay, pad_bytes=PAD_BYTES))
             for lay in layouts.LAYOUTS}
    print(f"{nbytes}-byte rows, wavefronts per ldmatrix matrix:", ", ".join(f"{k} {v}" for k, v in waves.items()))

# %% [markdown]
# What Nsight Compute counts. Each conflict is one extra shared-memory wavefront, so the counter next to
# the wavefronts it belongs to is the share of passes lost. `ldmatrix` (SASS `LDSM`) is counted apart from
# plain shared loads (`LDS`), where the profile read that counter. When no profile of this family exists
# yet, the cell says so: the counts are never estimated. On the Hopper rungs `wgmma` reads its operands
# from shared memory through the tensor cores' own path, which these load/store-unit counters do not see.
# A counter that is zero on every rung is said in a sentence, with the rungs that did read shared memory that
# way, instead of drawn as bars of height zero. Where there are bars, what to look at is which rungs have any:
# the padded and swizzled layouts should leave `ldmatrix` with none.

# %%
for metric in lessons.conflict_metrics(TC_PROFILE):
    rows = TC_PROFILE["rows"] if TC_PROFILE is not None else []
    if ladder_plots.all_zero(rows, metric):
        wavefronts = WAVEFRONTS.get(metric, "")
        readers = [r["rung"] for r in rows if r.get(wavefronts)]
        print(f"{metric}: 0 on every rung profiled ({len(rows)} rungs), so there is nothing to draw: no bank "
              "conflicts" + (f"; the rungs whose {wavefronts} the profile counted ({', '.join(readers)}) read "
                             "shared memory that way with every pass conflict-free" if readers else "")
              + f" [{describe_params(TC_PROFILE.get('params') or {})}]")
    else:
        lessons.profile_plot(TC_PROFILE, "gemm_tc", metric)

# %% [markdown]
# ---
# ## Rung 03 — XOR-swizzled tiles and a multi-stage `cp.async` pipeline
#
# Two changes. The tiles are **unpadded and swizzled**, so they are smaller and still conflict-free for
# both the `ldmatrix` reads and the 16-byte copies that write them. And shared memory holds `STAGES`
# k-tiles filled by `cp.async` (PTX ISA, "cp.async"; SASS `LDGSTS`), which copies global memory straight
# into shared memory without passing through registers and without stalling the thread that starts it.
# The warp tile grows to 64×64, so each warp executes more mma per `ldmatrix`; the count says what that buys
# against the tensor cores' need. The tiles live in dynamic shared memory; the launcher requests:

# %%
print("dynamic shared memory per block:", dynamic_smem_bytes(TC.rung("03")), "bytes;", lessons.knobs_line(TC, "03"))
warp_03 = flop_per_byte(KNOBS_03["WM"], KNOBS_03["WN"])
print(f"warp tile {KNOBS_03['WM']}x{KNOBS_03['WN']}: {warp_03:.1f} FLOP per byte from shared memory (rung 02: "
      f"{warp_02:.1f}), against the {NEEDED_INTENSITY:.0f} the tensor cores need")

# %% [markdown]
# ### Predict first

# %%
print(lessons.prediction(TC, "03"))

# %% [markdown]
# Rung 03 repeats the steps of rung 02, so one call shows them: the diff, the compile report, the checks, the
# records at every headline size, the climb so far (what to look at: the step over rung 02, and how far under
# cuBLAS a rung that still uses `mma.sync` stays) and the prediction against the records.

# %%
TC_03 = WALK("03")

# %% [markdown]
# ### What is in flight when
#
# The main loop, as `lab.lessons.layouts.pipeline_schedule` restates it: a prologue starts the copies of
# the first `STAGES - 1` k-tiles; iteration `kt` waits until tile `kt` has landed (`cp.async.wait_group`),
# passes one barrier (which also proves every warp is done with tile `kt - 1`), refills the stage that tile
# used with tile `kt + STAGES - 1`, and computes on tile `kt`. So while one tile is computed, the next
# `STAGES - 1` are in flight, and a global-memory latency is hidden as long as it is shorter than that many
# k-tiles of math. The figure uses the rung's own `STAGES`; read each row left to right: hatched while its
# copy is in flight, solid in the iteration that computes it.

# %%
lessons.figure(diagrams.pipeline_figure(k_tiles=2 * KNOBS_03["STAGES"], stages=KNOBS_03["STAGES"]))

# %% [markdown]
# How much the depth matters was measured on the reference GPU with every other knob held still
# (`scripts/gemm_tc_knobs.py`: each setting checked, then timed beside cuBLAS in the same run; "default" is
# the knob line printed above):

# %%
print(knob_records.probe_table())

# %% [markdown]
# ---
# ## Hopper: TMA, `mbarrier`, `wgmma` and warp specialization
#
# `mma.sync` is Ampere's instruction; on Hopper it runs, but it cannot keep the tensor cores fully busy,
# and every operand still passes through registers via `ldmatrix` that the SM must execute. Hopper adds
# (NVIDIA Hopper Tuning Guide; PTX ISA sections named below):
#
# - **TMA**, the Tensor Memory Accelerator (`cp.async.bulk.tensor`): one thread hands the copy engine a
#   *tensor map* (built on the host with `cuTensorMapEncodeTiled`: the matrix's base, sizes, strides, the
#   box to copy and the swizzle) and box coordinates; the engine copies the whole box into shared memory,
#   applies the 128-byte swizzle as it writes, and fills out-of-range elements with zeros, so tails need
#   no code. TMA requires 16-byte aligned bases and strides that are multiples of 16 bytes: an operand
#   that breaks this needs a fallback (this family repacks it first, and its records say which path each
#   launch took).
# - **`mbarrier`**, a barrier object in shared memory with a phase bit and a transaction count: TMA
#   completes a stage's "full" barrier when its bytes have landed, and the threads that read the stage
#   arrive on its "empty" barrier when they are done. Waiting on a phase replaces `__syncthreads()`.
# - **`wgmma.mma_async`** (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): four warps
#   (a warpgroup) execute one large MMA, up to 64×256×16, whose A and B the tensor cores read straight from
#   shared memory through matrix descriptors; only the fp32 accumulators live in registers. It is
#   asynchronous: a warpgroup commits groups of them and waits only for older groups.
# - **warp specialization** with **`setmaxnreg`**: instead of every warp both copying and computing, one
#   producer warp (or warpgroup) does nothing but start TMA copies, waiting on "empty" barriers, while
#   consumer warpgroups do nothing but `wgmma`, waiting on "full" barriers. The producer needs few
#   registers and the consumers many accumulators, so `setmaxnreg` moves registers from one role to the
#   other. This is the structure of CUTLASS's warp-specialized SM90 kernels ("Efficient GEMM in CUDA" in
#   CUTLASS's documentation).
#
# The timeline below is a *schematic*: a small simulation of those rules with assumed durations (a copy
# taking a few times as long as one k-tile of math), not a measurement. The producer runs ahead until every
# stage is full; each consumer starts a k-tile as soon as its "full" barrier flips; a stage is refilled as
# soon as both consumers have released it. What to look at: with too few stages the consumers wait (grey);
# with enough, the copies are hidden behind the math and the consumer rows are solid.

# %%
HOPPER = [rung.key for rung in TC.rungs if uses_tma(rung)]
HOPPER_STAGES = dict(TC.rung(HOPPER[-1]).spec.knobs).get("STAGES", KNOBS_03["STAGES"]) if HOPPER else None
print("the family's Hopper rungs (TMA operands, sm_90a):", ", ".join(HOPPER) if HOPPER else "none")
lessons.figure(diagrams.roles_figure(k_tiles=10, stages=2))
if HOPPER_STAGES:
    lessons.figure(diagrams.roles_figure(k_tiles=10, stages=HOPPER_STAGES))


# %% [markdown]
# ### The first Hopper rung: TMA, an `mbarrier` pipeline and `wgmma`
#
# The first rung of the family that reads its operands through TMA, taken apart like rungs 01 and 02. Its
# header names what changed; the count says what `wgmma` buys: a warpgroup's instruction covers a 64-row tile of
# C as wide as the block tile, read by the tensor cores straight from shared memory, so the same ratio
# `m * n / (m + n)` is taken over a much larger tile than a warp's `mma.sync`. And where rung 03's threads each
# started their own 16-byte `cp.async` copies, one thread now starts a whole k-tile.

# %%
FIRST_HOPPER = HOPPER[0] if HOPPER else None
if FIRST_HOPPER:
    kh = dict(TC.rung(FIRST_HOPPER).spec.knobs)
    wgmma_m = 64  # wgmma's m: one warpgroup's rows of the block tile
    warp_h = flop_per_byte(wgmma_m, kh["BN"])
    print(f"{TC.rung(FIRST_HOPPER).key}: one wgmma m{wgmma_m}n{kh['BN']}k16 per warpgroup reads "
          f"{2 * (wgmma_m + kh['BN']) * 16} B of shared memory for {2 * wgmma_m * kh['BN'] * 16} FLOP = "
          f"{warp_h:.1f} FLOP per byte (rung 03's warp tile: {warp_03:.1f}), against the {NEEDED_INTENSITY:.0f} "
          "the tensor cores need")
    tile_bytes = 2 * (kh["BM"] + kh["BN"]) * kh["BK"]  # one k-tile of A and B, two bytes an element
    copies_03 = 2 * (KNOBS_03["BM"] + KNOBS_03["BN"]) * KNOBS_03["BK"] // 16
    print(f"  copies: one thread starts {tile_bytes} B of TMA boxes per k-tile of {kh['BK']}; rung 03's "
          f"{KNOBS_03['THREADS']} threads started {copies_03} cp.async of 16 B per k-tile of {KNOBS_03['BK']} "
          f"({copies_03 // KNOBS_03['THREADS']} each)")
    print(f"  TMA on the odd shape: A's and B's rows are {2 * SHAPE['K']} B apart, "
          + ("a multiple of 16, so TMA reads them as they are" if 2 * SHAPE["K"] % 16 == 0 else
             "not a multiple of 16, so the family repacks them first"))
else:
    print("the family has no Hopper rung yet")

# %% [markdown]
# The rung rewrites most of rung 03 (new loads, new synchronization, a new instruction), so where a diff would
# show little but deletions, the notebook shows the whole source; otherwise the diff.

# %%
SHOW_H = lessons.show_source if FIRST_HOPPER and lessons.mostly_rewritten(TC, FIRST_HOPPER) else lessons.show_diff
SHOW_H(TC, FIRST_HOPPER) if FIRST_HOPPER else lessons.md("(no Hopper rung in the family yet)")

# %% [markdown]
# ### Predict first

# %%
if FIRST_HOPPER:
    print(lessons.prediction(TC, FIRST_HOPPER))
    print(lessons.arch_note(TC, FIRST_HOPPER, MODE))

# %%
REPORTS_H = lessons.compile_pair(TC, FIRST_HOPPER, ARCH) if FIRST_HOPPER else []
lessons.md(report.compile_markdown(REPORTS_H)) if REPORTS_H else None

# %%
if REPORTS_H:
    print(lessons.instruction_delta(REPORTS_H))
    print(lessons.mma_mix(REPORTS_H[-1:]))

# %% [markdown]
# ### One launch on the odd shape, checked, and timed against cuBLAS
#
# Only on a GPU that runs `sm_90a` code (an H100 or H200); elsewhere the cell says why it launches nothing. The
# tails of M, N and K need no code in this rung: TMA fills what lies outside A and B with zeros.

# %%
if MODE.live and FIRST_HOPPER and lessons.runs_on(TC.rung(FIRST_HOPPER), device.current().arch):
    rung = TC.rung(FIRST_HOPPER)
    out.view(cupy.uint16).fill(0x7FC1)
    TC.launch(rung, PROBLEM, out)
    cupy.cuda.get_current_stream().synchronize()
    print(f"{rung.key} on {PROBLEM.label}: grid {TC.grid(TC.variant(rung, PROBLEM, out), PROBLEM.params)} of "
          f"{dict(rung.spec.knobs)['THREADS']} threads, {dynamic_smem_bytes(rung)} B of dynamic shared memory, "
          f"path: {TC.launch_notes(rung, PROBLEM, out)['path']}")
    got = TC.output_values(out).get().astype(np.float64)[:, :N]
    err = np.abs(got - REF[:, :N])
    share = err / np.maximum(BOUND[:, :N], np.finfo(np.float64).tiny)
    print(f"  {int(np.isnan(got).sum())} elements still NaN; largest |error| {np.nanmax(err):.3g}; the closest "
          f"element came to {np.nanmax(share):.2f} of its bound")
    assert not np.isnan(got).any() and (err <= BOUND[:, :N]).all(), f"{rung.key} is wrong on {PROBLEM.label}"
    t_rung = timing.measure(lambda i: TC.launch(rung, PROBLEM, out, i), l2="cold", flusher=FLUSHER)
    t_lib = timing.measure(lambda i: TC.launch_ceiling(PROBLEM, LIB_OUT, i), l2="cold", flusher=FLUSHER)
    print(f"  median {t_rung.median_ms:.4f} ms = {TC.throughput(PROBLEM, t_rung.median_ms):.1f} TFLOP/s; cuBLAS "
          f"{t_lib.median_ms:.4f} ms -> {t_lib.median_ms / t_rung.median_ms:.3f}x cuBLAS's speed (measured in this "
          "run, cold L2)")
elif FIRST_HOPPER:
    why = (f"this GPU is sm_{device.current().arch} and {TC.rung(FIRST_HOPPER).key} needs sm_90a" if MODE.live
           else "no GPU here")
    print(f"(On an sm_90 GPU this cell launches {TC.rung(FIRST_HOPPER).key} on {describe_params(SHAPE)}, checks it "
          f"against the float64 reference and times it beside cuBLAS; not here: {why}. Replayed instead:)")
    print(replayed_timings(FIRST_HOPPER))
if FIRST_HOPPER:
    print(lessons.check_summary(TC_CHECKS, TC, FIRST_HOPPER))

# %% [markdown]
# ### The answer, against the prediction

# %%
if FIRST_HOPPER:
    print(lessons.prediction_check(TC_RS, TC, FIRST_HOPPER))

# %% [markdown]
# The climb so far. What to look at: the step from rung 03, the last `mma.sync` rung, to the first `wgmma`
# rung; the count above gave `wgmma` room over the tensor cores' need where rung 03 had none, so what remains
# between this bar and cuBLAS is no longer shared-memory bandwidth. The header names its suspects (one thread
# is both producer and consumer), which the next rungs remove.

# %%
if FIRST_HOPPER:
    lessons.plot(plots.ladder_bars, lessons.so_far(TC_RS, TC, FIRST_HOPPER), "gemm_tc")

# %% [markdown]
# ### The later Hopper rungs
#
# Every Hopper rung after the first, whatever the family holds when this runs: each with its header as its
# author wrote it, then the same walk as above (the whole source where it rewrites most of the previous rung).
# On a machine without `sm_90`, these rungs are compiled for `sm_90a` and shown compile-only, and a sentence
# says so; in REPLAY their numbers are the reference GPU's records, where those hold them.

# %%
LATER = HOPPER[1:]
print("Hopper rungs after the first:", ", ".join(LATER) if LATER else "none in the family yet")

# %%
LATER_REPORTS = {key: WALK.chapter(key) for key in LATER}

# %% [markdown]
# ### The Hopper techniques, one at a time
#
# From rung 09 on, each rung adds one technique to the rung before it: clusters of two blocks that share B through
# a multicast load (09), the epilogue through shared memory and a TMA store (10), and two consumer warpgroups that
# take turns, each on its own tile, so that one's epilogue runs under the other's k-loop (11). A step of a few
# percent is easily lost in the noise between processes on this GPU, so these rungs are compared in interleaved
# rounds in one process (`python -m lab.studies.hopper_gemm_study`): every rung and both library calls once a round
# on each shape, and each ratio taken within a round.
#
# Predict first: what each header expected from its technique, written before its first run.

# %%
for key in hopper_techniques.BEFORE:
    if key in [r.key for r in TC.rungs]:
        print(f"{key}: {lessons.prediction(TC, key)}\n")

# %% [markdown]
# The answer, at 4096^3 fp16 TN: each rung against the library and against the rung it adds to, in the same rounds,
# beside the range its header predicted. Then the fit of time against K (M = N = 4096), which splits a launch into a
# part that does not grow with K (each tile's epilogue and pipeline fill, the launch) and a part per k-tile: a
# technique that hides the epilogue should move the first, one that feeds the tensor cores better the second.

# %%
HOPPER_STUDY = hopper_techniques.load()
print(hopper_techniques.technique_table(HOPPER_STUDY, TC))
print()
print(hopper_techniques.fixed_cost_table(HOPPER_STUDY))

# %% [markdown]
# Every shape of the study: each bar a rung's median same-round ratio to the library (a line down to its lowest
# round), the dashed line the library. What to look at: whether each technique's step at the first shape holds at
# the other sizes, and the shapes where every rung stays far under the library. The cell after the figure counts
# each shape's tiles and waves: the shapes a little past a whole number of waves leave their last wave mostly
# empty. There the rung with the smaller tiles (rung 11's tiles have half the rows, so they split the last wave
# finer) loses less; the remedies are tile shapes per shape class and stream-K (notebook 04), not a faster main loop.

# %%
lessons.figure(hopper_techniques.technique_figure(HOPPER_STUDY), "no Hopper study record")

# %%
print(hopper_techniques.wave_lines(HOPPER_STUDY, TC))

# %% [markdown]
# ### Tile shapes for the shapes one wave does not fill
#
# Rung 10's clusters walk pair tiles (two blocks, 256 rows by BN columns), one cluster per slot, as many slots as
# fit on the GPU at once. A shape whose pair tiles come to a little more than a whole number of waves pays a whole
# last wave for a sliver of work. The family can build rung 10 with narrower tiles, BN = 192 (the TN layout only:
# in NN each block multicasts half of B's 64-column boxes, and three boxes do not split) or BN = 128, and picks one
# per shape from a wave model (`lab/families/gemm_tc_tiles.py`): a pair tile's k-loop takes time in proportion to
# BN, so a launch takes waves times BN. It keeps BN = 256 unless another width is predicted clearly faster; a
# narrower tile feeds the tensor cores a little worse, so the measured gain should fall a few percent short of the
# model's.
#
# Predict first: the model's arithmetic for each study shape, and its pick.

# %%
TILE_STUDY = hopper_tiles.load()
SLOTS = hopper_tiles.slots(TILE_STUDY, TC)  # clusters that fit at once: the record's, or this GPU's
print(f"{SLOTS} clusters at once; cost = waves x BN (lower is faster)" if SLOTS else
      "(no tile study record and no GPU: no count of clusters to divide the tiles by)")
for shape in hopper_tiles.shapes(TILE_STUDY) if SLOTS else []:
    M, N, layout = shape["M"], shape["N"], shape["layout"]
    per_bn = []
    for bn in gemm_tc_tiles.candidates(layout):
        pairs, waves = gemm_tc_tiles.pair_tiles(M, N, bn), gemm_tc_tiles.waves(M, N, bn, SLOTS)
        per_bn.append(f"BN={bn}: {pairs:4d} pairs {waves:2d} waves cost {waves * bn:5d}")
    print(f"{hopper_techniques.shape_label(shape):<24} " + " | ".join(per_bn)
          + f"  -> BN={gemm_tc_tiles.choose(M, N, layout, SLOTS)}")

# %% [markdown]
# The answer, from the tile study (`python -m lab.studies.hopper_tile_study`): every build of rung 10 and both
# library calls once a round on each shape, each ratio taken within a round. The table sets the model's predicted
# speedup over the BN = 256 build beside the measured one, and names the build that was fastest; the figure shows
# each build against the library, the model's pick outlined. What to look at: whether the shapes the model moves
# off BN = 256 gain what it predicted, and whether any shape it leaves alone had a faster build.

# %%
print(hopper_tiles.tile_table(TILE_STUDY))

# %%
lessons.figure(hopper_tiles.tile_figure(TILE_STUDY), "no tile study record")

# %% [markdown]
# ---
# ## The ladder, all together
#
# Every headline record, one panel per type and layout: cuBLAS hatched, each rung labelled with its
# fraction of cuBLAS in the same run (a label that would not fit above its bar is left out). The square sizes
# are where the predictions are stated; the sizes one off a multiple of the tile (and of 8) are where alignment
# decides which path every kernel, cuBLAS included, can take. What to look at: in each panel, how the bars climb
# rung by rung at the aligned sizes, and how the order changes at the sizes one off: cuBLAS's own bar drops
# there.

# %%
lessons.plot(plots.ladder_grid, TC_RS, "gemm_tc")

# %%
lessons.headline_table(TC_RS, "gemm_tc")

# %% [markdown]
# The best rung of the records, by its median fraction of cuBLAS over the headline sizes (computed below from
# whichever rungs the records hold), and what a size one off a multiple of 8 does to it and to cuBLAS, fp16 TN:

# %%
BEST = lessons.best_rung(TC_RS, TC)
if BEST:
    best_ratios = [r.ratio for r in TC_RS.where(kind="headline", rung=BEST)]
    print(f"best rung of these records: {BEST}, median {np.median(best_ratios):.3f}x cuBLAS over "
          f"{len(best_ratios)} headline problems (of {len(WITH)} rungs with records; {TC_RS.label()})")
TN16 = lessons.headline_sizes(TC_RS, layout="TN", dtype="float16")
print(lessons.size_change(TC_RS, TC, BEST, TN16[0], TN16[1:]) if BEST and TN16 else lessons.missing("gemm_tc"))

# %% [markdown]
# ### Throughput against size
#
# Square products from a side of 256 to 8192 (fp16 TN, cold L2), every rung beside cuBLAS (dashed black),
# and the same as a fraction of cuBLAS. Small products give too few 128-wide tiles to fill the GPU's SMs, so
# everything, cuBLAS included, is far from its plateau there. What to look at: on the left, where each curve
# flattens (the size from which the GPU is full); on the right, whether a rung's fraction of cuBLAS holds
# steady past that size or sags where cuBLAS switches to a better kernel.

# %%
print(lessons.kinds_status(TC_RS, TC, ("sweep",)))
lessons.plot(plots.throughput_vs_size, TC_RS, "gemm_tc")

# %%
print(lessons.ratio_by_size(TC_RS, TC, BEST, "ceiling") if BEST else lessons.missing("gemm_tc"))

# %% [markdown]
# ### Tails: `N` stepping by one around 4096
#
# `M = K = 4096`, fp16 TN, `N` stepping by one across 4096 and the next tile boundaries (warm L2). When `N`
# is not a multiple of 8, C's rows are not 16-byte aligned: **cuBLAS** falls off a cliff there (its fast
# kernels want aligned leading dimensions), and the **lab's rungs** take their fallback: element loads
# instead of 16-byte copies for rungs 02 and 03; the Hopper rungs repack an operand TMA cannot read as it
# is. In this TN tail only C's rows move off alignment (A and B keep `K` as their leading dimension), so
# whether a TMA rung needs its repack path here is for the records to say. The tables after the plot put
# numbers on both: each rung's (and cuBLAS's) median at `N` a multiple of 8 against the others, and which path each
# rung's launch took (the family notes it in every record). What to look at in the plot: the comb of cuBLAS's
# line (high only at every eighth `N`), against the flatter lines of the TMA rungs.

# %%
print(lessons.kinds_status(TC_RS, TC, ("tail",)))
print(lessons.tail_steps(TC_RS, TC))

# %%
lessons.plot(plots.tail, TC_RS, "gemm_tc")

# %%
print(lessons.tail_residues(TC_RS, TC, 8))

# %%
print(lessons.tail_sawtooth(TC_RS, TC))

# %%
print(lessons.launch_paths(TC_RS, TC))

# %% [markdown]
# ### DRAM traffic per rung
#
# Nsight Compute's DRAM bytes (read + written) for one launch of each rung against the fewest bytes the
# product can move (`GemmTcFamily.min_dram_bytes`: A and B read once, C written once), with the L2 hit
# rate. Larger block tiles mean fewer re-reads of A and B; an L2-aware order of the blocks (not in these
# rungs) would cut them further. What to look at in the plot: how far each stacked bar stands above the dashed
# minimum, rung by rung, and which step of the ladder moved more bytes rather than fewer.

# %%
lessons.dram_table(TC_PROFILE, TC)

# %%
lessons.dram_plot(TC_PROFILE, TC)

# %% [markdown]
# ---
# ## What to take away
#
# - A tensor-core instruction belongs to a warp (or a warpgroup): the fragment layout decides who loads
#   what, and `ldmatrix` exists to hand a warp a whole fragment from shared memory in one instruction.
# - The ratio `m * n / (m + n)` of a tile of C, against what the tensor cores consume per byte shared memory
#   delivers, says before any run which rung cannot keep them busy, and why: rung 01 by its loads, rung 02 by
#   its warp tile, rung 03 with no slack, `wgmma` with some.
# - Shared-memory layouts are designed against the 8-row read pattern of `ldmatrix`: padding or an XOR
#   swizzle, the swizzle costing no memory; the bank-group pictures follow from the index formulas alone.
# - A multi-stage pipeline hides global-memory latency behind math only with enough stages in flight; the
#   knob probe shows where more stages stop paying.
# - On Hopper the instruction set changes the design: TMA moves tiles without the threads, `mbarrier`
#   phases replace block-wide barriers, `wgmma` reads operands from shared memory, and warp specialization
#   gives copying and computing to different warps.
# - Alignment is a property of the shape as much as of the kernel: sizes one off a multiple of 8 cost
#   cuBLAS and the rungs alike, each through its own fallback.
