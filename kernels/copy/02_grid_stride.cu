// copy / rung 02 — grid-stride loop.
//
// What changed: instead of one thread per element, a fixed grid (a few blocks per SM) loops over the
//   array with a stride of the whole grid.
// Why: block launch and retirement cost is paid a few hundred times instead of millions of times,
//   and the same kernel works for any n without a grid that grows with it. Prediction: about the
//   same as rung 01 at large sizes (both are bound by one 4-byte load in flight per thread), a little
//   better in the mid range; it is the base that vectorizing builds on.
// Requires: nothing (any length, any alignment, sm_75+).
// Knobs: none in the source; the launcher picks BLOCKS_PER_SM x SMs blocks of 256 threads.
#include "lab_memory.cuh"

extern "C" __global__ void copy_grid_stride(const float* __restrict__ x, float* __restrict__ y, long long n) {
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) {
        y[i] = x[i];
    }
}
