// softmax / rung 03 — the row held in registers: x read once, y written once, 16-byte accesses.
//
// What changed: each thread loads its share of the row once, as 16-byte vectors (float4, or 8 fp16 in a
//   uint4), into registers, up to VECS vectors per thread; the max, the sum and the output all work on
//   those registers. No second read, so no online rescaling either: with the whole row at hand the plain
//   max-then-sum (rung 01's order) costs no extra traffic. In fp32 the exponentials of the sum pass
//   overwrite the inputs in place (same registers), so the output pass only multiplies; in fp16 the
//   registers hold the packed inputs and the output pass recomputes exp (fewer registers).
// Why: one read and one write per element, the copy's traffic, with a quarter (fp32) or an eighth (fp16)
//   of the memory instructions of rungs 01-02, and VECS independent 16-byte loads in flight per thread.
// Prediction (H200, arrays ~256 MiB): ~0.8-0.9x of copy at n = 4096 (256 threads x 4 vectors fp32, x 2
//   fp16); lower at n = 128-1024, where a row is one or a few vectors per thread and most of a 256-thread
//   block idles (n = 128 fp32: 32 threads of 256 have work); rows longer than the registers hold take
//   rung 02's kernel (below), so n = 32768 measures as rung 02. Rung 04 specializes both ends.
// Alignment: vectors must be 16-byte aligned, and row i starts at x + i * n, so a row's first `head`
//   elements (fewer than a vector) up to the next 16-byte boundary, and the last `tail` ones, are scalar;
//   thread t < head holds head element t, thread t < tail holds tail element t, one register each. This
//   needs x and y to share their address mod 16 (then every row's head is the same for both).
// Long rows and misaligned pairs: the launcher (lab/families/softmax.py) runs this kernel only when
//   n <= THREADS * VECS * (4 fp32, 8 fp16) elements (8192 fp32, 16384 fp16 at the defaults) and x and y
//   agree mod 16; otherwise it launches rung 02's kernel (two reads, any n, any alignment), and the
//   record's launch notes say so.
// Definitions: as rung 01's header (masks, all -inf rows -> zeros, NaN / +inf -> NaN rows). Masked
//   vectors (starting at or past the row's length) are not loaded at all.
// Requires: sm_75+; any rows >= 1; n as above; x, y aligned to their element and to each other mod 16.
//   Launch: grid (rows), block (THREADS), no dynamic shared memory.
// Knobs: HALF (0: fp32 in and out; 1: fp16 in and out, fp32 statistics), THREADS (256), VECS (8: 16-byte
//   vectors per thread at most).
#include "lab_reduce.cuh"

#ifndef HALF
#define HALF 0
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VECS
#define VECS 8
#endif
static_assert(HALF == 0 || HALF == 1, "HALF is 0 (fp32) or 1 (fp16)");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS is a multiple of 32, at most 1024");
static_assert(VECS >= 1, "VECS is at least 1");

// --- storage type: fp32, or fp16 kept as its raw 16 bits (NVRTC has no cuda_fp16.h here) -------------
#if HALF
typedef unsigned short elem_t;
typedef uint4 vec_t;  // 8 fp16 values, element 2k in the low half of word k
#define VEC_ELEMS 8
#else
typedef float elem_t;
typedef float4 vec_t;
#define VEC_ELEMS 4
#endif

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));  // exact
    return f;
}
__device__ __forceinline__ unsigned short to_half(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));  // the output's only rounding to fp16
    return h;
}
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(unsigned short* p, float v) { *p = to_half(v); }

