// gemm_tc / rung 02 — block tiles staged in padded shared memory, fragments read with ldmatrix.
//
// What changed (vs rung 01):
//   1. A block of THREADS = 256 threads (8 warps) owns a BM x BN = 128x128 tile of C and walks K in
//      k-tiles of BK = 32: per k-tile it copies A's 128x32 and B's 32x128 (or 128x32) tiles into shared
//      memory with 16-byte loads and stores, waits at a barrier, and computes from shared memory. Each
//      element of A is read from global memory once per block column instead of once per warp.
//   2. Each warp owns a WM x WN = 64x32 warp tile: 4 x 4 mma tiles of 16x8, 64 fp32 accumulators per
//      lane. Per k-step of 16 it loads 4 A fragments (ldmatrix.x4: one instruction = a whole 16x16 A
//      fragment) and 4 B fragments (2 ldmatrix.x4, each two 16x8 B fragments), then issues 16 mma.sync:
//      every A fragment is used 4 times and every B fragment 4 times from registers.
//   3. B in either layout with the same mma: for TN (B stored N x K, k contiguous) a B tile row is an
//      mma "col" operand as it is, read with plain ldmatrix; for NN (B stored K x N) the tile is k-major
//      and ldmatrix.trans hands each lane the transposed pairs the fragment needs. No data is
//      transposed in memory.
//   4. Padded rows: a tile row of BK = 32 halves is 64 bytes, so the 8 rows of one 8x8 ldmatrix matrix
//      would start at byte offsets 0, 64, 128, ... : only 2 distinct 16-byte bank groups out of 8, a
//      4-way conflict on every ldmatrix. With PAD = 8 halves (16 bytes) the row stride is 80 bytes and
//      the 8 rows start at 0, 80, 160, ... = 0, 80, 32, 112, 64, 16, 96, 48 modulo 128: all 8 groups,
//      conflict-free. (PAD = 8 is the smallest padding that keeps rows 16-byte aligned, which ldmatrix
//      and the 16-byte stores need; the NN B tile's 128-half rows pad to 272 bytes, 16 modulo 128, the
//      same argument.) The price is 20% more shared memory; rung 03 swizzles instead.
// Why: rung 01 spends 12 two-byte loads per mma; here a warp spends 6 ldmatrix per 16 mma, and the
//   global traffic per FLOP falls by the block tile's reuse (128 x 128 outputs per 128 + 128 inputs per
//   k, against 16 x 16 per 16 + 16 per warp in rung 01).
// Prediction (4096^3 and 8192^3, H200): 5-10x over rung 01, about 0.25-0.45x of cuBLAS (cuBLAS measured
//   720 to 790 TFLOP/s at 4096-8192; the dense fp16/bf16 tensor peak is ~990 TFLOP/s by the
//   NVIDIA H200 datasheet). What is left: the copy of k-tile kt+1 starts only after tile kt is
//   computed, so each k-tile waits out a global-memory latency covered only by the SM's other resident
//   block (~20 KB of shared memory and at most 128 registers per thread allow two); the tile passes through
//   registers on its way to shared memory; and mma.sync, not wgmma, drives Hopper's tensor cores.
//   Rung 03 pipelines the copies with cp.async and swizzles shared memory.
// Tails: every tile load is guarded (zeros outside A and B, so partial mma tiles and K not a multiple
//   of 16 or 32 add zeros); stores are guarded per element; C is not read when beta == 0. Threads with
//   no outputs still load, compute and reach every barrier.
// Requires: sm_80+; any M, N, K >= 1. VEC = 8 (16-byte global loads of 8 halves, 4-byte paired C
//   accesses) only when lda, ldb, ldc are multiples of 8 and A, B, C are 16-byte aligned (the
//   launcher's check); VEC = 1 loads element by element and takes any leading dimensions and any
//   2-byte alignment. Launch: 1-D blocks of THREADS = 32 * (BM/WM) * (BN/WN) threads, grid
//   (ceil(N / BN), ceil(M / BM)). Static shared memory: (BM * (BK + PAD) + BK * (BN + PAD)) * 2 bytes
//   for NN, (BM + BN) * (BK + PAD) * 2 for TN.
// Knobs: BF16 (0: fp16, 1: bf16), TN (0: B is K x N row-major, "NN"; 1: B is N x K row-major, "TN"),
//   BM (128), BN (128), BK (32), WM (64), WN (32), THREADS (256), PAD (8 halves), VEC (8; the launcher
//   picks 8 or 1).
#include "lab_cp_async.cuh"  // smem_u32addr
#include "lab_mma.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef TN
#define TN 0
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef PAD
#define PAD 8
#endif
#ifndef VEC
#define VEC 8  // 8: 16-byte global loads (launcher checks alignment); 1: element by element, any layout
#endif

