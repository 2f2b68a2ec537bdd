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

Ideas: the wave-quantization arithmetic of NVIDIA's CUTLASS stream-K notes and DeepGEMM's choice of block sizes per
shape (its BLOCK_N = 112 to busy more SMs); the model and code are this lab's own.
"""

from __future__ import annotations

import math

TILED_RUNGS = ("10_tma_store",)  # the rungs whose tile the family chooses per shape (`GemmTcFamily.shaped`)
PAIR_ROWS = 256  # rows of a pair tile: two blocks of BM = 128
DEFAULT_BN = 256
MIN_GAIN = 1.05  # a narrower tile must be predicted this much faster to be chosen
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
