// gemm_tc / rung 12 — stream-K on rung 10's main loop: clusters of two that multicast B and store C through TMA
// take the last partial wave of pair tiles split along K, as rung 07 did for rung 06's blocks.
//
// What changed (vs rung 10):
//   1. The worker is a cluster, the unit of work a k-tile of a pair tile (2 BM x BN, one BM x BN half a block). With
//      P = gridDim.x / 2 clusters and T pair tiles, rung 07's split (lab_stream_k.cuh, with the same model and knobs)
//      decides which tiles are spread along K and gives cluster w its pieces, in rung 07's order: its contribution,
//      whole tiles, the tail of the tile it owns, then its data-parallel tiles. Both blocks of a cluster walk the
//      same pieces, each its own half of the pair tile, so their producers issue the same k-tiles in the same order
//      and rung 10's stage barriers (every consumer warp of both blocks releases a stage) work unchanged.
//   2. A contribution goes to the block's own slot of the workspace (fp32, register order, 16-byte stores), then a
//      fence, a barrier of the 256 consumer threads and a release store of the block's flag, as in rung 07; the
//      owner of a tile begun by earlier clusters waits for the flags of the same-rank blocks of those clusters,
//      highest cluster first, adds their slots and clears the flags. Then its epilogue is rung 10's TMA store.
//   3. The contribution skips the epilogue: the staging buffer is only written for whole (or finished) tiles.
// Why: rung 10 runs ceil(T / P) rounds of pair tiles; with T a little past a multiple of P the last round keeps a
//   few clusters busy. Rung 07 showed the split on rung 06's slower loop: 1.51x rung 06 at 1152 x 4096 x 4096
//   (results/h200/schedule_stream_k_do_while.json), more than its model's 1.26x, so the fix-up costs about a
//   quarter of a tile-time, not the half the model assumes.
// Prediction (H200, fp16 TN, 128 x 256 block tiles, 66 clusters; written before any GPU run; the arithmetic is
//   lab/studies/stream_k_cluster_study.py's, whose record will hold the measurement): with the fix-up a quarter of a
//   tile-time, ceil(T / 66) / (T / 66 + 0.25) over rung 10's BN = 256 build: 1.35x at 2176 x 2176 x 4096 (81 pair
//   tiles), 1.05x the BN = 192 build the family picks there (1.29x BN = 256 in results/h200/hopper_tile_study.json);
//   1.18x at 3200 x 4096 x 4096 (208), 1.15x the BN = 128 build picked there; 1.14x at 4352 x 4096 x 4096 (272),
//   1.05x its BN = 192 build; 1.23x at 3072^3 (144, K = 3072), 0.96x the BN = 192 build, which should stay the pick
//   there; 1.0x at 4096^3 (256 tiles in 3.88 rounds: the model, 4 against 3.88 + 0.5, splits nothing).
//   The contributions write and read 128 KB per block, ~34 MB per launch through L2: a few microseconds.
// Measured (results/h100/stream_k_cluster_study_730294a.json, an H100, 3 rounds, cold L2; over rung 10 BN = 256 and
//   the library in the same rounds): 1.33x and 0.84x the library at 2176 x 2176 x 4096 (the BN = 192 pick 1.25x, so
//   1.06x it); 1.14x and 0.96x at 3200 x 4096 x 4096 (1.15x the BN = 128 pick); 1.11x and 0.99x at 4352 x 4096 x 4096
//   (1.04x the pick); 1.16x at 3072^3, where the BN = 192 pick ran 1.25x (0.93x it); 0.99x at 4096^3 (not split).
//   The quarter-tile fix-up nearly held: each ratio fell 0.03-0.08 short of that prediction, above the model's own.
//   GPU tests and memcheck, racecheck and synccheck clean there (results/h100/sanitize_new_rungs/). Repeated at
//   ec4fdb8 (results/h100/stream_k_cluster_study.json): the same within 0.02x. The family now runs it where its fitted
//   costs put it ahead of rung 10's tile (lab/families/gemm_tc_tiles.py, schedule): 2176, 3200, 4352 and 1152 rows
//   here, not 3072^3 or 4096^3. Next: the split itself on BN = 192 pair tiles, for 2176 and 3072.
// Deadlock: a cluster waits only for lower-numbered clusters, each of which makes its contribution before any wait
//   of its own; the launcher runs no more clusters than the driver says fit at once (a quarter of the SMs where it
//   cannot say: stream_k_cluster_slots), so every cluster is resident whatever order they start in. A wait of 10 s
//   traps.
// Workspace (the launcher's): a slot of BM * BN floats and an int flag per block, all flags 0 between launches (the
//   owner clears each flag it consumes). One workspace per device and stream.
// Tensor maps, tails and the epilogue as rung 10 (C through TMA where c_store_refusal allows, else from registers).
// Requires: sm_90a (wgmma, setmaxnreg, clusters); A and B as rung 09; C as rung 10. Launch: a 1-D grid of 2 x
//   min(T x k-tiles, clusters that fit) blocks, THREADS threads, rung 10's SMEM_BYTES; rung 10's arguments, then the
//   workspace's slots and flags.
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (256), BK (64), STAGES (4), C_PARTS (2), RASTER (2),
//   GROUP_M (4), SK_WAVES (1), SK_FIXUP_COST (50), SK_MIN_GAIN (105; 0 splits whenever T is not a multiple of P, as
//   the tests do), THREADS (384 = 128 * (1 + BM / 64)).
// Ideas: the stream-K paper (Osama et al., PPoPP 2023) and CUTLASS's sm90 stream-K scheduler with clusters; code is
//   this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"  // issue_stage_multicast, wgmma_k_tile, stage_c_part, store_pair, cluster pieces
#include "lab_tile_order.cuh"
#include "lab_sync.cuh"
#include "lab_stream_k.cuh"  // the stream-K region and each cluster's pieces

