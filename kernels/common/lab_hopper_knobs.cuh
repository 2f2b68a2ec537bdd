// The knobs the warp-specialized Hopper GEMMs share (gemm_tc rungs 05-08, grouped_gemm rung 01, and
// epilogue/plugin_numerics.cu, which gives a plugin what rung 06 gives it), their defaults, and what follows
// from them: one producer warpgroup and BM / 64 consumer warpgroups, the registers setmaxnreg gives each, and
// the bytes of one pipeline stage. The families pass every knob here as a -D option; these defaults serve a
// standalone compile, and each rung's "Knobs:" clause states them (lab/core/headers.py holds the two to each
// other). Rungs 05 and 08 spell the same defaults out before including this, because exercises 06 and 07 start
// from them and a starter shows its knobs; tests/test_headers.py holds their values to these. Each rung
// includes this after its other lab headers and keeps what is its own: the tile order (RASTER) where it has
// one, its other knobs, the arch check, and SMEM_BYTES, the dynamic shared memory its launch must give
// (STAGES * STAGE_BYTES, plus 1024 to align the tiles for the 128-byte swizzle).
#pragma once

#ifndef BF16
#define BF16 0  // 0: fp16, 1: bf16
#endif
#ifndef TN
#define TN 1  // 1: B is N x K (k contiguous, a linear layer's weight); 0: B is K x N
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8  // tile-rows per group of the grouped (and snake) tile order, column by column; 0: row-major
#endif
#ifndef CONSUMERS
#define CONSUMERS (BM / 64)  // consumer warpgroups: one per 64 rows of the tile (rung 11: one per tile, BM = 64)
#endif
#ifndef THREADS
#define THREADS (128 * (1 + BM / 64))  // a producer warpgroup, then the consumers (rung 11 sets its own)
#endif

#define ACC (BN / 2)                          // fp32 accumulators per thread: a 64 x BN tile over 128 threads
#define A_TILE_BYTES (BM * BK * 2)
#define STAGE_BYTES ((BM + BN) * BK * 2)      // what TMA delivers per stage (and the full barrier expects)
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232
#define ROW_BYTES 128                         // BK = 64 two-byte elements: one 128-byte swizzle row

static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(TN == 0 || TN == 1, "TN is 0 (B is K x N) or 1 (B is N x K)");
static_assert(BK == 64, "one k-tile row is one 128-byte swizzle row");
static_assert(BM % 64 == 0 && THREADS == 128 * (1 + CONSUMERS), "a producer warpgroup and CONSUMERS more");
static_assert(CONSUMERS == BM / 64 || (BM == 64 && CONSUMERS == 2), "a warpgroup per 64 rows, or ping-pong's two");
static_assert(128 * PRODUCER_REGS + 128 * CONSUMERS * CONSUMER_REGS <= 65536, "the register file holds both roles");
static_assert(BN == 128 || BN == 192 || BN == 256, "wgmma m64n128k16, m64n192k16 or m64n256k16");
static_assert(BM <= 256 && BN <= 256, "a TMA box has at most 256 rows");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");
