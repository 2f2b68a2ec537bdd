"""Tile shapes by shape class for gemm_tc rung 10: which BN the family builds for a problem, from a wave model.

Rung 10 walks pair tiles (two blocks of a cluster, 2 x 128 rows by BN columns) with one cluster per slot, as many
slots as fit on the GPU at once (gemm_tc.cluster_slots: 66 on the H200). The last wave of pair tiles is the cost a
fixed 128 x 256 tile cannot shed: at 3072^3 there are 144 pair tiles, 2.2 waves of 66, so the third wave runs
with 12 of 66 clusters busy and the launch takes three waves' time for 2.2 waves of work.

The model: a pair tile's k-loop takes time proportional to BN (the tensor cores are the bound, and a 64 x BN x 16
wgmma's time is proportional to BN), so a launch takes

    waves(BN) * BN,   waves(BN) = ceil(pair_tiles(BN) / slots),   pair_tiles(BN) = ceil(M / 256) * ceil(N / BN)

in units of a 64 x 1 x K product. `choose` takes the BN with the least, and keeps the default (256, the widest:
the fewest shared-memory bytes per product and the most reuse of each A tile) unless another is predicted at
least MIN_GAIN faster. Where a narrower tile wins, its k-tile feeds the tensor cores slightly worse (a 64 x 128
wgmma reads 96 bytes of shared memory a cycle against 80 for 64 x 256, of about 128 the SM serves), so the
measured gain should fall short of the model's by a few percent.

Predictions (66 slots, written before the H200 run; results/h200/hopper_tile_study.json holds what it measured):
4096^3, 6144^3, 2048^3 keep 256 (no gain); 3072^3 takes 192 (3 waves of 192 columns against 3 of 256: 1.33x);
2176 x 2176 x 4096 takes 192 (1.33x); 3200 x 4096 x 4096 takes 128 (7 waves x 128 against 4 x 256: 1.14x);
4352 x 4096 x 4096 takes 192 (1.11x); 8192^3 keeps 256 (192 would be 1.6% faster, under MIN_GAIN).

BN = 192 is TN only: in the NN layout B arrives in boxes of 64 columns and each block of the cluster multicasts
half of them, which 3 boxes cannot split. Each BN has the stages and C staging that fit the 227 KB a block may have
(TILE_KNOBS).

Rung 12 or rung 10 (`schedule`): rung 12 runs rung 10's loop on 128 x 256 block tiles and spreads the last partial
wave of pair tiles along K, so where its split applies (`split_model`, the kernel's own integer arithmetic) it takes
T / P tile-times plus a fix-up instead of ceil(T / P). Both costs, in tile-times of a 256-column pair tile:

    rung 10, BN:  waves(BN) * BN / 256 / EFFICIENCY[BN]
    rung 12:      T / P + FIXUP_TILES * 64 / k-tiles          (where it splits; else rung 10's BN = 256 build)

EFFICIENCY and FIXUP_TILES are fitted to one record, results/h100/stream_k_cluster_study_730294a.json (an H100,
rung 12 and rung 10's builds over rung 10's BN = 256 build in the same rounds): the narrower builds ran 0.94-0.97
(BN = 192, four shapes) and 0.87 (BN = 128, one shape) of the model's speed, and rung 12's fix-up cost 0.28-0.37 of
a tile-time at 64 k-tiles (0.41 at 48, as the scaling says). With them the model orders the study's shapes as
measured: rung 12 at 2176 x 2176 x 4096 (predicted 1.03x the BN = 192 build; measured 1.06x), 3200 x 4096 x 4096
(1.16x BN = 128; 1.15x), 4352 x 4096 x 4096 (1.07x BN = 192; 1.04x) and 1152 x 4096 x 4096 (1.04x; 1.05x); rung 10
BN = 192 at 3072^3 (rung 12 0.92x; 0.93x); and rung 10 at 4096^3, 6144^3 and 8192^3, where rung 12 does not split.
The study's repeat at ec4fdb8 (results/h100/stream_k_cluster_study.json, after the fit) ranked them the same: rung 12
1.05x, 1.17x, 1.04x and 1.06x the narrower tile on the first four, 0.92x at 3072^3.

Ideas: the wave-quantization arithmetic of NVIDIA's CUTLASS stream-K notes and DeepGEMM's choice of block sizes per
shape (its BLOCK_N = 112 to busy more SMs); the model and code are this lab's own.
"""

from __future__ import annotations

import math

