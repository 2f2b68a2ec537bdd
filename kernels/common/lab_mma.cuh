// Tensor-core wrappers for the gemm_tc ladder (sm_80+), as inline PTX: NVRTC has no host headers and
// <mma.h> needs CUDA's crt/ headers, which the pip wheels lack. References: PTX ISA (docs.nvidia.com/
// cuda/parallel-thread-execution), "Matrix Fragments for mma.m16n8k16 with floating point type" and
// "Warp-level matrix load instruction: ldmatrix".
//
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: one warp computes D = A*B + C with
// A 16x16 (row-major, "row"), B 16x8 (column-major, "col": each column's 16 k-values are the unit),
// C and D 16x8 in fp32. With lane = 0..31, g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group):
//   A: 4 x .b32 registers, two 16-bit elements each, the lower-indexed k in the low half:
//        a[0] = A[g    ][2t, 2t+1]     a[1] = A[g + 8][2t, 2t+1]
//        a[2] = A[g    ][2t+8, 2t+9]   a[3] = A[g + 8][2t+8, 2t+9]
//   B: 2 x .b32:  b[0] = B[2t, 2t+1][g]    b[1] = B[2t+8, 2t+9][g]      (k rows, n = g)
//   C, D: 4 x f32: c[0], c[1] = C[g][2t, 2t+1]    c[2], c[3] = C[g + 8][2t, 2t+1]
// So a lane owns 2 adjacent columns of 2 rows 8 apart of the 16x8 output, and the k of its A and B
// values match: lane (g, t) multiplies row g's k = 2t, 2t+1 (and +8, +9) with column g's same k.
//
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: the warp loads 1, 2 or 4 8x8 matrices of
// 16-bit elements from shared memory. Lanes 8i .. 8i+7 each give the address of one 16-byte row of
// matrix i (x2: lanes 0-15 matter; x4: all 32). Register i of every lane receives matrix i as:
//   without .trans: elements [g][2t], [g][2t+1] of the matrix (row g, two adjacent columns);
//   with .trans:    elements [2t][g], [2t+1][g] (the same positions of the transposed matrix).
// That is exactly the mma fragment shape: an A fragment is one x4 over A's 16x16 tile (matrices: rows
// 0-7/k 0-7, rows 8-15/k 0-7, rows 0-7/k 8-15, rows 8-15/k 8-15); a B fragment of a k-contiguous B
// (Bt[n][k], the "TN" layout) is a plain ldmatrix over n-rows; of an n-contiguous B (B[k][n], "NN") it
// is ldmatrix.trans over k-rows. The 8 rows of one matrix are read in one shared-memory wavefront when
// their 16-byte chunks fall in 8 different groups of 4 banks: the rungs pad or swizzle rows for that.
#pragma once

// 16-bit storage: the kernels keep fp16 and bf16 values as raw 16-bit patterns (unsigned short), so one
// source serves both types; BF16 = 1 picks bf16 arithmetic where it matters (mma, conversions).

// fp32 value of a 16-bit fp16 or bf16 pattern (exact: both widen without rounding).
template <int IS_BF16>
__device__ __forceinline__ float half_bits_to_float(unsigned short h) {
    if (IS_BF16) return __uint_as_float(static_cast<unsigned>(h) << 16);  // bf16 is fp32's top half
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Two 16-bit patterns packed into one .b32 register, `lo` in the low half (the lower-indexed element).
__device__ __forceinline__ unsigned pack_half2(unsigned short lo, unsigned short hi) {
    return static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// fp32 -> fp16 or bf16, rounded to nearest even (one rounding: the epilogue's only one).
template <int IS_BF16>
__device__ __forceinline__ unsigned short float_to_half_bits(float f) {
    unsigned short h;
    if (IS_BF16)
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    else
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// d += a * b on one 16x8x16 tile, fp32 accumulators (fragment layout above).
template <int IS_BF16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    if (IS_BF16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

// Four 8x8 matrices; `addr` is this lane's row address (shared window, 16-byte aligned).
// "memory" clobbers keep the loads on the right side of the barriers that publish the tile.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// Two 8x8 matrices (lanes 0-15 give the row addresses; the others' are ignored but must be valid).
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr)
                 : "memory");
}

#endif  // __CUDA_ARCH__ >= 800
