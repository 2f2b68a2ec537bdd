// Split-K's pieces that any kernel summing fp32 partial tiles can use (gemm_tc rung 08's split GEMM and its
// reductions): the workspace's layout, a partial tile's fp32 stores into a slice, fp32 reductions in L2, loads
// that stay in flight in batches, and how many threads share one output quad's slices. Which k-tiles a split takes
// and the fixed-order sum of the slices are rung 08's own (exercise 07 asks for them).
//
// Workspace layout (the launcher's, lab/families/gemm_split_k.py): S slices of M x LDW floats, LDW = N rounded
// up to a multiple of 4, so that every two-float store of a fragment pair is 8-byte aligned and the reduction
// reads 16-byte float4s. Slice s holds split s's partial product; nothing outside M x N is written or read.
// Reference: PTX ISA, "red" (the .v2.f32 vector form needs sm_90). Code is this lab's own.
#pragma once

#include "lab_hopper_gemm.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // store_pair (lab_hopper_gemm.cuh) is sm_90a's

__host__ __device__ __forceinline__ int lab_split_ldw(int N) { return (N + 3) & ~3; }

// Two adjacent partial sums of one fragment row into a slice (plain stores, kept in L2: the reduction reads them
// soon). Only inside M x N.
__device__ __forceinline__ void lab_split_store_pair(float* __restrict__ slice, int ldw, int row, int col, int M,
                                                     int N, float v0, float v1) {
    if (row >= M || col >= N) return;
    float* p = slice + static_cast<long long>(row) * ldw + col;
    if (col + 1 < N)
        __stcg(reinterpret_cast<float2*>(p), make_float2(v0, v1));
    else
        __stcg(p, v0);
}

// The same pair added into an fp32 accumulator in L2 with one vector reduction (no return value, so the SM
// does not wait for it). The order in which splits arrive decides the rounding: not reproducible bit for bit.
__device__ __forceinline__ void lab_split_red_pair(float* __restrict__ accum, int ldw, int row, int col, int M, int N,
                                                   float v0, float v1) {
    if (row >= M || col >= N) return;
    float* p = accum + static_cast<long long>(row) * ldw + col;
    if (col + 1 < N)
        asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(v0), "f"(v1) : "memory");
    else
        asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;\n" ::"l"(p), "f"(v0) : "memory");
}

#define LAB_SPLIT_BATCH 8  // slices each thread loads before it adds them: loads in flight, the order unchanged

// Threads that share one quad's slices, from S alone, so that every caller (the reduction kernel, the split
// kernel after its grid barrier) sums in the same tree and gets the same bits. With few output quads (128 x 128 is
// 4096 of them) one thread per quad would leave most of the GPU idle and walk S slices one after another.
__device__ __forceinline__ int lab_split_lanes(int splits) { return splits >= 32 ? 8 : splits >= 8 ? 4 : 1; }

// A plain 16-byte load that ptxas issues where it stands: a batch of them is in flight at once (left to itself,
// ptxas interleaved two or three loads with the adds), and never through the non-coherent path (ld.global.nc),
// which an in-kernel reduction must not use for slices written during the same launch.
__device__ __forceinline__ float4 lab_load_in_order(const float4* p) {
    float4 v;
    asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void lab_add4(float4& sum, const float4& v) {
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
}

#endif  // sm_90a
