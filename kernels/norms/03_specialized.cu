// norms / rung 03 — specialized by row length: a warp per short row, a block sized to a long one.
//
// What changed: rung 02 gave every row a block of THREADS = 256 threads whatever its length. Now the
//   launcher picks the kernel's shape from n (and says which in the record's launch notes):
//   - WARP_ROW = 1, rows of at most 32 * ELEMS = 1024 values: one warp per row, WARPS rows per block. The
//     row's sums are warp shuffles alone: no shared memory, no __syncthreads. The grid holds as many
//     blocks as fit on the GPU at once and each warp strides over the rows (a 2 KB row is too little work
//     to launch a block for).
//   - WARP_ROW = 0, longer rows: one block per row, of just enough warps that each thread holds at most
//     ELEMS values: 32 * ceil(n / (32 * ELEMS)) threads (128 at n = 4096, 1024 at n = 32768), so rows up
//     to 1024 * ELEMS = 32768 values stay in registers; longer ones fall back to two reads, as in rung 02.
// Why: at n = 1024 rung 02 leaves half of its 256 threads idle and pays two block barriers per sum on a
//   2 KB row; a warp's row needs five shuffles per sum. At n = 32768 rung 02 reads the row twice (past its
//   8192 values); here it is read once. In between (n = 4096-8192) little changes but the block size:
//   128-256 threads, so more rows in flight per SM. (The split by row length is the one OneFlow's CUDA
//   layer_norm.cuh makes between a warp per row, a block per row cached on chip and an uncached block;
//   the idea, not its code.)
// Prediction: 0.9-0.97x of the device copy for 1024 <= n <= 8192, both norms and types (what this rung is for);
//   0.85-0.95x at n = 32768, where a row takes a 1024-thread block of more than 32 registers a thread, so
//   an SM holds one row and nothing loads while it reduces; 0.8-0.95x at n = 512.
//   Against rung 02: +5-30% over rung 02 at n = 1024, 1.3-1.8x rung 02 at n = 32768, within 5% of it at
//   n = 4096-8192.
// Tails and alignment: as rung 02 (VEC from n and the pointers' alignment; whole packs, no tails).
// Left for later: at n = 32768 a row staged in shared memory (64 KB: three rows per SM), or split over a
//   thread-block cluster, would keep loads in flight while a row reduces.
// Measured: results/h200/rmsnorm.json and layernorm.json (cold L2, the device copy in the same run; notebook 07
//   replays them against this prediction). Odd n fall to 2-byte accesses (VEC = 1), which the prediction leaves out.
//   An attempt at those tails (a per-row scalar head, 16-byte body and tail with w and b shifted in registers,
//   and a one-round Chan merge for LayerNorm's block statistics) lifted RMSNorm's tails but cost LayerNorm at
//   n >= 4096, and was reverted: results/h200/rmsnorm_headtail_c89eb79.json and layernorm_headtail_c89eb79.json.
//   Next: the head/tail alone, measured per norm, then the LayerNorm block path's registers.
// Requires: sm_80+; any n >= 1, any rows. Launch: WARP_ROW = 1: blocks of 32 * WARPS threads, grid up to
//   the GPU's resident blocks; WARP_ROW = 0: grid (rows), blocks of 32 * ceil(n / (32 * ELEMS)) threads,
//   at most 1024 (the kernel takes any multiple of 32 and falls back to two reads past its registers).
// Knobs: BF16 (0), VEC (8), ELEMS (32), WARP_ROW (0: the launcher sets 1 when n <= 32 * ELEMS), WARPS (4).
#ifndef BF16
#define BF16 0
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef ELEMS
#define ELEMS 32
#endif
#ifndef WARP_ROW
#define WARP_ROW 0
#endif
#ifndef WARPS
#define WARPS 4
#endif

#define CHUNKS (ELEMS / VEC)  // packs a thread holds
#if WARP_ROW
#define LAUNCH_BOUNDS __launch_bounds__(32 * WARPS)
#else
#define LAUNCH_BOUNDS __launch_bounds__(1024, 1)  // <= 64 registers a thread: 32 values are 16 of them
#endif

#include "lab_mma.cuh"     // half_bits_to_float, float_to_half_bits: fp16 / bf16 bit patterns <-> fp32
#include "lab_reduce.cuh"  // warp_sum, block_sum

typedef unsigned short u16;

// VEC 16-bit values moved by one load or store (16 bytes at VEC = 8).
struct alignas(2 * VEC) Pack {
    u16 h[VEC];
};

__device__ __forceinline__ float value(const Pack& p, int k) { return half_bits_to_float<BF16>(p.h[k]); }

// A row's sum over the threads that share it: its warp's, or its block's.
__device__ __forceinline__ float row_sum(float v, float* scratch) {
#if WARP_ROW
    return warp_sum(v);
#else
    return block_sum(v, scratch);
#endif
}

