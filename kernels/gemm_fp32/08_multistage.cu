// gemm_fp32 / rung 08 — multistage: a STAGES-deep cp.async pipeline from global to shared memory,
// fragments double-buffered in registers, and a block tile tuned on the H200.
//
// What changed (vs rung 07, whose 128x128x16 tile, 32x64 warp tiles and 8x8 thread tiles it keeps
// as knobs; the tuned defaults are below):
//   1. Shared memory holds STAGES k-tiles (dynamic shared memory), filled with cp.async, which
//      copies global -> shared without passing through registers and without stalling the thread
//      (SASS: LDGSTS; the compile report's few scalar LDS are ptxas's never-executed
//      `@!PT LDS RZ, [RZ]` fillers beside them, not loads). While the block computes on tile kt,
//      tiles kt+1 .. kt+STAGES-1 are in flight.
//   2. One barrier per k-tile instead of two: the barrier that publishes tile kt+1 also proves that
//      every warp has finished reading tile kt, so that buffer is refilled straight after it.
//   3. A is transposed by the copy itself: one 4-byte cp.async per element, A[m][k] -> As[k][m]. The
//      lanes of a warp take 8 consecutive k of 4 rows (one full 32-byte sector per row) and write
//      banks 4*k + m mod 32, all different. B keeps its layout: 16-byte cp.async when VEC = 4,
//      4-byte when VEC = 1. At the edges an out-of-range copy reads 0 bytes (src-size 0) and
//      zero-fills, and a float4 of B that straddles column N reads only its in-range bytes; those
//      checks run only for k-tiles that touch an edge (a block-uniform branch), not in the interior.
//      (cuBLAS's own FFMA kernel on the H200 moves A the same way: Nsight Compute shows the same
//      12% "excessive" shared-store wavefronts for both, results/h200/gemm_ncu_detailed.txt.)
//   4. Shared memory is addressed through per-thread 32-bit shared-window addresses plus a stage
//      byte offset, so every LDS and cp.async inside a k-tile is [register + constant] (see Measured).
//   5. FRAG_DB = 1: the fragments of k-step k+1 are loaded (LDS) before k-step k's FFMAs, and the
//      barrier for tile kt+1 sits inside tile kt's last k-step, so the first LDS of the next tile
//      overlap the last FFMAs of this one (CUTLASS's multistage mainloop does the same).
//   6. ORDER = 1: the outer product walks odd rows backwards (a serpentine, as CUTLASS's SIMT
//      thread-level MMA does), so consecutive FFMAs share an operand for the register reuse cache.
//   7. On sm_75 (no cp.async) a fallback is compiled instead: register double buffering. Tile kt+1
//      is loaded into registers (its LDGs in flight) while tile kt is computed from shared memory,
//      then stored to the other buffer; one barrier per k-tile; it uses 2 of the STAGES buffers.
// Why: in rung 07 a block issues tile k+1's loads only after computing tile k, then waits out a
//   whole global-memory latency with nothing to do, and only the other resident block fills that
//   gap. Here each wait is covered by STAGES-1 tiles of compute, the tiles no longer pass through
//   registers, and half the barriers are gone.
// Prediction (written before any GPU run): 1.05-1.2x over rung 07 at 4096^3 and 8192^3, about
//   0.85-1.0x of cuBLAS SGEMM on the H200; STAGES = 4 no faster than 3; STAGES = 2 within a few %.
// Measured (H200; the ladder's figures in results/h200/gemm_fp32.json, the tuning behind them in
//   results/h200/gemm_tuning.json, five rounds of scripts/gemm_sweep.py; cuBLAS timed in every run):
//   - With rung 07's tile (128x128x16, 3 stages) rung 08 first ran 1.04-1.05x rung 07 and 0.84-0.86x
//     cuBLAS; STAGES 2, 3, 4 within 0.5% of each other, as predicted: at 16 warps per SM the
//     memory latency was already hidden, so the pipeline's gain was mostly the halved barriers.
//   - Rounds 1-4 (67 settings: tiles 64x128 to 256x128, thread tiles 4x8 to 16x8, BK 8/16/32,
//     2-5 stages, 1-3 blocks per SM, FRAG_DB, ORDER, grouped block order) all landed at
//     0.70-0.90x: the limit was not the tile shape. Nsight Compute at 4096^3
//     (results/h200/gemm_ncu_*.txt) showed why. cuBLAS runs an FFMA kernel with a 256x128x8 tile,
//     3 stages, 8 warps and 254 registers (sm80_xmma_gemm_f32f32_..._tilesize256x128x8_stage3);
//     given that tiling this rung executed 4% more instructions and issued 10% fewer per cycle
//     (3.24 against 3.59), losing 0.27 cycles per instruction to dispatch stalls (cuBLAS 0.10)
//     and 0.12 to fixed-latency waits (cuBLAS 0.01). The SASS (NVRTC 13.0, the H200 image's)
//     showed the source: addressing shared memory through generic pointers indexed by a run-time
//     stage made it recompute addresses per access, 373 non-FFMA instructions per k-tile in the
//     main loop against 1024 FFMAs (NVRTC 13.5 builds leaner code from the same source).
//   - Round 5, after the change to per-thread 32-bit shared addresses plus a stage byte offset
//     (233 non-FFMA per k-tile, both copy paths counted; the compute part is now 1024 FFMA, 64
//     LDS.128 and about a dozen other instructions): the same 64x128 setting went from 0.87-0.90x
//     to 0.99x of cuBLAS in one step (+14%). In that round 128x128 tiles with 2 blocks per SM
//     reached 1.002x at 8192^3 but 0.98x at 4096^3 and lost 18% at 4097^3.
//   - The recorded ladder (lab bench, defaults below): 0.991x cuBLAS at 4096^3 and 0.976x at
//     8192^3 (0.99x there in the tuning round, with more repetitions); 0.97x at 4095^3 and 0.98x
//     at 4097^3, which lose 10% and 15% of the 4096^3 throughput (cuBLAS itself loses 8% and 14%).
//     Reached: 0.98-0.99x, not the 1.00x target. Next: the copy paths' integer work (global
//     addresses per k-tile), and a persistent schedule for the partial last wave of tiles.
// Tails: zeros outside A and B (zero-fill on sm_80+); per-element or whole-float4 guarded stores;
//   C not read when beta == 0.
// Requires: sm_75+ (cp.async path on sm_80+, register double-buffered fallback on sm_75); any M, N,
//   K >= 1. VEC = 4 only when lda, ldb, ldc are multiples of 4 and A, B, C are 16-byte aligned (the
//   launcher's check); VEC = 1 takes any leading dimensions and any 4-byte alignment. Launch: 1-D
//   blocks of THREADS = 32*(BM/WM)*(BN/WN) threads, grid (ceil(N/BN), ceil(M/BM)), dynamic shared
//   memory SMEM_BYTES = STAGES*(BK*(BM+4) + BK*BN)*4 bytes (50176 at the defaults; the A tile's rows
//   are padded by 4 floats), with cudaFuncAttributeMaxDynamicSharedMemorySize set above 48 KB. Given
//   less, the kernel traps at once (it reads %dynamic_smem_size) instead of overrunning the buffer.
// Knobs (family defaults in lab/families/gemm.py; the #defines below are rung 07's tile):
//   BM 64, BN 128, BK 16, WM 32, WN 64, TM 8, TN 8, THREADS 128, STAGES 4, MINB 3 (blocks per SM
//   promised to ptxas: registers <= 65536 / (3 * 128)), FRAG_DB 1, ORDER 1, VEC 4/1 (launcher).
//   At the defaults it compiles to 128 registers and 50176 bytes of shared memory a block, so
//   (lab/occupancy.py) four blocks, 16 warps, fit an sm_90 SM (registers and shared memory both
//   allow four), three an sm_80 SM, two an sm_86/89 SM and one an sm_75 SM (the launcher opts in to
//   the 49 KB).
//   results/h200/gemm_ladder.md has every rung's registers, shared memory and occupancy.
// Ideas from NVIDIA's PTX ISA (cp.async, cp.async.commit_group/wait_group), the CUDA C++
//   Programming Guide's asynchronous-copy pipelines, and CUTLASS's multistage mainloop and SIMT
//   thread MMA ("Efficient GEMM in CUDA", software pipelining, serpentine FFMA order); code is this
//   lab's own.
#include "lab_cp_async.cuh"

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
#ifndef STAGES
#define STAGES 3  // k-tiles resident in shared memory (>= 2); the sm_75 fallback uses 2 of them
#endif
#ifndef VEC
#define VEC 4  // 4: float4 global loads/stores (launcher checks alignment); 1: scalar, any layout
#endif
#ifndef MINB
#define MINB 2  // blocks per SM promised to ptxas on sm_80+ (2 caps registers at 128 with 256 threads)
#endif
#ifndef FRAG_DB
#define FRAG_DB 0  // 1: fragments double-buffered in registers, also across the k-tile boundary (sm_80+)
#endif
#ifndef ORDER
#define ORDER 0  // FFMA order in a k-step: 0 row-major, 1 serpentine (see outer_product)
#endif

