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

// The k-tiles of split s of `splits`: kt = first, first + step, ... while kt < end.
//   INTERLEAVE = 0: a contiguous range, the ranges differing in length by at most one (the longer ones first);
//   INTERLEAVE = 1: every S-th k-tile from s (s, s + S, s + 2S, ...): at any moment the S splits of a tile read S
//   neighbouring k-tiles, so each row of A and B is fetched as one run of S x 128 bytes instead of S runs of 128
//   bytes far apart (DRAM pages opened once).
// 32-bit arithmetic only: a 64-bit division is a called subroutine, and a call after the mainloop makes ptxas
// serialize the wgmmas (warning C7520).
template <int INTERLEAVE>
__device__ __forceinline__ void lab_split_k_tiles(int k_tiles, int splits, int s, int& first, int& step, int& end) {
    if constexpr (INTERLEAVE) {
        first = s, step = splits, end = k_tiles;
    } else {
        const int base = k_tiles / splits, extra = k_tiles % splits;
        first = s * base + min(s, extra);
        end = first + base + (s < extra ? 1 : 0);
        step = 1;
    }
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

#define LAB_SPLIT_BATCH 8  // slices each thread loads before it adds them: loads in flight, the order unchanged

// Threads that share one quad's slices, from S alone, so that every caller (the reduction kernel, the split
// kernel after its grid barrier) sums in the same tree and gets the same bits. With few output quads (128 x 128 is
// 4096 of them) one thread per quad would leave most of the GPU idle and walk S slices one after another.
__device__ __forceinline__ int lab_split_lanes(int splits) { return splits >= 32 ? 8 : splits >= 8 ? 4 : 1; }

// Every quad of C (four columns, `col` a multiple of 4) from the sum of the S slices, for the threads numbered
// `first`, first + stride, ... (`first` % 32 is the lane; stride a multiple of 32). Lane p of a quad's group sums
// slices p, p + lanes, p + 2 lanes, ... in that order; the group then adds its partial sums in a fixed butterfly
// (a + b and b + a are the same bits, so every lane ends with the same value), and its first lane applies alpha
// and beta, rounds once and stores, as rung 06's store_pair. The order never depends on timing: the result is the
// same bits on every run. The loads are plain ones (load_in_order): the caller orders them after the slices' stores
// (a kernel boundary, or the grid barrier's acquire and a fence).
// M * LDW < 2^31 (the launcher's limit), so the indices are 32-bit (see lab_split_range).
// A plain 16-byte load that ptxas issues where it stands: a batch of them is in flight at once (left to itself,
// ptxas interleaved two or three loads with the adds), and never through the non-coherent path (ld.global.nc),
// which the in-kernel reduction must not use for slices written during the same launch.
__device__ __forceinline__ float4 load_in_order(const float4* p) {
    float4 v;
    asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void add4(float4& sum, const float4& v) {
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
}

template <int IS_BF16>
__device__ __forceinline__ void lab_split_reduce(const float* slices, int splits, unsigned short* C,
                                                 int ldc, int M, int N, float alpha, float beta, int first,
                                                 int stride) {
    const int ldw = lab_split_ldw(N), quads_per_row = ldw / 4, quads = M * quads_per_row;
    const int lanes = lab_split_lanes(splits), items = quads * lanes, lane = first & 31;
    const long long step = static_cast<long long>(M) * ldw / 4;  // one slice, in float4s
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    for (int warp_first = first - lane; warp_first < items; warp_first += stride) {  // warp-uniform: the shuffles
        const int i = warp_first + lane, q = i / lanes, p = i - q * lanes;
        const int row = q / quads_per_row, col = 4 * (q - row * quads_per_row);
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < items) {
            const float4* base = reinterpret_cast<const float4*>(slices + static_cast<long long>(row) * ldw + col);
            int s = p;
            for (; s + (LAB_SPLIT_BATCH - 1) * lanes < splits; s += LAB_SPLIT_BATCH * lanes) {  // whole batches
                float4 v[LAB_SPLIT_BATCH];
#pragma unroll
                for (int b = 0; b < LAB_SPLIT_BATCH; ++b) v[b] = load_in_order(base + (s + b * lanes) * step);
#pragma unroll
                for (int b = 0; b < LAB_SPLIT_BATCH; ++b) add4(sum, v[b]);
            }
            for (; s < splits; s += lanes) add4(sum, load_in_order(base + s * step));
        }
        for (int offset = lanes / 2; offset > 0; offset /= 2) {
            sum.x += __shfl_xor_sync(0xffffffffu, sum.x, offset);
            sum.y += __shfl_xor_sync(0xffffffffu, sum.y, offset);
            sum.z += __shfl_xor_sync(0xffffffffu, sum.z, offset);
            sum.w += __shfl_xor_sync(0xffffffffu, sum.w, offset);
        }
        if (i < items && p == 0) {
            store_pair<IS_BF16>(C, ldc, pairs, row, col, M, N, alpha, beta, sum.x, sum.y);
            store_pair<IS_BF16>(C, ldc, pairs, row, col + 2, M, N, alpha, beta, sum.z, sum.w);
        }
    }
}

#endif  // sm_90a
