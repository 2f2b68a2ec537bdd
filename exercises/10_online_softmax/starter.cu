// Exercise 10's online-softmax step: one key tile of the FlashAttention-2 recurrence for one query row, as one
// lane of attention rung 02 holds it. Plugged into a copy of rung 02 (kernels/exercises/10_online_softmax.cu),
// which calls lab_online_softmax_step once per row and key tile where rung 02 does the same step inline.
//
// What the student writes: the body of lab_online_softmax_step. A student's kernel.cu is this whole file: the
// grader hands it to NVRTC under the name of the lab's plugin header (lab.core.build.KernelSpec.plugin), so it
// may include only the lab's headers and may define no macro the kernel uses.
//
// The step (Dao 2023, FlashAttention-2, section 3.1), in log2 units with the softmax scale folded in:
// c = scale * log2(e), one fp32 the launcher rounds. Before the call, m is the row's running max as the fp32
// product (max of the scores seen) * c, -inf while the row has seen no visible key; l is this lane's partial
// sum of the row's weights; o holds this lane's fp32 output columns of the row; s holds the lane's raw scores
// q . k_j of the tile's keys (-inf where a key is masked: past S_k, or past the diagonal when causal), and
// tile_max the largest raw score of the whole tile's row (the four lanes that share the row already agree on
// it). After the call:
//   m_new  = max(m, tile_max * c)
//   shift  = m_new, or 0 while m_new is -inf (2^(-inf - -inf) would be NaN)
//   alpha  = 2^(m - shift), exactly 1 when the max did not move (the factors then telescope, with no drift)
//   p[k]   = 2^(s[k] c - shift) (one fma), rounded to the input type (fp16 or bf16 bits): the A operand of P V
//   l      = alpha l + the sum of the rounded p[k] (the weights the product uses, so a common rounding cancels)
//   o[j]  *= alpha, and m = m_new
// A row that has seen only masked keys keeps m = -inf, alpha = 1, p = 0, l = 0: its output is +0.
#pragma once

#include "lab_mma.cuh"  // float_to_half_bits, half_bits_to_float: fp16 or bf16 as 16-bit patterns

// 2^x on the SFU (ex2.approx.ftz: within 2 ulps, results below 2^-126 flushed to 0); 2^-inf = 0.
__device__ __forceinline__ float lab_step_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// One tile step of one row: KEYS scores and probabilities (KEYS even), COLS output columns of this lane.
template <int IS_BF16, int KEYS, int COLS>
__device__ __forceinline__ void lab_online_softmax_step(float& m, float& l, float (&o)[COLS], const float (&s)[KEYS],
                                                        float tile_max, float c, unsigned short (&p)[KEYS]) {
    // What stays when nothing below is filled in: the max does not move, no weight, no rescale.
    float m_next = m, shift = 0.0f, alpha = 1.0f;
#pragma unroll
    for (int k = 0; k < KEYS; ++k) p[k] = 0;
    // TODO: the new max m_next = max(m, tile_max * c), the shift (m_next, or 0 while m_next is -inf), and alpha = 2^(m - shift), exactly 1 when the max did not move
    // TODO: p[k] = 2^(s[k] c - shift) rounded to the input type, l = alpha l + the sum of the rounded p[k], and every o[j] scaled by alpha
    m = m_next;
}