#define AS_STRIDE (BM + 4)                 // padded row of the transposed A tile, in floats
#define A_SLOTS (BM * BK / 4 / THREADS)    // float4s of A each thread loads per k-tile
#define B_SLOTS (BK * BN / 4 / THREADS)    // float4s of B each thread loads per k-tile
#define LANES_M (WM / TM)                  // lanes along M in a warp tile
#define LANES_N (WN / TN)                  // lanes along N in a warp tile
#define A_ELEMS (BM * BK / THREADS)        // cp.asyncs of one float of A per thread per k-tile
#define A_ROW(i) ((i) * (THREADS / 8) % BM)       // tile row of copy i, past this thread's first row
#define A_COL(i) (8 * ((i) * (THREADS / 8) / BM)) // tile column (k) of copy i, past its first column
#define B_COPIES (BK * BN / VEC / THREADS)  // cp.asyncs of VEC floats of B per thread per k-tile
#define B_PASS (THREADS / (BN / VEC))       // B tile rows covered by one pass of the block
#define STAGE_FLOATS (BK * AS_STRIDE + BK * BN)  // one stage: As[BK][BM+4], then Bs[BK][BN]
#define STAGE_BYTES (STAGE_FLOATS * 4)          // one stage, in bytes (the stride between stages)
#define SMEM_BYTES (STAGES * STAGE_BYTES)        // what the launcher must pass as dynamic shared memory

