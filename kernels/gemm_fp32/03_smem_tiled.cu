// gemm_fp32 / rung 03 — shared-memory tiles: the block stages BM x BK of A and BK x BN of B.
//
// What changed: the k loop walks K in steps of BK. Each step the block copies a BM x BK tile of A
//   and a BK x BN tile of B into shared memory (coalesced: consecutive threads load consecutive
//   elements of a row), waits at a barrier, and each thread then runs BK steps of its dot product
//   from shared memory. The thread-to-element mapping is rung 02's.
// Why: every element the block fetches from global memory is reused BN (A) or BM (B) times from
//   shared memory instead of being requested again through L1/L2 by each warp that needs it (the
//   block's global traffic is 8 FLOP per byte). In the inner loop the As read is a broadcast and the
//   compiler fuses four k steps of it into one LDS.128; the Bs read is 32 consecutive words, no
//   bank conflict (the compile report's LDS.128, LDS and FFMA counts show it).
// Prediction (4096^3, H200): 1.1-1.5x rung 02, ~4-6 TFLOP/s. Still ~2 shared-memory wavefronts per
//   warp-FMA, so the same 12.5%-of-peak ceiling as rung 02; what improves is how close it gets
//   (shorter latency, no L1 misses). Boehm (siboehm.com/articles/22/CUDA-MMM, kernel 3) measured
//   1.5x his coalesced kernel on an A6000; Hopper's larger L1 already serves more of rung 02's
//   reuse, hence the lower range.
// Left for later: a 32 x 32 tile with 1024 threads lets only two blocks, two block rows of C, share an
//   SM, so B streams from DRAM again for every pair of rows: the tile stops L1 thrashing, not DRAM
//   traffic (rung 04's larger tile does).
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: every tile load is guarded; out-of-range elements of A and B are stored as 0.0f, so a
//   partial last k tile adds 0 * 0, and rows or columns past M or N compute values that are never
//   stored. No thread returns early (all must reach the barriers). Stores are guarded: nothing
//   outside M x N (the ldc padding) is written, and beta == 0 never reads C.
// Requires: any M, N, K >= 1, lda >= K, ldb >= N, ldc >= N, no alignment; sm_75+.
//   Shared memory: (BM*BK + BK*BN) * 4 bytes static.
// Knobs: BM (32), BN (32), BK (32), THREADS (1024 = BM * BN). The launcher's grid is
//   (ceil(N/BN), ceil(M/BM)).
#ifndef BM
#define BM 32
#endif
#ifndef BN
#define BN 32
#endif
#ifndef BK
#define BK 32
#endif
#ifndef THREADS
#define THREADS 1024
#endif
static_assert(THREADS == BM * BN, "one thread per element of the BM x BN tile of C");
static_assert(THREADS % BK == 0 && BM % (THREADS / BK) == 0, "the A tile loads must divide evenly");
static_assert(THREADS % BN == 0 && BK % (THREADS / BN) == 0, "the B tile loads must divide evenly");
static_assert((BM * BK + BK * BN) * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");

extern "C" __global__ void sgemm_smem_tiled(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                                            const float* __restrict__ B, int ldb, float beta, float* __restrict__ C,
                                            int ldc) {
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    // Move A, B and C to this block's tile; what is left is small tile-local offsets.
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    A += (long long)row0 * lda;
    B += col0;
    C += (long long)row0 * ldc + col0;
    const int rows_left = M - row0;  // >= 1: the grid has ceil(M / BM) rows of blocks
    const int cols_left = N - col0;

    const int tr = threadIdx.x / BN, tc = threadIdx.x % BN;  // this thread's element of the C tile
    const int a_r = threadIdx.x / BK, a_c = threadIdx.x % BK;  // its first slot in the A tile
    const int b_r = threadIdx.x / BN, b_c = threadIdx.x % BN;  // and in the B tile
    const float* a_src = A + (long long)a_r * lda + a_c;  // both move one tile along k per step
    const float* b_src = B + (long long)b_r * ldb + b_c;

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        // BEGIN SOLUTION: stage the A and B tiles in As and Bs (0.0f outside the matrices), sync, add BK products to acc, sync.
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
        for (int k = 0; k < BK; ++k) acc += As[tr][k] * Bs[k][tc];
        __syncthreads();  // the next step overwrites the tiles
        // END SOLUTION
    }

    float* c = C + (long long)tr * ldc + tc;
    if (tr < rows_left && tc < cols_left)
        *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
}
