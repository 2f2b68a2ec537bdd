// gemm_tc / rung 09 — clusters of two blocks share B: each loads half of the pair's B tile and the TMA multicasts it
// to both, so the L2 sends every B byte once per pair instead of once per block.
//
// What changed (vs rung 06):
//   1. The kernel is compiled with __cluster_dims__(2, 1, 1): blocks 2c and 2c + 1 form cluster c and run at once
//      on two SMs of one GPC. A cluster walks the tiles of C two tile-rows at a time (a 2 BM x BN "pair tile", in
//      the RASTER order over pair tiles); the block of rank r computes rows r * BM .. +BM of it. Both need the same
//      BN x BK tile of B each k-step.
//   2. Loads: each block loads its own A tile as before, and half of B (TN: BN / 2 rows of Bt; NN: BN / 128 of the
//      64-column boxes) with cp.async.bulk.tensor ... .multicast::cluster, mask 0b11. Each block's "full" barrier
//      still expects the whole stage (A + all of B): half of its B bytes arrive from its partner's copy.
//   3. Release: a block may refill stage s only when the consumers of both blocks are done with it (its B half
//      lands in both). So each "empty" barrier counts the consumer warps of both blocks, and a consumer warp
//      arrives on its own block's barrier and on its partner's (mapa + mbarrier.arrive.shared::cluster).
//   4. Start and end: the barriers are initialized before a cluster-wide barrier (barrier.cluster), not
//      __syncthreads, because the partner's copies and arrivals reach them; and no block leaves before its partner
//      is done, because a late arrival on an exited block's shared memory is undefined.
// Why: rung 06 pulls a whole stage, (BM + BN) * BK * 2 = 48 KB, from L2 into every SM per k-step. At rung 06's
//   rate (about 680 TFLOP/s at 4096^3, 4.2 MFLOP a k-step per SM) that is about 7.8 TB/s out of the L2 in all, as
//   much as this lab's L2-resident copy moves (~7 TB/s): the L2 -> SM path, not the tensor cores, sets the pace.
//   With B shared it is 16 + 16 = 32 KB per block per k-step, two thirds of the traffic.
// Prediction (4096^3 and 8192^3 fp16 TN, H200; written before any GPU run): 1.03-1.07x over rung 06 at 4096^3
//   (700-730 TFLOP/s), 1.02-1.05x at 8192^3; about 0.93-0.97x of torch.mm. What stays: the epilogue (both
//   consumer warpgroups store at once with 4-byte stores, the tensor cores idle meanwhile) and the wave tail.
//   Pranjal Shankhdhar's H100 worklog "Outperforming cuBLAS on H100" (2024) measured 704 -> 734 TFLOP/s (bf16,
//   4096^3) from a cluster of two with multicast.
// Measured (results/h200/hopper_gemm_study.json; cold L2, three rounds, torch.mm and cuBLASLt in the same run):
//   0.90-1.00x rung 06 (4096^3 fp16 TN 682 against 683 TFLOP/s), so the prediction missed: the L2 -> SM path was not
//   what set the pace. The study's fit of time against K at M = N = 4096 gives both rungs the same 2.66 us a
//   k-tile, with a third less L2 traffic here; what rung 06 loses is elsewhere, 31 us a launch that does not grow
//   with K (the epilogue, rung 10). The first build released each stage at cluster scope
//   (mbarrier.arrive.release.cluster) and ran at 0.56-0.71x rung 06 (hopper_gemm_study_cluster_release.json): a
//   cluster-scope release makes the arriving warp wait until its memory operations are visible to the cluster
//   before it issues the next k-tile's wgmma. The default (CTA-scope) release, as CUTLASS's cluster barriers use,
//   is all a stage's consumers owe its producer here: they have waited for the wgmma that read it.
// Tensor maps, tails and the epilogue as rung 04 (its header says why the maps are __grid_constant__); a pair
//   tile's second block past M loads zeros and stores nothing.
// Requires: sm_90a (wgmma, setmaxnreg, clusters); A and B as rung 04 (the launcher repacks otherwise), and B's
//   tensor map with boxes of BK x BN / 2 (TN) or 64 x BK (NN). Launch: THREADS = 128 * (1 + BM / 64) threads, a
//   1-D grid of 2 * min(pair tiles, the clusters that fit at once) blocks (cuOccupancyMaxActiveClusters), dynamic
//   shared memory SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 (197632 bytes at the defaults).
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (256), BK (64), STAGES (4), RASTER (2: grouped; 0 row,
//   1 column, 3 snake), GROUP_M (4: pair-tile rows per group, 8 tile-rows as rung 06's 8), THREADS (384 =
//   128 * (1 + BM / 64)).
// Ideas: NVIDIA's PTX ISA (multicast TMA, mapa, barrier.cluster), CUTLASS's sm90 warp-specialized kernels with
//   cluster shapes, and Shankhdhar's worklog; code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"  // issue_stage_multicast, wgmma_k_step, store_pair (and lab_cluster.cuh's pieces)
#include "lab_tile_order.cuh"

#ifndef RASTER
#define RASTER 2  // the pair-tile order: 0 row, 1 column, 2 grouped, 3 snake (lab_tile_order.cuh)
#endif
#ifndef GROUP_M
#define GROUP_M 4  // pair-tile rows per group (2 BM rows each)
#endif
#include "lab_hopper_knobs.cuh"  // the other knobs' defaults, ACC, STAGE_BYTES, CONSUMERS, the register split

#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)
#define CLUSTER 2  // blocks per cluster, sharing B

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 09 needs sm_90a (wgmma, setmaxnreg, clusters): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_tc_cluster_multicast(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M,
                          int N, int K, float alpha, float beta, half_bits* __restrict__ C, int ldc) {
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
            int it = 0;  // k-tiles issued so far, over all of this cluster's tiles (the partner counts the same)
            for (int tile = cluster; tile < tiles; tile += clusters) {
                int row0, col0;
                lab_cluster_tile_origin<RASTER, GROUP_M, CLUSTER, BM, BN>(tile, pairs_m, tiles_n, rank, row0, col0);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    // Both blocks' consumers released this stage's previous k-tile (it - STAGES).
                    if (it >= STAGES) mbar_wait(empty + 8 * s, ((it - STAGES) / STAGES) & 1);
                    issue_stage_multicast<BM, BN, BK, TN, CLUSTER>(tiles_smem, full, &map_a, &map_b, s, kt, row0, col0,
                                                                   rank);
                }
            }
        }
    } else {
        setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;  // this consumer's 64 rows of each block tile
        const int g = lane / 4, t = lane % 4;
        const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
        // This warp's arrival on stage s's "empty" barrier in block r of the cluster is at empty_at[r] + 8 s.
        const unsigned empty_at[CLUSTER] = {cluster_peer_address(empty, 0), cluster_peer_address(empty, 1)};
        int it = 0;  // k-tiles consumed so far, over all of this cluster's tiles
        for (int tile = cluster; tile < tiles; tile += clusters) {
            int row0, col0;
            lab_cluster_tile_origin<RASTER, GROUP_M, CLUSTER, BM, BN>(tile, pairs_m, tiles_n, rank, row0, col0);
            float acc[ACC];
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(full + 8 * s, (it / STAGES) & 1);  // k-tile `it` has landed (both halves of B)
                const unsigned a = tiles_smem + s * STAGE_BYTES + c * 64 * ROW_BYTES;
                const unsigned b = tiles_smem + s * STAGE_BYTES + A_TILE_BYTES;
                wgmma_k_tile<BF16, TN, BN, BK>(acc, a, b);  // committed as one group
                wgmma_wait<1>();  // k-tile it-1's products are done: release its stage in both blocks
                if (kt > 0 && lane == 0)
#pragma unroll
                    for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_at[r] + 8 * ((it - 1) % STAGES));
            }
            wgmma_wait<0>();
            fence_accumulators(acc);
            if (lane == 0)  // the tile's last stage, for the next tile
#pragma unroll
                for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty_at[r] + 8 * ((it - 1) % STAGES));

            // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this consumer's 64 x BN tile.
            const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta,
                                     acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }
    }
    cluster_sync();  // the partner's last arrivals on this block's barriers have landed before it exits
}
