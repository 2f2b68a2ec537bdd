// softmax / rung 04 — specialized by row length: a warp per row, a block per row, or two reads.
//
// What changed: rung 03's row-in-registers body becomes one template, run by three kernels that the
//   launcher (lab/families/softmax.py) picks by n; the record's launch notes name the one it took.
//   - softmax_specialized_warp, n <= 32 * WARP_VECS * (4 fp32, 8 fp16) (1024 fp32, 2048 fp16): one warp
//     per row, WARP_ROWS rows per block. The reductions are warp_max / warp_sum (shuffles only): no
//     shared memory, no __syncthreads, and a warp that finishes its row leaves at once.
//   - softmax_specialized_block, up to 1024 * BLOCK_VECS * (4 fp32, 8 fp16) (32768 fp32, 65536 fp16):
//     rung 03 with the block's size picked per launch: the fewest warps that hold the row at BLOCK_VECS
//     vectors per thread (n = 4096: 128 threads fp32, 64 fp16; n = 32768: 1024 fp32, 512 fp16). The
//     registers are allocated for BLOCK_VECS vectors whatever a block uses, so filling them puts the most
//     bytes in flight per SM; rung 03's fixed 256 threads hold 1 vector each at n = 1024 fp32, and would
//     need 32 at n = 32768.
//   - softmax_specialized_long, longer rows (and x, y that differ mod 16, where no vector serves both):
//     rung 02's online statistics over 16-byte vectors, then a second read for the output; LONG_THREADS.
// Why: rung 03's one shape fits one range of n. Short rows left most of its block idle and paid block
//   barriers for a row a warp can hold; long rows did not fit and took rung 02's scalar two reads. Here
//   every n up to 32768 fp32 / 65536 fp16 keeps one read and one write, with up to 8 16-byte loads in
//   flight per thread.
// Prediction (H200, arrays ~256 MiB): ~0.85-0.95x of copy at n = 1024 (warp path, 8 vectors per lane in
//   fp32, 4 in fp16) and n = 4096 (block path), both dtypes; ~0.8-0.9x at n = 32768 (fp32: 1024-thread
//   blocks of ~60 registers, one row per SM at a time, so a row's load, reduce and store phases overlap
//   only across SMs; fp16: 512 threads, two rows per SM); n = 128 and 512 lower (~0.6-0.8x: a lane has 1-4
//   vectors in flight). Rows past 65536 fp16 / 32768 fp32 read x twice (the second read mostly from the
//   L2): ~0.6-0.75x.
// Alignment, tails, definitions: as rung 03's header (scalar head and tail per row, vectors in between;
//   masks, all -inf rows -> zeros, NaN / +inf -> NaN rows).
// Requires: sm_75+; any rows >= 1, any n >= 1; x, y element-aligned (the register paths also need x and y
//   to agree mod 16: the launcher sends other pairs to the long path, which then uses scalar accesses).
//   Launch: warp: grid (ceil(rows / WARP_ROWS)), block (32 * WARP_ROWS); block: grid (rows), block (32 to
//   1024, picked by n); long: grid (rows), block (LONG_THREADS). No dynamic shared memory.
// Knobs: HALF (0: fp32 in and out; 1: fp16 in and out, fp32 statistics), WARP_ROWS (8), WARP_VECS (8),
//   BLOCK_VECS (8), LONG_THREADS (1024).
#include "lab_reduce.cuh"

#ifndef HALF
#define HALF 0
#endif
#ifndef WARP_ROWS
#define WARP_ROWS 8
#endif
#ifndef WARP_VECS
#define WARP_VECS 8
#endif
#ifndef BLOCK_VECS
#define BLOCK_VECS 8
#endif
#ifndef LONG_THREADS
#define LONG_THREADS 1024
#endif
static_assert(HALF == 0 || HALF == 1, "HALF is 0 (fp32) or 1 (fp16)");
static_assert(WARP_ROWS >= 1 && WARP_ROWS <= 32, "WARP_ROWS is 1 to 32 (a block of at most 1024 threads)");
static_assert(WARP_VECS >= 1 && BLOCK_VECS >= 1, "WARP_VECS and BLOCK_VECS are at least 1");
static_assert(LONG_THREADS % 32 == 0 && LONG_THREADS <= 1024, "LONG_THREADS is a multiple of 32, at most 1024");

#include "lab_softmax.cuh"  // elem_t, vec_t, conversions, and the definitions every rung shares

// One row held in registers by `stride` threads (t = 0 .. stride - 1): a warp (WARP: shuffle reductions)
// or a whole block (shared scratch). Needs n - head <= stride * VECS * VEC_ELEMS and head, tail < stride.
template <int VECS, bool WARP>
__device__ __forceinline__ void softmax_row_in_registers(const elem_t* __restrict__ xr, elem_t* __restrict__ yr,
                                                         int n, int len, int t, int stride, float* scratch) {
    const int head = head_length(xr, n);
    const int nvec = (n - head) / VEC_ELEMS;
    const int tail_start = head + nvec * VEC_ELEMS;  // n - tail_start < VEC_ELEMS
    const vec_t* xv = reinterpret_cast<const vec_t*>(xr + head);
    vec_t* yv = reinterpret_cast<vec_t*>(yr + head);

    // Load: thread t holds vectors t, t + stride, ... and at most one head and one tail element. Masked
    // elements hold -inf from here on (a vector wholly past the length is not read), so the max and the
    // sum need no test: exp(-inf - shift) = 0.
    vec_t v[VECS];
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * stride, first = head + i * VEC_ELEMS;
        if (i < nvec) {
            v[k] = first < len ? xv[i] : all_neg_inf();
            if (first + VEC_ELEMS > len) v[k] = masked(v[k], len - first);
        }
    }
    const int hj = t, tj = tail_start + t;
    float hv = hj < head && hj < len ? to_float(xr[hj]) : NEG_INF;
    float tv = tj < n && tj < len ? to_float(xr[tj]) : NEG_INF;

    // The max.
    float m = fmaxf(hv, tv);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * stride;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) m = fmaxf(m, f[e]);
        }
    }
    const float shift = safe_shift(WARP ? warp_max(m) : block_max(m, scratch));

    // The sum of exponentials (fp32: kept in place of the inputs).
    hv = exp_shifted(hv, shift);  // -inf (absent or masked) -> 0
    tv = exp_shifted(tv, shift);
    float s = hv + tv;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * stride;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) {
                f[e] = exp_shifted(f[e], shift);
                s += f[e];
            }
