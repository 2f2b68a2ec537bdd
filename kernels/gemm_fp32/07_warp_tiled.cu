// gemm_fp32 / rung 07 — warp tiling: block tile -> warp tile -> thread tile, conflict-free LDS.128.
//
// What changed (vs rung 06):
//   1. The 128x128 block tile is cut into 8 warp tiles of WM x WN = 32x64 (a 4x2 grid of warps), and
//      inside a warp tile the 32 lanes form a 4x8 grid. Each thread still owns 8x8 results, but as
//      2x2 quadrants of 4x4: rows lm*4 + {0, 16} + 0..3 and columns ln*4 + {0, 32} + 0..3 of its
//      warp tile (lane = lm*8 + ln). This is CUTLASS's SGEMM hierarchy: block, warp, thread.
//   2. BK = 16 instead of 8: half as many k-tiles, so half as many barriers per FLOP, for twice the
//      shared memory (still two blocks per SM with room to spare).
// Why: (a) bank conflicts. A 128-bit shared load is served a quarter warp (8 lanes) at a time. In
//   rung 06 the 8 lanes of a quarter warp read B float4s 32 bytes apart: 4 of the 8 16-byte bank
//   groups, twice each, a 2-way conflict on every B load. Here the 8 lanes of a quarter warp share
//   lm and have ln = 0..7: for B they read 8 consecutive float4s (128 bytes, every bank once), and
//   for A they all read the same float4 (a broadcast). No conflicts. (b) Less shared-memory traffic:
//   per k a warp reads 32 floats of A and 64 of B, 96 in all, against 16 + 128 = 144 for rung 06's
//   2x16-thread strip. (c) C stores coalesce: a store instruction writes 4 rows x 128 contiguous
//   bytes, where rung 06's lanes wrote float4s 32 bytes apart. The register tile, and so the
//   ratio of 64 FFMA to 4 LDS.128 per k, is unchanged.
// Prediction: 1.15-1.3x over rung 06 at 4096^3 and 8192^3, about 0.75-0.9x of cuBLAS SGEMM on the
//   H200. The gap left: each k-tile still loads, stores, waits at a barrier and only then computes,
//   so global latency is hidden only by the other resident block (rung 08 pipelines it).
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: as rung 06 (zeros outside A and B, per-element or whole-float4 guarded stores, C not read
//   when beta == 0).
// Requires: sm_75+; any M, N, K >= 1. VEC = 4 only when lda, ldb, ldc are multiples of 4 and A, B,
//   C are 16-byte aligned (the launcher's check); VEC = 1 takes any leading dimensions and any
//   4-byte alignment. Launch: 1-D blocks of THREADS = 32*(BM/WM)*(BN/WN) threads, grid
//   (ceil(N/BN), ceil(M/BM)). Static shared memory: BK*(BM+4)*4 + BK*BN*4 bytes.
// Knobs: BM (128), BN (128), BK (16), WM (32), WN (64), TM (8), TN (8), THREADS (256), VEC (4; the
//   launcher picks 4 or 1); (WM/TM) x (WN/TN) must be 32 lanes, and TM, TN multiples of 4 (the
//   thread tile is made of 4x4s).
// Ideas from CUTLASS's "Efficient GEMM in CUDA" (github.com/NVIDIA/cutlass, media/docs: the
//   threadblock/warp/thread tiling of its SIMT SGEMM) and Simon Boehm's SGEMM worklog (kernel 10,
//   warptiling); code and lane layout are this lab's own.
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef WM
#define WM 32
#endif
#ifndef WN
#define WN 64
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
#ifndef VEC
#define VEC 4  // 4: float4 global loads/stores (launcher checks alignment); 1: scalar, any layout
#endif

#define AS_STRIDE (BM + 4)                 // padded row of the transposed A tile, in floats
#define A_SLOTS (BM * BK / 4 / THREADS)    // float4s of A each thread loads per k-tile
#define B_SLOTS (BK * BN / 4 / THREADS)    // float4s of B each thread loads per k-tile
#define LANES_M (WM / TM)                  // lanes along M in a warp tile
#define LANES_N (WN / TN)                  // lanes along N in a warp tile

static_assert(VEC == 4 || VEC == 1, "VEC is 4 (float4 global access) or 1 (scalar)");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0, "tiles divide evenly");
static_assert(LANES_M * LANES_N == 32, "a warp tile holds exactly 32 thread tiles");
static_assert(THREADS == 32 * (BM / WM) * (BN / WN), "one warp per WM x WN warp tile of the block tile");
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4x4 quadrants");
static_assert(BK % 8 == 0 && BM % 32 == 0 && BN % 4 == 0, "A loads go in pairs of float4 along k (32 bytes)");
static_assert(A_SLOTS * 4 * THREADS == BM * BK && B_SLOTS * 4 * THREADS == BK * BN,
              "every thread loads the same whole number of float4s of A and of B");

// Four consecutive elements of a row-major matrix, X[row][col .. col+3], with zeros outside the
// rows x cols matrix. VEC = 4: one 16-byte load when all four are in range (col is a multiple of 4
// and ld too, so the address is 16-byte aligned); element by element at an edge.
__device__ __forceinline__ float4 load4(const float* __restrict__ X, int ld, int row, int col, int rows, int cols) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row >= rows) return v;
    const float* p = X + (long long)row * ld + col;
#if VEC == 4
    if (col + 3 < cols) return *reinterpret_cast<const float4*>(p);
#endif
    if (col + 0 < cols) v.x = p[0];
    if (col + 1 < cols) v.y = p[1];
    if (col + 2 < cols) v.z = p[2];
    if (col + 3 < cols) v.w = p[3];
    return v;
}