#ifndef RASTER
#define RASTER 2  // the pair-tile order: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif
#ifndef GROUP_M
#define GROUP_M 4  // pair-tile rows per group (2 BM rows each)
#endif
#ifndef C_PARTS
#define C_PARTS 2  // a warpgroup's tile of C goes out in this many parts of BN / C_PARTS columns through one buffer
#endif
#ifndef STAGES
#define STAGES 4  // with C_PARTS = 1 (a whole tile staged), only 3 fit
#endif
#ifndef SK_WAVES
#define SK_WAVES 1  // full waves added to the stream-K region besides the last partial one
#endif
#ifndef SK_FIXUP_COST
#define SK_FIXUP_COST 50  // the fix-up's cost in hundredths of a tile-time at 64 k-tiles, scaled by 64 / k_tiles
#endif
#ifndef SK_MIN_GAIN
#define SK_MIN_GAIN 105  // percent: split along K only where the model (lab_stream_k.cuh) predicts this speed-up
#endif
#include "lab_hopper_knobs.cuh"  // the other knobs' defaults, ACC, STAGE_BYTES, CONSUMERS, the register split

#define PART_COLS (BN / C_PARTS)
#define STAGING_BYTES (64 * PART_COLS * 2)  // one consumer warpgroup's buffer: 64 rows x PART_COLS of C
static_assert(C_PARTS >= 1 && PART_COLS % 64 == 0, "each part is whole 64-column boxes");