TILED_RUNGS = ("10_tma_store",)
STREAM_K_RUNG = "12_stream_k_cluster"  # the rungs whose tile the family chooses per shape (`GemmTcFamily.shaped`)
PAIR_ROWS = 256  # rows of a pair tile: two blocks of BM = 128
DEFAULT_BN = 256
MIN_GAIN = 1.05  # a narrower tile must be predicted this much faster to be chosen
# Measured speed of each build against the wave model's, and rung 12's fix-up in tile-times at 64 k-tiles (fitted to
# results/h100/stream_k_cluster_study_730294a.json: see the module's docstring).
EFFICIENCY = {256: 1.0, 192: 0.945, 128: 0.87}
FIXUP_TILES = 0.31
STREAM_K_MARGIN = 1.02  # rung 12 must be predicted this much faster than rung 10's pick (the fit's error is ~4%)
# Rung 12's split knobs (its header's defaults): full waves added to the split region, the fix-up the kernel's own
# model assumes (hundredths of a tile-time at 64 k-tiles) and the gain it needs to split (percent).
STREAM_K_KNOBS = {"SK_WAVES": 1, "SK_FIXUP_COST": 50, "SK_MIN_GAIN": 105, "BK": 64}
# The knobs each BN is built with: stages and C staging that fit a block's 227 KB (the family's dynamic_smem_bytes;
# tests/test_gemm_tc_tiles.py holds each to the limit). 128 columns take 6 stages: a k-tile is half as long as
# 256's, so it takes more in flight to cover the same load latency.
TILE_KNOBS = {
    256: {"BN": 256, "STAGES": 4, "C_PARTS": 2},
    192: {"BN": 192, "STAGES": 4, "C_PARTS": 1},
    128: {"BN": 128, "STAGES": 6, "C_PARTS": 1},
}


def candidates(layout: str) -> tuple[int, ...]:
    """The BNs rung 10 builds for a layout, widest first (192 is TN only: see the module's docstring)."""
    return (256, 192, 128) if layout == "TN" else (256, 128)


def pair_tiles(M: int, N: int, bn: int) -> int:
    return math.ceil(M / PAIR_ROWS) * math.ceil(N / bn)


def waves(M: int, N: int, bn: int, slots: int) -> int:
    return math.ceil(pair_tiles(M, N, bn) / slots)


def predicted_cost(M: int, N: int, bn: int, slots: int) -> int:
    """The model's launch time in units of a 64 x 1 x K product: waves x BN."""
    return waves(M, N, bn, slots) * bn


def predicted_speedups(M: int, N: int, layout: str, slots: int) -> dict[int, float]:
    """Each candidate BN's predicted speed over the default's (above 1: faster)."""
    base = predicted_cost(M, N, DEFAULT_BN, slots)
    return {bn: base / predicted_cost(M, N, bn, slots) for bn in candidates(layout)}


def choose(M: int, N: int, layout: str, slots: int) -> int:
    """The BN the family builds rung 10 with for an M x N output: the model's fastest, if it gains MIN_GAIN over
    the default; the wider of two that tie."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1 (clusters that fit on the GPU at once); got {slots}.")
    speed = predicted_speedups(M, N, layout, slots)
    best = max(speed, key=lambda bn: (speed[bn], bn))
    return best if speed[best] >= MIN_GAIN else DEFAULT_BN


def split_model(tiles: int, k_tiles: int, workers: int, waves: int = STREAM_K_KNOBS["SK_WAVES"],
                fixup_cost: int = STREAM_K_KNOBS["SK_FIXUP_COST"], min_gain: int = STREAM_K_KNOBS["SK_MIN_GAIN"]
                ) -> dict:
    """Rung 12's decision (LabStreamK in kernels/common/lab_stream_k.cuh) in Python: the rounds data-parallel takes
    and the tile-times stream-K takes, both in hundredths as the kernel reckons them (integer division), whether it
    splits, and how many tiles the stream-K region holds."""
    dp = 100 * -(-tiles // workers)
    sk = 100 * tiles // workers + 64 * fixup_cost // k_tiles
    split = tiles % workers != 0 and 100 * dp >= min_gain * sk
    return {"tiles": tiles, "k_tiles": k_tiles, "workers": workers, "dp": dp, "sk": sk, "split": split,
            "sk_tiles": min(tiles, tiles % workers + waves * workers) if split else 0}


def stream_k_split(M: int, N: int, K: int, slots: int) -> dict:
    """split_model for rung 12 on an M x N x K problem: its pair tiles of 256 columns, and as many clusters as its
    launcher runs (min(pair tiles x k-tiles, slots))."""
    t, k_tiles = pair_tiles(M, N, DEFAULT_BN), -(-K // STREAM_K_KNOBS["BK"])
    return split_model(t, k_tiles, min(slots, t * k_tiles))


def schedule_costs(M: int, N: int, K: int, layout: str, slots: int) -> dict[str, float]:
    """Each build's predicted time in tile-times of a 256-column pair tile (the module's docstring): "10 BN=..." for
    rung 10's tiles, and "12" where rung 12 splits."""
    costs = {f"10 BN={bn}": waves(M, N, bn, slots) * bn / DEFAULT_BN / EFFICIENCY[bn] for bn in candidates(layout)}
    sk = stream_k_split(M, N, K, slots)
    if sk["split"]:
        costs["12"] = sk["tiles"] / sk["workers"] + FIXUP_TILES * 64 / sk["k_tiles"]
    return costs


def schedule(M: int, N: int, K: int, layout: str, slots: int) -> tuple[str, int]:
    """(rung key, BN) the family runs on Hopper for an M x N x K problem: rung 10 with the tile `choose` picks, or
    rung 12 where it splits and the fitted costs put it STREAM_K_MARGIN ahead of that build."""
    bn = choose(M, N, layout, slots)
    costs = schedule_costs(M, N, K, layout, slots)
    if "12" in costs and costs["12"] * STREAM_K_MARGIN <= costs[f"10 BN={bn}"]:
        return STREAM_K_RUNG, DEFAULT_BN
    return TILED_RUNGS[0], bn
