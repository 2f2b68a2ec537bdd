// gemm_fp32 / rung 05 — 2-D register tile: each thread computes a TM x TN block of C.
//
// What changed: a thread owns TM x TN accumulators instead of a TM x 1 strip, so
//   THREADS = (BM / TM) * (BN / TN) and the block tile grows. Per k, the thread copies its TM values
//   of the As column and its TN values of the Bs row into registers, then does the TM x TN outer
//   product from registers alone.
// Why: per k, TM + TN = 16 values from shared memory feed TM * TN = 64 FMAs, against rung 04's 9 for
//   8 (As reads fused over four k steps, as in rung 04; Bs read with LDS.128). Global traffic: 32
//   FLOP per byte with 128 x 128 tiles.
// The cost: 64 accumulators plus four k steps of As held at once take more registers than two
//   256-thread blocks can share on an SM (the compile report's register count; lab/core/occupancy.py
//   turns it into blocks per SM), so only one block (8 warps) fits and nothing hides the global
//   loads and barriers of that block. Rung 06's transposed As gets under the line.
// Prediction (4096^3, H200): 1.4-2x rung 04, ~17-25 TFLOP/s. Model ceiling: per k a warp issues
//   64 FMAs (16 clocks) and 4 LDS.128 (~24 wavefronts, counting the conflicts below), ~65% of peak;
//   one block per SM costs a good share of that. Boehm (siboehm.com/articles/22/CUDA-MMM, kernel 5,
//   the same 128 x 128 x 8, 8 x 8, 256 threads; his repository's ptxas log shows 126-128 registers
//   for it, i.e. two blocks per SM) measured 1.9x his 1-D kernel: 41% of the A6000's peak, 68.7% of
//   cuBLAS. Expect the low end of the range here.
// Left for later rungs: a thread's TN columns are contiguous, so threads tc and tc + 4 of a
//   quarter-warp read the same Bs banks: a 2-way conflict on every LDS.128 of Bs (the As reads are
//   broadcasts; Nsight Compute's shared-load bank conflicts count it, rung 07's lane layout removes
//   it). Global loads are scalar and not overlapped with the same block's math.
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: as rung 03 (guarded tile loads store 0.0f, no early return, every store guarded per
//   element; nothing outside M x N is written, and beta == 0 never reads C).
// Requires: any M, N, K >= 1, lda >= K, ldb >= N, ldc >= N, no alignment; sm_75+.
//   Shared memory: (BM*BK + BK*BN) * 4 bytes static.
// Knobs: BM (128), BN (128), BK (8), TM (8), TN (8), THREADS (256 = (BM / TM) * (BN / TN)). The
//   launcher's grid is (ceil(N/BN), ceil(M/BM)).
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef THREADS
#define THREADS 256
#endif
static_assert(BM % TM == 0 && BN % TN == 0, "a thread's TM x TN block must tile BM x BN");
static_assert(THREADS == (BM / TM) * (BN / TN), "one thread per TM x TN block of the BM x BN tile of C");
static_assert(THREADS % BK == 0 && BM % (THREADS / BK) == 0, "the A tile loads must divide evenly");
static_assert(THREADS % BN == 0 && BK % (THREADS / BN) == 0, "the B tile loads must divide evenly");
static_assert((BM * BK + BK * BN) * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");

extern "C" __global__ void sgemm_register_tile_2d(int M, int N, int K, float alpha, const float* __restrict__ A,
                                                  int lda, const float* __restrict__ B, int ldb, float beta,
                                                  float* __restrict__ C, int ldc) {
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    // Move A, B and C to this block's tile; what is left is small tile-local offsets.
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    A += (long long)row0 * lda;
    B += col0;
    C += (long long)row0 * ldc + col0;
    const int rows_left = M - row0;  // >= 1: the grid has ceil(M / BM) rows of blocks
    const int cols_left = N - col0;

    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);  // its block: rows tr*TM.., cols tc*TN..
    const int a_r = threadIdx.x / BK, a_c = threadIdx.x % BK;  // its first slot in the A tile
    const int b_r = threadIdx.x / BN, b_c = threadIdx.x % BN;  // and in the B tile
    const float* a_src = A + (long long)a_r * lda + a_c;  // both move one tile along k per step
    const float* b_src = B + (long long)b_r * ldb + b_c;

    float acc[TM][TN] = {};
    float a_reg[TM], b_reg[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        // TODO: stage the A and B tiles in As and Bs (0.0f outside the matrices) as rung 03 does, sync.

        // TODO: per k: TM values of As into a_reg, TN of Bs into b_reg, outer product into acc; sync.
    }

    float* c = C + (long long)(tr * TM) * ldc + tc * TN;
#pragma unroll
    for (int m = 0; m < TM; ++m, c += ldc) {
#pragma unroll
        for (int n = 0; n < TN; ++n)
            if (tr * TM + m < rows_left && tc * TN + n < cols_left)
                c[n] = beta == 0.f ? alpha * acc[m][n] : alpha * acc[m][n] + beta * c[n];
    }
}
