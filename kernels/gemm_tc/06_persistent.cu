// gemm_tc / rung 06 — persistent: one block per SM walks the tiles, so the producer loads the next tile's
// first k-tiles while the consumers are still storing the last one.
//
// What changed (vs rung 05):
//   1. Grid: min(tiles, SMs) blocks; block b takes tiles b, b + gridDim.x, ... (in the RASTER order, by
//      default rung 05's GROUP_M order), so the blocks that run together still cover neighbouring tiles.
//   2. The pipeline runs across tiles: producer and consumers count k-tiles with one running index `it`
//      (stage it % STAGES, phase (it / STAGES) & 1) instead of restarting at each tile, and the consumers
//      release a tile's last stage too (wait_group 0, then arrive), so the producer can refill it.
//   3. Barriers are initialized, tensor maps prefetched and registers reassigned once per block, not once
//      per tile.
// Why: in rung 05 every tile starts with an empty pipeline (the first TMA round trip, about a microsecond,
//   with idle tensor cores) and ends with the tensor cores idle while C is stored and the next block is
//   launched into the freed SM. Here the next tile's loads are already in flight during the epilogue.
//   What stays exposed: the consumers' own store time (both consumer warpgroups store at once; CUTLASS's
//   "ping-pong" schedule would let one compute while the other stores).
// Prediction (4096^3 and 8192^3 fp16 TN, H200; written before any GPU run): 1.02-1.05x over rung 05 at 4096,
//   about 1.01x at 8192. Where from: about 4 tiles per SM at 4096, each saving a pipeline fill of a microsecond
//   or two out of about 50; at 8192 the same saving is spread over four times the work.
// Tensor maps, tails and the epilogue as rung 04 (its header says why the maps are __grid_constant__).
// Requires: sm_90a (wgmma, setmaxnreg); A and B as rung 04 (the launcher repacks otherwise). Launch:
//   THREADS = 128 * (1 + BM / 64) threads, a 1-D grid of min(ceil(M / BM) * ceil(N / BN), SM count) blocks,
//   dynamic shared memory SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 (197632 bytes at the defaults).
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (256), BK (64), STAGES (4), RASTER (2: grouped; 0 row,
//   1 column, 3 snake), GROUP_M (8), THREADS (384 = 128 * (1 + BM / 64)), all but RASTER from lab_hopper_knobs.cuh
//   (rung 05's defaults); the epilogue (lab_epilogue.cuh): EPI_OP1 (0) .. EPI_OP4 (0), the ops in order,
//   EPI_OUT (0: the input type; 1 int8, 2 fp8 e4m3), EPI_QROW (0: one quantization scale; 1 per row). With any
//   of them set the kernel takes one more argument, the LabEpilogue; at their defaults the code is the plain GEMM.
//   EPI_PLUGIN (0; 1: each pair of outputs goes through lab_epilogue_plugin.cuh's lab_plugin_store_pair instead).
// Fused epilogue prediction (written before any GPU run; lab/families/gemm_epilogue.py times it against this rung
//   without it): bias + GELU costs each consumer thread ~15 instructions on each of its 128 outputs per tile, about
//   2 us of issue per tile against ~50 us of mainloop at 4096^3 and ~100 us at 8192^3, and the consumers' stores
//   are not overlapped with math here. So 1.02-1.05x the plain time at 4096^3, 1.01-1.03x at 8192^3; int8 output
//   the same compute with half the bytes stored, so no slower than the fp16 output.
//   The first measurement (results/h200/gemm_tc_epilogue_first_run.json) came out well over the prediction: the
//   SASS showed each output pair waiting on its own bias load (LDG, then the math, then the store, pair after
//   pair), with only two consumer warps per scheduler to hide it. Now the chunk's bias / scale / residual loads
//   are issued together ahead of the math (lab_epi_store_wgmma_fragment). Prediction for that: 1.03-1.07x at
//   4096^3. Measured: results/h200/gemm_tc_epilogue.json (against the plain rung and cuBLAS + CuPy ops in the same
//   run); results/h200/gemm_tc_notes.md holds both records' tables and each range above checked against them.
// Knob probe: results/h200/gemm_tc_knobs_06_{4096,8192}.json (GROUP_M 8, 16 and 4; fp16 TN, cold L2, cuBLAS in
//   the same run).
// Results: results/h200/gemm_tc_notes.md (generated from the records by `python -m lab.lessons.notes`): the
//   headline records of results/h200/gemm_tc.json (both types and layouts, the repack path at 4095^3 and 4097^3;
//   cold L2, cuBLAS in the same run) with this prediction checked against them, the knob probe, and the 8192^3
//   repeats of results/h200/gemm_tc_repeat_8192.json, which move with the SM clock (rung 05's header).
// What is left, in the order it should pay: the consumers' epilogue (both warpgroups store at once, 4-byte
//   stores: a ping-pong schedule or a TMA store from shared memory), TMA multicast across a cluster of 2 (half
//   the L2 -> SM traffic of one operand), then the wave tail.
// Ideas: CUTLASS's persistent tile schedulers for sm90, and Pranjal Shankhdhar's worklog "Outperforming
//   cuBLAS on H100" (2024); code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"
#include "lab_tile_order.cuh"
#include "lab_epilogue.cuh"
#include "lab_hopper_knobs.cuh"  // the knobs' defaults, ACC, STAGE_BYTES, CONSUMERS, the register split

#ifndef RASTER
#define RASTER 2  // the tile order: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif
#ifndef EPI_OP1
#define EPI_OP1 0
#endif
#ifndef EPI_OP2
#define EPI_OP2 0
#endif
#ifndef EPI_OP3
#define EPI_OP3 0
#endif
#ifndef EPI_OP4
#define EPI_OP4 0
#endif
#ifndef EPI_OUT
#define EPI_OUT 0
#endif
#ifndef EPI_QROW
#define EPI_QROW 0
#endif
#ifndef EPI_PLUGIN
#define EPI_PLUGIN 0
#endif
#if EPI_PLUGIN
#include "lab_epilogue_plugin.cuh"
#endif
#define FUSED_EPILOGUE (EPI_OP1 || EPI_OP2 || EPI_OP3 || EPI_OP4 || EPI_OUT || EPI_PLUGIN)

#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 06 needs sm_90a (wgmma, setmaxnreg): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;

// The origin of tile `tile` (0 .. tiles_m * tiles_n - 1) in C, in the RASTER order (lab_tile_order.cuh;
// lab/core/tile_order.py restates it for lessons and tests).
__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& row0, int& col0) {
    int tile_m, tile_n;
    lab_tile_coords<RASTER, GROUP_M>(tile, tiles_m, tiles_n, tile_m, tile_n);
    row0 = tile_m * BM;
    col0 = tile_n * BN;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_tc_persistent(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M,
                   int N, int K, float alpha, float beta, half_bits* __restrict__ C, int ldc
#if FUSED_EPILOGUE
                   , const __grid_constant__ LabEpilogue ep
#endif
) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles_smem = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
    const int k_tiles = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_a);
        prefetch_tensor_map(&map_b);
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                  // the producer's arrive_expect_tx, then the bytes
            mbar_init(empty + 8 * s, 4 * CONSUMERS);     // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // the producer warpgroup: one thread issues every load, the rest just give registers back
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int it = 0;  // k-tiles issued so far, over all of this block's tiles
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                int row0, col0;
                tile_origin(tile, tiles_m, tiles_n, row0, col0);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    // Wait until the consumers released this stage's previous k-tile (it - STAGES).
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage<BM, BN, BK, TN>(tiles_smem, full, &map_a, &map_b, s, kt, row0, col0);
                }
            }
        }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;  // this consumer's 64 rows of each block tile
    const int g = lane / 4, t = lane % 4;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    int it = 0;  // k-tiles consumed so far, over all of this block's tiles
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int row0, col0;
        tile_origin(tile, tiles_m, tiles_n, row0, col0);
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            const int s = it % STAGES;
            mbar_wait(full + 8 * s, (it / STAGES) & 1);  // k-tile `it` has landed
            const unsigned a = tiles_smem + s * STAGE_BYTES + c * 64 * ROW_BYTES;
            const unsigned b = tiles_smem + s * STAGE_BYTES + A_TILE_BYTES;
            wgmma_fence();
            fence_accumulators(acc);