#define MI (WM / 16)           // mma tiles along M in a warp tile
#define NI (WN / 8)            // mma tiles along N in a warp tile
#define A_STRIDE (BK + PAD)    // halves per row of the A tile, As[m][k]
#if TN
#define B_ROWS BN              // Bs[n][k]: k contiguous, as A
#define B_COLS BK
#else
#define B_ROWS BK              // Bs[k][n]: n contiguous, as B is stored
#define B_COLS BN
#endif
#define B_STRIDE (B_COLS + PAD)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "gemm_tc rungs need sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(TN == 0 || TN == 1, "TN is 0 (B is K x N) or 1 (B is N x K)");
static_assert(VEC == 8 || VEC == 1, "VEC is 8 (16-byte global loads) or 1 (element by element)");
static_assert(THREADS == 32 * (BM / WM) * (BN / WN), "one warp per WM x WN warp tile");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiles of whole 16x16 pairs");
static_assert(BK % 16 == 0, "k-tiles of whole mma k-steps");
static_assert(PAD % 8 == 0, "rows stay 16-byte aligned for ldmatrix and the 16-byte stores");
static_assert((BM * BK / 8) % THREADS == 0 && (BK * BN / 8) % THREADS == 0, "whole 16-byte chunks per thread");

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits

// Eight consecutive elements X[row][col .. col+7] of a row-major rows x cols matrix, zeros outside it.
// VEC = 8: one 16-byte load when all eight are inside (col is a multiple of 8, and so is ld: aligned).
__device__ __forceinline__ uint4 load8(const half_bits* __restrict__ X, int ld, int row, int col, int rows, int cols) {
    if (row >= rows) return make_uint4(0, 0, 0, 0);
    const half_bits* p = X + (long long)row * ld + col;
#if VEC == 8
    if (col + 7 < cols) return *reinterpret_cast<const uint4*>(p);
#endif
    half_bits e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = col + j < cols ? p[j] : half_bits(0);
    return make_uint4(pack_half2(e[0], e[1]), pack_half2(e[2], e[3]), pack_half2(e[4], e[5]), pack_half2(e[6], e[7]));
}

// Global -> shared: the ROWS x COLS tile of X starting at (r0, c0) into S (rows of COLS + PAD halves).
// Chunk c (8 halves) of the tile is row c / (COLS/8), columns 8 * (c % (COLS/8)): consecutive threads
// read consecutive 16-byte pieces of a row. All loads are issued before the first store.
template <int ROWS, int COLS>
__device__ __forceinline__ void copy_tile(half_bits* S, const half_bits* __restrict__ X, int ld, int r0, int c0,
                                          int rows, int cols) {
    constexpr int CHUNKS = ROWS * COLS / 8 / THREADS, PER_ROW = COLS / 8;
    uint4 v[CHUNKS];
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x;
        v[i] = load8(X, ld, r0 + c / PER_ROW, c0 + 8 * (c % PER_ROW), rows, cols);
    }
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
        const int c = i * THREADS + threadIdx.x;
        *reinterpret_cast<uint4*>(&S[(c / PER_ROW) * (COLS + PAD) + 8 * (c % PER_ROW)]) = v[i];
    }
}

