// gemm_fp32 / rung 02 — coalesced: neighbouring threads walk ALONG a row of C.
//
// What changed: the two lines that map a thread to its element. Thread t now takes tile row t / BN
//   and tile column t % BN, so the 32 threads of a warp are 32 consecutive COLUMNS of one row.
// Why: per k, the warp's A load is now one address (a broadcast, 1 wavefront), its B load is 32
//   consecutive floats (128 bytes, 1 wavefront), and the C stores are coalesced too. L1 wavefronts
//   per warp-FMA fall from ~33 to 2.
// Prediction (4096^3, H200): 6-10x rung 01, ~3-5 TFLOP/s. Model ceiling: 2 wavefronts per
//   warp-FMA at ~1 wavefront per clock is 0.5 of the SM's 4 warp-FMAs per clock, 12.5% of peak
//   (8.4 TFLOP/s); L1 misses and load latency keep it well under that (Boehm, siboehm.com/articles/
//   22/CUDA-MMM, kernel 2: 6.4x his naive kernel, 5.1% of the A6000's peak, 8.5% of cuBLAS).
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: as rung 01 (out-of-range threads return; nothing outside M x N is touched).
// Requires: any M, N, K >= 1, lda >= K, ldb >= N, ldc >= N, no alignment; sm_75+. beta == 0 never
//   reads C.
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

extern "C" __global__ void sgemm_coalesced(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                                           const float* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                                           int ldc) {
    const int tr = threadIdx.x / BN;
    const int tc = threadIdx.x % BN;  // consecutive threads -> consecutive COLUMNS (coalesced)
    const int row = blockIdx.y * BM + tr;
    const int col = blockIdx.x * BN + tc;
    if (row >= M || col >= N) return;

    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(long long)row * lda + k] * B[(long long)k * ldb + col];

    float* c = C + (long long)row * ldc + col;
    *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
}
