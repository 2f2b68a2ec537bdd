// Epilogue functors: what a GEMM does to each accumulator on its way to memory, composed as a chain.
//
// A rung that takes an epilogue computes v = alpha * acc (+ beta * C on a half output), then applies up to
// four ops in order, EPI_OP1 .. EPI_OP4 (0 = none), each one of the LAB_EPI_* codes below, then converts v to
// the output type EPI_OUT: the GEMM's own type (fp16/bf16, or fp32 on the SIMT ladder), int8, or fp8 e4m3.
// Bias + GELU is EPI_OP1 = 1, EPI_OP2 = 5; "+ residual after the activation" is one more op. Every op works in
// fp32 on one element; per-row values (row scale, quantization scale) are read once per row (LabEpiRow).
// lab/families/epilogue.py restates every op in float64 for the references and carries each op's error bound.
//
// Defined behaviour the tests pin down (the references follow it):
//   ReLU and clamp propagate NaN (as torch does), rather than fmaxf's "the other operand".
//   int8: q = cvt.rni.sat.s8(v * q_scale): one fp32 multiply by the scale (a multiplier, the inverse of the
//     dequantization step), round to nearest even, saturate to [-128, 127]; NaN -> 0, +-inf -> 127 / -128.
//   fp8 e4m3 (sm_89+): cvt.rn.satfinite.e4m3x2: nearest even, |v| past 448 -> +-448 (inf too), NaN -> NaN.
// Activations use the fast hardware paths (tanh.approx, ex2.approx): their error is part of the bound.
// Ideas: CUTLASS's epilogue "visitor" trees and LinearCombination* functors; the code is this lab's own.
#pragma once

#include "lab_mma.cuh"  // half_bits_to_float (any arch); the sm_80+ conversions below

#define LAB_EPI_NONE 0
#define LAB_EPI_BIAS 1       // v += bias[col]
#define LAB_EPI_ROW_SCALE 2  // v *= row_scale[row]
#define LAB_EPI_COL_SCALE 3  // v *= col_scale[col]
#define LAB_EPI_RELU 4
#define LAB_EPI_GELU_TANH 5  // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
#define LAB_EPI_GELU_ERF 6   // 0.5 v (1 + erf(v / sqrt(2)))
#define LAB_EPI_SILU 7       // v / (1 + exp(-v))
#define LAB_EPI_CLAMP 8      // v clamped to [clamp_lo, clamp_hi]
#define LAB_EPI_RESIDUAL 9   // v += residual[row][col] (in the output's own type)

#define LAB_EPI_OUT_SAME 0   // the GEMM's type (fp16/bf16 as BF16 says; fp32 on the SIMT ladder)
#define LAB_EPI_OUT_INT8 1
#define LAB_EPI_OUT_E4M3 2

// Passed by value as one __grid_constant__ kernel argument; lab/families/epilogue.py builds it (PARAMS_DTYPE there
// mirrors this layout: every field 8 bytes, clamp_lo and clamp_hi sharing the last).
struct LabEpilogue {
    const float* bias;        // N values (fp32)
    const float* row_scale;   // M values
    const float* col_scale;   // N values
    const void* residual;     // M x ld_residual, in the GEMM's output type
    const float* q_scale;     // 1 value (per tensor) or M (per row, EPI_QROW = 1)
    void* q_out;              // M x ld_q bytes: the int8 / e4m3 output
    long long ld_residual;
    long long ld_q;
    float clamp_lo, clamp_hi;
};

struct LabEpiRow {  // what one output row needs, loaded once per row
    float row_scale;
    float q_scale;
};

// What one element needs besides its value: its column's bias and scale, its residual (fp32; unused ones 0).
// A rung loads these for several columns ahead of the math (lab_epi_cols, lab_epi_residual), so the loads of a
// whole chunk of outputs are in flight together instead of one dependent load per store.
struct LabEpiElem {
    float bias;
    float col_scale;
    float residual;
};

__device__ __forceinline__ float lab_tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <int OP1, int OP2, int OP3, int OP4>
struct LabEpiUses {
    template <int CODE>
    static constexpr bool has = OP1 == CODE || OP2 == CODE || OP3 == CODE || OP4 == CODE;
    static constexpr bool bias = has<LAB_EPI_BIAS>, row_scale = has<LAB_EPI_ROW_SCALE>,
                          col_scale = has<LAB_EPI_COL_SCALE>, residual = has<LAB_EPI_RESIDUAL>;
};

