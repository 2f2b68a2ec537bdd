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
# # 04 — Scheduling: when and where work runs
#
# Notebooks 02 and 03 made each block of a GEMM fast. This one is about the blocks *together*: which output
# tile each block computes, in which order, on which SM, and what happens when the work does not divide evenly
# over the SMs. Three lessons, each stated as a prediction first, then measured, then held against the
# prediction:
#
# 1. **Tile orders** (threadblock swizzle): the blocks that run at the same time share the L2, so the order
#    in which tiles are handed out decides how often A and B are read from DRAM.
# 2. **Persistent kernels**: launch once, and let resident blocks fetch work themselves: for many small items
#    (where a launch costs more than the work) and for the GEMM (where each tile restarts a pipeline).
# 3. **Stream-K**: when the tile count is just past a multiple of the SM count, the last wave leaves most SMs
#    idle; splitting the leftover work along K spreads it over all of them.
#
# The kernels: gemm_tc rungs 05 (warp-specialized, one block per tile), 06 (persistent, with a `RASTER` knob for
# the tile order) and 07 (stream-K); gemm_fp32 rung 08 for a contrast; `kernels/persistent/small_items.cu` for
# the small items. The orders are written once in `kernels/common/lab_tile_order.cuh` and restated in Python in
# `lab.core.tile_order`, which draws and predicts everything below that is not a measurement. Every measured figure is
# computed in a cell from records; none is typed in. Sources for the ideas: Triton's matrix-multiplication
# tutorial ("grouped ordering"), CUTLASS's threadblock swizzles and sm90 tile schedulers, Gupta, Stuart & Owens
# on persistent threads (InPar 2012), and Osama et al., "Stream-K" (PPoPP 2023).

# %%
from lab import lessons
from lab.families import work_queue
from lab.lessons import plots
from lab.lessons import scheduling as lesson
from lab.studies import scheduling

# %% [markdown]
# ## Live or replay
#
# LIVE (a GPU here) runs a short plan and shows it first; the full studies of the reference GPU are replayed
# beside it, labelled as such. REPLAY (no GPU) shows only the records, and says so. The box lists every record
# file this notebook reads, with the device, date and commit it was made on.

# %%
MODE = lessons.mode()
REPLAYED = lesson.replayed()
print(lesson.banner(MODE, REPLAYED))

# %% [markdown]
# The predictions need two facts about the GPU: how many tiles run at once (one persistent block per SM) and
# how much L2 they share. LIVE: this GPU's. REPLAY: the GPU the records were made on, from their provenance.
# The tile is the gemm_tc rungs' own (their `BM`, `BN` and `BK` knobs).

# %%
GPU = lesson.gpu_facts(MODE, REPLAYED)
TILE = lesson.tile_knobs()
print("GPU:", GPU)
print("tile:", TILE, "(the knobs of gemm_tc rungs 06 and 07)")

# %% [markdown]
# The LIVE plan is kept to a few minutes on an H200 (compiling included): one shape and four orders instead of
# four shapes and nine, no Nsight Compute, fewer small items, a handful of `M` values for the sawtooth.
# `lab study orders|counters|fp32|streamk|items` record the full studies.

# %%
print(lesson.live_plan(GPU, TILE))

# %% [markdown]
# ---
# ## 1. Tile orders: which tiles share the L2
#
# A GEMM's output is cut into tiles; block (or, in a persistent kernel, work item) number `i` computes the
# tile that the order assigns to `i`. Blocks start roughly in index order, so the tiles numbered
# `0 .. SMs - 1` run together: that is the first **wave**. Each tile reads one row-panel of A (`BM × K`) and
# one column-panel of B (`K × BN`); the panels a wave reads together are what the L2 must hold for them to be
# fetched from DRAM once rather than once per tile.
#
# The four orders of `lab_tile_order.cuh`, on a small grid with a made-up wave of twelve tiles (highlighted):
# **row** (along a row of tiles: one A panel, every B panel), **column** (the mirror image), **grouped**
# (`GROUP_M` rows of tiles at a time, walked column by column: a squarish patch of tiles), and **snake**
# (grouped, but every other group walks back, so the next group starts on the B panels the last one ended on).

