// copy / rung 04 — vectorized and unrolled: UNROLL independent 16-byte loads in flight per thread.
//
// What changed: each thread first issues UNROLL float4 loads (to addresses one block-width apart, so
//   every load instruction is still coalesced across the warp), then UNROLL stores.
// And the grid covers the array once, one chunk per block, instead of a grid-stride loop: with a
//   fixed grid of 8 blocks/SM, a 256 MiB copy takes 15.5 rounds, and the last half-round leaves half
//   the SMs idle.
// Why: by Little's law, bandwidth = bytes in flight / latency. With ~600-800 ns DRAM latency and
//   ~4.3 TB/s, an H200 needs ~3 MB in flight, ~23 KB per SM; rung 03 keeps 16 B per thread at a
//   time, rung 04 keeps 16*UNROLL. Prediction: reaches the device-copy ceiling (>= 0.98x) at large
//   sizes, where rung 03 sits a few percent under it.
// Tails and alignment: exactly as rung 03 (scalar head to reach 16-byte alignment, scalar tail);
//   the unrolled body covers whole chunks of UNROLL*blockDim float4, a plain float4 loop the rest.
// Requires: sm_75+. Knobs: UNROLL (2), STREAMING (0: 1 adds evict-first hints), and the launcher's
//   BLOCK (128); chosen by scripts/knob_sweep.py (results/h200/knobs.json, which also holds the other
//   settings tried).
#include "lab_memory.cuh"

#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef STREAMING
#define STREAMING 0  // 1: evict-first cache hints (ld.global.cs / st.global.cs), data used once
#endif

__device__ __forceinline__ float4 load4(const float4* p) {
#if STREAMING
    return __ldcs(p);
#else
    return *p;
#endif
}
__device__ __forceinline__ void store4(float4* p, float4 v) {
#if STREAMING
    __stcs(p, v);
#else
    *p = v;
#endif
}

extern "C" __global__ void copy_unrolled(const float* __restrict__ x, float* __restrict__ y, long long n,
                                         long long head) {
    const long long tid = global_thread_index();
    const long long stride = grid_thread_count();
    // BEGIN SOLUTION: scalar head, float4 body in chunks of UNROLL x blockDim per block, leftover float4s, scalar tail.
    for (long long i = tid; i < head; i += stride) y[i] = x[i];

    const long long n_vec = (n - head) / 4;
    const float4* __restrict__ xv = reinterpret_cast<const float4*>(x + head);
    float4* __restrict__ yv = reinterpret_cast<float4*>(y + head);

    // Whole chunks: each block owns UNROLL*blockDim consecutive float4s per step.
    const long long chunk = (long long)UNROLL * blockDim.x;
    const long long n_chunks = n_vec / chunk;
    for (long long c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        const long long base = c * chunk + threadIdx.x;
        float4 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) r[u] = load4(xv + base + (long long)u * blockDim.x);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) store4(yv + base + (long long)u * blockDim.x, r[u]);
    }
    // The float4s after the last whole chunk, then the scalar tail.
    for (long long v = n_chunks * chunk + tid; v < n_vec; v += stride) yv[v] = xv[v];
    for (long long i = head + 4 * n_vec + tid; i < n; i += stride) y[i] = x[i];
    // END SOLUTION
}
