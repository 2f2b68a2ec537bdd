// Split-K's pieces, shared by gemm_tc rung 08's kernels (the split GEMM and the separate reduction): which
// k-tiles split s of S takes, a partial tile's fp32 stores into a slice of the workspace, fp32 reductions in
// L2, and the fixed-order sum of the slices into C.
//
// Workspace layout (the launcher's, lab/families/gemm_split_k.py): S slices of M x LDW floats, LDW = N rounded
// up to a multiple of 4, so that every two-float store of a fragment pair is 8-byte aligned and the reduction
// reads 16-byte float4s. Slice s holds split s's partial product; nothing outside M x N is written or read.
// Reference: PTX ISA, "red" (the .v2.f32 vector form needs sm_90). Code is this lab's own.
#pragma once

#include "lab_hopper_gemm.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // store_pair (lab_hopper_gemm.cuh) is sm_90a's

__host__ __device__ __forceinline__ int lab_split_ldw(int N) { return (N + 3) & ~3; }

// Split s of `splits` takes k-tiles [k0, k1): contiguous ranges that differ in length by at most one, the longer
// ones first. 32-bit arithmetic only: a 64-bit division is a called subroutine, and a call after the mainloop makes
// ptxas serialize the wgmmas (warning C7520).
__device__ __forceinline__ void lab_split_range(int k_tiles, int splits, int s, int& k0, int& k1) {
    const int base = k_tiles / splits, extra = k_tiles % splits;
    k0 = s * base + min(s, extra);
    k1 = k0 + base + (s < extra ? 1 : 0);
}

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

// C[row][col .. col + 3] from the sum of the slices, added in the order s = 0, 1, ..., S - 1 whoever computed them
// (so the bits do not depend on timing), then alpha, beta and one rounding, as rung 06's store. `col` is a
// multiple of 4; columns past N are left alone. The slices are read through L2 (.cg): they were written by
// other SMs during this launch, and L1 is not coherent.
template <int IS_BF16>
__device__ __forceinline__ void lab_split_reduce_quad(const float* __restrict__ slices, long long slice_floats,
                                                      int splits, int ldw, unsigned short* __restrict__ C, int ldc,
                                                      bool pairs, int row, int col, int M, int N, float alpha,
                                                      float beta) {
    const float4* p = reinterpret_cast<const float4*>(slices + static_cast<long long>(row) * ldw + col);
    const long long step = slice_floats / 4;
    float4 sum = __ldcg(p);
    for (int s = 1; s < splits; ++s) {
        const float4 v = __ldcg(p + s * step);
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
    }
    store_pair<IS_BF16>(C, ldc, pairs, row, col, M, N, alpha, beta, sum.x, sum.y);
    store_pair<IS_BF16>(C, ldc, pairs, row, col + 2, M, N, alpha, beta, sum.z, sum.w);
}

// Every quad of C from `first`, stepping by `stride` threads: the separate reduction kernel's whole grid, or
// the split kernel's consumer threads after its grid barrier. M * LDW < 2^31 (the launcher's limit), so the indices
// are 32-bit: see lab_split_range on 64-bit division.
template <int IS_BF16>
__device__ __forceinline__ void lab_split_reduce(const float* __restrict__ slices, int splits, unsigned short* C,
                                                 int ldc, int M, int N, float alpha, float beta, int first,
                                                 int stride) {
    const int ldw = lab_split_ldw(N), quads_per_row = ldw / 4, quads = M * quads_per_row;
    const long long slice_floats = static_cast<long long>(M) * ldw;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    for (int q = first; q < quads; q += stride) {
        const int row = q / quads_per_row, col = 4 * (q - row * quads_per_row);
        lab_split_reduce_quad<IS_BF16>(slices, slice_floats, splits, ldw, C, ldc, pairs, row, col, M, N, alpha, beta);
    }
}

#endif  // sm_90a