static_assert(VEC == 4 || VEC == 1, "VEC is 4 (float4 global access) or 1 (scalar)");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0, "tiles divide evenly");
static_assert(LANES_M * LANES_N == 32, "a warp tile holds exactly 32 thread tiles");
static_assert(THREADS == 32 * (BM / WM) * (BN / WN), "one warp per WM x WN warp tile of the block tile");
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4x4 quadrants");
static_assert(BK % 8 == 0 && BM % 32 == 0 && BN % 4 == 0, "A loads go in pairs of float4 along k (32 bytes)");
static_assert(A_SLOTS * 4 * THREADS == BM * BK && B_SLOTS * 4 * THREADS == BK * BN,
              "every thread loads the same whole number of float4s of A and of B");
static_assert(STAGES >= 2, "a pipeline needs at least two buffers");
static_assert(BK % 2 == 0, "FRAG_DB alternates two fragment buffers over the k-steps of a tile");
static_assert(BM % (THREADS / 8) == 0 && A_ELEMS * THREADS == BM * BK, "A copies: whole passes of THREADS/8 rows");
static_assert(THREADS % (BN / VEC) == 0 && B_COPIES * VEC * THREADS == BK * BN, "B copies: whole rows per pass");
static_assert((BK * AS_STRIDE * 4) % 16 == 0 && (STAGE_FLOATS * 4) % 16 == 0, "every buffer starts 16-byte aligned");

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

// Global -> registers: this thread's float4s of the k-tile starting at k0. (In this rung, load_tile and
// store_tile serve only the sm_75 fallback; sm_80+ copies with load_tile_async below.)
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

