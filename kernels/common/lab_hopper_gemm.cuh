// The pieces the Hopper GEMM rungs (gemm_tc 04 on) share unchanged, so that the diff from one rung to the
// next shows only what that rung changes: one k-step of wgmma (and, from rung 09, one k-tile's), one stage's TMA
// loads, the staging of C and its TMA store (rung 10's, for the rungs after it), and the epilogue's store of two
// adjacent outputs. Each takes the rung's knobs as template parameters, named apart from the
// knob macros (BM, BN, BK, TN, BF16 arrive as -D options and would replace same-named parameters).
#pragma once

#include "lab_cluster.cuh"
#include "lab_hopper.cuh"
#include "lab_mma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// d (+)= one 64 x TILE_N x 16 step (TILE_N = 128, 192 or 256), B K-major (B_K_MAJOR = 1: TN) or MN-major (NN).
template <int IS_BF16, int B_K_MAJOR, int TILE_N>
__device__ __forceinline__ void wgmma_k_step(float (&d)[TILE_N / 2], unsigned long long da, unsigned long long db) {
    static_assert(TILE_N == 128 || TILE_N == 192 || TILE_N == 256, "wgmma m64n128k16, m64n192k16 or m64n256k16");
    if constexpr (TILE_N == 256)
        wgmma_m64n256k16<IS_BF16, 1 - B_K_MAJOR>(d, da, db, 1);
    else if constexpr (TILE_N == 192)
        wgmma_m64n192k16<IS_BF16, 1 - B_K_MAJOR>(d, da, db, 1);
    else
        wgmma_m64n128k16<IS_BF16, 1 - B_K_MAJOR>(d, da, db, 1);
}

// One k-tile's products, d (+)= A (64 x TILE_K at a) x B (TILE_N x TILE_K at b), as TILE_K / 16 k-steps fenced
// before and committed as one group (gemm_tc rungs 09-11): the caller waits for the group (wgmma_wait) before it
// releases the stage. a and b are 128-byte-swizzled as a stage holds them: A and TN's B k-major (rows of 64
// elements), NN's B in boxes of TILE_K k-rows x 64 columns.
template <int IS_BF16, int B_K_MAJOR, int TILE_N, int TILE_K>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[TILE_N / 2], unsigned a, unsigned b) {
    constexpr unsigned ROW = 128;
    wgmma_fence();
    fence_accumulators(d);
#pragma unroll
    for (int ks = 0; ks < TILE_K / 16; ++ks) {
        const unsigned long long da = wgmma_desc(a + 32 * ks, 16, 8 * ROW);
        const unsigned long long db = B_K_MAJOR ? wgmma_desc(b + 32 * ks, 16, 8 * ROW)
                                                : wgmma_desc(b + 16 * ks * ROW, TILE_K * ROW, 8 * ROW);
        wgmma_k_step<IS_BF16, B_K_MAJOR, TILE_N>(d, da, db);
    }
    wgmma_commit();
    fence_accumulators(d);
}

// Stage s's TMA loads of k-tile kt for the block tile at (row0, col0), completing on mbarrier full + 8 s.
// A stage is A's TILE_M x TILE_K tile then B's (TN: TILE_N x TILE_K, one box; NN: TILE_N / 64 boxes of
// TILE_K x 64), starting at tiles + s * (TILE_M + TILE_N) * TILE_K * 2; rows of TILE_K = 64 two-byte
// elements are one 128-byte swizzle row.
template <int TILE_M, int TILE_N, int TILE_K, int B_K_MAJOR>
__device__ __forceinline__ void issue_stage(unsigned tiles, unsigned full, const TensorMap* map_a,
                                            const TensorMap* map_b, int s, int kt, int row0, int col0) {
    constexpr unsigned STAGE = (TILE_M + TILE_N) * TILE_K * 2, ROW = 128;
    const unsigned a = tiles + s * STAGE, b = a + TILE_M * TILE_K * 2, bar = full + 8 * s;
    mbar_arrive_expect_tx(bar, STAGE);
    tma_load_2d(a, map_a, kt * TILE_K, row0, bar);  // A[row0 .. +TILE_M][k0 .. +TILE_K], k-major rows
    if constexpr (B_K_MAJOR) {
        tma_load_2d(b, map_b, kt * TILE_K, col0, bar);  // Bt[col0 .. +TILE_N][k0 .. +TILE_K]: k-major, as A
    } else {
#pragma unroll
        for (int j = 0; j < TILE_N / 64; ++j)  // B[k0 .. +TILE_K][col0 + 64j .. +64]: one box per 64 columns
            tma_load_2d(b + j * TILE_K * ROW, map_b, col0 + 64 * j, kt * TILE_K, bar);
    }
}

