// Shared helpers for the memory-bound ladders (copy, transpose).
// Kept tiny on purpose: a learner should be able to read every rung without chasing helpers.
#pragma once

// 64-bit index of this thread in a 1-D grid: lengths past 2^31 elements must not overflow.
__device__ __forceinline__ long long global_thread_index() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

// Total threads in a 1-D grid, the stride of a grid-stride loop.
__device__ __forceinline__ long long grid_thread_count() {
    return (long long)gridDim.x * blockDim.x;
}
