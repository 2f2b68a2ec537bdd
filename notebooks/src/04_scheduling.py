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
# over the SMs.

# %% [markdown]
# ## What you will learn
#
# - How a block's number becomes an output tile in each **tile order** (row, column, grouped, snake: the `RASTER`
#   knob), and why the order decides what the L2 must hold.
# - How to count the **tiles and waves** of a shape, and predict from them a wave's footprint in the L2 and the
#   DRAM reads of the whole GEMM, before measuring either.
# - When fewer DRAM bytes buy speed (the tensor-core GEMM) and when they do not (the FP32 GEMM).
# - Why a launch is a fixed cost, and how a **persistent kernel** that pulls items from a queue removes it for many
#   small items and overlaps one tile's stores with the next tile's loads in a GEMM.
# - How **stream-K** splits the K-iterations of a partial wave across every SM, and what its fix-up costs.
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
from lab.core import tile_order
from lab.families import work_queue
from lab.lessons import hopper_schedule
from lab.lessons import scheduling as lesson
from lab.lessons import scheduling_live as live
from lab.lessons import scheduling_model as model
from lab.lessons.plots import scheduling as schedule_plots
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
HOPPER_SKIP = live.hopper_refusal(MODE)  # None, except on a GPU that cannot run the sm_90a rungs
print("GPU:", GPU)
print("tile:", TILE, "(the knobs of gemm_tc rungs 06 and 07)")

# %% [markdown]
# The LIVE plan is kept to a few minutes on an H200 (compiling included): one shape and four orders instead of
# four shapes and nine, no Nsight Compute, fewer small items, a handful of `M` values for the sawtooth.
# `lab study orders|counters|fp32|streamk|items` record the full studies.

# %%
print(live.live_plan(GPU, TILE))

# %% [markdown]
# ---
# ## 1. Tile orders: which tiles share the L2
#
# A GEMM's output is cut into tiles; block number `i` (or, in a persistent kernel, the `i`-th tile a block takes)
# computes the tile that the order assigns to `i`. Blocks start roughly in index order, so the tiles numbered
# `0 .. SMs - 1` run together: that is the first **wave**. Each tile reads one row-panel of A (`BM × K`) and
# one column-panel of B (`K × BN`); the panels a wave reads together are what the L2 must hold for them to be
# fetched from DRAM once rather than once per tile.
#
# ### The order as code
#
# This is the function every rung that has a `RASTER` knob includes: a block's linear index in, a tile's
# `(tile_m, tile_n)` out.

# %%
lesson.tile_order_source()

# %% [markdown]
# The same index arithmetic in Python, line for line. **row**: along a row of tiles (one A panel, every B panel);
# **column**: the mirror image; **grouped**: `GROUP_M` rows of tiles at a time, walked column by column inside a
# group (the last group takes the rows that are left); **snake**: grouped, but every other group walks back, so the
# next group starts on the B panels the last one ended on.

# %%
def tile_of(index, tiles_m, tiles_n, order, group_m):
    """Block `index` -> (tile_m, tile_n): lab_tile_coords, restated."""
    if order == "row":
        return index // tiles_n, index % tiles_n
    if order == "column":
        return index % tiles_m, index // tiles_m
    per_group = group_m * tiles_n                   # grouped and snake: GROUP_M tile-rows per group
    group, in_group = divmod(index, per_group)
    first = group * group_m                         # the group's first tile-row
    rows = min(tiles_m - first, group_m)            # the last group may be shorter
    tile_n = in_group // rows                       # column by column inside the group
    if order == "snake" and group % 2:
        tile_n = tiles_n - 1 - tile_n               # every other group walks right to left
    return first + in_group % rows, tile_n


# A toy grid of 5 x 6 tiles (an odd number of tile-rows, so the last group of 2 is a short one):
TOY_M, TOY_N, TOY_GROUP = 5, 6, 2
for order in tile_order.ORDERS:
    visits = [[0] * TOY_N for _ in range(TOY_M)]
    for index in range(TOY_M * TOY_N):
        m, n = tile_of(index, TOY_M, TOY_N, order, TOY_GROUP)
        visits[m][n] = index
    # The kernels' Python restatement (lab.core.tile_order) agrees tile for tile:
    assert visits == tile_order.visit_order(TOY_M, TOY_N, order, TOY_GROUP).tolist()
    print(f"{order} (RASTER={tile_order.RASTER[order]}, GROUP_M={TOY_GROUP}): which block computes each tile")
    print("\n".join("  " + " ".join(f"{v:2d}" for v in row) for row in visits), "\n")