#pragma unroll
            for (int ks = 0; ks < BK / 16; ++ks) {
                const unsigned long long da = wgmma_desc(a + 32 * ks, 16, 8 * ROW_BYTES);
#if TN
                const unsigned long long db = wgmma_desc(b + 32 * ks, 16, 8 * ROW_BYTES);
#else
                const unsigned long long db = wgmma_desc(b + 16 * ks * ROW_BYTES, BK * ROW_BYTES, 8 * ROW_BYTES);
#endif
                wgmma_k_step<BF16, TN, BN>(acc, da, db);
            }
            wgmma_commit();
            fence_accumulators(acc);
            wgmma_wait<1>();  // k-tile it-1's products are done: release its stage
            if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));
        }
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (lane == 0) mbar_arrive(empty + 8 * ((it - 1) % STAGES));  // the tile's last stage, for the next tile

        // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this consumer's 64 x BN tile.
        const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#if FUSED_EPILOGUE
        const LabEpiRow rows[2] = {lab_epi_row<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT, EPI_QROW>(ep, row, M),
                                   lab_epi_row<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT, EPI_QROW>(ep, row + 8, M)};
#if EPI_PLUGIN
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                lab_plugin_store_pair<BF16>(ep, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha * acc[4 * j + 2 * h],
                                            alpha * acc[4 * j + 2 * h + 1], rows[h].q_scale);
#else
        lab_epi_store_wgmma_fragment<BF16, BN, EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT>(
            C, ldc, pairs, row, col0, t, M, N, alpha, beta, acc, rows, ep);
#endif
#else
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta, acc[4 * j + 2 * h],
                           acc[4 * j + 2 * h + 1]);
#endif
    }
}
