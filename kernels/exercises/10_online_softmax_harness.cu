// Exercise 10's step (lab_online_softmax_step, from kernels/exercises/10_online_softmax_step.cuh or a student's
// file in its place) on chosen rows instead of a kernel's.
//
// What it is for: pinning the step down where attention's output cannot see it. A row that has seen no key ends
//   with l = 0 and the kernel stores +0 for it whatever its accumulator holds, so a NaN from 2^(-inf - -inf)
//   never reaches the output; here every quantity the step returns is compared exactly, on rows chosen so that
//   every result is exact in fp32 and in the input type (scores and scales that make every exponent an integer,
//   so every weight and factor is a power of two). lab/grading/online_softmax_numerics.py holds the rows and the
//   expected values.
// Defined behaviour: thread i (i < n) reads row i's state and tile from `in` (STEP_IN floats: m, l, o[0..COLS-1],
//   s[0..KEYS-1], tile_max, c), calls lab_online_softmax_step<BF16> once, exactly as the exercise's kernel calls
//   it, and writes m, l, o (STEP_OUT floats) to `out` and the KEYS probabilities (16-bit patterns) to `p_out`.
// Launch: one thread per row; grid ceil(n / 64), 64 threads.
// Requires: sm_80+ (the step's conversions to fp16 and bf16), as the exercise's kernel.
// Knobs: BF16 (0: fp16 probabilities, 1: bf16), as the exercise's kernel.
#include "lab_mma.cuh"
#include "lab_epilogue_plugin.cuh"  // the plugin slot: lab_online_softmax_step

#ifndef BF16
#define BF16 0
#endif

#define STEP_KEYS 4
#define STEP_COLS 2
#define STEP_IN (STEP_COLS + STEP_KEYS + 4)
#define STEP_OUT (STEP_COLS + 2)

extern "C" __global__ void __launch_bounds__(64)
lab_online_softmax_step_harness(const float* __restrict__ in, float* __restrict__ out,
                                unsigned short* __restrict__ p_out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* x = in + i * STEP_IN;
    float m = x[0], l = x[1], o[STEP_COLS], s[STEP_KEYS];
    unsigned short p[STEP_KEYS];
#pragma unroll
    for (int j = 0; j < STEP_COLS; ++j) o[j] = x[2 + j];
#pragma unroll
    for (int k = 0; k < STEP_KEYS; ++k) s[k] = x[2 + STEP_COLS + k];
    lab_online_softmax_step<BF16>(m, l, o, s, x[2 + STEP_COLS + STEP_KEYS], x[3 + STEP_COLS + STEP_KEYS], p);
    float* y = out + i * STEP_OUT;
    y[0] = m, y[1] = l;
#pragma unroll
    for (int j = 0; j < STEP_COLS; ++j) y[2 + j] = o[j];
#pragma unroll
    for (int k = 0; k < STEP_KEYS; ++k) p_out[i * STEP_KEYS + k] = p[k];
}
