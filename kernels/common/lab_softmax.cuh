// The softmax ladder's shared ground (kernels/softmax/): the storage type, its conversions and 16-byte vectors, and
// the definitions every rung follows, as rung 01's header states them (masked elements, rows of -inf, NaN, the
// exponential and the reciprocal the error bound accounts for). A rung defines HALF, then includes this file; what
// a rung changes (passes, online statistics, vector widths, clusters) stays in the rung.
#pragma once

#ifndef HALF
#error "define HALF (0: fp32, 1: fp16) before including lab_softmax.cuh"
#endif

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

// --- the definitions (kernels/softmax/01_three_pass.cu's header states them) ---------------------------
#define NEG_INF (-__int_as_float(0x7f800000))

// The row's valid length: n, or lengths[row] clamped to 0..n.
__device__ __forceinline__ int valid_length(const int* lengths, int row, int n) {
    return lengths ? min(max(lengths[row], 0), n) : n;
}
// The shift subtracted before exp: the max, or 0 for a row with nothing above -inf.
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

// --- vectors of 16 bytes (rungs 03 on) ------------------------------------------------------------------
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