#if !HALF
            v[k] = pack(f);
#endif
        }
    }
    const float inv = inv_sum(WARP ? warp_sum(s) : block_sum(s, scratch));

    // The output: masked elements are exactly 0 (even in a NaN row, where inv is NaN).
    if (hj < head) store(yr + hj, hj < len ? hv * inv : 0.0f);
    if (tj < n) store(yr + tj, tj < len ? tv * inv : 0.0f);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * stride;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) {
                const bool valid = head + i * VEC_ELEMS + e < len;
#if HALF
                f[e] = valid ? exp_shifted(f[e], shift) * inv : 0.0f;
#else
                f[e] = valid ? f[e] * inv : 0.0f;
#endif
            }
            yv[i] = pack(f);
        }
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARP_ROWS, 1024 / (32 * WARP_ROWS))
softmax_specialized_warp(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                         int rows, int n) {
    const int row = blockIdx.x * WARP_ROWS + threadIdx.x / 32;
    if (row >= rows) return;  // the whole warp: nothing below waits for the block
    const long long start = (long long)row * n;
    softmax_row_in_registers<WARP_VECS, true>(x + start, y + start, n, valid_length(lengths, row, n),
                                              threadIdx.x % 32, 32, nullptr);
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_specialized_block(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                          int rows, int n) {
    __shared__ float scratch[32];
    const int row = blockIdx.x;
    const long long start = (long long)row * n;
    softmax_row_in_registers<BLOCK_VECS, false>(x + start, y + start, n, valid_length(lengths, row, n),
                                                threadIdx.x, blockDim.x, scratch);
}

// Adds element v to a thread's running (max m, sum d of exp(. - m)): rung 02's online update.
__device__ __forceinline__ void online_add(float& m, float& d, float v) {
    if (v > m) {
        d = d * exp_shifted(m, v) + 1.0f;
        m = v;
    } else {
        d += exp_shifted(v, safe_shift(m));
    }
}

extern "C" __global__ void __launch_bounds__(LONG_THREADS)
softmax_specialized_long(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                         int rows, int n) {
    __shared__ float scratch[32];
    const int row = blockIdx.x, t = threadIdx.x;
    const elem_t* xr = x + (long long)row * n;
    elem_t* yr = y + (long long)row * n;
    const int len = valid_length(lengths, row, n);
    // x and y disagreeing mod 16: no vector serves both, so the whole row is the scalar "head".
    const bool together = ((reinterpret_cast<unsigned long long>(x) ^ reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    const int head = together ? head_length(xr, n) : n;
    const int nvec = (n - head) / VEC_ELEMS;
    const int tail_start = head + nvec * VEC_ELEMS;
    const vec_t* xv = reinterpret_cast<const vec_t*>(xr + head);
    vec_t* yv = reinterpret_cast<vec_t*>(yr + head);

    // Read 1: online max and sum over the valid elements.
    float m = NEG_INF, d = 0.0f;
    for (int j = t; j < head && j < len; j += LONG_THREADS) online_add(m, d, to_float(xr[j]));
    for (int i = t; i < nvec && head + i * VEC_ELEMS < len; i += LONG_THREADS) {
        float f[VEC_ELEMS];
        unpack(xv[i], f);
#pragma unroll
        for (int e = 0; e < VEC_ELEMS; ++e)
            if (head + i * VEC_ELEMS + e < len) online_add(m, d, f[e]);
    }
    for (int j = tail_start + t; j < len; j += LONG_THREADS) online_add(m, d, to_float(xr[j]));
    const float shift = safe_shift(block_max(m, scratch));
    const float inv = inv_sum(block_sum(d * exp_shifted(m, shift), scratch));

    // Read 2: the output (masked elements exactly 0, and not read).
    for (int j = t; j < head; j += LONG_THREADS) store(yr + j, j < len ? exp_shifted(to_float(xr[j]), shift) * inv : 0.0f);
    for (int i = t; i < nvec; i += LONG_THREADS) {
        float f[VEC_ELEMS];
        if (head + i * VEC_ELEMS < len) {
            unpack(xv[i], f);
        } else {
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) f[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < VEC_ELEMS; ++e)
            f[e] = head + i * VEC_ELEMS + e < len ? exp_shifted(f[e], shift) * inv : 0.0f;
        yv[i] = pack(f);
    }
    for (int j = tail_start + t; j < n; j += LONG_THREADS) store(yr + j, j < len ? exp_shifted(to_float(xr[j]), shift) * inv : 0.0f);
}