# %%
SMALL_GRID, SMALL_WAVE = (8, 12), 12
SMALL_SETTINGS = [("row", 0), ("column", 0), ("grouped", 4), ("snake", 4)]
lessons.figure(plots.tile_orders(*SMALL_GRID, SMALL_SETTINGS, workers=SMALL_WAVE))

# %% [markdown]
# The lesson's headline shape, `M × N × K` = 4096 × 32768 × 8192 in fp16, is a wide grid of tiles: far more
# tile columns than rows. In row order the first wave is a thin strip that touches every B panel; grouped by 8
# or 16 rows it is a block that touches few of each. Wave 0 highlighted, one tile per SM:

# %%
BIG = lesson.TARGET_SHAPE
BIG_SETTINGS = [("row", 0), ("grouped", 8), ("grouped", 16)]
lessons.figure(plots.tile_orders(*TILE.grid(BIG), BIG_SETTINGS, workers=GPU.sm_count))

# %%
print(lesson.wave_zero(BIG, BIG_SETTINGS, TILE, GPU))

# %% [markdown]
# ### Prediction: the footprint of a wave against the L2
#
# For every shape and order of the study, `lab.core.tile_order.wave_footprints` counts the panels each wave reads;
# the table gives the median wave's bytes and their multiple of the L2. Where that multiple is well above one,
# panels are evicted before the next wave can reuse them, and DRAM traffic grows. The last column is a small
# model (`lab.lessons.scheduling.predicted_reads`: the L2 as a least-recently-used store of whole panels) of
# the GEMM's DRAM reads against the minimum (A and B read once). Expected: on the first two shapes, whose
# panels overflow the L2 in row order, grouped orders read several times less; on the 4096-cube, whose whole
# A and B nearly fit, the order hardly matters.

# %%
print(lesson.footprint_table(scheduling.ORDER_SHAPES, scheduling.ORDER_SETTINGS, TILE, GPU))

# %%
print(lesson.predicted_order_ratio(BIG, TILE, GPU, scheduling.ORDER_SETTINGS))

# %% [markdown]
# ### Measurement: TFLOP/s per order
#
# `lab.studies.scheduling.time_orders`: rung 06 built with each order (`RASTER`, `GROUP_M`), each build checked
# against the float64 reference on an odd shape first, then timed with a cold L2 beside cuBLAS on the same
# problem in the same run. LIVE: one shape, four orders, measured now.

# %%
LIVE_ORDERS = lesson.live_orders(MODE)
print(lesson.live_note(LIVE_ORDERS, MODE, "schedule_orders (live)"))

# %%
if LIVE_ORDERS:
    print(lesson.order_table(LIVE_ORDERS, "schedule_orders (live)"))
    lessons.figure(plots.order_speeds(LIVE_ORDERS))

# %% [markdown]
# The reference GPU's full study, every shape and order (replayed):

# %%
ORDERS = REPLAYED["schedule_orders"]
print(lesson.order_table(ORDERS))

# %%
lesson.show(plots.order_speeds, ORDERS, "schedule_orders")

# %% [markdown]
# ### What the L2 saw: Nsight Compute
#
# One launch of each order at each shape under Nsight Compute (`lab.studies.scheduling.order_counters`: caches flushed
# before each launch, clocks left alone): bytes read from and written to DRAM, and the L2's sector hit rate.
# Reads are shown as a multiple of the minimum, to set beside the model's column above. These counters are
# never measured in LIVE mode (one `ncu` process per study, minutes long); they are the reference GPU's.

# %%
NCU = REPLAYED["schedule_orders_ncu"]
print(lesson.ncu_table(NCU))

# %% [markdown]
# At the headline shape: where the first wave runs in row order and in the order that read the fewest bytes,
# beside the DRAM bytes of every order.

# %%
lesson.show(plots.order_traffic, NCU, "schedule_orders_ncu", shape=BIG, workers=lesson.sm_count_of(NCU, GPU),
            tile=(TILE.bm, TILE.bn))

# %%
lesson.show(plots.order_dram, NCU, "schedule_orders_ncu")

# %% [markdown]
# The lesson's two targets at the headline shape, from these records: the fastest order's speed over row order,
# and its DRAM reads over row order's.

# %%
print(lesson.order_targets(ORDERS, NCU))