// One k-step's fragments: this thread's TM values of A's column k and TN values of B's row k. Its
// rows in the block tile are tr0 + i*LANES_M + 0..3 for i = 0, 4, .., TM-4 (tr0 = warp row + lm*4)
// and its columns tc0 + j*LANES_N + 0..3 (tc0 = warp column + ln*4): 4x4 quadrants LANES_M*4 rows
// and LANES_N*4 columns apart. TM/4 + TN/4 LDS.128, each conflict-free for a quarter warp.
// a_row and b_row are the shared-window addresses of As[k][tr0] and Bs[k][tc0] in the stage being
// read: with k a constant of the unrolled loop, every load is [one register + an immediate].
__device__ __forceinline__ void load_fragments(float (&a)[TM], float (&b)[TN], unsigned a_row, unsigned b_row) {
    // BEGIN SOLUTION: this thread's TM values of As row k and TN of Bs row k, as float4 loads (TM/4 + TN/4 LDS.128).
#pragma unroll
    for (int i = 0; i < TM; i += 4) {
        const float4 v = lds128(a_row + 4 * i * LANES_M);
        a[i + 0] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
        const float4 v = lds128(b_row + 4 * j * LANES_N);
        b[j + 0] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
    }
    // END SOLUTION
}

// The outer product of one k-step: TM x TN FFMAs. ORDER = 1 walks the columns of odd rows backwards
// (a serpentine, as CUTLASS's SIMT thread-level MMA does), so consecutive FFMAs always share an
// operand, which the register reuse cache can then serve; ORDER = 0 is plain row-major.
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float (&a)[TM], const float (&b)[TN]) {
    // BEGIN SOLUTION: the TM x TN FFMAs acc[i][j] += a[i] * b[j], in the order ORDER says.
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
            const int j = (ORDER == 1 && (i & 1)) ? TN - 1 - jj : jj;
            acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    // END SOLUTION
}

// acc += the whole k-tile's contribution (the sm_75 fallback, and sm_80+ with FRAG_DB = 0); a_frag
// and b_frag are this thread's As[0][tr0] and Bs[0][tc0] in the stage, as shared-window addresses.
__device__ __forceinline__ void compute_tile(float (&acc)[TM][TN], unsigned a_frag, unsigned b_frag) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        float a_reg[TM], b_reg[TN];
        load_fragments(a_reg, b_reg, a_frag + 4 * k * AS_STRIDE, b_frag + 4 * k * BN);
        outer_product(acc, a_reg, b_reg);
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Global -> shared memory without registers: this thread's cp.asyncs for the k-tile starting at k0.
// A, 4 bytes each, transposed on the way: 8 consecutive lanes copy 8 consecutive k of one row, a
//   pass of the block covers THREADS/8 rows, so element i of thread t is tile row t/8 + A_ROW(i),
//   tile column (k) t%8 + A_COL(i), written to As[k][m].
// B, VEC floats each (16-byte or 4-byte copies), layout kept: BN/VEC lanes cover one tile row, so
//   copy i of thread t is tile row t/(BN/VEC) + i*B_PASS, columns VEC*(t%(BN/VEC)) + 0..VEC-1.
// GUARD = false (the whole k-tile is inside A and B) copies with no checks. GUARD = true: an
//   out-of-range source copies 0 bytes from the matrix's base pointer (valid memory) and zero-fills;
//   a float4 of B that straddles column N copies only its in-range bytes.
// a_dst and b_dst are this thread's first destinations in the stage (As[t%8][t/8] and
//   Bs[t/(BN/VEC)][VEC*(t%(BN/VEC))]) as shared-window addresses: every copy adds a constant.
template <bool GUARD>
__device__ __forceinline__ void copy_tile(unsigned a_dst, unsigned b_dst, const float* __restrict__ A, int lda,
                                          const float* __restrict__ B, int ldb, int M, int N, int K, int row0, int col0,
                                          int k0) {
    const int am = threadIdx.x / 8, ak = threadIdx.x % 8;
    const float* a = A + (long long)(row0 + am) * lda + (k0 + ak);
#pragma unroll
    for (int i = 0; i < A_ELEMS; ++i) {
        const float* src = a + (long long)A_ROW(i) * lda + A_COL(i);
        const bool in = !GUARD || (row0 + am + A_ROW(i) < M && k0 + ak + A_COL(i) < K);
        cp_async_4_at(a_dst + 4 * (A_COL(i) * AS_STRIDE + A_ROW(i)), in ? src : A, in ? 4 : 0);
    }
    const int bk = threadIdx.x / (BN / VEC), bn = VEC * (threadIdx.x % (BN / VEC));
    const float* b = B + (long long)(k0 + bk) * ldb + (col0 + bn);
#pragma unroll
    for (int i = 0; i < B_COPIES; ++i) {
        const float* src = b + (long long)(i * B_PASS) * ldb;
        const int bytes = !GUARD ? 4 * VEC : (k0 + bk + i * B_PASS < K ? 4 * min(max(N - (col0 + bn), 0), VEC) : 0);
#if VEC == 4
        cp_async_16_at(b_dst + 4 * (i * B_PASS * BN), bytes ? src : B, bytes);
#else
        cp_async_4_at(b_dst + 4 * (i * B_PASS * BN), bytes ? src : B, bytes);
#endif
    }
}

