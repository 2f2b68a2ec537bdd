// gemm_tc / rung 04 — Hopper: TMA copies into 128-byte-swizzled shared memory, an mbarrier pipeline, and
// warpgroup MMA (wgmma) reading both operands straight from shared memory.
//
// What changed (vs rung 03):
//   1. Loads: one thread per k-tile hands the copy engine (TMA, cp.async.bulk.tensor) two boxes, A's
//      BM x BK and B's BN x BK (TN; NN: BN / 64 boxes of BK x 64), instead of 128 threads each issuing
//      cp.async chunks with their own address and bounds arithmetic. The engine swizzles as it writes
//      (the 128-byte pattern: lab_swizzle.cuh's XOR, in hardware) and zero-fills whatever lies outside
//      the matrix, so tails need no code at all.
//   2. Synchronization: per stage, a "full" mbarrier completes when the stage's TMA bytes have landed,
//      and an "empty" mbarrier when every warp has finished reading it. No __syncthreads() in the loop.
//   3. Math: wgmma m64nBNk16. Each warpgroup (4 warps) issues one asynchronous 64 x BN x 16 product per
//      k-step, with A and B read by the tensor cores from shared memory through matrix descriptors: no
//      ldmatrix, no fragments in registers, only the fp32 accumulators (BN / 2 per thread). The block's
//      two warpgroups take rows 0-63 and 64-127 of the 128 x 128 tile.
//   4. Overlap: a warpgroup commits a k-tile's 4 wgmma as one group and waits only for the previous
//      group (wait_group 1), so the tensor cores always have the next k-tile queued; then the stage of
//      tile kt-1 is released and thread 0 refills it with tile kt-1+STAGES.
// Why: on Hopper mma.sync reaches only part of the tensor cores' rate (rung 03's ratio to cuBLAS is in
//   results/h200/gemm_tc.json), and its operands pass through registers (ldmatrix) that the SM must issue
//   for every mma. wgmma is the instruction that reaches the full rate, and TMA frees the threads from
//   address work.
// Prediction (4096^3 and 8192^3 fp16 TN, H200; written before any GPU run): 1.2-1.4x over rung 03, about
//   0.65-0.75x of cuBLAS. What should hold it back: thread 0 is both a consumer and the producer, so
//   warpgroup 0 stalls while it waits for the slowest warp to release a stage before refilling it; and a
//   64 x 128 x 16 wgmma reads 6 KB of shared memory for 262144 FLOP, 43 FLOP per byte, against the 32 the
//   tensor cores need at 128 bytes per clock per SM (about 4096 FLOP per clock per SM): little slack.
//   Rung 05 takes the producer out of the consumers and widens the tile.
// Tensor maps: built on the host with cuTensorMapEncodeTiled (cuda.bindings.driver; CuPy has no wrapper)
//   and passed by value as __grid_constant__ kernel parameters: a parameter lives in the constant bank,
//   which TMA reads directly, so no global-memory copy and no cudaMemcpy before the launch are needed
//   (CuPy passes a one-element NumPy array of the 128 bytes by value). They are the first parameters, so
//   they sit at offsets 0 and 128 (CUtensorMap must be 64-byte aligned).
// Tails: TMA zero-fills out-of-range rows and columns (M, N, K tails, K not a multiple of 16 or BK); the
//   epilogue stores only inside M x N; C is not read when beta == 0.
// Requires: sm_90a (wgmma; the family builds it with -arch=sm_90a). A and B 16-byte aligned with lda and
//   ldb multiples of 8 (TMA's global strides are multiples of 16 bytes); the launcher checks this and
//   otherwise repacks A and B into aligned scratch buffers first (lab/families/gemm_tc.py says how that
//   is recorded). C: any ldc (4-byte paired stores when ldc is even and C 4-byte aligned, else 2-byte).
//   Launch: THREADS = 128 * BM / 64 threads, grid (ceil(N / BN), ceil(M / BM)), dynamic shared memory
//   SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 (the 1024 to align the tiles for the swizzle).
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (128), BK (64: one 128-byte swizzle row),
//   STAGES (4), THREADS (256 = 128 * BM / 64).
// Results: results/h200/gemm_tc_notes.md (generated from the records by `python -m lab.lessons.notes`): the
//   headline records of results/h200/gemm_tc.json (both types and layouts, 4096^3 and 8192^3, and the repack path
//   at 4095^3 and 4097^3; cold L2, cuBLAS in the same run), with this prediction checked against them.
// Ideas: NVIDIA's PTX ISA (cp.async.bulk.tensor, mbarrier, wgmma descriptors), CUTLASS's sm90 TMA
//   pipelines, and Pranjal Shankhdhar's worklog "Outperforming cuBLAS on H100" (2024) for the order in
//   which these pieces pay; code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef TN
#define TN 1
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef THREADS
#define THREADS (128 * BM / 64)
#endif