// Rows longer than the registers hold: rung 01's two reads, in packs.
template <bool LAYER>
__device__ void norm_two_read(const Pack* __restrict__ xr, const Pack* __restrict__ wv,
                              const Pack* __restrict__ bv, Pack* __restrict__ yr, int packs, int n, float eps,
                              int t, int group, float* scratch) {
    float count = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int p = t; p < packs; p += group) {
        const Pack xp = xr[p];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float v = value(xp, k);
            if (LAYER) {
                count += 1.0f;
                const float d = v - mean;
                mean += __fdividef(d, count);
                m2 = fmaf(d, v - mean, m2);
            } else {
                m2 = fmaf(v, v, m2);
            }
        }
    }
    const float row_mean = LAYER ? __fdividef(row_sum(count * mean, scratch), n) : 0.0f;
    const float spread = LAYER ? fmaf(count * (mean - row_mean), mean - row_mean, m2) : m2;
    const float rstd = rsqrtf(__fdividef(row_sum(spread, scratch), n) + eps);
    for (int p = t; p < packs; p += group) {
        const Pack xp = xr[p], wp = wv[p];
        Pack bp, out;
        if (LAYER) bp = bv[p];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float v = (value(xp, k) - row_mean) * rstd * value(wp, k);
            if (LAYER) v += value(bp, k);
            out.h[k] = float_to_half_bits<BF16>(v);
        }
        yr[p] = out;
    }
}

// One row: xr, yr point at its packs, wv and bv at the weights' and biases'; this thread is thread t of
// the `group` threads that share the row.
template <bool LAYER>
__device__ __forceinline__ void norm_row(const Pack* __restrict__ xr, const Pack* __restrict__ wv,
                                         const Pack* __restrict__ bv, Pack* __restrict__ yr, int packs, int n,
                                         float eps, int t, int group, float* scratch) {
    if (packs > CHUNKS * group) {
        norm_two_read<LAYER>(xr, wv, bv, yr, packs, n, eps, t, group, scratch);
        return;
    }

    // The one read: every load issued before any is used. This thread holds packs t + c * group for
    // c < mine.
    const int mine = t < packs ? min(CHUNKS, (packs - t + group - 1) / group) : 0;
    Pack held[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine) held[c] = xr[t + c * group];

    // The mean (LayerNorm), then the sum of squares about it, both from registers.
    float row_mean = 0.0f;
    if (LAYER) {
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c)
            if (c < mine)
#pragma unroll
                for (int k = 0; k < VEC; ++k) sum += value(held[c], k);
        row_mean = __fdividef(row_sum(sum, scratch), n);
    }
    float sq = 0.0f;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
        if (c < mine)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float d = value(held[c], k) - row_mean;
                sq = fmaf(d, d, sq);
            }
    const float rstd = rsqrtf(__fdividef(row_sum(sq, scratch), n) + eps);

    // Normalize from registers; w and b through the cache.
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        if (c >= mine) continue;
        const int p = t + c * group;
        const Pack wp = wv[p];
        Pack bp, out;
        if (LAYER) bp = bv[p];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float v = (value(held[c], k) - row_mean) * rstd * value(wp, k);
            if (LAYER) v += value(bp, k);
            out.h[k] = float_to_half_bits<BF16>(v);
        }
        yr[p] = out;
    }
}

// WARP_ROW = 1: warp s of block i starts at row i * WARPS + s and strides over the rows by the grid's
// warps. WARP_ROW = 0: block r normalizes row r (no loop: a loop over rows would invite the compiler
// to keep every w and b address of the thread in registers across rows).
template <bool LAYER>
__device__ __forceinline__ void norm_rows(const u16* __restrict__ x, const u16* __restrict__ w,
                                          const u16* __restrict__ b, u16* __restrict__ y, int rows, int n,
                                          float eps) {
    __shared__ float scratch[32];
    if (n % VEC != 0) __trap();  // the launcher picks VEC to divide n
    const Pack* __restrict__ wv = reinterpret_cast<const Pack*>(w);
    const Pack* __restrict__ bv = reinterpret_cast<const Pack*>(b);
#if WARP_ROW
    for (long long row = (long long)blockIdx.x * WARPS + threadIdx.x / 32; row < rows;
         row += (long long)gridDim.x * WARPS) {
        const long long start = row * n;
        norm_row<LAYER>(reinterpret_cast<const Pack*>(x + start), wv, bv, reinterpret_cast<Pack*>(y + start),
                        n / VEC, n, eps, threadIdx.x % 32, 32, scratch);
    }
#else
    if (blockIdx.x >= rows) return;
    const long long start = (long long)blockIdx.x * n;
    norm_row<LAYER>(reinterpret_cast<const Pack*>(x + start), wv, bv, reinterpret_cast<Pack*>(y + start), n / VEC,
                    n, eps, threadIdx.x, blockDim.x, scratch);
#endif
}

extern "C" __global__ void LAUNCH_BOUNDS
rmsnorm_specialized(const u16* __restrict__ x, const u16* __restrict__ w, u16* __restrict__ y, int rows, int n,
                    float eps) {
    norm_rows<false>(x, w, nullptr, y, rows, n, eps);
}

extern "C" __global__ void LAUNCH_BOUNDS
layernorm_specialized(const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ b,
                      u16* __restrict__ y, int rows, int n, float eps) {
    norm_rows<true>(x, w, b, y, rows, n, eps);
}
