// copy / rung 01 — naive: one thread per element.
//
// What it is: the first kernel everyone writes. Thread i copies y[i] = x[i]; the grid is sized to
//   cover n, and the last block's extra threads do nothing.
// Why it can already be fast: a warp reads 32 consecutive floats (128 bytes), which is perfectly
//   coalesced. Prediction: large copies reach ~85-95% of the device copy, since each thread has only
//   one 4-byte load in flight and the grid is enormous (launch and block-scheduling cost per byte).
// Requires: nothing (any length, any alignment, sm_75+).
// Knobs: none in the source; the block size is the launcher's (256).
#include "lab_memory.cuh"

extern "C" __global__ void copy_naive(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = global_thread_index();
    if (i < n) y[i] = x[i];
}