// C[row][col .. col+3] = alpha * acc + beta * C, only where inside M x N; C is not read if beta == 0.
__device__ __forceinline__ void store4(float* __restrict__ C, int ldc, int row, int col, int M, int N, float alpha,
                                       float beta, const float* acc) {
    if (row >= M) return;
    float* p = C + (long long)row * ldc + col;
#if VEC == 4
    if (col + 3 < N) {
        float4 r = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
        if (beta != 0.0f) {
            const float4 c = *reinterpret_cast<const float4*>(p);
            r.x = fmaf(beta, c.x, r.x);
            r.y = fmaf(beta, c.y, r.y);
            r.z = fmaf(beta, c.z, r.z);
            r.w = fmaf(beta, c.w, r.w);
        }
        *reinterpret_cast<float4*>(p) = r;
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (col + j < N) p[j] = beta != 0.0f ? fmaf(beta, p[j], alpha * acc[j]) : alpha * acc[j];
    }
}

// Global -> registers: this thread's float4s of the k-tile starting at k0.
// A: slot f covers row m = (f/2) % BM, k = 4*(2*((f/2)/BM) + f%2), so a warp reads 16 rows x 32
//   bytes (one full sector per row) and lanes 2i, 2i+1 split a row's sector.
// B: slot f covers row k = f / (BN/4), columns 4*(f % (BN/4)): a warp reads 512 contiguous bytes.
__device__ __forceinline__ void load_tile(float4 (&a)[A_SLOTS], float4 (&b)[B_SLOTS], const float* __restrict__ A,
                                          int lda, const float* __restrict__ B, int ldb, int M, int N, int K,
                                          int row0, int col0, int k0) {
#pragma unroll
    for (int i = 0; i < A_SLOTS; ++i) {
        const int f = i * THREADS + threadIdx.x;
        const int m = (f >> 1) % BM, k = 4 * (2 * ((f >> 1) / BM) + (f & 1));
        a[i] = load4(A, lda, row0 + m, k0 + k, M, K);
    }
#pragma unroll
    for (int i = 0; i < B_SLOTS; ++i) {
        const int f = i * THREADS + threadIdx.x;
        const int k = f / (BN / 4), n = 4 * (f % (BN / 4));
        b[i] = load4(B, ldb, k0 + k, col0 + n, K, N);
    }
}

// Registers -> shared memory, A transposed: As[k .. k+3][m] = the float4 A[m][k .. k+3]. Across a warp
// one store instruction writes bank (4*k + m) mod 32 for 16 rows m and 2 values of k/4: all distinct.
__device__ __forceinline__ void store_tile(float* As, float* Bs, const float4 (&a)[A_SLOTS],
                                           const float4 (&b)[B_SLOTS]) {
#pragma unroll
    for (int i = 0; i < A_SLOTS; ++i) {
        const int f = i * THREADS + threadIdx.x;
        const int m = (f >> 1) % BM, k = 4 * (2 * ((f >> 1) / BM) + (f & 1));
        As[(k + 0) * AS_STRIDE + m] = a[i].x;
        As[(k + 1) * AS_STRIDE + m] = a[i].y;
        As[(k + 2) * AS_STRIDE + m] = a[i].z;
        As[(k + 3) * AS_STRIDE + m] = a[i].w;
    }
#pragma unroll
    for (int i = 0; i < B_SLOTS; ++i) {
        const int f = i * THREADS + threadIdx.x;
        const int k = f / (BN / 4), n = 4 * (f % (BN / 4));
        *reinterpret_cast<float4*>(&Bs[k * BN + n]) = b[i];
    }
}

// acc += the k-tile's contribution. The thread's rows in the block tile are tr0 + i*LANES_M + 0..3
// for i = 0, 4, .., TM-4 (tr0 = warp row + lm*4) and its columns tc0 + j*LANES_N + 0..3 (tc0 =
// warp column + ln*4): 4x4 quadrants LANES_M*4 rows and LANES_N*4 columns apart. Per k it reads
// TM/4 + TN/4 float4s of shared memory, each conflict-free for a quarter warp.
__device__ __forceinline__ void compute_tile(float (&acc)[TM][TN], const float* As, const float* Bs, int tr0,
                                             int tc0) {
    // BEGIN SOLUTION: per k, this thread's TM values of As and TN of Bs as float4 loads, then the TM x TN outer product into acc.
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&As[k * AS_STRIDE + tr0 + i * LANES_M]);
            a[i + 0] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[k * BN + tc0 + j * LANES_N]);
            b[j + 0] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    // END SOLUTION
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_warp_tiled(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                 const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    __shared__ __align__(16) float As[BK * AS_STRIDE];  // A tile, transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK * BN];         // B tile as it is: Bs[k][n]

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tr0 = (warp / (BN / WN)) * WM + (lane / LANES_N) * 4;  // warp tile row + lm*4
    const int tc0 = (warp % (BN / WN)) * WN + (lane % LANES_N) * 4;  // warp tile column + ln*4

    float acc[TM][TN] = {};

    float4 a[A_SLOTS], b[B_SLOTS];
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile(a, b, A, lda, B, ldb, M, N, K, row0, col0, k0);
        store_tile(As, Bs, a, b);
        __syncthreads();  // the tile is complete
        compute_tile(acc, As, Bs, tr0, tc0);
        __syncthreads();  // everyone is done reading it before the next tile overwrites it
    }

#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, ldc, row0 + tr0 + (r / 4) * 4 * LANES_M + r % 4, col0 + tc0 + j * LANES_N, M, N, alpha, beta,
                   &acc[r][j]);
}
