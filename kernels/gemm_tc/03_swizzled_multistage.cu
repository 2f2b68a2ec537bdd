// gemm_tc / rung 03 — unpadded XOR-swizzled shared-memory tiles, filled by a STAGES-deep cp.async pipeline.
//
// What changed (vs rung 02):
//   1. Shared memory holds STAGES k-tiles (dynamic shared memory), filled with cp.async (SASS: LDGSTS),
//      which copies global -> shared without passing through registers and without stalling the
//      thread. While the block computes on tile kt, tiles kt+1 .. kt+STAGES-1 are in flight, and one
//      barrier per k-tile replaces two: the barrier that publishes tile kt also proves that every warp
//      has finished reading tile kt-1, whose stage is refilled straight after it.
//   2. No padding: each 16-byte chunk of a tile row sits at an XOR-swizzled position
//      (kernels/common/lab_swizzle.cuh explains the pattern and why it is conflict-free): the 8 rows an
//      ldmatrix phase reads, and the 8 chunks a quarter-warp of cp.async writes, fall in 8 different
//      bank groups, for A's k-contiguous rows (64 bytes at BK = 32), TN's k-contiguous B rows, and NN's
//      n-contiguous B rows (256 bytes at BN = 128) read with ldmatrix.trans. A stage is (BM + BN) * BK * 2
//      bytes, 20% less than rung 02's padded tiles.
//   3. Warp tiles of WM x WN = 64x64 (4 warps of 128 threads on the 128x128 block tile, rung 02 had 8 of
//      64x32): per k-step of 16 a warp issues 4 + 4 ldmatrix.x4 for 32 mma.sync (rung 02: 4 + 2 for 16),
//      so shared-memory reads per mma fall by a third. Each lane keeps 128 fp32 accumulators.
//   4. Each lane computes its swizzled ldmatrix offsets once (per k-step for A and TN's B, per 16-column
//      pair for NN's B); the other fragments of a warp tile are 16 rows further, which the swizzle maps to
//      the same key, so their addresses are that offset plus a constant, and every ldmatrix and cp.async
//      in the main loop is [register + immediate].
// Why: rung 02's k-tile loop waits out a full global-memory latency per k-tile (covered only by the SM's
//   other resident block), routes every tile through registers, and (counting bytes per k-tile of one
//   block at the H200's 128 bytes/clock/SM of shared memory) spends more shared-memory cycles on
//   ldmatrix and stores than the tensor cores need for the math. Here the latency hides behind
//   STAGES - 1 tiles of compute, the copies skip registers, and the 64x64 warp tile cuts the reads.
// Prediction (4096^3 and 8192^3, H200; written before any GPU run): 2.5-3.5x over rung 02, about
//   0.45-0.65x of cuBLAS (measured before it: cuBLAS 750 to 810 TFLOP/s fp16, rung 02 141 to 159 TFLOP/s;
//   the ladder aims for 0.60x). mma.sync cannot reach the tensor cores' full rate on
//   Hopper (wgmma can), and with 2 blocks of 4 warps per SM the ldmatrix -> mma dependence inside a
//   k-step is hidden only by the other warps: that is the ceiling this rung expects to hit.
// Tails: at an edge k-tile (a block-uniform test) every 16-byte copy is checked: a chunk outside A or B
//   copies 0 bytes (src-size 0) and zero-fills; a chunk that straddles the K (or NN's N) edge copies
//   only its in-range bytes and zero-fills the rest (cp.async's src-size may be any value below the
//   copy size). So partial mma tiles and K not a multiple of 8, 16 or BK add zeros. Stores are guarded
//   per element; C is not read when beta == 0. Threads with no outputs still copy, compute and reach
//   every barrier.
// Requires: sm_80+ (cp.async, mma.sync m16n8k16 for fp16 and bf16); any M, N, K >= 1. VEC = 8 (16-byte
//   cp.async, 4-byte paired C accesses) only when lda, ldb, ldc are multiples of 8 and A, B, C are
//   16-byte aligned (the launcher's check, which makes every chunk's source 16-byte aligned); VEC = 1
//   loads element by element (synchronous, as rung 02, into the same swizzled layout) and takes any
//   leading dimensions and any 2-byte alignment. Launch: 1-D blocks of THREADS = 32*(BM/WM)*(BN/WN)
//   threads, grid (ceil(N / BN), ceil(M / BM)), dynamic shared memory SMEM_BYTES = STAGES*(BM+BN)*BK*2
//   bytes (65536 at the defaults), with cudaFuncAttributeMaxDynamicSharedMemorySize raised above 48 KB
//   (GemmTcFamily.dynamic_smem_bytes and launch). Given less, the kernel traps at once (it reads
//   %dynamic_smem_size) instead of overrunning the buffer.
// Knobs (the family's defaults in lab/families/gemm_tc.py, and the #define fallbacks below): BF16 (0:
//   fp16, 1: bf16), TN (0: B is K x N row-major, "NN"; 1: B is N x K row-major, "TN"), BM (128),
//   BN (128), BK (32), WM (64), WN (64), THREADS (128), STAGES (4), VEC (8; the launcher picks 8 or 1).
// Results: results/h200/gemm_tc.json (the ladder's records, cuBLAS timed in the same run).
// Ideas from NVIDIA's PTX ISA (cp.async with src-size, ldmatrix, mma) and CUTLASS's multistage
//   mainloop and XOR-swizzled shared-memory layouts; code is this lab's own.
#include "lab_cp_async.cuh"
#include "lab_mma.cuh"
#include "lab_swizzle.cuh"

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
#define WN 64
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef STAGES
#define STAGES 4  // k-tiles resident in shared memory (>= 2)
#endif
#ifndef VEC
#define VEC 8  // 8: 16-byte cp.async (launcher checks alignment); 1: element by element, any layout
#endif