# %% [markdown]
# ### The contrast: FP32, where compute sets the pace
#
# gemm_fp32 rung 08 (`RASTER` knob added for this lesson) runs an order of magnitude fewer FLOP/s than the
# tensor cores, so it needs an order of magnitude fewer bytes per second for the same reuse: even the row
# order's extra DRAM traffic should fit in the bandwidth, and grouped should gain little. The same two orders
# on two shapes, with their DRAM reads where the counters were read.

# %%
LIVE_FP32 = lesson.live_fp32(MODE)
print(lesson.live_note(LIVE_FP32, MODE, "schedule_orders_fp32 (live)"))

# %%
if LIVE_FP32:
    print(lesson.fp32_contrast(LIVE_FP32, "schedule_orders_fp32 (live)"))

# %%
FP32 = REPLAYED["schedule_orders_fp32"]
print(lesson.fp32_contrast(FP32))

# %%
lesson.show(plots.order_speeds, FP32, "schedule_orders_fp32")

# %% [markdown]
# ### What it shows
#
# Read the tables against the prediction: where a wave's panels overflow the L2 (the wide and the
# large-square shapes in row order), the counters show DRAM reads many times the minimum, and the grouped and
# snake orders with 8 to 16 tile-rows per group cut them by a large factor; where everything fits (the
# 4096-cube), every order reads about the same. The panel model ranks the orders roughly as the counters do
# but not exactly: it favours the column order at the wide shape more than the L2 did, because real blocks
# drift apart in time and the L2 keeps parts of panels, which the model ignores.
#
# Fewer bytes buy speed only where bytes are the limit. At the wide shape the row order's reads come near
# the HBM's rate, and every order that cuts them gains about a third. At the 8192-cube the row order reads
# several times the bytes of the snake order yet runs as fast: spread over its run time those bytes stay
# well under the HBM's bandwidth, so the tensor cores, not DRAM, set the pace (divide the read bytes by the
# time to see it). The FP32 rung, with a tenth of the tensor cores' demand for bytes per second, barely
# notices the same change in traffic.

# %% [markdown]
# ---
# ## 2. Persistent kernels
#
# ### 2a. Many small items: what a launch costs
#
# RMSNorm of one fp32 row per item, `N` items, four ways (`lab.families.work_queue`): one CuPy launch per item from a
# Python loop; the same launches captured once in a CUDA graph; one launch with one block per item; and one
# persistent launch whose blocks pull item numbers from a counter in global memory. The prediction (the
# kernel's header): a launch costs several microseconds of host time whatever the item, so per-item launches
# are flat until the item's own work exceeds that; a graph cuts the host cost to a fraction of it but still runs
# one kernel at a time on one SM; the batched launch and the queue spread the items over every SM, and the
# queue should be several times faster per item than per-item launches for every item under ten microseconds
# of work (the lesson's target, printed with the records). The items measured:

# %%
print(lesson.item_sizes())

# %%
LIVE_ITEMS = lesson.live_small_items(MODE)
print(lesson.live_note(LIVE_ITEMS, MODE, "small_items (live)"))

# %%
if LIVE_ITEMS:
    print(work_queue.summary(LIVE_ITEMS["rows"]))
    lessons.figure(plots.small_items(LIVE_ITEMS))

# %% [markdown]
# The reference GPU's study (replayed): the queue's speed-up over per-item launches for the items under the
# target's work (an item's work: `alone_us`, one item on its own in a graph of launches of it), and where the
# graph lands between the two.

# %%
ITEMS = REPLAYED["small_items"]
print(lesson.small_items_targets(ITEMS))

# %%
lesson.show(plots.small_items, ITEMS, "small_items")

# %% [markdown]
# What it shows: per-item launches sit on a floor set by the launch, not by the item, until the items are large;
# the graph lowers the floor but keeps one item at a time; the queue and the batched launch pay one launch for
# all the items and keep every SM busy, so their time per item follows the bytes an item moves. On a skewed mix
# of lengths both balance the load, because a block that finishes early simply takes the next item.