# %% [markdown]
# The same four orders on a grid of 8 × 12 tiles, with a made-up wave of twelve tiles highlighted. Read each
# panel's title: how many A panels (rows of tiles) and B panels (columns of tiles) the first wave touches. The row
# order touches every column of tiles, so every B panel; the grouped and snake orders touch a squarish patch, so
# few of each.

# %%
SMALL_GRID, SMALL_WAVE = (8, 12), 12
SMALL_SETTINGS = [("row", 0), ("column", 0), ("grouped", 4), ("snake", 4)]
lessons.figure(schedule_plots.tile_orders(*SMALL_GRID, SMALL_SETTINGS, workers=SMALL_WAVE))

# %% [markdown]
# ### Tiles and waves of the headline shape
#
# The headline shape is a wide GEMM in fp16: far more tile columns than rows. How many tiles, how many waves, and
# what the first wave reads in the row order and in a grouped order:

# %%
BIG = lesson.HEADLINE_SHAPE
M, N, K = BIG["M"], BIG["N"], BIG["K"]
tiles_m, tiles_n = -(-M // TILE.bm), -(-N // TILE.bn)     # ceil(M / BM), ceil(N / BN)
tiles = tiles_m * tiles_n
waves = tiles / GPU.sm_count                               # one tile per SM at a time
print(f"{M} x {N} x {K}: {tiles_m} x {tiles_n} = {tiles} tiles of {TILE.bm} x {TILE.bn}, "
      f"{tiles} / {GPU.sm_count} SMs = {waves:.1f} waves")
a_panel, b_panel = 2 * TILE.bm * K, 2 * K * TILE.bn        # bytes of one A row-panel and one B column-panel (fp16)
for order, group in [("row", 0), ("grouped", 8)]:
    wave0 = [tile_of(i, tiles_m, tiles_n, order, group) for i in range(GPU.sm_count)]
    a_panels, b_panels = len({m for m, _ in wave0}), len({n for _, n in wave0})
    wave_bytes = a_panels * a_panel + b_panels * b_panel
    print(f"  {order:8s} wave 0 reads {a_panels:3d} A panels + {b_panels:3d} B panels = {wave_bytes / 1e6:.0f} MB, "
          f"{wave_bytes / GPU.l2_bytes:.2f} x the L2")

# %% [markdown]
# Wave 0 of the headline shape, one tile per SM, in three orders: in the row order a thin strip that touches every
# B panel; grouped by 8 or 16 rows, a block that touches few of each.

# %%
BIG_SETTINGS = [("row", 0), ("grouped", 8), ("grouped", 16)]
lessons.figure(schedule_plots.tile_orders(*TILE.grid(BIG), BIG_SETTINGS, workers=GPU.sm_count))

# %%
print(model.wave_zero(BIG, BIG_SETTINGS, TILE, GPU))

# %% [markdown]
# ### Predict first: the footprint of a wave against the L2
#
# For every shape and order of the study, `lab.core.tile_order.wave_footprints` counts the panels each wave reads;
# the table gives the median wave's bytes and their multiple of the L2. Where that multiple is well above one,
# panels are evicted before the next wave can reuse them, and DRAM traffic grows. The last column is a small
# model (`lab.lessons.scheduling_model.predicted_reads`: the L2 as a least-recently-used store of whole panels) of
# the GEMM's DRAM reads against the minimum (A and B read once). Expected: on the first two shapes, whose
# panels overflow the L2 in row order, grouped orders read several times less; on the smallest cube, whose whole
# A and B nearly fit, the order hardly matters.

# %%
print(model.footprint_table(scheduling.ORDER_SHAPES, scheduling.ORDER_SETTINGS, TILE, GPU))

# %%
print(model.predicted_order_ratio(BIG, TILE, GPU, scheduling.ORDER_SETTINGS))

# %% [markdown]
# ### Measurement: TFLOP/s per order
#
# `lab.studies.scheduling.time_orders`: rung 06 built with each order (`RASTER`, `GROUP_M`), each build checked
# against the float64 reference on an odd shape first, then timed with a cold L2 beside cuBLAS on the same
# problem in the same run. LIVE: one shape, four orders, measured in this run.

# %%
LIVE_ORDERS = live.live_orders(MODE)
print(live.live_note(LIVE_ORDERS, MODE, "schedule_orders (live)"))

# %%
if LIVE_ORDERS:
    print(lesson.order_table(LIVE_ORDERS, "schedule_orders (live)"))
    lessons.figure(schedule_plots.order_speeds(LIVE_ORDERS))

# %% [markdown]
# The reference GPU's full study, every shape and order (replayed):

# %%
ORDERS = REPLAYED["schedule_orders"]
print(lesson.order_table(ORDERS))

# %% [markdown]
# How to read the figure: one panel per shape, one bar per order, the dashed line cuBLAS on the same problem in the
# same run, each bar labelled with its speed over the row order. Compare the bars within a panel (the order is
# the only thing that changes), then each panel's bars against the dashed line.

# %%
lesson.show(schedule_plots.order_speeds, ORDERS, "schedule_orders")

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
# beside the DRAM bytes of every order. Read the left panels as the picture of the footprint (the highlighted
# tiles are the wave), and the right panel as its cost: the blue part of each bar is what the L2 failed to hold.

# %%
lesson.show(schedule_plots.order_traffic, NCU, "schedule_orders_ncu", shape=BIG,
            workers=lesson.sm_count_of(NCU, GPU), tile=(TILE.bm, TILE.bn))

# %% [markdown]
# Every shape: the reads (blue) and writes (orange) per order, each bar labelled with the L2 hit rate. The writes
# are C, the same in every order; only the reads move.

# %%
lesson.show(schedule_plots.order_dram, NCU, "schedule_orders_ncu")

# %% [markdown]
# The two expectations at the headline shape, held against these records: the fastest order's speed over the row
# order, and its DRAM reads over the row order's.

# %%
print(lesson.order_gains(ORDERS, NCU))

# %% [markdown]
# ### The contrast: FP32, where compute sets the pace
#
# gemm_fp32 rung 08 (with the same `RASTER` knob) runs an order of magnitude fewer FLOP/s than the tensor cores,
# so it needs an order of magnitude fewer bytes per second for the same reuse.
#
# **Predict first.** How many times more FLOP/s does the tensor-core rung run than the FP32 one, in the row order at
# the headline shape (the records, before the contrast)? If the row order's extra DRAM traffic already fits the
# FP32 rung's slower pace, grouping should gain it little.

# %%
FP32 = REPLAYED["schedule_orders_fp32"]
rows_at_big = [next((r for r in (p or {}).get("rows", []) if lesson.shape_label(r) == lesson.shape_label(BIG)
                     and r["order"] == "row"), None) for p in (ORDERS, FP32)]
if None in rows_at_big:
    print("(no row-order records at the headline shape for both rungs: nothing to compare)")
else:
    tc_row, fp32_row = rows_at_big
    print(f"row order at {lesson.shape_label(BIG)}: tensor cores {tc_row['tflops']:.0f} TFLOP/s, FP32 "
          f"{fp32_row['tflops']:.0f} TFLOP/s: {tc_row['tflops'] / fp32_row['tflops']:.1f}x the FLOP/s, so that many "
          "times the bytes per second for the same reads")

# %%
LIVE_FP32 = live.live_fp32(MODE)
print(live.live_note(LIVE_FP32, MODE, "schedule_orders_fp32 (live)"))

# %%
if LIVE_FP32:
    print(lesson.fp32_contrast(LIVE_FP32, "schedule_orders_fp32 (live)"))

# %%
print(lesson.fp32_contrast(FP32))

# %% [markdown]
# The same figure as for the tensor cores: compare the bar labels (speed over the row order) with those above.

# %%
lesson.show(schedule_plots.order_speeds, FP32, "schedule_orders_fp32")

# %% [markdown]
# ### What it shows
#
# Read the tables against the prediction: where a wave's panels overflow the L2 (the wide and the
# large-square shapes in row order), the counters show DRAM reads many times the minimum, and the grouped and
# snake orders with 8 to 16 tile-rows per group cut them by a large factor; where everything fits (the
# smallest cube), every order reads about the same. The panel model ranks the orders roughly as the counters do
# but not exactly: it favours the column order at the wide shape more than the L2 did, because real blocks
# drift apart in time and the L2 keeps parts of panels, which the model ignores.
#
# Fewer bytes buy speed only where bytes are the limit. At the wide shape the row order's reads come near
# the HBM's rate, and every order that cuts them gains. At the largest cube the row order reads
# several times the bytes of the snake order yet runs about as fast: spread over its run time those bytes stay
# well under the HBM's bandwidth, so the tensor cores, not DRAM, set the pace (divide the read bytes by the
# time to see it). The FP32 rung, with a fraction of the tensor cores' demand for bytes per second, barely
# notices the same change in traffic.

# %% [markdown]
# ---
# ## 2. Persistent kernels
#
# ### 2a. Many small items: what a launch costs
#
# RMSNorm of one fp32 row per item, `N` items, four ways (`lab.families.work_queue`): one CuPy launch per item from a
# Python loop; the same launches captured once in a CUDA graph; one launch with one block per item; and one
# persistent launch whose blocks pull item numbers from a counter in global memory.
#
# The count that motivates it: an item's bytes, the time they would take even at the whole GPU's copy rate, and
# what one launch costs (an empty kernel between two events, from the records).

# %%
ITEMS = REPLAYED["small_items"]
copy_rate = lessons.copy_ceiling((ITEMS or {}).get("provenance", {}).get("device"))  # (GB/s, where), or None
if ITEMS is None or copy_rate is None:
    print("(no small-items or copy records from the same GPU here: the count needs both)")
else:
    launch_us = ITEMS["empty_kernel"]["events_us"]
    print(f"one launch of an empty kernel: {launch_us:.2f} us; the device copy: {copy_rate[0]:.0f} GB/s "
          f"({copy_rate[1]})")
    for length in work_queue.SIZES:
        item_bytes = work_queue.BYTES_PER_ELEMENT * length      # x and w read, y written, fp32
        work_us = item_bytes / (copy_rate[0] * 1e3)              # bytes / (GB/s * 1e9) in microseconds
        print(f"  length {length:6d}: {item_bytes:8d} bytes, {work_us:8.3f} us at the copy rate, "
              f"{launch_us / work_us:8.1f} x that in launch cost")

# %% [markdown]
# **Predict first.** The prediction written in the kernel's header before anything was measured:

# %%
print(lesson.header_prediction(work_queue.SOURCE))

# %% [markdown]
# The items measured (the study's tables: each length's bytes per item and number of items):

# %%
print(lesson.item_sizes())

# %%
LIVE_ITEMS = live.live_small_items(MODE)
print(live.live_note(LIVE_ITEMS, MODE, "small_items (live)"))

# %%
if LIVE_ITEMS:
    print(work_queue.summary(LIVE_ITEMS["rows"]))
    lessons.figure(schedule_plots.small_items(LIVE_ITEMS))

# %% [markdown]
# The reference GPU's study (replayed), held against the prediction: the queue's speed-up over per-item launches
# for the items whose own work (`alone_us`: one item on its own, in a graph of launches of it) is under the
# expected limit, and where the graph lands between the two.

# %%
print(lesson.small_items_gains(ITEMS))

# %% [markdown]
# How to read the figure: both axes are logarithmic; each line is one way of running the items. A flat line is a
# fixed cost per item (the launch); a line that rises with the bytes is paying for the work itself. Look where each
# line leaves its floor.

# %%
lesson.show(schedule_plots.small_items, ITEMS, "small_items")

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
# first k-steps during the last one's epilogue. The loop that changed, in the consumers (the producer's loop has
# the same shape): block `b` takes tiles `b, b + gridDim.x, ...`, and the k-tile counter `it` runs on across
# tiles instead of restarting at each one.

# %%
lesson.rung_excerpt("06", "int it = 0;  // k-tiles consumed", 10)

# %% [markdown]
# The whole change from rung 05, code lines only:

# %%
lesson.code_diff("06")

# %% [markdown]
# The saving is a pipeline fill per tile, so it weighs more when each SM has few, short tiles. Tiles per SM at
# the two squares:

# %%
print(lesson.tiles_per_sm(scheduling.SQUARES, TILE, GPU.sm_count))

# %% [markdown]
# **Predict first.** Rung 06's header:

# %%
print(lessons.prediction("gemm_tc", "06"))

# %% [markdown]
# Measured with `lab.studies.scheduling.time_rungs`, three rounds in which the rungs take turns (so a clock that drifts
# under sustained load touches both alike): each round's ratio, then the median against the expectation.

# %%
LIVE_PERSISTENT = live.live_persistent(MODE, GPU, TILE)
print(live.live_note(LIVE_PERSISTENT, MODE, "schedule_stream_k (live, squares)"))

# %%
if LIVE_PERSISTENT:
    print(lesson.persistent_rounds(LIVE_PERSISTENT, "schedule_stream_k (live, squares)"))

# %%
STREAM_K = REPLAYED["schedule_stream_k"]
print(lesson.persistent_rounds(STREAM_K))

# %% [markdown]
# The prediction's range against the headline records of gemm_tc (`lab bench gemm_tc`, every type and layout):

# %%
print(lessons.prediction_check(lessons.reference("gemm_tc"), "gemm_tc", "06"))

# %% [markdown]
# What it shows: the per-round ratios tell whether the persistent loop's saving stands above the round-to-round
# noise. A fill saved per tile is a small share of a tile's time, so the ratios stay close to one, and closer at
# the larger square, where the same saving is spread over four times the work per tile.

# %% [markdown]
# ---
# ## 3. Stream-K: the wave sawtooth
#
# ### Waves of a shape
#
# With `T` tiles and `P` SMs, a data-parallel schedule (rung 06) runs `ceil(T / P)` rounds; when `T` is a
# little past a multiple of `P`, the last round keeps a few SMs busy and leaves the rest idle. The first
# wave-quantized shape of the study:

# %%
SK_SHAPE = scheduling.WAVE_QUANTIZED[0]
tiles_m, tiles_n = -(-SK_SHAPE["M"] // TILE.bm), -(-SK_SHAPE["N"] // TILE.bn)
tiles = tiles_m * tiles_n
P = GPU.sm_count
waves = tiles / P
dp_rounds = -(-tiles // P)                        # rung 06: whole rounds of tiles
busy = tiles / (dp_rounds * P)                    # the share of SM time spent on tiles
print(f"{lesson.shape_label(SK_SHAPE)}: {tiles_m} x {tiles_n} = {tiles} tiles on {P} SMs = {waves:.2f} waves")
print(f"rung 06 runs {dp_rounds} rounds; in the last one {tiles - (dp_rounds - 1) * P} of {P} SMs have a tile, so "
      f"the SMs spend {busy:.1%} of the run on tiles")

# %% [markdown]
# ### The split of the K-iterations
#
# Rung 07 keeps the whole waves data-parallel and cuts the leftover tiles (plus one whole wave) along K into `P`
# equal ranges of k-iterations (one iteration: one `BK`-deep k-step of one tile), so every SM does about `T / P`
# tiles' worth, plus a fix-up in which each tile's owner sums the pieces others parked in a workspace. Here is the
# split in rung 07's `StreamK` struct: its model (whether to split at all), the stream-K region, and block `b`'s
# range.

# %%
lesson.rung_excerpt("07", "struct StreamK {", 14)

# %% [markdown]
# First on a toy problem, small enough to print whole: 5 tiles of 8 k-iterations on 4 blocks, with the model
# switched off (`SK_MIN_GAIN = 0`, which splits every partial wave). Each row is a tile, each character the block
# that computes that k-iteration:

# %%
toy_tiles, toy_k, toy_blocks = 5, 8, 4
toy_split = tile_order.stream_k_split(toy_tiles, toy_blocks, toy_k, min_gain=0)   # tiles in the stream-K region
toy_iters = toy_split * toy_k
toy_begin = [toy_iters * b // toy_blocks for b in range(toy_blocks + 1)]           # block b: [begin[b], begin[b+1])
owner = [[""] * toy_k for _ in range(toy_tiles)]
for b in range(toy_blocks):
    for it in range(toy_begin[b], toy_begin[b + 1]):
        owner[it // toy_k][it % toy_k] = str(b)
print(f"{toy_split} tiles x {toy_k} k-iterations = {toy_iters}, {toy_iters // toy_blocks} per block")
for t, row in enumerate(owner):
    print(f"  tile {t}: {''.join(row)}")
print("each block's pieces, in the order it does them (tile, k0..k1; '*' marks the one it parks for another):")
for block in tile_order.stream_k_pieces(toy_tiles, toy_k, toy_blocks, min_gain=0):
    print(f"  block {block[0].block}: " + ", ".join(f"tile {p.tile} k{p.k0}..{p.k1}{'' if p.owner else '*'}"
                                                    for p in block))

# %% [markdown]
# Then on the wave-quantized shape, with the model as rung 07 runs it: the first blocks' ranges and the busiest
# block's work in tile-times, against rung 06's rounds.

# %%
k_tiles = -(-SK_SHAPE["K"] // TILE.bk)                     # k-iterations per tile
blocks = min(P, tiles * k_tiles)                           # rung 07's grid
sk_tiles = tile_order.stream_k_split(tiles, blocks, k_tiles)   # the model's choice: 0 keeps rung 06's schedule
sk_iters = sk_tiles * k_tiles
begin = [sk_iters * b // blocks for b in range(blocks + 1)]
dp_tiles_per_block = -(-(tiles - sk_tiles) // blocks)     # the whole waves left data-parallel
print(f"{tiles} tiles x {k_tiles} k-iterations; the model spreads {sk_tiles} tiles = {sk_iters} k-iterations "
      f"over {blocks} blocks, {dp_tiles_per_block} data-parallel tiles each besides")
for b in (0, 1, 2, blocks - 1):
    lo, hi = begin[b], begin[b + 1]
    print(f"  block {b:3d}: k-iterations [{lo:5d}, {hi:5d}) = {hi - lo}: from tile {lo // k_tiles} k-step "
          f"{lo % k_tiles} up to tile {(hi - 1) // k_tiles} k-step {(hi - 1) % k_tiles + 1} (not included)")
busiest = max(begin[b + 1] - begin[b] for b in range(blocks)) / k_tiles + dp_tiles_per_block
print(f"busiest block: {busiest:.3f} tile-times, against {dp_rounds} for rung 06: {dp_rounds / busiest:.2f}x "
      "before the fix-up")
assert abs(busiest - tile_order.stream_k_rounds(tiles, k_tiles, blocks, min_gain=tile_order.SK_MIN_GAIN)) < 1e-9

# %% [markdown]
# The fix-up is not free (a tile cut in two is written once more in fp32 and read back), so rung 07 splits only
# where the small model above predicts a gain: `ceil(T / P)` rounds against `T / P` plus a fixed fix-up cost
# (`SK_FIXUP_COST`, fitted to a first run on the reference GPU that split every partial wave). Where the last wave
# is mostly full, the model keeps rung 06's schedule. The records also time rung 07 with the model switched off
# ("forced split"), so both choices can be seen. The whole change from rung 06, code lines only:

# %%
lesson.code_diff("07")

# %% [markdown]
# **Predict first.** Rung 07's header:

# %%
print(lessons.prediction("gemm_tc", "07").split(" Deadlock:")[0])

# %% [markdown]
# ### One launch, checked against float64
#
# Rung 07 through the family, on an odd shape that the model does split (a prime-ish `K`, `M` and `N` one past and
# three short of a tile multiple): the output poisoned with NaN first, so a tile the kernel never wrote shows, then
# every element against the float64 reference and its own error bound (`lab.measure.bounds`).

# %%
ODD = {"M": 1153, "N": 4093, "K": 4099}
odd_tiles = -(-ODD["M"] // TILE.bm) * -(-ODD["N"] // TILE.bn)
odd_k = -(-ODD["K"] // TILE.bk)
print(f"{lesson.shape_label(ODD)}: {odd_tiles} tiles x {odd_k} k-iterations; on {P} SMs the model spreads "
      f"{tile_order.stream_k_split(odd_tiles, min(P, odd_tiles * odd_k), odd_k)} tiles along K")
if MODE.live and not HOPPER_SKIP:
    import cupy as cp
    import numpy as np

    from lab.families import get_family

    fam = get_family("gemm_tc")
    rung = fam.rung("07")
    problem = fam.make_problem(seed=7, layout="TN", dtype="float16", **ODD)
    out = cp.full(problem.out_shape, np.nan, dtype=problem.dtype)    # poisoned: unwritten elements stay NaN
    fam.launch(rung, problem, out)
    cp.cuda.get_current_stream().synchronize()
    print("launch path:", fam.launch_notes(rung, problem, out))

    ref = fam.reference(problem)                    # float64, from the fp16-rounded inputs
    bound = fam.error_bound(problem, ref)           # each element's allowed |error|
    got = cp.asnumpy(fam.output_values(out)).astype(np.float64)
    err = np.abs(got - ref)
    share = err / bound                             # <= 1 everywhere: every element within its own bound
    worst = tuple(int(i) for i in np.unravel_index(np.nanargmax(share), share.shape))
    print(f"unwritten (NaN) elements: {int(np.isnan(got).sum())} of {got.size}")
    print(f"largest error {np.nanmax(err):.3g}; largest error / bound {share[worst]:.3f} at (row, column) {worst} "
          f"(error {err[worst]:.3g}, bound {bound[worst]:.3g}): {'within' if share[worst] <= 1 else 'OVER'} the bound")
elif MODE.live:
    print(f"(not run here: {HOPPER_SKIP})")
else:
    print("REPLAY: on a Hopper GPU this cell launches rung 07 once on that shape and prints its largest error "
          "against the bound. The records were made after the study's own checks:")
    print(lesson.checked_shapes(STREAM_K))

# %% [markdown]
# Guard zones around the output and the full list of stream-K cases (shapes that cut tiles across blocks) stay in
# `lab.measure.verify.check_rung`, which the live stream-K study below runs on rung 07 before it times anything.
#
# ### One timing against cuBLAS
#
# Rungs 07 and 06 and cuBLAS on the wave-quantized shape, in the same run, cold L2 (`lab.measure.timing.measure`:
# CUDA events, a flush of the L2 before every launch, the median of enough launches).

# %%
if MODE.live and not HOPPER_SKIP:
    from lab.measure import timing

    timed = fam.make_problem(seed=1, layout="TN", dtype="float16", **SK_SHAPE)
    out_t = cp.empty(timed.out_shape, dtype=timed.dtype)
    flusher = timing.L2Flusher()
    t_sk = timing.measure(lambda i: fam.launch(rung, timed, out_t, i), l2="cold", flusher=flusher)
    t_dp = timing.measure(lambda i: fam.launch(fam.rung("06"), timed, out_t, i), l2="cold", flusher=flusher)
    t_lib = timing.measure(lambda i: fam.launch_ceiling(timed, out_t, i), l2="cold", flusher=flusher)
    print(f"{lesson.shape_label(SK_SHAPE)}, measured in this run: rung 07 {t_sk.median_ms * 1e3:.1f} us, rung 06 "
          f"{t_dp.median_ms * 1e3:.1f} us, cuBLAS {t_lib.median_ms * 1e3:.1f} us (medians, cold L2)")
    print(f"rung 07 runs at {t_lib.median_ms / t_sk.median_ms:.3f}x cuBLAS's speed and "
          f"{t_dp.median_ms / t_sk.median_ms:.3f}x rung 06's")
elif MODE.live:
    print(f"(not run here: {HOPPER_SKIP})")
else:
    print("REPLAY: on a Hopper GPU this cell times rungs 07 and 06 and cuBLAS on that shape in one run. The "
          "replayed study's times at the same shape:")
    print(lesson.recorded_times(STREAM_K, SK_SHAPE))

# %% [markdown]
# ### The sawtooth, predicted
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
# boundaries, and four named shapes, measured in this run.

# %%
LIVE_SK = live.live_stream_k(MODE, GPU, TILE)
print(live.live_note(LIVE_SK, MODE, "schedule_stream_k (live)"))

# %%
if LIVE_SK:
    lessons.figure(schedule_plots.stream_k_sawtooth(LIVE_SK, lesson.sawtooth_prediction(
        sorted({r["M"] for r in LIVE_SK["sweep"]}), TILE, GPU.sm_count)))
    print(lesson.stream_k_ratios(LIVE_SK, TILE, "schedule_stream_k (live)"))
    print(lesson.determinism(LIVE_SK, "schedule_stream_k (live)"))

# %% [markdown]
# The reference GPU's sweep (replayed), with the prediction for that GPU's SM count beside it. How to read it: on
# the left, TFLOP/s against `M`; the dotted lines mark where the tile count reaches a multiple of the SM count.
# On the right, the same lines for the prediction, which has no fix-up and no clock: compare where the teeth are,
# not their height.

# %%
REF_SMS = lesson.sm_count_of(STREAM_K, GPU)
REF_SAW = lesson.sawtooth_prediction(scheduling.WAVE_MS, TILE, REF_SMS)
lesson.show(schedule_plots.stream_k_sawtooth, STREAM_K, "schedule_stream_k", predicted=REF_SAW)

# %%
print(lesson.sweep_crossings(STREAM_K))

# %% [markdown]
# The named shapes: rung 07 over rung 06, the median of three rounds per shape, beside the prediction and the
# lesson's expectation for each kind.

# %%
print(lesson.stream_k_ratios(STREAM_K, TILE))

# %% [markdown]
# How to read the figure: one bar per named shape, coloured by kind; the black ticks are the rounds-over-rounds
# prediction (no fix-up), the dashed lines the expectation per kind, and the thin line at one is "no change". A
# bar below its tick is the fix-up's and the main loop's cost.

# %%
PREDICTED_RATIOS = lesson.predicted_ratios(TILE, REF_SMS)
lesson.show(schedule_plots.stream_k_named, STREAM_K, "schedule_stream_k", predicted=PREDICTED_RATIOS,
            expected=lesson.EXPECTED)

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
# back); part is that ptxas serializes the tensor-core instructions of the k-loop these records timed (warning
# C7515, rung 07's header says why), which makes its main loop slower than rung 06's on every tile. That second
# cost shows alone on the well-quantized shapes, where the model splits nothing and rung 07 runs rung 06's
# schedule with its own, slower loop; and at the smaller square, where the model also keeps the data-parallel
# schedule (the forced split loses more). cuBLAS, which picks a kernel and a split per shape, shows the sawtooth
# its own way.
#
# The order in which a block walks its pieces matters as much as the split: rung 07 does the pieces that
# start at k = 0 first and the tail it starts inside last (the toy above shows it), so all blocks walk K almost in
# step and share k-slices in L2 (`lab.core.tile_order.k_offsets`); walking each range in order, a first version
# lost its gain at the larger K. Ways to make it cheaper still: a k-loop that ptxas does not serialize, rung 06's
# kernel where the model splits nothing, and a cheaper fix-up (reduce through distributed shared memory inside a
# cluster, or store the partial tile with TMA).

# %% [markdown]
# ### Stream-K on the fastest loop, and which build the family runs
#
# Rung 12 (`kernels/gemm_tc/12_stream_k_cluster.cu`) makes the same split on notebook 03's fastest main loop (rung
# 10: clusters of two, B multicast, the store through TMA): the worker is a cluster, the unit a k-tile of a pair tile,
# and the fix-up goes through a per-block workspace slot as in rung 07. That leaves the family two ways to shed a
# partial last wave: rung 10 with a narrower tile (notebook 03's tile model) or rung 12 with 256 columns split along
# K. `lab.families.gemm_tc_tiles.schedule` chooses between them by a cost in tile-times: waves x BN / 256 for rung
# 10, divided by how fast each width ran against its model; T / P plus a fix-up for rung 12, where its own model
# splits. The two fitted numbers (each width's efficiency, the fix-up's cost) come from the record below, so the
# record shows how well a model fitted to it ranks the builds, not an independent test; a shape outside it is the
# test. Predict first: the model's costs and picks on the study's shapes.

# %%
SK_STUDY = hopper_schedule.load(hopper_schedule.STREAM_K_STUDY)
if SK_STUDY:
    print(hopper_schedule.schedule_lines([m["shape"] for m in SK_STUDY[0]["model"]], SK_STUDY[0]["cluster_slots"]))

# %% [markdown]
# The measurement (`python -m lab.studies.stream_k_cluster_study`): rung 12, rung 10 with its tile for the shape and
# both library calls once a round on each shape, each ratio taken within its round. What to look at: where rung 12
# beats the narrower tile (the shapes whose last wave is a sliver), where it loses (3072^3: 48 k-tiles make the
# fix-up a larger share of a tile, and 192 columns nearly fill three waves, 192 pair tiles on 66 clusters), and how
# far the family's pick still is from the library.

# %%
print(hopper_schedule.stream_k_table(SK_STUDY))

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
