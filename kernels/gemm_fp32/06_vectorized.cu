// gemm_fp32 / rung 06 — vectorized: 16-byte global loads, A transposed in shared memory, LDS.128.
//
// What changed (vs rung 05: same block tile, BK, thread tile and thread count):
//   1. Global loads move float4s: per k-tile each thread fetches one float4 of A (4 consecutive k of
//      one row) and one float4 of B (4 consecutive n) with LDG.E.128, instead of 4 + 4 scalar loads.
//   2. A is stored transposed in shared memory, As[k][m]: the float4 read along a row of A is
//      scattered down a column of As (4 scalar STS). In exchange, the TM values of A that a thread
//      multiplies at one k are contiguous: 2 LDS.128 for this k alone. Rung 05 also read A with
//      LDS.128, but along k (As[m][k .. k+3], four k steps fused), so it held 4 x TM values of A at
//      once. Still 4 LDS.128 per 64 FFMA (2 of A, 2 of B).
//   3. As rows are padded to BM + 4 floats: the transposing stores then hit 32 different banks
//      (row stride 132 = 4 mod 32 banks), and every As row still starts 16-byte aligned.
// Why: registers, hence occupancy. Rung 05's register count let one 256-thread block (8 warps) live
//   on an SM, so nothing covered its global loads and barriers. Holding TM values of A per k instead
//   of 4 x TM brings the count under the two-block line (the compile report and lab/core/occupancy.py):
//   two blocks (16 warps) per SM, and one block's loads and barriers overlap the other's FFMAs. The
//   4x fewer global load instructions help a little too; the shared-load count does not change.
// Prediction: 1.3-1.6x over rung 05 at 4096^3 and 8192^3 (mostly the second resident block), about
//   0.6-0.75x of cuBLAS SGEMM on the H200. Boehm's kernel 6, the same change on an A6000 where his
//   kernel 5 already ran two blocks per SM (rung 05's header), gained 1.14x; the occupancy step
//   comes on top of that.
//   Not more: B's LDS.128 still has rung 05's 2-way bank conflict (threads tc and tc+4 of a quarter
//   warp sit 128 bytes apart, on the same banks), each k-tile pays two __syncthreads with nothing
//   in flight, and a warp's 2x16 thread layout makes it read 16 + 128 floats of shared memory per
//   k where a 32x64 warp tile needs 96 (rung 07).
// Results: results/h200/gemm_fp32_notes.md (generated from the records by `python -m lab.lessons.notes`).
// Tails: out-of-range elements of A and B load as zeros (rows past M or K, columns past K or N);
//   a float4 that straddles the edge is loaded element by element, never past it. Each result is
//   stored only if it is inside M x N: as a float4 when VEC = 4 and all four columns are in range,
//   otherwise one float at a time. C is not read when beta == 0.
// Requires: sm_75+; any M, N, K >= 1. VEC = 4 only when lda, ldb, ldc are multiples of 4 and A, B,
//   C are 16-byte aligned (the launcher's check); VEC = 1 takes any leading dimensions and any
//   4-byte alignment. Launch: 1-D blocks of THREADS = (BM/TM)*(BN/TN) threads, grid
//   (ceil(N/BN), ceil(M/BM)). Static shared memory: BK*(BM+4)*4 + BK*BN*4 bytes.
// Knobs: BM (128), BN (128), BK (8), TM (8), TN (8), THREADS (256), VEC (4; the launcher picks 4 or 1).
// Ideas from Simon Boehm's "How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance"
//   (siboehm.com/articles/22/CUDA-MMM, kernel 6); code and padding choice are this lab's own.
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
#ifndef VEC
#define VEC 4  // 4: float4 global loads/stores (launcher checks alignment); 1: scalar, any layout
#endif

#define AS_STRIDE (BM + 4)                 // padded row of the transposed A tile, in floats
#define A_SLOTS (BM * BK / 4 / THREADS)    // float4s of A each thread loads per k-tile
#define B_SLOTS (BK * BN / 4 / THREADS)    // float4s of B each thread loads per k-tile

static_assert(VEC == 4 || VEC == 1, "VEC is 4 (float4 global access) or 1 (scalar)");
static_assert(THREADS == (BM / TM) * (BN / TN), "one thread per TM x TN sub-tile of the block tile");
static_assert(BM % TM == 0 && BN % TN == 0 && TM % 4 == 0 && TN % 4 == 0, "thread tiles are whole float4s");
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

// acc += the k-tile's contribution. Thread (tr, tc) owns rows tr*TM .. +TM and columns tc*TN .. +TN
// of the block tile; per k it reads TM/4 + TN/4 float4s of shared memory.
__device__ __forceinline__ void compute_tile(float (&acc)[TM][TN], const float* As, const float* Bs, int tr,
                                             int tc) {
    // BEGIN SOLUTION: per k, this thread's TM values of As and TN of Bs as float4 loads, then the TM x TN outer product into acc.
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&As[k * AS_STRIDE + tr * TM + i]);
            a[i + 0] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[k * BN + tc * TN + j]);
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
sgemm_vectorized(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                 const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    __shared__ __align__(16) float As[BK * AS_STRIDE];  // A tile, transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK * BN];         // B tile as it is: Bs[k][n]

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tr = threadIdx.x / (BN / TN), tc = threadIdx.x % (BN / TN);

    float acc[TM][TN] = {};

    float4 a[A_SLOTS], b[B_SLOTS];
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile(a, b, A, lda, B, ldb, M, N, K, row0, col0, k0);
        store_tile(As, Bs, a, b);
        __syncthreads();  // the tile is complete
        compute_tile(acc, As, Bs, tr, tc);
        __syncthreads();  // everyone is done reading it before the next tile overwrites it
    }

#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, ldc, row0 + tr * TM + r, col0 + tc * TN + j, M, N, alpha, beta, &acc[r][j]);
}