// issue_stage for a cluster of CLUSTER_SIZE blocks that share B (gemm_tc rung 09 on): this block's A tile as
// before, and its 1 / CLUSTER_SIZE share of B (TN: TILE_N / CLUSTER_SIZE rows of Bt, so B's tensor map has boxes of
// that many rows; NN: as many of the 64-column boxes) multicast into every block of the cluster. Each block's
// barrier still expects the whole stage: the rest of its B arrives from the others' copies.
template <int TILE_M, int TILE_N, int TILE_K, int B_K_MAJOR, int CLUSTER_SIZE>
__device__ __forceinline__ void issue_stage_multicast(unsigned tiles, unsigned full, const TensorMap* map_a,
                                                      const TensorMap* map_b, int s, int kt, int row0, int col0,
                                                      unsigned rank) {
    constexpr unsigned STAGE = (TILE_M + TILE_N) * TILE_K * 2, ROW = 128;
    constexpr unsigned short ALL = (1u << CLUSTER_SIZE) - 1;
    static_assert(B_K_MAJOR ? TILE_N % CLUSTER_SIZE == 0 : (TILE_N / 64) % CLUSTER_SIZE == 0,
                  "each block multicasts an equal share of B");
    const unsigned a = tiles + s * STAGE, b = a + TILE_M * TILE_K * 2, bar = full + 8 * s;
    mbar_arrive_expect_tx(bar, STAGE);
    tma_load_2d(a, map_a, kt * TILE_K, row0, bar);
    if constexpr (B_K_MAJOR) {
        constexpr int SHARE = TILE_N / CLUSTER_SIZE;  // rows of Bt each block brings
        tma_load_2d_multicast(b + rank * SHARE * ROW, map_b, kt * TILE_K, col0 + rank * SHARE, bar, ALL);
    } else {
        constexpr int BOXES = TILE_N / 64 / CLUSTER_SIZE;  // 64-column boxes of B each block brings
#pragma unroll
        for (int i = 0; i < BOXES; ++i) {
            const int j = rank * BOXES + i;
            tma_load_2d_multicast(b + j * TILE_K * ROW, map_b, col0 + 64 * j, kt * TILE_K, bar, ALL);
        }
    }
}

// Part `part` of a consumer thread's 64 x TILE_N accumulators (alpha * acc, rounded) written into its warpgroup's
// staging buffer for a TMA store (gemm_tc rungs 10 and 11): acc[4j + 2h + e] is row r = 16 * (warp % 4) + g + 8h,
// column 8j + 2t + e; the part holds column blocks j of part * PART_N / 8 onwards, block jj of the part in box jj / 8
// (64 rows x 128 bytes), 16-byte chunk jj % 8 of row r, which the 128-byte swizzle moves to chunk (jj % 8) ^ (r % 8):
// the 32 lanes of a warp hit 32 banks.
template <int IS_BF16, int TILE_N, int PART_N>
__device__ __forceinline__ void stage_c_part(unsigned staging, const float (&acc)[TILE_N / 2], float alpha, int part,
                                             int warp, int g, int t) {
    constexpr unsigned ROW = 128;
    static_assert(PART_N % 64 == 0 && TILE_N % PART_N == 0, "each part is whole 64-column boxes");
#pragma unroll
    for (int jj = 0; jj < PART_N / 8; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = part * (PART_N / 8) + jj, r = 16 * (warp % 4) + g + 8 * h;
            const unsigned addr = staging + (jj / 8) * 64 * ROW + r * ROW + (((jj % 8) ^ (r % 8)) << 4) + 4 * t;
            const unsigned bits = pack_half2(float_to_half_bits<IS_BF16>(alpha * acc[4 * j + 2 * h]),
                                             float_to_half_bits<IS_BF16>(alpha * acc[4 * j + 2 * h + 1]));
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(bits) : "memory");
        }
}