# %% [markdown]
# ### 2b. The persistent GEMM: rung 06 against rung 05
#
# Rung 05 launches one block per tile: every tile starts with an empty pipeline and ends with idle tensor
# cores while C is stored. Rung 06 launches one block per SM that walks its tiles, loading the next tile's
# first k-steps during the last one's epilogue. The saving is a pipeline fill per tile, so it weighs more when
# each SM has few, short tiles. The prediction is in rung 06's header: a small gain at 4096-cube, smaller at
# 8192-cube. Tiles per SM at the two squares:

# %%
print(lesson.tiles_per_sm(scheduling.SQUARES, TILE, GPU.sm_count))

# %% [markdown]
# Measured with `lab.studies.scheduling.time_rungs`, three rounds in which the rungs take turns (so a clock that drifts
# under sustained load touches both alike): each round's ratio, then the median against the target.

# %%
LIVE_PERSISTENT = lesson.live_persistent(MODE, GPU, TILE)
print(lesson.live_note(LIVE_PERSISTENT, MODE, "schedule_stream_k (live, squares)"))

# %%
if LIVE_PERSISTENT:
    print(lesson.persistent_rounds(LIVE_PERSISTENT, "schedule_stream_k (live, squares)"))

# %%
STREAM_K = REPLAYED["schedule_stream_k"]
print(lesson.persistent_rounds(STREAM_K))

# %% [markdown]
# What it shows: the per-round ratios tell whether the persistent loop's saving stands above the round-to-round
# noise. A fill saved per tile is a small share of a tile's time, so the ratios stay close to one, and closer at
# the larger square, where the same saving is spread over four times the work per tile.

# %% [markdown]
# ---
# ## 3. Stream-K: the wave sawtooth
#
# With `T` tiles and `P` SMs, a data-parallel schedule (rung 06) runs `ceil(T / P)` rounds; when `T` is a
# little past a multiple of `P`, the last round keeps a few SMs busy and leaves the rest idle. Throughput
# against `M` is then a sawtooth: it climbs as the last wave fills and drops when a new one starts. Rung 07
# keeps the whole waves data-parallel and cuts the leftover tiles (plus one whole wave) along K into `P` equal
# ranges, so every SM does about `T / P` tiles' worth of k-steps, plus a fix-up in which each tile's owner sums
# the pieces others parked in a workspace. `lab.core.tile_order.stream_k_rounds` restates that split: the busiest
# block's work in tile-times.
#
# The fix-up is not free (a tile cut in two is written once more in fp32 and read back), so rung 07 splits only
# where a small model in its header predicts a gain: `ceil(T / P)` rounds against `T / P` plus a fixed fix-up
# cost (`SK_FIXUP_COST`, fitted to a first run on the reference GPU that split every partial wave). Where the
# last wave is mostly full, the model keeps rung 06's schedule. The records also time rung 07 with the model
# switched off (`SK_MIN_GAIN = 0`, "forced split"), so both choices can be seen.
#
# The prediction for the sweep (`N = K = 4096`, `M` in steps of one tile row): the share of the SMs' time each
# schedule spends on tiles, before any fix-up.

# %%
SAW = lesson.sawtooth_prediction(scheduling.WAVE_MS, TILE, GPU.sm_count)
print(lesson.sawtooth_summary(SAW))

# %% [markdown]
# And for the named shapes of the study: tile counts a little past a multiple of the SM count
# (*wave-quantized*), exact multiples (*well-quantized*, where stream-K has nothing to split and should match
# rung 06), and the squares. The predicted ratio is rounds over rounds, with no fix-up, so it is an upper bound.

# %%
print(lesson.rounds_table(scheduling.WAVE_QUANTIZED + scheduling.WELL_QUANTIZED + scheduling.SQUARES, TILE,
                          GPU.sm_count, lesson.named_kinds()))

# %% [markdown]
# ### Measurement
#
# `lab.studies.scheduling.time_rungs` on every `M` of the sweep (rungs 06 and 07 and cuBLAS, cold L2), after rung 07
# was checked on shapes that cut tiles across blocks. LIVE: the `M` just below and just above the first wave
# boundaries, and four named shapes, measured now.

# %%
LIVE_SK = lesson.live_stream_k(MODE, GPU, TILE)
print(lesson.live_note(LIVE_SK, MODE, "schedule_stream_k (live)"))