#define MI (WM / 16)           // mma tiles along M in a warp tile
#define NI (WN / 8)            // mma tiles along N in a warp tile
#define KSTEPS (BK / 16)       // mma k-steps per k-tile
#define A_CHUNKS (BK / 8)      // 16-byte chunks per row of the A tile, As[m][k]
#if TN
#define B_ROWS BN              // Bs[n][k]: k contiguous, as A
#define B_CHUNKS (BK / 8)
#define B_OFFSETS KSTEPS       // one ldmatrix offset per k-step; n-pairs are 16 rows apart
#else
#define B_ROWS BK              // Bs[k][n]: n contiguous, as B is stored
#define B_CHUNKS (BN / 8)
#define B_OFFSETS (NI / 2)     // one ldmatrix offset per 16-column pair; k-steps are 16 rows apart
#endif
#define A_TILE_BYTES (BM * BK * 2)
#define STAGE_BYTES ((BM + BN) * BK * 2)   // As, then Bs: the stride between stages
#define SMEM_BYTES (STAGES * STAGE_BYTES)  // what the launcher must pass as dynamic shared memory
#define A_FRAG_STEP (16 * BK * 2)          // bytes between A fragments mi and mi+1 (16 rows)
#if TN
#define B_FRAG_STEP (16 * BK * 2)          // bytes between n-pairs p and p+1 (16 rows of Bs[n][k])
#else
#define B_KSTEP (16 * BN * 2)              // bytes between k-steps (16 rows of Bs[k][n])
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "gemm_tc rungs need sm_80 or newer (mma.sync m16n8k16 for fp16 and bf16)"
#endif
static_assert(BF16 == 0 || BF16 == 1, "BF16 is 0 (fp16) or 1 (bf16)");
static_assert(TN == 0 || TN == 1, "TN is 0 (B is K x N) or 1 (B is N x K)");
static_assert(VEC == 8 || VEC == 1, "VEC is 8 (16-byte cp.async) or 1 (element by element)");
static_assert(THREADS == 32 * (BM / WM) * (BN / WN), "one warp per WM x WN warp tile");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiles of whole 16x16 pairs");
static_assert(BK % 32 == 0 && (BK & (BK - 1)) == 0, "tile rows of a power-of-two number (>= 4) of 16-byte chunks");
static_assert(TN || (BN % 32 == 0 && (BN & (BN - 1)) == 0), "NN's B rows: a power-of-two number (>= 4) of chunks");
static_assert(STAGES >= 2, "a pipeline needs at least two buffers");
static_assert((BM * A_CHUNKS) % THREADS == 0 && (B_ROWS * B_CHUNKS) % THREADS == 0, "whole 16-byte chunks per thread");
static_assert(A_TILE_BYTES % 128 == 0 && STAGE_BYTES % 128 == 0, "every tile starts on a 128-byte line");

typedef unsigned short half_bits;  // an fp16 or a bf16 value, as its 16 bits

