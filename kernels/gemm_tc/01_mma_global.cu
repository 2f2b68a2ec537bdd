// gemm_tc / rung 01 — mma.sync m16n8k16 with fragments loaded straight from global memory.
//
// What changed (vs the FP32 ladder's naive rung): the multiply-adds run on tensor cores. One warp owns
//   a 16x16 tile of C as two 16x8 mma tiles; per k-step of 16 each lane loads exactly the A and B
//   elements the mma fragment layout assigns to it (kernels/common/lab_mma.cuh spells the layout out:
//   lane (g, t) = (lane/4, lane%4) holds A rows g and g+8 at k = 2t, 2t+1, 2t+8, 2t+9, and B column g
//   at the same k), packs pairs of 16-bit values into .b32 registers, and issues two mma.sync. The
//   accumulators stay in fp32 registers, in the C fragment layout: rows g and g+8, columns 2t, 2t+1.
// Why: this is the fragment-layout lesson: the only new thing is who holds what. Each mma.sync does
//   16*8*16 = 2048 multiply-adds per warp-instruction, where an FFMA does 32.
// Prediction (4096^3 and 8192^3, H200): ~5-10% of cuBLAS, far below it and the tensor peak (132 SMs; dense
//   fp16/bf16 ~990 TFLOP/s by the NVIDIA H200 datasheet, 1979 with 2:4 sparsity; cuBLAS measured 720 to
//   790 TFLOP/s at 4096-8192). Every fragment element is a separate 2-byte load (per lane and k-step, 8
//   for A, shared by the warp's two mma, and 4 for B of each: 16 loads for 2 mma; the same A and B elements
//   loaded again by every warp that needs them, from L1/L2, in 4-byte-apart
//   pairs that use a fraction of each 32-byte sector), so the load units, not the tensor cores, limit
//   it. Rung 02 stages tiles in shared memory and reads whole fragments with one ldmatrix.
// Tails: every load is guarded (zero outside A and B, so partial mma tiles and K not a multiple of 16
//   add zeros); every store is guarded; C is not read when beta == 0.
// Requires: sm_80+ (m16n8k16 for fp16 and bf16, cvt.rn.bf16.f32); any M, N, K >= 1, any leading
//   dimensions >= the widths, 2-byte aligned pointers. Launch: 1-D blocks of THREADS = 32 * WARPS_M *
//   WARPS_N threads, grid (ceil(N / (16 * WARPS_N)), ceil(M / (16 * WARPS_M))); no shared memory.
// Knobs: BF16 (0: fp16, 1: bf16), TN (0: B is K x N row-major, "NN"; 1: B is N x K row-major, "TN"),
//   WARPS_M (2), WARPS_N (2), THREADS (128).
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef TN
#define TN 0
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef THREADS
#define THREADS 128
#endif

#define BM (16 * WARPS_M)  // block tile: one 16x16 warp tile per warp
#define BN (16 * WARPS_N)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "gemm_tc rungs need sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16)"
#endif
static_assert(THREADS == 32 * WARPS_M * WARPS_N, "one warp per 16x16 warp tile");
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(TN == 0 || TN == 1, "TN is 0 (B is K x N) or 1 (B is N x K)");

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits

// X[row][col] of a row-major rows x cols matrix, or 0 outside it (0 is +0.0 in fp16 and bf16).
__device__ __forceinline__ half_bits load_or_zero(const half_bits* __restrict__ X, int ld, int row, int col, int rows,
                                                  int cols) {
    return (row < rows && col < cols) ? X[(long long)row * ld + col] : half_bits(0);
}

// B as the math sees it (K x N): element (k, n), whichever way it is stored.
__device__ __forceinline__ half_bits load_b(const half_bits* __restrict__ B, int ldb, int k, int n, int K, int N) {
#if TN
    return load_or_zero(B, ldb, n, k, N, K);  // stored N x K: row n, column k
#else
    return load_or_zero(B, ldb, k, n, K, N);
#endif
}

// C[row][col] = alpha * acc + beta * C, rounded once to the output type; only inside M x N.
__device__ __forceinline__ void store_c(half_bits* __restrict__ C, int ldc, int row, int col, int M, int N,
                                        float alpha, float beta, float acc) {
    if (row >= M || col >= N) return;
    half_bits* p = C + (long long)row * ldc + col;
    float r = alpha * acc;
    if (beta != 0.0f) r = fmaf(beta, half_bits_to_float<BF16>(*p), r);  // beta == 0: C is never read
    *p = float_to_half_bits<BF16>(r);
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_tc_mma_global(int M, int N, int K, float alpha, const half_bits* __restrict__ A, int lda,
                   const half_bits* __restrict__ B, int ldb, float beta, half_bits* __restrict__ C, int ldc) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;                                 // groupID, threadID_in_group
    const int row0 = blockIdx.y * BM + (warp / WARPS_N) * 16;            // the warp's 16x16 tile of C
    const int col0 = blockIdx.x * BN + (warp % WARPS_N) * 16;

    float acc[2][4] = {};  // two 16x8 tiles: columns col0 + 0..7 and col0 + 8..15

    for (int k0 = 0; k0 < K; k0 += 16) {
        // This lane's A fragment (rows g, g+8; k 2t, 2t+1, 2t+8, 2t+9) and, per 8-column tile j, its B
        // fragment (column g, the same k); then one mma.sync per 8-column tile.
        unsigned a[4];
        a[0] = pack_half2(load_or_zero(A, lda, row0 + g, k0 + 2 * t, M, K),
                          load_or_zero(A, lda, row0 + g, k0 + 2 * t + 1, M, K));
        a[1] = pack_half2(load_or_zero(A, lda, row0 + g + 8, k0 + 2 * t, M, K),
                          load_or_zero(A, lda, row0 + g + 8, k0 + 2 * t + 1, M, K));
        a[2] = pack_half2(load_or_zero(A, lda, row0 + g, k0 + 2 * t + 8, M, K),
                          load_or_zero(A, lda, row0 + g, k0 + 2 * t + 9, M, K));
        a[3] = pack_half2(load_or_zero(A, lda, row0 + g + 8, k0 + 2 * t + 8, M, K),
                          load_or_zero(A, lda, row0 + g + 8, k0 + 2 * t + 9, M, K));
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int n = col0 + 8 * j + g;
            unsigned b[2];
            b[0] = pack_half2(load_b(B, ldb, k0 + 2 * t, n, K, N), load_b(B, ldb, k0 + 2 * t + 1, n, K, N));
            b[1] = pack_half2(load_b(B, ldb, k0 + 2 * t + 8, n, K, N), load_b(B, ldb, k0 + 2 * t + 9, n, K, N));
            mma_m16n8k16<BF16>(acc[j], a, b);
        }
    }

    // The C fragment: acc[j][i] is row g + 8*(i/2), column 8*j + 2t + i%2 of the warp's tile.
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            store_c(C, ldc, row0 + g + 8 * (i / 2), col0 + 8 * j + 2 * t + (i % 2), M, N, alpha, beta, acc[j][i]);
}