// The k-tile starting at k0 into one stage; the checks are paid only at the matrix's edges.
__device__ __forceinline__ void load_tile_async(unsigned a_dst, unsigned b_dst, const float* __restrict__ A, int lda,
                                                const float* __restrict__ B, int ldb, int M, int N, int K, int row0,
                                                int col0, int k0) {
    if (row0 + BM <= M && col0 + BN <= N && k0 + BK <= K)  // the same for the whole block: no divergence
        copy_tile<false>(a_dst, b_dst, A, lda, B, ldb, M, N, K, row0, col0, k0);
    else
        copy_tile<true>(a_dst, b_dst, A, lda, B, ldb, M, N, K, row0, col0, k0);
}
#endif

// On sm_80+ promise ptxas MINB resident blocks per SM, which caps registers at 65536 / (MINB *
// THREADS) (the defaults fit with no spills). On sm_75 SMEM_BYTES (over 32 KB at the defaults)
// already limits Turing's 64 KB to one block per SM, so the fallback is left free to use more.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MIN_BLOCKS_PER_SM 1
#else
#define MIN_BLOCKS_PER_SM MINB
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
sgemm_multistage(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                 const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
    extern __shared__ float4 smem[];  // STAGES x (As[BK][BM+4], Bs[BK][BN]): SMEM_BYTES in all
    float* const tiles = reinterpret_cast<float*>(smem);
    if (dynamic_smem_size() < SMEM_BYTES) __trap();  // launched with too little: stop, do not overrun it

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tr0 = (warp / (BN / WN)) * WM + (lane / LANES_N) * 4;  // warp tile row + lm*4
    const int tc0 = (warp % (BN / WN)) * WN + (lane % LANES_N) * 4;  // warp tile column + ln*4

    float acc[TM][TN] = {};

    // Shared memory by 32-bit shared-window address: one register per stream of accesses (this
    // thread's A and B copy destinations, its A and B fragment rows), plus a byte offset for the
    // stage, so that each access inside a k-tile is [register + constant]. (With generic pointers
    // indexed by a run-time stage, NVRTC 13.0 recomputed most addresses per access: 373 non-FFMA
    // instructions per k-tile in the main loop against 1024 FFMAs.)
    const unsigned base = smem_u32addr(tiles);
    const unsigned a_frag = base + 4 * tr0;                  // As[0][tr0] of stage 0
    const unsigned b_frag = base + 4 * (BK * AS_STRIDE + tc0);  // Bs[0][tc0] of stage 0

    const int k_tiles = (K + BK - 1) / BK;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a_dst = base + 4 * ((threadIdx.x % 8) * AS_STRIDE + threadIdx.x / 8);
    const unsigned b_dst = base + 4 * (BK * AS_STRIDE + (threadIdx.x / (BN / VEC)) * BN + VEC * (threadIdx.x % (BN / VEC)));
    // Prologue: tiles 0 .. STAGES-2 in flight, one commit group each (empty groups past the end
    // keep the count uniform, so the wait below always means "tile kt has landed").
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles)
            load_tile_async(a_dst + s * STAGE_BYTES, b_dst + s * STAGE_BYTES, A, lda, B, ldb, M, N, K, row0, col0, s * BK);
        cp_async_commit();
    }
    // Byte offsets of the stage holding tile kt (read) and of the one tile kt + STAGES - 1 goes to.
    unsigned read = 0, write = (STAGES - 1) * STAGE_BYTES;
