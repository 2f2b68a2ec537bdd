// gemm_tc / rung 05 — warp specialization: a producer warpgroup that only issues TMA, two consumer warpgroups
// that only issue wgmma, registers moved from the first to the others (setmaxnreg), and a 128 x 256 tile.
//
// What changed (vs rung 04):
//   1. Roles: warpgroup 0 is the producer. One of its threads waits for a stage to be released ("empty"
//      mbarrier) and refills it; it never computes, so a slow consumer no longer delays the next refill
//      for everyone, and the consumers never wait on anything but data ("full" mbarrier).
//   2. Registers: the producer needs a few dozen registers, the consumers 128 accumulators each plus
//      addresses. The kernel starts with 168 per thread (384 threads, one block per SM, 64 K registers);
//      setmaxnreg.dec drops the producer's warpgroup to 40, setmaxnreg.inc lifts the consumers to 232
//      (128 * 40 + 256 * 232 = 64512 <= 65536).
//   3. Tile: 128 x 256 (each consumer warpgroup 64 x 256 with wgmma m64n256k16). Shared memory read per
//      FLOP falls: a 64 x 256 x 16 step reads 10 KB for 524288 FLOP, 52 FLOP per byte (rung 04: 43),
//      and L2 -> SM bytes per FLOP fall by a quarter: a k-tile brings (128 + 256) rows for 128 x 256 outputs,
//      against (128 + 128) rows for 128 x 128.
//   4. Release: a consumer warp arrives on a stage's "empty" barrier as soon as the wgmma group that
//      read it has completed (wait_group 1 after the next group is committed).
// Why: rung 04's thread 0 both computes and produces, and its 128 x 128 tile leaves little slack in
//   shared-memory bandwidth; the published Hopper GEMM worklogs (CUTLASS's warp-specialized kernels,
//   Shankhdhar 2024) get most of their way to cuBLAS from exactly these two changes.
// Prediction (4096^3 and 8192^3 fp16 TN, H200; written before any GPU run): 1.15-1.35x over rung 04, about
//   0.80-0.92x of cuBLAS. What should remain: the epilogue (registers -> global memory, uncoalesced
//   4-byte stores, not overlapped with the next tile's loads: no persistent loop), the wave tail (4096^2
//   has 512 tiles for 132 SMs: 3.9 waves), and no L2-aware raster order at 8192.
// Tensor maps, tails and the epilogue as rung 04 (its header says why the maps are __grid_constant__
//   parameters).
// Requires: sm_90a (wgmma, setmaxnreg); A and B as rung 04 (the launcher repacks otherwise). Launch:
//   THREADS = 128 * (1 + BM / 64) threads, grid (ceil(N / BN), ceil(M / BM)), dynamic shared memory
//   SMEM_BYTES = STAGES * (BM + BN) * BK * 2 + 1024 (197632 bytes at the defaults).
// Knobs: BF16 (0/1), TN (1; 0: B is K x N), BM (128), BN (256), BK (64), STAGES (4), GROUP_M (8; 0: row-major
//   tile order; G > 0: G tile-rows at a time, the raster order notebook 04 studies),
//   THREADS (384 = 128 * (1 + BM / 64)); the defaults, the register split and the stage bytes are those of
//   lab_hopper_knobs.cuh, which rungs 06-08 share.
// Knob probe: results/h200/gemm_tc_knobs_05_{4096,8192}.json (GROUP_M 0, 8 and 16, STAGES 3 against 4; fp16 TN,
//   cold L2, cuBLAS in the same run), the default GROUP_M = 8 chosen from it. The order matters most at 8192^3: a
//   row of 32 tiles reads all of B, 128 MB, more than the 60 MB L2, per 128 rows of A.
// Results: results/h200/gemm_tc_notes.md (generated from the records by `python -m lab.lessons.notes`): the
//   headline records of results/h200/gemm_tc.json (cold L2, cuBLAS in the same run) with this prediction checked
//   against them, the knob probe, and results/h200/gemm_tc_repeat_8192.json: 8192^3 is not steady on this
//   machine, and repeats in one later process, with nvidia-smi's SM clock read after each, show the ratio to cuBLAS
//   moving with the clock, which drops under minutes of full load.
// Ideas: NVIDIA's PTX ISA (setmaxnreg, wgmma), CUTLASS's warp-specialized sm90 kernels, and Pranjal
//   Shankhdhar's worklog "Outperforming cuBLAS on H100" (2024); code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"

// The knobs' defaults as lab_hopper_knobs.cuh has them (gemm_tc rungs 06 and 07 and grouped rung 01 take them
// from there), spelled out because exercise 06 starts from this file and a starter shows its knobs
// (tests/test_exercises.py); tests/test_headers.py holds the two equal.
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
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8  // 0: tiles in row-major order; G: G tile-rows at a time, column by column (L2 reuse)
#endif
#ifndef THREADS
#define THREADS (128 * (1 + BM / 64))  // a producer warpgroup, then the consumers
#endif

#include "lab_hopper_knobs.cuh"  // what follows from the knobs: ACC, STAGE_BYTES, CONSUMERS, the register split

#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024)

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_tc rung 05 needs sm_90a (wgmma, setmaxnreg): build it with -arch=sm_90a"
#endif

typedef unsigned short half_bits;

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_tc_warp_specialized(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int M,
                         int N, int K, float alpha, float beta, half_bits* __restrict__ C, int ldc) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long full_bars[STAGES], empty_bars[STAGES];
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const unsigned tiles = (smem_u32addr(smem) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1024
    const unsigned full = smem_u32addr(full_bars), empty = smem_u32addr(empty_bars);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int tile_m = blockIdx.y, tile_n = blockIdx.x;
#if GROUP_M
    // TODO: map the linear block id (x fastest) to tile_m, tile_n in the grouped order: GROUP_M tile-rows per group, column by column inside a group, the last group taking the rows that are left.
#endif
    const int row0 = tile_m * BM, col0 = tile_n * BN;
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
        if (threadIdx.x == 0)
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(empty + 8 * s, ((kt - STAGES) / STAGES) & 1);  // tile kt-STAGES is read
                issue_stage<BM, BN, BK, TN>(tiles, full, &map_a, &map_b, s, kt, row0, col0);
            }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;  // this consumer's 64 rows of the block tile
    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(full + 8 * s, (kt / STAGES) & 1);  // tile kt has landed
        const unsigned a = tiles + s * STAGE_BYTES + c * 64 * ROW_BYTES, b = tiles + s * STAGE_BYTES + A_TILE_BYTES;
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
        wgmma_wait<1>();  // tile kt-1's products are done: release its stage
        if (kt > 0 && lane == 0) mbar_arrive(empty + 8 * ((kt - 1) % STAGES));
    }
    wgmma_wait<0>();
    fence_accumulators(acc);

    // acc[4j + 2h + e] is row 16 * (warp % 4) + g + 8h, column 8j + 2t + e of this consumer's 64 x BN tile.
    const int g = lane / 4, t = lane % 4;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    const int row = row0 + c * 64 + 16 * (warp % 4) + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            store_pair<BF16>(C, ldc, pairs, row + 8 * h, col0 + 8 * j + 2 * t, M, N, alpha, beta, acc[4 * j + 2 * h],
                       acc[4 * j + 2 * h + 1]);
}