# %%
if LIVE_SK:
    lessons.figure(plots.stream_k_sawtooth(LIVE_SK, lesson.sawtooth_prediction(
        sorted({r["M"] for r in LIVE_SK["sweep"]}), TILE, GPU.sm_count)))
    print(lesson.stream_k_ratios(LIVE_SK, TILE, "schedule_stream_k (live)"))
    print(lesson.determinism(LIVE_SK, "schedule_stream_k (live)"))

# %% [markdown]
# The reference GPU's sweep (replayed), with the prediction for that GPU's SM count beside it; dotted lines
# where the tile count reaches a multiple of the SM count:

# %%
REF_SMS = lesson.sm_count_of(STREAM_K, GPU)
REF_SAW = lesson.sawtooth_prediction(scheduling.WAVE_MS, TILE, REF_SMS)
lesson.show(plots.stream_k_sawtooth, STREAM_K, "schedule_stream_k", predicted=REF_SAW)

# %%
print(lesson.sweep_crossings(STREAM_K))

# %% [markdown]
# The named shapes: rung 07 over rung 06, the median of three rounds per shape, beside the prediction and
# against the lesson's target for each kind.

# %%
print(lesson.stream_k_ratios(STREAM_K, TILE))

# %%
PREDICTED_RATIOS = lesson.predicted_ratios(TILE, REF_SMS)
lesson.show(plots.stream_k_named, STREAM_K, "schedule_stream_k", predicted=PREDICTED_RATIOS, targets=lesson.TARGETS)

# %% [markdown]
# Stream-K sums a tile's pieces in a fixed order (block by block), so its results must be the same bits on
# every run, even though they differ in the last bits from rung 06's single-piece sum. Rung 07 was run three
# times on a wave-quantized shape:

# %%
print(lesson.determinism(STREAM_K))

# %% [markdown]
# ### What it shows
#
# The data-parallel rung follows the predicted sawtooth: its drops sit on the dotted lines, where one more
# tile row starts a wave that few SMs share. Stream-K fills in the teeth right after each line, most at the
# first boundaries, where the idle share of a wave is the largest part of the run; it recovers less than the
# no-fix-up prediction. Part of that is the fix-up (a tile cut in two is written once more in fp32 and read
# back); part is that ptxas serializes rung 07's tensor-core instructions (warning C7515, its header says
# why), which makes its main loop slower than rung 06's on every tile. That second cost shows alone on the
# well-quantized shapes, where the model splits nothing and rung 07 runs rung 06's schedule with its own,
# slower loop; and at the 4096-cube, where the model also keeps the data-parallel schedule (the forced split
# loses more). cuBLAS, which picks a kernel and a split per shape, shows the sawtooth its own way.
#
# The order in which a block walks its pieces matters as much as the split: rung 07 does the pieces that
# start at k = 0 first and the tail it starts inside last, so all blocks walk K almost in step and share
# k-slices in L2 (`lab.core.tile_order.k_offsets`); walking each range in order, a first version lost its gain from
# K = 8192 on. Next steps: remove the serialization (the test in `tests/test_gemm_tc_family.py` says when
# ptxas agrees), run rung 06's kernel where the model splits nothing, and make the fix-up cheaper (reduce
# through distributed shared memory inside a cluster, or store the partial tile with TMA).

# %% [markdown]
# ---
# ## What to take away
#
# - Which tiles run together decides what the L2 must hold. A wave's footprint is arithmetic on the tile order
#   (`lab.core.tile_order`), and it predicts where a grouped or snake order cuts DRAM traffic and where it cannot
#   matter.
# - Fewer DRAM bytes only buy speed where bytes are the limit: the tensor-core GEMM feels the order, the FP32
#   GEMM hardly does.
# - A launch is a fixed cost. For small items, paying it once and letting resident blocks pull work from a
#   queue turns a launch-bound loop into a bandwidth-bound one; a CUDA graph only shrinks the cost.
# - Persistent blocks also let a GEMM overlap one tile's epilogue with the next tile's loads: a small saving
#   per tile, visible only where tiles are few per SM.
# - Work that does not divide into whole waves wastes the SMs a partial wave leaves idle; stream-K spreads that
#   leftover along K at the price of a deterministic fix-up.
