// gemm_tc / rung 10 — the epilogue through shared memory and a TMA store: the consumers write their tile into a
// swizzled staging buffer, one thread per warpgroup hands it to the copy engine, and the warpgroup goes on to the
// next tile's k-loop while the store drains.
//
// What changed (vs rung 09):
//   1. Each consumer warpgroup owns a staging buffer of 64 rows x BN / C_PARTS columns (boxes of 64 x 64 two-byte
//      elements, 128-byte swizzled as TMA loads write them), after the stages in dynamic shared memory. Its threads
//      write alpha * acc, rounded to the output type, as 4-byte pairs into it, one part of the tile at a time: with
//      the swizzle, the 32 lanes of a warp hit 32 banks.
//   2. fence.proxy.async makes those writes visible to the copy engine, a barrier of the warpgroup's 128 threads
//      (bar.sync 1 + c, 128) says they are all in, and the warpgroup's first thread issues one TMA store a box
//      (cp.async.bulk.tensor ... .bulk_group); TMA writes only what lies inside M x N, so tails need nothing more.
//   3. Before the next tile writes the buffer, that thread waits until the previous stores have read it
//      (cp.async.bulk.wait_group.read 0), and the warpgroup's barrier passes that on. That wait is a tile's k-loop
//      later: the stores are long done.
//   4. Room: 4 stages (192 KB) and two whole-tile buffers (64 KB) do not fit the 227 KB a block may have. C_PARTS = 2
//      (the default) stages half a tile at a time (2 x 16 KB) and keeps 4 stages; the second half waits for the
//      first's stores to read the buffer. C_PARTS = 1 stages the whole tile at once and needs STAGES = 3.
//   Where C cannot be stored by TMA (its address or ldc not 16-byte aligned; or padded, with N not a multiple of 8:
//   a TMA store ends a row at a 16-byte boundary, so it would write the padding, as the H200 showed) or beta != 0
//   (C is read), the kernel takes rung 09's stores from registers: the launcher passes store_by_tma = 0.
// Why: rung 09's consumers store their accumulators with 4-byte global stores, 64 a thread per tile, both warpgroups
//   at once, and the tensor cores wait meanwhile; the next tile's first k-tiles are loaded but not multiplied. Here
//   a warpgroup's epilogue is its shared-memory writes, a few hundred cycles; the global writes overlap the next
//   tile's k-loop.
// Prediction (4096^3 and 8192^3 fp16 TN, H200; C_PARTS = 1, STAGES = 3; written before any GPU run):
//   lab/studies/hopper_gemm_study.py fits each rung's time at M = N = 4096 against K (fixed_cost); a launch's cost
//   that does not grow with K is about four tiles' epilogues per SM. This rung should remove most of the epilogue's
//   share of it and lose a little to 3 stages instead of 4: 1.02-1.05x over rung 09 at 4096^3, 1.01-1.03x at 8192^3.
//   Shankhdhar's H100 worklog measured 747 -> 758 TFLOP/s (bf16 4096^3) from its TMA-store epilogue, with its
//   store already overlapped by the next tile's loads, as here.
// Measured (results/h200/hopper_gemm_study.json, C_PARTS = 1, STAGES = 3; cold L2, three rounds): 1.03x rung 09 at
//   4096^3 fp16 TN and 1.01x at 8192^3, inside the prediction. The fit says why it is not more: the cost that does
//   not grow with K fell from 31.5 to 10.7 us a launch, but each k-tile took 2.91 us instead of 2.66 with one stage
//   fewer to hide the loads.
// For C_PARTS = 2, STAGES = 4 (predicted before its GPU run): the k-tile back to about 2.66 us and the
//   fixed cost up by about half a microsecond a tile (the second half waits for the first's stores to read the
//   buffer), 10.7 + 2 + 64 * 2.66 = 183 us at 4096^3 fp16 TN: 1.08-1.11x rung 09, 0.97-1.0x the library.
// Measured (results/h200/hopper_gemm_study_4096.json, 4096^3 fp16 TN, the whole-tile build beside it in the same
//   rounds): 723 TFLOP/s, 1.08x rung 09 and 0.98x the faster of torch.mm and cuBLASLt (0.97x in its lowest round);
//   the whole-tile build 0.93x. Inside the prediction, at its low end: the fit gives 11.2 us + 2.78 us a k-tile,
//   the k-tile still slower than rung 09's 2.70 us in the same run.
// What is left, in the order it should pay: each warpgroup's part-to-part wait and the two warpgroups' epilogues at
//   once (a ping-pong schedule, one warpgroup's epilogue under the other's k-loop), tile shapes for the shapes one
//   wave does not fill (3072^3 and 2176 x 2176 x 4096 run at 0.59-0.70x the library in hopper_gemm_study.json), and
//   this epilogue in lab.ops's fused GEMM (rung 06's epilogue functors).
// Tile width per shape: the family can build this rung with BN = 192 (TN only: in NN each block multicasts half of
//   B's 64-column boxes, which three do not split) or 128 as well as 256, with the stages and staging that fit
//   (lab/families/gemm_tc_tiles.py), and picks one per shape from a wave model: time = ceil(pair tiles / clusters)
//   x BN. Predicted there before the H200 run: 1.33x at 3072^3 and 2176 x 2176 x 4096 (BN = 192), 1.14x at
//   3200 x 4096 x 4096 (128), 1.11x at 4352 x 4096 x 4096 (192), the square 2048-8192 shapes kept at 256; measured
//   in results/h200/hopper_tile_study.json (notebook 03 sets the two side by side).
// A fused epilogue (EPI_* knobs, lab_epilogue.cuh; gemm_tc_epilogue builds it): each consumer applies the chain to its
//   accumulators in registers, the chunk's bias and scale loads ahead of the math, then stages the result for the
//   TMA store as above; a quantized output, beta != 0 or a C the TMA store cannot take goes through rung 06's
//   register stores instead. At the knobs' defaults none of it is compiled (the same machine code as without it).
//   Prediction (bias + GELU, fp16 TN, H200; written before any GPU run; lab/studies/fused_epilogue_study.py will
//   measure it): about 15 instructions on each of a thread's 128 outputs a tile, ~2 us of issue against ~47 us of
//   k-loop, not hidden (the warpgroup's next k-loop waits): ~1.04x rung 10's plain time. Against torch's
//   F.gelu(F.linear(...)) (its GEMM about rung 10's, then a GELU kernel reading and writing C, ~20 us at 4096^3):
//   1.03-1.07x at 4096^3, 1.01-1.03x at 8192^3; per-row int8 (torch: three more elementwise kernels) 1.15-1.25x.
//   Measured (results/h100/fused_epilogue_study.json, an H100 at 730294a, 3 rounds, cold L2): 0.97x its plain time
//   and 1.09x torch's pair at 4096^3 fp16 (rung 06 fused 1.01x), 1.07x bf16, 1.04x at 8192^3 (its noisiest: 0.97x
//   in one round); per-row int8 2.24x, since torch's quantization took three kernels at 290 TFLOP/s-equivalent. Short
//   of 1.10x at fp16: the chain's ~3% is not hidden behind the other warpgroup's k-loop (ping-pong's schedule would).
// Tensor maps, tails and the main loop as rung 09; C's map (when used) has boxes of 64 columns x 64 rows.
// Requires: sm_90a (wgmma, setmaxnreg, clusters); A and B as rung 09; C 16-byte aligned with ldc a multiple of 8, and
//   N one too where ldc > N, for the TMA store (else the register stores). Launch: rung 09's grid and threads,
//   dynamic shared memory SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + BM * BN * 2 / C_PARTS + 1024 (230400 bytes at
//   the defaults); two more arguments after ldc: C's tensor map and store_by_tma (0 or 1), then with a fused
//   epilogue its LabEpilogue.
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (256; or 192, 128), BK (64), STAGES (4), C_PARTS (2), RASTER (2:
//   grouped; 0 row, 1 column, 3 snake), GROUP_M (4: pair-tile rows per group), THREADS (384 = 128 * (1 + BM / 64));
//   the epilogue as rung 06's: EPI_OP1 (0) .. EPI_OP4 (0), EPI_OUT (0), EPI_QROW (0).
// Ideas: NVIDIA's PTX ISA (cp.async.bulk.tensor shared -> global, bulk async-groups, fence.proxy.async), CUTLASS's
//   sm90 TMA epilogues, and Shankhdhar's worklog; code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"  // issue_stage_multicast, wgmma_k_step, stage_c_part, store_pair, cluster pieces
#include "lab_tile_order.cuh"
#include "lab_epilogue.cuh"

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
#include "lab_hopper_knobs.cuh"  // the other knobs' defaults, ACC, STAGE_BYTES, CONSUMERS, the register split
#ifndef EPI_OP1
#define EPI_OP1 0  // the epilogue chain (lab_epilogue.cuh), none unless given: the knobs as rung 06's
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
#define FUSED_EPILOGUE (EPI_OP1 || EPI_OP2 || EPI_OP3 || EPI_OP4 || EPI_OUT)

#define PART_COLS (BN / C_PARTS)
#define STAGING_BYTES (64 * PART_COLS * 2)  // one consumer warpgroup's buffer: 64 rows x PART_COLS of C
static_assert(C_PARTS >= 1 && PART_COLS % 64 == 0, "each part is whole 64-column boxes");

#define SMEM_BYTES (STAGES * STAGE_BYTES + CONSUMERS * STAGING_BYTES + 1024)
#define CLUSTER 2  // blocks per cluster, sharing B

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 10 needs sm_90a (wgmma, setmaxnreg, clusters): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
gemm_tc_tma_store(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M, int N,
                  int K, float alpha, float beta, half_bits* __restrict__ C, int ldc,
                  const __grid_constant__ TensorMap map_c, int store_by_tma
#if FUSED_EPILOGUE
                  , const __grid_constant__ LabEpilogue ep
#endif
) {
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
        const unsigned staging = tiles_smem + STAGES * STAGE_BYTES + c * STAGING_BYTES;
        const bool storer = (threadIdx.x % 128) == 0;  // the warpgroup's thread that issues its TMA stores
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

            float stage_alpha = alpha;  // what the staging multiplies by: 1 once a fused chain has applied alpha
#if FUSED_EPILOGUE
            {  // the chain (lab_epilogue.cuh): in place before the TMA store, else on the way out from registers
                const int row = row0 + c * 64 + 16 * (warp % 4) + g;
                const LabEpiRow rows[2] = {
                    lab_epi_row<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT, EPI_QROW>(ep, row, M),
                    lab_epi_row<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT, EPI_QROW>(ep, row + 8, M)};
                if (EPI_OUT != LAB_EPI_OUT_SAME || !store_by_tma) {
                    lab_epi_store_wgmma_fragment<BF16, BN, EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT>(
                        C, ldc, pairs, row, col0, t, M, N, alpha, beta, acc, rows, ep);
                    continue;
                }
                lab_epi_apply_wgmma_fragment<BF16, BN, EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(acc, row, col0, t, M, N, alpha,
                                                                                           rows, ep);
                stage_alpha = 1.0f;
            }
#endif
            if (store_by_tma) {
#pragma unroll
                for (int part = 0; part < C_PARTS; ++part) {
                    if (storer) tma_store_wait_read<0>();  // the stores before have read the buffer
                    named_barrier_sync(1 + c, 128);
                    stage_c_part<BF16, BN, PART_COLS>(staging, acc, stage_alpha, part, warp, g, t);
                    fence_async_shared();  // this thread's writes, visible to the copy engine
                    named_barrier_sync(1 + c, 128);
                    if (storer) {
#pragma unroll
                        for (int box = 0; box < PART_COLS / 64; ++box)
                            tma_store_2d(&map_c, col0 + part * PART_COLS + 64 * box, row0 + c * 64,
                                         staging + box * 64 * ROW_BYTES);
                        tma_store_commit();
                    }
                }
                continue;
            }
            // Rung 09's stores from registers: acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e.
            const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta,
                                     acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }
        if (storer && store_by_tma) tma_store_wait_all();  // C is written before the block's shared memory goes
    }
    cluster_sync();  // the partner's last arrivals on this block's barriers have landed before it exits
}