#define ACC (BN / 2)                          // fp32 accumulators per thread: a 64 x BN tile over 128 threads
#define A_TILE_BYTES (BM * BK * 2)
#define STAGE_BYTES ((BM + BN) * BK * 2)      // what TMA delivers per stage (and the full barrier expects)
#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)
#define ROW_BYTES 128                         // BK = 64 two-byte elements: one 128-byte swizzle row

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 04 needs sm_90a (wgmma): build it with -arch=sm_90a"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(TN == 0 || TN == 1, "TN is 0 (B is K x N) or 1 (B is N x K)");
static_assert(BK == 64, "one k-tile row is one 128-byte swizzle row");
static_assert(BM % 64 == 0 && THREADS == 128 * BM / 64, "one warpgroup per 64 rows of the block tile");
static_assert(BN == 128 || BN == 256, "wgmma m64n128k16 or m64n256k16");
static_assert(BM <= 256 && BN <= 256, "a TMA box has at most 256 rows");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");

typedef unsigned short half_bits;

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_tc_tma_wgmma(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M, int N,
                  int K, float alpha, float beta, half_bits* __restrict__ C, int ldc) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int k_tiles = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_a);
        prefetch_tensor_map(&map_b);
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);             // the producer's arrive_expect_tx, then the bytes
            mbar_init(empty + 8 * s, THREADS / 32);  // one arrival per warp that read the stage
        }
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int s = 0; s < STAGES && s < k_tiles; ++s)
            issue_stage<BM, BN, BK, TN>(tiles, full, &map_a, &map_b, s, s, row0, col0);

    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(full + 8 * s, (kt / STAGES) & 1);  // tile kt has landed
        const unsigned a = tiles + s * STAGE_BYTES + wg * 64 * ROW_BYTES, b = tiles + s * STAGE_BYTES + A_TILE_BYTES;
        wgmma_fence();
        fence_accumulators(acc);
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            // A: this warpgroup's 64 k-major rows, k-step ks 32 bytes into each swizzled row.
            const unsigned long long da = wgmma_desc(a + 32 * ks, 16, 8 * ROW_BYTES);
#if TN
            const unsigned long long db = wgmma_desc(b + 32 * ks, 16, 8 * ROW_BYTES);
#else
            // n-major boxes of BK k-rows: k-step ks is 16 rows down; the next 64 columns one box further.
            const unsigned long long db = wgmma_desc(b + 16 * ks * ROW_BYTES, BK * ROW_BYTES, 8 * ROW_BYTES);
#endif
            wgmma_k_step<BF16, TN, BN>(acc, da, db);
        }
        wgmma_commit();
        fence_accumulators(acc);
        wgmma_wait<1>();  // tile kt-1's products are done (tile kt's may still run)
        if (kt > 0) {
            const int sp = (kt - 1) % STAGES;
            if (lane == 0) mbar_arrive(empty + 8 * sp);
            if (threadIdx.x == 0 && kt - 1 + STAGES < k_tiles) {
                mbar_wait(empty + 8 * sp, ((kt - 1) / STAGES) & 1);  // every warp is done with it
                issue_stage<BM, BN, BK, TN>(tiles, full, &map_a, &map_b, sp, kt - 1 + STAGES, row0, col0);
            }
        }
    }
    wgmma_wait<0>();
    fence_accumulators(acc);

    // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this warpgroup's 64 x BN tile.
    const int g = lane / 4, t = lane % 4;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    const int row = row0 + wg * 64 + 16 * (warp % 4) + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta, acc[4 * j + 2 * h],
                       acc[4 * j + 2 * h + 1]);
}
