// Exercise 08's epilogue functor: bias + GELU (tanh form) + int8 quantization of two adjacent outputs, plugged
// into the persistent Hopper GEMM (kernels/gemm_tc/06_persistent.cu built with EPI_PLUGIN=1).
//
// What the student writes: lab_plugin_store_pair below (and the two small helpers it calls). Rung 06 calls it
// once per pair of adjacent columns of each consumer thread's wgmma fragment, after the mainloop, with the two
// fp32 values v = alpha * acc already formed; it replaces rung 06's own epilogue chain (lab_epilogue.cuh). A
// student's kernel.cu is this whole file: the grader hands it to NVRTC under this header's name, in place of the
// lab's copy (lab.core.build.KernelSpec.plugin), so it may include only the lab's headers.
//
// Defined behaviour (tests/test_gpu_exercises.py and the exercise's checks hold it to the float64 reference of
// lab/families/epilogue.py, with that module's error bounds):
//   for c in {col, col + 1}, only where row < M and c < N (col + 1 may be N: the row's last odd column):
//     v = acc_c + bias[c]                                   (fp32; bias holds N floats)
//     g = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))   (tanh.approx.f32, the fast hardware tanh)
//     q_out[row * ld_q + c] = the int8 code of g * q_scale: one fp32 multiply, round to nearest (ties to even),
//                             saturate to [-128, 127], NaN -> 0 (cvt.rni.sat.s8.f32 does exactly this)
//   Both codes in one 2-byte store when both columns are inside N and the address is even, else byte stores.
//   Nothing outside M x N is written: not the padding of ld_q, not past the last row.
// What is tested: whole tiles; tails (N odd, N = 1, rows of q_out starting at odd addresses through a padded
//   ld_q, M = 1 and M not a multiple of a tile); per-tensor and per-row scales; outputs that saturate at 127 and
//   negative outputs near zero (GELU never goes below about -0.17); fp16 and bf16, both layouts of B; guard zones
//   around q_out, and repeated runs giving the same bytes.
#pragma once

#include "lab_epilogue.cuh"  // LabEpilogue: bias, q_out, ld_q

// GELU in its tanh form, with the hardware's tanh.approx.f32.
__device__ __forceinline__ float lab_plugin_gelu(float v) {
    float g = 0.0f;
    // TODO: g = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), the tanh by `tanh.approx.f32` (inline PTX)
    return g;
}

// The int8 code of g * q_scale as a byte (two's complement).
__device__ __forceinline__ unsigned char lab_plugin_int8(float g, float q_scale) {
    int code = 0;
    // TODO: code = g * q_scale rounded to nearest even, saturated to [-128, 127], NaN -> 0 (cvt.rni.sat.s8.f32)
    return static_cast<unsigned char>(code & 0xff);
}

// q_out[row][col] and q_out[row][col + 1] from v0 = alpha * acc at (row, col) and v1 at (row, col + 1).
template <int IS_BF16>
__device__ __forceinline__ void lab_plugin_store_pair(const LabEpilogue& ep, int row, int col, int M, int N,
                                                      float acc0, float acc1, float q_scale) {
    // TODO: inside M x N only: codes of GELU(acc + bias[c]) for c = col, col + 1; one 2-byte store when both fit and the address is even, else bytes
}
