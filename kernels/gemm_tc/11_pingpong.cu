// gemm_tc / rung 11 — ping-pong: each consumer warpgroup owns a whole tile, and the two take turns on the tensor
// cores, so one's epilogue runs while the other's k-loop does.
//
// What changed (vs rung 10):
//   1. A tile is 64 x BN (BM = 64), one consumer warpgroup's: the cluster's j-th pair tile (2 x 64 rows, one block
//      each) goes to consumer j % 2 of both blocks. Rung 10 split a 128 x BN tile between the two, so both ran
//      their epilogues at once and the tensor cores waited for both.
//   2. The producer still walks the cluster's tiles in order through one ring of stages (each stage one 64-row A
//      tile and the B tile, B multicast as before); a stage belongs to the tile whose k-tile it holds, so each
//      "empty" barrier counts the 4 warps of one consumer in each block. A consumer skips the other's k-tiles: its
//      j-th tile starts at ring position j * k_tiles.
//   3. The turn: a consumer starts a tile's k-loop only after the other consumer has issued its last k-tile's
//      products for the tile before (bar.arrive by the one, bar.sync by the other, hardware barriers 3 and 4; 128
//      arrivals each). Then the tensor cores run one k-loop after the other, and each epilogue (the staging writes
//      and the TMA store, rung 10's, now of a whole 64 x BN tile: C_PARTS = 1) overlaps the next k-loop.
//      The turn also keeps the parity waits sound: a consumer waiting for ring position `it` of stage s must not
//      see the stage's previous phase (`it - STAGES`, which can be the other's) still open, or the parity would
//      read as done. When the other has issued its tile, every earlier position has landed.
// Why: rung 10's fit (hopper_gemm_study_4096.json) is 11.2 us a launch that does not grow with K, beside 2.78 us a
//   k-tile. Of that fixed part, each tile's epilogue and the drain before the next tile's first products
//   (wgmma wait 0, then the fill) recur four times per SM at 4096^3; here they hide under the other tile's k-loop.
// Prediction (4096^3 fp16 TN, H200; written before any GPU run): the fixed part from 11.2 to 5-7 us (the last
//   tile's epilogue, the launch and the first fill stay), the k-tile unchanged at 2.75-2.85 us if one warpgroup's
//   products keep the tensor cores as busy as two did: 1.02-1.05x rung 10, 1.00-1.03x the library. Each block
//   now brings 1.5x rung 10's bytes from L2 per output (A is loaded for 64 rows, not 128), as rung 06 did; rung
//   09 showed that path was not the limit. If one warpgroup cannot keep the tensor cores fed, the k-tile grows
//   and this rung loses: CUTLASS's sm90 "pingpong" kernels rest on one warpgroup being enough.
// Measured (results/h200/hopper_gemm_study.json, 09, 10 and 11 in the same rounds; notebook 03's technique table
//   sets it beside this prediction): 651 TFLOP/s at 4096^3 fp16 TN, 0.88x the library and 0.90x rung 10, so the
//   prediction missed, the way it said it could. The fit: 9.3 us fixed (predicted 5-7) + 3.16 us a k-tile
//   (rung 10: 11.5 + 2.79). The epilogue did leave the fixed part, but each k-tile got 13% slower. The likely
//   reason (not yet profiled): one warpgroup, with at most two k-tiles of products in flight (wgmma wait 1),
//   leaves the tensor cores idle between its groups, where two warpgroups fill each other's gaps. It wins where the last wave is mostly
//   empty, because its 64-row tiles split that wave finer: 1.06x rung 10 at 3072^3 and 1.09x at
//   2176 x 2176 x 4096. Next: a 128 x 128 tile per consumer (two m64n128 products a k-step, twice the
//   independent work per group), or more k-tiles in flight per warpgroup.
// Tensor maps, tails and stores as rung 10 (A's map has boxes of BK x 64 rows); register stores where C cannot be
//   stored by TMA or beta != 0.
// Requires: sm_90a (wgmma, setmaxnreg, clusters); A and B as rung 10; C as rung 10 for the TMA store. Launch: rung
//   10's (a 1-D grid of 2 * min(pair tiles, the clusters that fit) blocks, pair tiles of 2 x 64 rows), THREADS =
//   384, dynamic shared memory SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + 2 * 64 * BN * 2 / C_PARTS + 1024 (230400
//   bytes at the defaults); C's tensor map and store_by_tma after ldc.
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (64), BN (256), BK (64), STAGES (4), C_PARTS (1), CONSUMERS (2),
//   RASTER (2: grouped; 0 row, 1 column, 3 snake), GROUP_M (8: pair-tile rows per group, 16 tile-rows of 64 as
//   rung 10's 8 of 128), THREADS (384 = 128 * (1 + CONSUMERS)).
// Ideas: CUTLASS's sm90 KernelTmaWarpSpecializedPingpong (its ordered math warpgroups) and the PTX ISA (bar.arrive);
//   code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"  // issue_stage_multicast, wgmma_k_step, stage_c_part, store_pair, cluster pieces
#include "lab_tile_order.cuh"