// One op on one element.
template <int OP>
__device__ __forceinline__ float lab_epi_op(float v, const LabEpiElem& e, const LabEpiRow& r, const LabEpilogue& ep) {
    if constexpr (OP == LAB_EPI_BIAS) return v + e.bias;
    if constexpr (OP == LAB_EPI_ROW_SCALE) return v * r.row_scale;
    if constexpr (OP == LAB_EPI_COL_SCALE) return v * e.col_scale;
    if constexpr (OP == LAB_EPI_RELU) return v < 0.0f ? 0.0f : v;  // NaN stays NaN
    if constexpr (OP == LAB_EPI_GELU_TANH) {
        const float inner = 0.7978845608f * v * fmaf(0.044715f, v * v, 1.0f);
        return 0.5f * v * (1.0f + lab_tanh_approx(inner));
    }
    if constexpr (OP == LAB_EPI_GELU_ERF) return 0.5f * v * (1.0f + erff(v * 0.7071067812f));
    if constexpr (OP == LAB_EPI_SILU) return v / (1.0f + __expf(-v));
    if constexpr (OP == LAB_EPI_CLAMP) return v < ep.clamp_lo ? ep.clamp_lo : (v > ep.clamp_hi ? ep.clamp_hi : v);
    if constexpr (OP == LAB_EPI_RESIDUAL) return v + e.residual;
    return v;
}

// The chain OP1 -> OP2 -> OP3 -> OP4 on one element.
template <int OP1, int OP2, int OP3, int OP4>
__device__ __forceinline__ float lab_epi_chain(float v, const LabEpiElem& e, const LabEpiRow& r, const LabEpilogue& ep) {
    v = lab_epi_op<OP1>(v, e, r, ep);
    v = lab_epi_op<OP2>(v, e, r, ep);
    v = lab_epi_op<OP3>(v, e, r, ep);
    return lab_epi_op<OP4>(v, e, r, ep);
}

// The per-row values of `row` (only those the chain and the output type use are read).
template <int OP1, int OP2, int OP3, int OP4, int OUT, int QROW>
__device__ __forceinline__ LabEpiRow lab_epi_row(const LabEpilogue& ep, int row, int M) {
    LabEpiRow r{1.0f, 1.0f};
    if (row >= M) return r;
    if constexpr (LabEpiUses<OP1, OP2, OP3, OP4>::row_scale) r.row_scale = __ldg(ep.row_scale + row);
    if constexpr (OUT != LAB_EPI_OUT_SAME) r.q_scale = __ldg(ep.q_scale + (QROW ? row : 0));
    return r;
}

// Column `col`'s bias and scale (0 and 1 past N or where the chain does not use them).
template <int OP1, int OP2, int OP3, int OP4>
__device__ __forceinline__ LabEpiElem lab_epi_col(const LabEpilogue& ep, int col, int N) {
    using U = LabEpiUses<OP1, OP2, OP3, OP4>;
    LabEpiElem e{0.0f, 1.0f, 0.0f};
    if (col >= N) return e;
    if constexpr (U::bias) e.bias = __ldg(ep.bias + col);
    if constexpr (U::col_scale) e.col_scale = __ldg(ep.col_scale + col);
    return e;
}

// The residual at (row, col) in the output's 16-bit type (IS_BF16) or fp32 (IS_BF16 = -1), into `e`.
template <int OP1, int OP2, int OP3, int OP4, int IS_BF16>
__device__ __forceinline__ void lab_epi_residual(LabEpiElem& e, const LabEpilogue& ep, int row, int col, int M, int N) {
    if constexpr (LabEpiUses<OP1, OP2, OP3, OP4>::residual) {
        if (row >= M || col >= N) return;
        const long long at = (long long)row * ep.ld_residual + col;
        if constexpr (IS_BF16 < 0)
            e.residual = __ldg(static_cast<const float*>(ep.residual) + at);
        else
            e.residual = half_bits_to_float<IS_BF16>(__ldg(static_cast<const unsigned short*>(ep.residual) + at));
    }
}


// --- quantized outputs ----------------------------------------------------------------------------------

