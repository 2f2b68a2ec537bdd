// gemm_fp32 / rung 01 — naive: one thread per element of C, neighbouring threads walk DOWN a column.
//
// What it is: C = alpha * A @ B + beta * C, all row-major. Each thread owns one C[row][col] and runs
//   the whole dot product over k straight from global memory. Thread t of the block takes tile row
//   t % BM and tile column t / BM, so the 32 threads of a warp are 32 consecutive ROWS of one column.
// What that does to memory: per k, the warp's A load, A[row..row+31][k], touches 32 rows, i.e. 32
//   cache lines and 32 L1 wavefronts for 128 useful bytes; the B load is one address (a broadcast);
//   the final C stores hit 32 separate sectors. The mapping is deliberately the wrong one: rung 02
//   changes only the two lines that compute it.
// Prediction (4096^3, H200): ~0.4-0.5 TFLOP/s, ~0.7% of the 67 TFLOP/s FP32 peak. Model: an SM
//   issues 4 warp-FMAs per clock but its L1 serves ~1 wavefront per clock, and each warp-FMA here
//   needs ~33 wavefronts: a ceiling of 4 / 33 / 4 = 0.75% of peak. Simon Boehm's worklog ("How to
//   optimize a CUDA matmul kernel for cuBLAS-like performance", siboehm.com/articles/22/CUDA-MMM,
//   kernel 1, same mapping) measured 309 GFLOP/s on an A6000: 0.8% of that GPU's peak, 1.3% of cuBLAS.
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: a thread whose (row, col) falls outside M x N returns at once (no barriers here, so that
//   is safe). Nothing outside the M x N region of C (the ldc padding) is read or written.
// Requires: any M, N, K >= 1, lda >= K, ldb >= N, ldc >= N, no alignment; sm_75+. beta == 0 never
//   reads C (the BLAS convention: C may hold NaN then).
// Knobs: BM (32), BN (32), THREADS (1024 = BM * BN). The launcher's grid is (ceil(N/BN), ceil(M/BM)).
#ifndef BM
#define BM 32
#endif
#ifndef BN
#define BN 32
#endif
#ifndef THREADS
#define THREADS 1024
#endif
static_assert(THREADS == BM * BN, "one thread per element of the BM x BN tile of C");

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                                       const float* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                                       int ldc) {
    const int tr = threadIdx.x % BM;  // consecutive threads -> consecutive ROWS (uncoalesced)
    const int tc = threadIdx.x / BM;
    const int row = blockIdx.y * BM + tr;
    const int col = blockIdx.x * BN + tc;
    if (row >= M || col >= N) return;

    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(long long)row * lda + k] * B[(long long)k * ldb + col];

    float* c = C + (long long)row * ldc + col;
    *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
}