// acc += the k-tile in shared memory (a_base, b_base: As and Bs as shared-window addresses).
// A fragment mi: ldmatrix.x4 whose lane l points at row (l % 16), k (l / 16) * 8 of the 16x16 tile,
//   so matrices 0..3 are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15):
//   registers a[0..3] in the mma order. B fragments 2p, 2p+1 (n-tiles of 8): one ldmatrix.x4 whose
//   matrices are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) of the 16-column
//   pair. TN (Bs[n][k]): lane l points at n-row (l % 8) + 8 * (l / 16), k 8 * ((l / 8) % 2), read as
//   it is. NN (Bs[k][n]): lane l points at k-row (l % 8) + 8 * ((l / 8) % 2), n 8 * (l / 16), and
//   .trans hands lane (g, t) the pairs (k 2t, 2t+1; n g) the fragment wants.
__device__ __forceinline__ void compute_tile(float (&acc)[MI][NI][4], unsigned a_base, unsigned b_base, int wr, int wc,
                                             int lane) {
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
        unsigned a[MI][4], b[NI][2];
        // BEGIN SOLUTION: the MI A fragments of this k-step into a[mi], one ldmatrix_x4 per 16x16 tile.
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            ldmatrix_x4(a[mi], a_base + 2 * ((wr + 16 * mi + lane % 16) * A_STRIDE + kk + 8 * (lane / 16)));
        // END SOLUTION
        // BEGIN SOLUTION: the NI B fragments into b[ni], two per ldmatrix_x4 (TN: plain on Bs[n][k]; NN: .trans on Bs[k][n]).
#pragma unroll
        for (int p = 0; p < NI / 2; ++p) {
            unsigned r[4];
#if TN
            const int n = wc + 16 * p + lane % 8 + 8 * (lane / 16), k = kk + 8 * ((lane / 8) % 2);
            ldmatrix_x4(r, b_base + 2 * (n * B_STRIDE + k));
#else
            const int k = kk + lane % 8 + 8 * ((lane / 8) % 2), n = wc + 16 * p + 8 * (lane / 16);
            ldmatrix_x4_trans(r, b_base + 2 * (k * B_STRIDE + n));
#endif
            b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
        }
        // END SOLUTION
        // BEGIN SOLUTION: the MI x NI mma_m16n8k16<BF16> calls, acc[mi][ni] += a[mi] * b[ni].
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_m16n8k16<BF16>(acc[mi][ni], a[mi], b[ni]);
        // END SOLUTION
    }
}

// C[row][col, col+1] = alpha * acc + beta * C, rounded once to the output type, only inside M x N;
// C is not read when beta == 0. VEC = 8 (ldc a multiple of 8, C 16-byte aligned, col even): one
// 4-byte access for the pair when both are inside.
__device__ __forceinline__ void store_pair(half_bits* __restrict__ C, int ldc, int row, int col, int M, int N,
                                           float alpha, float beta, float acc0, float acc1) {
    if (row >= M) return;
    half_bits* p = C + (long long)row * ldc + col;
    float r0 = alpha * acc0, r1 = alpha * acc1;
#if VEC == 8
    if (col + 1 < N) {
        if (beta != 0.0f) {
            const unsigned c = *reinterpret_cast<const unsigned*>(p);
            r0 = fmaf(beta, half_bits_to_float<BF16>(half_bits(c & 0xffff)), r0);
            r1 = fmaf(beta, half_bits_to_float<BF16>(half_bits(c >> 16)), r1);
        }
        *reinterpret_cast<unsigned*>(p) = pack_half2(float_to_half_bits<BF16>(r0), float_to_half_bits<BF16>(r1));
        return;
    }
#endif
    if (col < N) p[0] = float_to_half_bits<BF16>(beta != 0.0f ? fmaf(beta, half_bits_to_float<BF16>(p[0]), r0) : r0);
    if (col + 1 < N) p[1] = float_to_half_bits<BF16>(beta != 0.0f ? fmaf(beta, half_bits_to_float<BF16>(p[1]), r1) : r1);
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_tc_ldmatrix_smem(int M, int N, int K, float alpha, const half_bits* __restrict__ A, int lda,
                      const half_bits* __restrict__ B, int ldb, float beta, half_bits* __restrict__ C, int ldc) {
    __shared__ __align__(16) half_bits As[BM * A_STRIDE];
    __shared__ __align__(16) half_bits Bs[B_ROWS * B_STRIDE];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr = (warp / (BN / WN)) * WM, wc = (warp % (BN / WN)) * WN;  // the warp tile in the block tile
    const unsigned a_base = smem_u32addr(As), b_base = smem_u32addr(Bs);

    float acc[MI][NI][4] = {};

    for (int k0 = 0; k0 < K; k0 += BK) {
        copy_tile<BM, BK>(As, A, lda, row0, k0, M, K);
#if TN
        copy_tile<BN, BK>(Bs, B, ldb, col0, k0, N, K);
#else
        copy_tile<BK, BN>(Bs, B, ldb, k0, col0, K, N);
#endif
        __syncthreads();  // the tiles are complete
        compute_tile(acc, a_base, b_base, wr, wc, lane);
        __syncthreads();  // everyone is done reading them before the next copy overwrites them
    }

    // The C fragment: acc[mi][ni][2h + e] is row 16*mi + g + 8h, column 8*ni + 2t + e of the warp tile.
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                store_pair(C, ldc, row0 + wr + 16 * mi + g + 8 * h, col0 + wc + 8 * ni + 2 * t, M, N, alpha, beta,
                           acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
}