// 16 bytes to a shared-window address (the VEC = 1 path's stores; the cp.async path never stores).
__device__ __forceinline__ void sts128(unsigned addr, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

// Eight consecutive elements X[row][col .. col+7] of a row-major rows x cols matrix, zeros outside it,
// element by element (the VEC = 1 path: any leading dimension, any 2-byte alignment).
__device__ __forceinline__ uint4 load8_scalar(const half_bits* __restrict__ X, int ld, int row, int col, int rows,
                                              int cols) {
    if (row >= rows) return make_uint4(0, 0, 0, 0);
    const half_bits* p = X + (long long)row * ld + col;
    half_bits e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = col + j < cols ? p[j] : half_bits(0);
    return make_uint4(pack_half2(e[0], e[1]), pack_half2(e[2], e[3]), pack_half2(e[4], e[5]), pack_half2(e[6], e[7]));
}

// Global -> one tile of a stage (dst: its shared-window address): the ROWS x (8 * ROW_CHUNKS) tile of X
// starting at (r0, c0). Chunk c = i * THREADS + thread is tile row c / ROW_CHUNKS, logical chunk
// c % ROW_CHUNKS (consecutive threads copy consecutive 16-byte pieces of a row), stored at its
// swizzled position. VEC = 8, GUARD = false (the whole tile is inside X): plain 16-byte cp.async.
// GUARD = true: a chunk past the last row copies 0 bytes from X itself (valid memory) and zero-fills;
// a chunk that crosses column `cols` copies only its 2 * (cols - col) in-range bytes (its source is
// still 16-byte aligned: col and ld are multiples of 8). VEC = 1: element-by-element loads, all issued
// before the first 16-byte store.
template <int ROWS, int ROW_CHUNKS, bool GUARD>
__device__ __forceinline__ void copy_tile(unsigned dst, const half_bits* __restrict__ X, int ld, int r0, int c0,
                                          int rows, int cols) {
    constexpr int COPIES = ROWS * ROW_CHUNKS / THREADS;
#if VEC == 8
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
        const int c = i * THREADS + threadIdx.x;
        const int row = c / ROW_CHUNKS, chunk = c % ROW_CHUNKS;
        const int gr = r0 + row, gc = c0 + 8 * chunk;
        const half_bits* src = X + (long long)gr * ld + gc;
        const int bytes = !GUARD ? 16 : (gr < rows ? 2 * min(max(cols - gc, 0), 8) : 0);
        cp_async_16_at(dst + swizzle_bytes<ROW_CHUNKS>(row, chunk), bytes ? src : X, bytes);
    }
#else
    uint4 v[COPIES];
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
        const int c = i * THREADS + threadIdx.x;
        v[i] = load8_scalar(X, ld, r0 + c / ROW_CHUNKS, c0 + 8 * (c % ROW_CHUNKS), rows, cols);
    }
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
        const int c = i * THREADS + threadIdx.x;
        sts128(dst + swizzle_bytes<ROW_CHUNKS>(c / ROW_CHUNKS, c % ROW_CHUNKS), v[i]);
    }
#endif
}

// The k-tile starting at k0 into the stage at `stage` (As at its start, Bs A_TILE_BYTES in). The checks
// are paid only in k-tiles that touch an edge of A or B (the test is the same for the whole block).
template <bool GUARD>
__device__ __forceinline__ void copy_stage(unsigned stage, const half_bits* __restrict__ A, int lda,
                                           const half_bits* __restrict__ B, int ldb, int M, int N, int K, int row0,
                                           int col0, int k0) {
    copy_tile<BM, A_CHUNKS, GUARD>(stage, A, lda, row0, k0, M, K);
#if TN
    copy_tile<BN, B_CHUNKS, GUARD>(stage + A_TILE_BYTES, B, ldb, col0, k0, N, K);
#else
    copy_tile<BK, B_CHUNKS, GUARD>(stage + A_TILE_BYTES, B, ldb, k0, col0, K, N);
#endif
}

__device__ __forceinline__ void load_stage(unsigned stage, const half_bits* __restrict__ A, int lda,
                                           const half_bits* __restrict__ B, int ldb, int M, int N, int K, int row0,
                                           int col0, int k0) {
    if (row0 + BM <= M && col0 + BN <= N && k0 + BK <= K)
        copy_stage<false>(stage, A, lda, B, ldb, M, N, K, row0, col0, k0);
    else
        copy_stage<true>(stage, A, lda, B, ldb, M, N, K, row0, col0, k0);
}