__device__ __forceinline__ unsigned char lab_quantize_int8(float v, float q_scale) {
    int q;
    asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(q) : "f"(v * q_scale));  // NaN -> 0, saturating
    return static_cast<unsigned char>(q & 0xff);
}

// Two values as two e4m3 bytes (lo in the low byte), nearest even, saturated to +-448.
__device__ __forceinline__ unsigned short lab_quantize_e4m3x2(float lo, float hi, float q_scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short q;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(q) : "f"(hi * q_scale), "f"(lo * q_scale));
    return q;
#else
    __trap();  // the launcher refuses e4m3 outputs below sm_89: this is never reached
    return 0;
#endif
}

// Two adjacent quantized outputs q_out[row][col, col + 1] (col + 1 only if inside N): one 2-byte store when
// both are inside and the address is even, else byte stores.
template <int OUT>
__device__ __forceinline__ void lab_store_quantized_pair(const LabEpilogue& ep, int row, int col, int N, float v0,
                                                         float v1, float q_scale) {
    unsigned char* p = static_cast<unsigned char*>(ep.q_out) + (long long)row * ep.ld_q + col;
    unsigned char b0, b1;
    if constexpr (OUT == LAB_EPI_OUT_E4M3) {
        const unsigned short both = lab_quantize_e4m3x2(v0, v1, q_scale);
        b0 = static_cast<unsigned char>(both & 0xff);
        b1 = static_cast<unsigned char>(both >> 8);
    } else {
        b0 = lab_quantize_int8(v0, q_scale);
        b1 = lab_quantize_int8(v1, q_scale);
    }
    if (col + 1 < N && (reinterpret_cast<unsigned long long>(p) % 2 == 0)) {
        *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(b0 | (b1 << 8));
        return;
    }
    p[0] = b0;
    if (col + 1 < N) p[1] = b1;
}

// --- the tensor-core ladder's store: two adjacent outputs of one row --------------------------------------
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// C[row][col, col + 1] (or q_out's) = the chain applied to alpha * acc (+ beta * C on a half output), only
// inside M x N, with e0 and e1 the two columns' values (lab_epi_col, lab_epi_residual). The half output is
// rounded once, as the plain store_pair does; `pairs` (ldc even, C 4-byte aligned) lets both go in one 4-byte store.
template <int IS_BF16, int OP1, int OP2, int OP3, int OP4, int OUT>
__device__ __forceinline__ void lab_epi_store_half_pair(unsigned short* __restrict__ C, int ldc, bool pairs, int row,
                                                        int col, int M, int N, float alpha, float beta, float acc0,
                                                        float acc1, const LabEpiRow& r, const LabEpiElem& e0,
                                                        const LabEpiElem& e1, const LabEpilogue& ep) {
    if (row >= M || col >= N) return;
    const bool both = col + 1 < N;
    unsigned short* p = C + (long long)row * ldc + col;
    float v0 = alpha * acc0, v1 = alpha * acc1;
    if constexpr (OUT == LAB_EPI_OUT_SAME) {
        if (beta != 0.0f) {
            v0 = fmaf(beta, half_bits_to_float<IS_BF16>(p[0]), v0);
            if (both) v1 = fmaf(beta, half_bits_to_float<IS_BF16>(p[1]), v1);
        }
    }
    v0 = lab_epi_chain<OP1, OP2, OP3, OP4>(v0, e0, r, ep);
    v1 = lab_epi_chain<OP1, OP2, OP3, OP4>(v1, e1, r, ep);
    if constexpr (OUT != LAB_EPI_OUT_SAME) {
        lab_store_quantized_pair<OUT>(ep, row, col, N, v0, v1, r.q_scale);
    } else if (pairs && both) {
        *reinterpret_cast<unsigned*>(p) = pack_half2(float_to_half_bits<IS_BF16>(v0), float_to_half_bits<IS_BF16>(v1));
    } else {
        p[0] = float_to_half_bits<IS_BF16>(v0);
        if (both) p[1] = float_to_half_bits<IS_BF16>(v1);
    }
}