#if FRAG_DB
    // Fragments double-buffered in registers: k-step k+1's LDS are issued before k-step k's FFMAs,
    // so their latency hides behind 64 FFMAs. The barrier for tile kt+1 sits inside tile kt's last
    // k-step, before that step's FFMAs, so the first LDS of the next tile overlaps them too
    // (CUTLASS's multistage mainloop does the same).
    float fa[2][TM], fb[2][TN];
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_fragments(fa[0], fb[0], a_frag, b_frag);
    for (int kt = 0; kt < k_tiles; ++kt) {
        // Refill the stage that tile kt-1 used: every warp passed the barrier after its last LDS.
        if (kt + STAGES - 1 < k_tiles)
            load_tile_async(a_dst + write, b_dst + write, A, lda, B, ldb, M, N, K, row0, col0, (kt + STAGES - 1) * BK);
        cp_async_commit();
        const unsigned next = read + STAGE_BYTES == STAGES * STAGE_BYTES ? 0 : read + STAGE_BYTES;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k < BK - 1) {
                load_fragments(fa[(k + 1) & 1], fb[(k + 1) & 1], a_frag + read + 4 * (k + 1) * AS_STRIDE,
                               b_frag + read + 4 * (k + 1) * BN);
            } else {
                cp_async_wait<STAGES - 2>();  // tile kt+1 has landed (this thread's copies) ...
                __syncthreads();              // ... everyone's, and every warp is done reading tile kt
                if (kt + 1 < k_tiles) load_fragments(fa[0], fb[0], a_frag + next, b_frag + next);
            }
            outer_product(acc, fa[k & 1], fb[k & 1]);
        }
        read = next;
        write = write + STAGE_BYTES == STAGES * STAGE_BYTES ? 0 : write + STAGE_BYTES;
    }
#else
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt are done ...
        __syncthreads();              // ... everyone's are, and everyone has finished tile kt-1
        if (kt + STAGES - 1 < k_tiles)
            load_tile_async(a_dst + write, b_dst + write, A, lda, B, ldb, M, N, K, row0, col0, (kt + STAGES - 1) * BK);
        cp_async_commit();
        compute_tile(acc, a_frag + read, b_frag + read);
        read = read + STAGE_BYTES == STAGES * STAGE_BYTES ? 0 : read + STAGE_BYTES;
        write = write + STAGE_BYTES == STAGES * STAGE_BYTES ? 0 : write + STAGE_BYTES;
    }
#endif
    cp_async_wait<0>();  // only empty groups can be left; drain them anyway
#else
    // sm_75: register double buffering over stages 0 and 1.
    float4 a[A_SLOTS], b[B_SLOTS];
    load_tile(a, b, A, lda, B, ldb, M, N, K, row0, col0, 0);
    store_tile(tiles, tiles + BK * AS_STRIDE, a, b);
    __syncthreads();
    for (int kt = 0; kt < k_tiles; ++kt) {
        const bool more = kt + 1 < k_tiles;
        const int cur = kt & 1, nxt = cur ^ 1;
        if (more) load_tile(a, b, A, lda, B, ldb, M, N, K, row0, col0, (kt + 1) * BK);  // in flight during compute
        compute_tile(acc, a_frag + cur * STAGE_BYTES, b_frag + cur * STAGE_BYTES);
        if (more) store_tile(tiles + nxt * STAGE_FLOATS, tiles + nxt * STAGE_FLOATS + BK * AS_STRIDE, a, b);
        __syncthreads();  // the stores are visible, and tile kt-1's buffer (the next store target) is free
    }
#endif

#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, ldc, row0 + tr0 + (r / 4) * 4 * LANES_M + r % 4, col0 + tc0 + j * LANES_N, M, N, alpha, beta,
                   &acc[r][j]);
}