__device__ __forceinline__ void unpack(float4 v, float (&f)[4]) {
    f[0] = v.x;
    f[1] = v.y;
    f[2] = v.z;
    f[3] = v.w;
}
__device__ __forceinline__ float4 pack(const float (&f)[4]) { return make_float4(f[0], f[1], f[2], f[3]); }
__device__ __forceinline__ void unpack_word(unsigned w, float& lo, float& hi) {
    lo = to_float(static_cast<unsigned short>(w & 0xffffu));
    hi = to_float(static_cast<unsigned short>(w >> 16));
}
__device__ __forceinline__ void unpack(uint4 v, float (&f)[8]) {
    unpack_word(v.x, f[0], f[1]);
    unpack_word(v.y, f[2], f[3]);
    unpack_word(v.z, f[4], f[5]);
    unpack_word(v.w, f[6], f[7]);
}
__device__ __forceinline__ uint4 pack(const float (&f)[8]) {
    unsigned w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = to_half(f[2 * k]) | (static_cast<unsigned>(to_half(f[2 * k + 1])) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// --- the softmax definitions every rung shares (see rung 01's header) -----------------------------
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ int valid_length(const int* lengths, int row, int n) {
    return lengths ? min(max(lengths[row], 0), n) : n;
}
__device__ __forceinline__ float safe_shift(float m) { return m == NEG_INF ? 0.0f : m; }
// exp(v - shift) = 2^((v - shift) * log2(e)) on the SFU: what __expf does, with subnormal results flushed
// to 0 (.ftz) instead of the fix-up code plain ex2.approx.f32 needs. exp(-inf) = 0, exp(NaN) = NaN.
__device__ __forceinline__ float exp_shifted(float v, float shift) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"((v - shift) * 1.4426950408889634f));
    return r;
}
// 1 / sum (rcp.approx: within an ulp; the sum is 0, NaN, or in [1, n], never subnormal), 0 for an empty
// sum (every exponential 0: 0 * (1/0) would be NaN); a NaN sum stays NaN.
__device__ __forceinline__ float inv_sum(float s) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return s == 0.0f ? 0.0f : r;
}

// The vector with its elements from `valid` on (valid < VEC_ELEMS; may be <= 0) set to -inf.
__device__ __forceinline__ vec_t masked(vec_t v, int valid) {
    float f[VEC_ELEMS];
    unpack(v, f);
#pragma unroll
    for (int e = 0; e < VEC_ELEMS; ++e) f[e] = e < valid ? f[e] : NEG_INF;
    return pack(f);  // exact: fp16 -> fp32 -> fp16 round-trips
}
__device__ __forceinline__ vec_t all_neg_inf() {
    float f[VEC_ELEMS];
#pragma unroll
    for (int e = 0; e < VEC_ELEMS; ++e) f[e] = NEG_INF;
    return pack(f);
}

// Elements before the row's first 16-byte boundary (at most n): the scalar head.
__device__ __forceinline__ int head_length(const elem_t* row_start, int n) {
    const int misalign = static_cast<int>(reinterpret_cast<unsigned long long>(row_start) & 15);
    return min(n, ((16 - misalign) & 15) / static_cast<int>(sizeof(elem_t)));
}

// At most 64 registers (1024 threads' worth per SM): without the minimum, ptxas trades a few spills for a
// fifth block per SM at 256 threads.
extern "C" __global__ void __launch_bounds__(THREADS, 1024 / THREADS)
softmax_single_pass(const elem_t* __restrict__ x, elem_t* __restrict__ y, const int* __restrict__ lengths,
                    int rows, int n) {
    __shared__ float scratch[32];
    const int row = blockIdx.x, t = threadIdx.x;
    const elem_t* xr = x + (long long)row * n;
    elem_t* yr = y + (long long)row * n;
    const int len = valid_length(lengths, row, n);
    const int head = head_length(xr, n);
    const int nvec = (n - head) / VEC_ELEMS;
    const int tail_start = head + nvec * VEC_ELEMS;  // n - tail_start < VEC_ELEMS
    const vec_t* xv = reinterpret_cast<const vec_t*>(xr + head);
    vec_t* yv = reinterpret_cast<vec_t*>(yr + head);

    // Load: thread t holds vectors t, t + THREADS, ... and at most one head and one tail element. Masked
    // elements hold -inf from here on (a vector wholly past the length is not read), so the max and the
    // sum need no test: exp(-inf - shift) = 0.
    vec_t v[VECS];
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS, first = head + i * VEC_ELEMS;
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
        const int i = t + k * THREADS;
        if (i < nvec) {
            float f[VEC_ELEMS];
            unpack(v[k], f);
#pragma unroll
            for (int e = 0; e < VEC_ELEMS; ++e) m = fmaxf(m, f[e]);
        }
    }
    const float shift = safe_shift(block_max(m, scratch));

    // The sum of exponentials (fp32: kept in place of the inputs).
    hv = exp_shifted(hv, shift);  // -inf (absent or masked) -> 0
    tv = exp_shifted(tv, shift);
    float s = hv + tv;
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS;
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
    const float inv = inv_sum(block_sum(s, scratch));

    // The output: masked elements are exactly 0 (even in a NaN row, where inv is NaN).
    if (hj < head) store(yr + hj, hj < len ? hv * inv : 0.0f);
    if (tj < n) store(yr + tj, tj < len ? tv * inv : 0.0f);
#pragma unroll
    for (int k = 0; k < VECS; ++k) {
        const int i = t + k * THREADS;
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
