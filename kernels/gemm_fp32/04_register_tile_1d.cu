// gemm_fp32 / rung 04 — 1-D register tile: each thread computes TM consecutive rows of one column.
//
// What changed: a thread owns a TM x 1 strip of C (TM accumulators in registers) instead of one
//   element, so THREADS = BM * BN / TM threads cover a BM x BN tile; the tiles get taller and
//   thinner in k (BM x BK of A and BK x BN of B). Per k, the thread reads Bs[k][col] once into a
//   register and reuses it for TM FMAs.
// Why: rung 03 pays ~2 shared-memory wavefronts per warp-FMA. Here, per k, a warp issues one
//   conflict-free LDS of Bs and (fused over four k steps, as in rung 03) two LDS.128 broadcasts of
//   As, ~9 wavefronts, for TM = 8 FMAs: ~1.1 per warp-FMA. Global traffic: 16 FLOP per byte with
//   64 x 64 tiles.
// Prediction (4096^3, H200): 2-3x rung 03, ~10-13 TFLOP/s. Model ceiling: 8 warp-FMAs (2 clocks)
//   per ~9 wavefronts (9 clocks) is ~22% of peak (~15 TFLOP/s); shared memory is still the limit.
//   Boehm (siboehm.com/articles/22/CUDA-MMM, kernel 4, the same 64 x 64 x 8, TM = 8, 512 threads)
//   measured 2.8x his shared-memory kernel: 22% of the A6000's peak, 36.5% of cuBLAS.
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: as rung 03 (guarded tile loads store 0.0f, no early return, every store guarded; nothing
//   outside M x N is written, and beta == 0 never reads C).
// Requires: any M, N, K >= 1, lda >= K, ldb >= N, ldc >= N, no alignment; sm_75+.
//   Shared memory: (BM*BK + BK*BN) * 4 bytes static.
// Knobs: BM (64), BN (64), BK (8), TM (8), THREADS (512 = BM * BN / TM). The launcher's grid is
//   (ceil(N/BN), ceil(M/BM)).
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef THREADS
#define THREADS 512
#endif
static_assert(BM % TM == 0, "a thread's TM rows must tile BM");
static_assert(THREADS == BM * BN / TM, "one thread per TM x 1 strip of the BM x BN tile of C");
static_assert(THREADS % BK == 0 && BM % (THREADS / BK) == 0, "the A tile loads must divide evenly");
static_assert(THREADS % BN == 0 && BK % (THREADS / BN) == 0, "the B tile loads must divide evenly");
static_assert((BM * BK + BK * BN) * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");

extern "C" __global__ void sgemm_register_tile_1d(int M, int N, int K, float alpha, const float* __restrict__ A,
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

    const int tr = threadIdx.x / BN, tc = threadIdx.x % BN;  // this thread's strip: rows tr*TM.., column tc
    const int a_r = threadIdx.x / BK, a_c = threadIdx.x % BK;  // its first slot in the A tile
    const int b_r = threadIdx.x / BN, b_c = threadIdx.x % BN;  // and in the B tile
    const float* a_src = A + (long long)a_r * lda + a_c;  // both move one tile along k per step
    const float* b_src = B + (long long)b_r * ldb + b_c;

    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // BEGIN SOLUTION: stage the A and B tiles, sync, per k one Bs value into TM accumulators, sync.
#pragma unroll
        for (int i = 0; i < BM; i += THREADS / BK)  // out-of-range elements load as 0
            As[a_r + i][a_c] = (a_r + i < rows_left && k0 + a_c < K) ? a_src[(long long)i * lda] : 0.f;
#pragma unroll
        for (int i = 0; i < BK; i += THREADS / BN)
            Bs[b_r + i][b_c] = (k0 + b_r + i < K && b_c < cols_left) ? b_src[(long long)i * ldb] : 0.f;
        a_src += BK;  // the next step's tiles
        b_src += (long long)BK * ldb;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tc];  // one shared load, TM FMAs
#pragma unroll
            for (int m = 0; m < TM; ++m) acc[m] += As[tr * TM + m][k] * b;
        }
        __syncthreads();  // the next step overwrites the tiles
        // END SOLUTION
    }

    float* c = C + (long long)(tr * TM) * ldc + tc;
#pragma unroll
    for (int m = 0; m < TM; ++m, c += ldc)
        if (tr * TM + m < rows_left && tc < cols_left)
            *c = beta == 0.f ? alpha * acc[m] : alpha * acc[m] + beta * *c;
}