#ifndef BM
#define BM 64  // one consumer warpgroup's tile rows
#endif
#ifndef CONSUMERS
#define CONSUMERS 2  // two consumer warpgroups, each on its own tile
#endif
#ifndef THREADS
#define THREADS 384  // a producer warpgroup and the two consumers
#endif
#ifndef RASTER
#define RASTER 2  // the pair-tile order: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif
#ifndef GROUP_M
#define GROUP_M 8  // pair-tile rows per group (2 BM rows each)
#endif
#ifndef C_PARTS
#define C_PARTS 1  // a whole 64 x BN tile staged at once (4 stages still fit)
#endif
#ifndef STAGES
#define STAGES 4
#endif
#include "lab_hopper_knobs.cuh"  // the other knobs' defaults, ACC, STAGE_BYTES, the register split

#define PART_COLS (BN / C_PARTS)
#define STAGING_BYTES (64 * PART_COLS * 2)  // one consumer warpgroup's buffer: 64 rows x PART_COLS of C
#define SMEM_BYTES (STAGES * STAGE_BYTES + CONSUMERS * STAGING_BYTES + 1024)
#define CLUSTER 2    // blocks per cluster, sharing B
#define TURN_BAR 3   // hardware barrier 3 + c: consumer c's turn (1 + c is its staging barrier)
static_assert(BM == 64 && CONSUMERS == 2, "ping-pong: two consumer warpgroups, each on its own 64-row tile");

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 11 needs sm_90a (wgmma, setmaxnreg, clusters): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_tc_pingpong(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M, int N,
                 int K, float alpha, float beta, half_bits* __restrict__ C, int ldc,
                 const __grid_constant__ TensorMap map_c, int store_by_tma) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles_smem = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const unsigned rank = cluster_rank();
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles_n = (N + BN - 1) / BN, pairs_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);
    const int tiles = pairs_m * tiles_n;
    const int cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    const int k_tiles = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_a);
        prefetch_tensor_map(&map_b);
        if (store_by_tma) prefetch_tensor_map(&map_c);
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);             // the producer's arrive_expect_tx, then the bytes
            mbar_init(empty + 8 * s, CLUSTER * 4);  // the warps of the one consumer that reads it, in both blocks
        }
        fence_barrier_init();
    }
    cluster_sync();  // both blocks' barriers exist before either block's copies or arrivals reach them

    if (wg == 0) {  // the producer warpgroup: one thread issues every load, in the cluster's tile order
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int it = 0;  // k-tiles issued so far, over all of this cluster's tiles (the partner counts the same)
            for (int tile = cluster; tile < tiles; tile += clusters) {
                int row0, col0;
                lab_cluster_tile_origin<RASTER, GROUP_M, CLUSTER, BM, BN>(tile, pairs_m, tiles_n, rank, row0, col0);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage_multicast<BM, BN, BK, TN, CLUSTER>(tiles_smem, full, &map_a, &map_b, s, kt, row0, col0,
                                                                   rank);
                }
            }
        }
    } else {
        setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;  // this consumer takes the cluster's tiles c, c + 2, c + 4, ...
        const int g = lane / 4, t = lane % 4;
        const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
        const unsigned empty_at[CLUSTER] = {cluster_peer_address(empty, 0), cluster_peer_address(empty, 1)};
        const unsigned staging = tiles_smem + STAGES * STAGE_BYTES + c * STAGING_BYTES;
        const bool storer = (threadIdx.x % 128) == 0;  // the warpgroup's thread that issues its TMA stores
        for (int j = c; cluster + j * clusters < tiles; j += CONSUMERS) {
            const int tile = cluster + j * clusters;
            int row0, col0;
            lab_cluster_tile_origin<RASTER, GROUP_M, CLUSTER, BM, BN>(tile, pairs_m, tiles_n, rank, row0, col0);
            float acc[ACC];
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

            if (j > 0) named_barrier_sync(TURN_BAR + c, 256);  // the other has issued tile j - 1: our turn
            int it = j * k_tiles;  // this tile's first ring position
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(full + 8 * s, (it / STAGES) & 1);  // k-tile `it` has landed (both halves of B)
                const unsigned a = tiles_smem + s * STAGE_BYTES;
                const unsigned b = a + A_TILE_BYTES;
                wgmma_k_tile<BF16, TN, BN, BK>(acc, a, b);  // committed as one group
                wgmma_wait<1>();  // k-tile it-1's products are done: release its stage in both blocks
                if (kt > 0 && lane == 0)
#pragma unroll
                    for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_at[r] + 8 * ((it - 1) % STAGES));
            }
            // Every product of this tile is issued: the other consumer's turn, if the cluster has a tile j + 1.
            if (cluster + (j + 1) * clusters < tiles) named_barrier_arrive(TURN_BAR + (1 - c), 256);
            wgmma_wait<0>();
            fence_accumulators(acc);
            if (lane == 0)  // the tile's last stage
#pragma unroll
                for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_at[r] + 8 * ((it - 1) % STAGES));

            if (store_by_tma) {
                tma_store_tile<BF16, BN, PART_COLS>(&map_c, staging, acc, alpha, row0, col0, 1 + c,
                                                    storer, warp, g, t);
                continue;
            }
            // Rung 09's stores from registers: acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e.
            const int row = row0 + 16 * (warp % 4) + g;
#pragma unroll
            for (int jn = 0; jn < BN / 8; ++jn)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * jn + 2 * t, M, N, alpha, beta,
                                     acc[4 * jn + 2 * h], acc[4 * jn + 2 * h + 1]);
        }
        if (storer && store_by_tma) tma_store_wait_all();  // C is written before the block's shared memory goes
    }
    cluster_sync();  // the partner's last arrivals on this block's barriers have landed before it exits
}