// A wgmma consumer's whole fragment of a TILE_N-wide tile (acc[4j + 2h + e] is row `row + 8h`, column
// col0 + 8j + 2t + e): CHUNK column-pairs at a time, first every column value and residual of the chunk (loads in
// flight together), then the math and the stores. One pair at a time, each store waited on its own bias load.
// Chunks are smaller when each element carries more (a residual per element): 8 pairs' values would spill.
template <int OP1, int OP2, int OP3, int OP4>
__host__ __device__ constexpr int lab_epi_chunk() {
    return LabEpiUses<OP1, OP2, OP3, OP4>::residual ? 2 : 8;
}

// The chunk of column pairs j0 .. j0 + CHUNK - 1 of a fragment: every column value and residual it needs, loaded
// together (e[pair][h][column of the pair]).
template <int IS_BF16, int OP1, int OP2, int OP3, int OP4, int CHUNK>
__device__ __forceinline__ void lab_epi_load_chunk(LabEpiElem (&e)[CHUNK][2][2], const LabEpilogue& ep, int row,
                                                   int col0, int j0, int t, int M, int N) {
#pragma unroll
    for (int j = 0; j < CHUNK; ++j)
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int col = col0 + 8 * (j0 + j) + 2 * t + k;
            const LabEpiElem c = lab_epi_col<OP1, OP2, OP3, OP4>(ep, col, N);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                e[j][h][k] = c;
                lab_epi_residual<OP1, OP2, OP3, OP4, IS_BF16>(e[j][h][k], ep, row + 8 * h, col, M, N);
            }
        }
}

template <int IS_BF16, int TILE_N, int OP1, int OP2, int OP3, int OP4, int OUT,
          int CHUNK = lab_epi_chunk<OP1, OP2, OP3, OP4>()>
__device__ __forceinline__ void lab_epi_store_wgmma_fragment(unsigned short* __restrict__ C, int ldc, bool pairs,
                                                             int row, int col0, int t, int M, int N, float alpha,
                                                             float beta, const float (&acc)[TILE_N / 2],
                                                             const LabEpiRow (&rows)[2], const LabEpilogue& ep) {
    static_assert((TILE_N / 8) % CHUNK == 0, "whole chunks of column pairs");
#pragma unroll
    for (int j0 = 0; j0 < TILE_N / 8; j0 += CHUNK) {
        LabEpiElem e[CHUNK][2][2];
        lab_epi_load_chunk<IS_BF16, OP1, OP2, OP3, OP4, CHUNK>(e, ep, row, col0, j0, t, M, N);
#pragma unroll
        for (int j = 0; j < CHUNK; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                lab_epi_store_half_pair<IS_BF16, OP1, OP2, OP3, OP4, OUT>(
                    C, ldc, pairs, row + 8 * h, col0 + 8 * (j0 + j) + 2 * t, M, N, alpha, beta, acc[4 * (j0 + j) + 2 * h],
                    acc[4 * (j0 + j) + 2 * h + 1], rows[h], e[j][h][0], e[j][h][1], ep);
    }
}

// The chain applied in place to a wgmma consumer's fragment, for a rung that stores the tile afterwards itself (gemm_tc
// rung 10's staging for a TMA store): acc = chain(alpha * acc) in fp32, with the chunk's column values and residuals
// loaded ahead of the math as above. The output type is the GEMM's own (OUT = 0) and C is not read (beta = 0): the
// TMA store's conditions.
template <int IS_BF16, int TILE_N, int OP1, int OP2, int OP3, int OP4,
          int CHUNK = lab_epi_chunk<OP1, OP2, OP3, OP4>()>
__device__ __forceinline__ void lab_epi_apply_wgmma_fragment(float (&acc)[TILE_N / 2], int row, int col0, int t, int M,
                                                             int N, float alpha, const LabEpiRow (&rows)[2],
                                                             const LabEpilogue& ep) {
    static_assert((TILE_N / 8) % CHUNK == 0, "whole chunks of column pairs");
#pragma unroll
    for (int j0 = 0; j0 < TILE_N / 8; j0 += CHUNK) {
        LabEpiElem e[CHUNK][2][2];
        lab_epi_load_chunk<IS_BF16, OP1, OP2, OP3, OP4, CHUNK>(e, ep, row, col0, j0, t, M, N);
#pragma unroll
        for (int j = 0; j < CHUNK; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    float& v = acc[4 * (j0 + j) + 2 * h + k];
                    v = lab_epi_chain<OP1, OP2, OP3, OP4>(alpha * v, e[j][h][k], rows[h], ep);
                }
    }
}
#endif  // sm_80+