// acc += the k-tile in the stage at `stage`. a_off[s]: this lane's swizzled ldmatrix row for A fragment
// mi = 0 of k-step s (row wr + lane % 16, k 16s + 8 * (lane / 16), as rung 02); fragment mi is
// A_FRAG_STEP * mi further. TN: b_off[s] is the lane's row of n-pair p = 0 at k-step s (n-row
// wc + lane % 8 + 8 * (lane / 16), k 16s + 8 * ((lane / 8) % 2)), pair p is B_FRAG_STEP * p further.
// NN: b_off[p] is the lane's row of pair p at k-step 0 (k-row lane % 8 + 8 * ((lane / 8) % 2), n
// wc + 16p + 8 * (lane / 16)), read with .trans; k-step s is B_KSTEP * s further. Matrices and registers
// as in rung 02: a[mi] in the mma order, b[2p], b[2p+1] the pair's two 16x8 B fragments.
__device__ __forceinline__ void compute_tile(float (&acc)[MI][NI][4], unsigned stage, const unsigned (&a_off)[KSTEPS],
                                             const unsigned (&b_off)[B_OFFSETS]) {
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
        unsigned a[MI][4], b[NI][2];
        // BEGIN SOLUTION: the MI A fragments and NI B fragments of k-step s with ldmatrix at the swizzled offsets (TN: plain; NN: .trans), then the MI x NI mma.sync.
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a[mi], stage + a_off[s] + mi * A_FRAG_STEP);
#pragma unroll
        for (int p = 0; p < NI / 2; ++p) {
            unsigned r[4];
#if TN
            ldmatrix_x4(r, stage + b_off[s] + p * B_FRAG_STEP);
#else
            ldmatrix_x4_trans(r, stage + b_off[p] + s * B_KSTEP);
#endif
            b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
        }
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
gemm_tc_swizzled_multistage(int M, int N, int K, float alpha, const half_bits* __restrict__ A, int lda,
                            const half_bits* __restrict__ B, int ldb, float beta, half_bits* __restrict__ C,
                            int ldc) {
    extern __shared__ __align__(128) uint4 smem[];  // STAGES x (As[BM][BK], Bs[B_ROWS][..]), swizzled
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr = (warp / (BN / WN)) * WM, wc = (warp % (BN / WN)) * WN;  // the warp tile in the block tile
    const unsigned base = smem_u32addr(smem);

    // This lane's swizzled ldmatrix offsets in a stage (see compute_tile).
    unsigned a_off[KSTEPS], b_off[B_OFFSETS];
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) a_off[s] = swizzle_bytes<A_CHUNKS>(wr + lane % 16, 2 * s + lane / 16);
#if TN
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s)
        b_off[s] = A_TILE_BYTES + swizzle_bytes<B_CHUNKS>(wc + lane % 8 + 8 * (lane / 16), 2 * s + (lane / 8) % 2);
#else
#pragma unroll
    for (int p = 0; p < NI / 2; ++p)
        b_off[p] = A_TILE_BYTES + swizzle_bytes<B_CHUNKS>(lane % 8 + 8 * ((lane / 8) % 2), (wc + 16 * p) / 8 + lane / 16);
#endif

    float acc[MI][NI][4] = {};

    const int k_tiles = (K + BK - 1) / BK;
    // Prologue: tiles 0 .. STAGES-2 in flight, one commit group each (empty groups past the end keep
    // the count uniform, so the wait below always means "tile kt has landed").
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_stage(base + s * STAGE_BYTES, A, lda, B, ldb, M, N, K, row0, col0, s * BK);
        cp_async_commit();
    }
    // Byte offsets of the stage holding tile kt (read) and of the one tile kt + STAGES - 1 goes to.
    unsigned read = 0, write = (STAGES - 1) * STAGE_BYTES;
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt are done ...
        __syncthreads();              // ... everyone's are, and every warp has finished reading tile kt-1
        // Refill the stage tile kt-1 used (VEC = 1 stores into it directly: it is just as free).
        if (kt + STAGES - 1 < k_tiles)
            load_stage(base + write, A, lda, B, ldb, M, N, K, row0, col0, (kt + STAGES - 1) * BK);
        cp_async_commit();
        compute_tile(acc, base + read, a_off, b_off);
        read = read + STAGE_BYTES == SMEM_BYTES ? 0 : read + STAGE_BYTES;
        write = write + STAGE_BYTES == SMEM_BYTES ? 0 : write + STAGE_BYTES;
    }
    cp_async_wait<0>();  // only empty groups can be left; drain them anyway

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