#define SMEM_BYTES (STAGES * STAGE_BYTES + CONSUMERS * STAGING_BYTES + 1024)
#define CLUSTER 2                            // blocks per cluster, sharing B
#define SLOT_FLOATS (CONSUMERS * 128 * ACC)  // one block's partial tile: BM * BN floats
#define FIXUP_BARRIER 3                      // named barrier of the 256 consumer threads (1 and 2: the staging's)

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 12 needs sm_90a (wgmma, setmaxnreg, clusters): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;
typedef LabStreamK<CLUSTER, SK_WAVES, SK_FIXUP_COST, SK_MIN_GAIN> StreamK;

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_tc_stream_k_cluster(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M,
                         int N, int K, float alpha, float beta, half_bits* __restrict__ C, int ldc,
                         const __grid_constant__ TensorMap map_c, int store_by_tma, float* __restrict__ workspace,
                         int* __restrict__ flags) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles_smem = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const unsigned rank = cluster_rank();
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles_n = (N + BN - 1) / BN, pairs_m = (M + CLUSTER * BM - 1) / (CLUSTER * BM);
    const int cluster = blockIdx.x / CLUSTER;
    const StreamK work(pairs_m * tiles_n, (K + BK - 1) / BK);

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_a);
        prefetch_tensor_map(&map_b);
        if (store_by_tma) prefetch_tensor_map(&map_c);
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);                            // the producer's arrive_expect_tx, then the bytes
            mbar_init(empty + 8 * s, CLUSTER * 4 * CONSUMERS);     // every consumer warp of both blocks
        }
        fence_barrier_init();
    }
    cluster_sync();  // both blocks' barriers exist before either block's copies or arrivals reach them

    if (wg == 0) {  // the producer warpgroup: one thread issues every load, the rest just give registers back
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int it = 0;  // k-tiles issued so far, over all of this cluster's pieces (the partner counts the same)
            work.for_each_piece(cluster, [&](int tile, int k0, int k1) {
                int row0, col0;
                lab_cluster_tile_origin<RASTER, GROUP_M, CLUSTER, BM, BN>(tile, pairs_m, tiles_n, rank, row0, col0);
                for (int kt = k0; kt < k1; ++kt, ++it) {
                    const int s = it % STAGES;
                    // Both blocks' consumers released this stage's previous k-tile (it - STAGES).
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage_multicast<BM, BN, BK, TN, CLUSTER>(tiles_smem, full, &map_a, &map_b, s, kt, row0, col0,
                                                                   rank);
                }
            });
        }
    } else {
        setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;  // this consumer's 64 rows of each block tile
        const int tid = threadIdx.x % 128;
        const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
        // This warp's arrival on stage s's "empty" barrier in block r of the cluster is at empty_at[r] + 8 s.
        const unsigned empty_at[CLUSTER] = {cluster_peer_address(empty, 0), cluster_peer_address(empty, 1)};
        const unsigned staging = tiles_smem + STAGES * STAGE_BYTES + c * STAGING_BYTES;
        const bool storer = tid == 0;  // the warpgroup's thread that issues its TMA stores
        // This thread's accumulators in a block's slot: float4 q of consumer c sits at [(c * ACC / 4 + q) * 128 + tid].
        auto slot = [&](int block) {
            return reinterpret_cast<float4*>(workspace + static_cast<long long>(block) * SLOT_FLOATS)
                   + c * (ACC / 4) * 128 + tid;
        };
        int it = 0;  // k-tiles consumed so far, over all of this cluster's pieces
        work.for_each_piece(cluster, [&](int tile, int k0, int k1) {
            int row0, col0;
            lab_cluster_tile_origin<RASTER, GROUP_M, CLUSTER, BM, BN>(tile, pairs_m, tiles_n, rank, row0, col0);
            float acc[ACC];
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

            int kt = k0;
            do {  // every piece has k1 > k0: no zero-trip path on which acc is zeroed with a group in flight
                const int s = it % STAGES;
                mbar_wait(full + 8 * s, (it / STAGES) & 1);  // k-tile `it` has landed (both halves of B)
                const unsigned a = tiles_smem + s * STAGE_BYTES + c * 64 * ROW_BYTES;
                const unsigned b = tiles_smem + s * STAGE_BYTES + A_TILE_BYTES;
                wgmma_k_tile<BF16, TN, BN, BK>(acc, a, b);  // committed as one group
                wgmma_wait<1>();  // k-tile it-1's products are done: release its stage in both blocks
                if (kt > k0 && lane == 0)
#pragma unroll
                    for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_at[r] + 8 * ((it - 1) % STAGES));
                ++kt, ++it;
            } while (kt < k1);
            wgmma_wait<0>();
            fence_accumulators(acc);
            if (lane == 0)  // the piece's last stage, for the next piece
#pragma unroll
                for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_at[r] + 8 * ((it - 1) % STAGES));

            if (k1 < work.k_tiles) {  // a contribution: park it in this block's slot and raise the flag
                float4* mine = slot(blockIdx.x);
#pragma unroll
                for (int q = 0; q < ACC / 4; ++q)
                    __stcg(mine + q * 128, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
                __threadfence();
                named_barrier_sync<FIXUP_BARRIER, 128 * CONSUMERS>();
                if (threadIdx.x == 128) store_release(flags + blockIdx.x, 1);
                return;
            }
            if (k0 > 0) {  // the owner of a tile begun by earlier clusters: add their halves, highest cluster first
                const long long tile_start = static_cast<long long>(tile) * work.k_tiles;
                for (int q = cluster - 1; q >= 0 && work.begin(q + 1) > tile_start; --q) {
                    if (work.begin(q + 1) == work.begin(q)) continue;  // an empty range contributes nothing
                    const int theirs_block = q * CLUSTER + static_cast<int>(rank);  // the same half of the pair tile
                    if (threadIdx.x == 128) {
                        const unsigned long long start = global_ns();
                        while (load_acquire(flags + theirs_block) == 0)
                            if (global_ns() - start > LAB_WAIT_LIMIT_NS) __trap();  // never hang: say it failed
                        flags[theirs_block] = 0;  // consumed: the slot is not rewritten before the next launch
                    }
                    named_barrier_sync<FIXUP_BARRIER, 128 * CONSUMERS>();
                    const float4* theirs = slot(theirs_block);
#pragma unroll
                    for (int i = 0; i < ACC / 4; ++i) {
                        const float4 v = __ldcg(theirs + i * 128);
                        acc[4 * i] += v.x;
                        acc[4 * i + 1] += v.y;
                        acc[4 * i + 2] += v.z;
                        acc[4 * i + 3] += v.w;
                    }
                }
            }

            // Read from threadIdx.x here, not kept from the start: kept live across the piece, they spilled.
            const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
            if (store_by_tma) {  // rung 10's epilogue
                tma_store_tile<BF16, BN, PART_COLS>(&map_c, staging, acc, alpha, row0 + c * 64, col0, 1 + c,
                                                    storer, warp, g, t);
                return;
            }
            // Rung 09's stores from registers: acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e.
            const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta,
                                     acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        });
        if (storer && store_by_tma) tma_store_wait_all();  // C is written before the block's shared memory goes
    }
    cluster_sync();  // the partner's last arrivals on this block's barriers have landed before it exits
}