// A consumer warpgroup's 64 x TILE_N tile of C (alpha * acc, rounded) out through its staging buffer and TMA stores,
// PART_N columns at a time, with its top-left at (row0, col0) (rung 10's epilogue, written out there; rungs 11 and
// 12 call this): before a part overwrites the
// buffer the warpgroup's `storer` thread waits until the stores before have read it, and the warpgroup's named
// barrier `bar` (its 128 threads) passes that on; once every thread's writes are in and visible to the copy engine,
// the storer issues a store a 64-column box and commits them as one bulk group.
template <int IS_BF16, int TILE_N, int PART_N>
__device__ __forceinline__ void tma_store_tile(const TensorMap* map_c, unsigned staging, const float (&acc)[TILE_N / 2],
                                               float alpha, int row0, int col0, unsigned bar, bool storer, int warp,
                                               int g, int t) {
    constexpr unsigned ROW = 128;
#pragma unroll
    for (int part = 0; part < TILE_N / PART_N; ++part) {
        if (storer) tma_store_wait_read<0>();  // the stores before have read the buffer
        named_barrier_sync(bar, 128);
        stage_c_part<IS_BF16, TILE_N, PART_N>(staging, acc, alpha, part, warp, g, t);
        fence_async_shared();  // this thread's writes, visible to the copy engine
        named_barrier_sync(bar, 128);
        if (storer) {
#pragma unroll
            for (int box = 0; box < PART_N / 64; ++box)
                tma_store_2d(map_c, col0 + part * PART_N + 64 * box, row0, staging + box * 64 * ROW);
            tma_store_commit();
        }
    }
}

// C[row][col, col+1] = alpha * acc + beta * C rounded once to the output type, only inside M x N; C is
// not read when beta == 0. `pairs`: ldc even and C 4-byte aligned, so both go in one 4-byte access.
template <int IS_BF16>
__device__ __forceinline__ void store_pair(unsigned short* __restrict__ C, int ldc, bool pairs, int row, int col,
                                           int M, int N, float alpha, float beta, float acc0, float acc1) {
    if (row >= M || col >= N) return;
    unsigned short* p = C + (long long)row * ldc + col;
    float r0 = alpha * acc0, r1 = alpha * acc1;
    if (pairs && col + 1 < N) {
        if (beta != 0.0f) {
            const unsigned c = *reinterpret_cast<const unsigned*>(p);
            r0 = fmaf(beta, half_bits_to_float<IS_BF16>(static_cast<unsigned short>(c & 0xffff)), r0);
            r1 = fmaf(beta, half_bits_to_float<IS_BF16>(static_cast<unsigned short>(c >> 16)), r1);
        }
        *reinterpret_cast<unsigned*>(p) =
            pack_half2(float_to_half_bits<IS_BF16>(r0), float_to_half_bits<IS_BF16>(r1));
        return;
    }
    p[0] = float_to_half_bits<IS_BF16>(beta != 0.0f ? fmaf(beta, half_bits_to_float<IS_BF16>(p[0]), r0) : r0);
    if (col + 1 < N)
        p[1] = float_to_half_bits<IS_BF16>(beta != 0.0f ? fmaf(beta, half_bits_to_float<IS_BF16>(p[1]), r1) : r1);
}

#endif  // sm_90a
