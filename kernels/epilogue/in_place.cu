// epilogue / in_place — the epilogue chain applied in place to a GEMM's 16-bit output, after the GEMM.
//
// What it is for: lab.ops's paths that do not fuse a call's epilogue (the library's GEMM with an activation the
//   library has no epilogue for, SiLU say; stream-K, split-K, the decode GEMV) finish the call with this one pass
//   over C, with the same ops (lab_epilogue.cuh) the fused GEMMs run.
// Why it should be fast: C read once and written once (the residual read once), 16-byte accesses, and no index
//   arithmetic per element: a block row is a row of C (blockIdx.y), each thread 8 adjacent columns, so a bias is
//   8 contiguous loads. A flat elementwise kernel that finds each element's column as i % N pays a 64-bit
//   division per element. Prediction: within 10% of the device copy of C's bytes at 2048 x 14336. Measured only
//   inside lab.ops's calls so far (the library's GEMM, then this pass, against PyTorch's F.linear and an in-place
//   F.silu: results/h200/ops_sweep.json); the pass has not been timed alone.
// Launch: grid (ceil(N / (8 * 128)), min(M, 65535)), 128 threads; block rows stride over C's rows by gridDim.y.
//   Rows of C are ldc elements apart, the residual's ep.ld_residual apart.
// Requires: sm_80+ (the conversions). 16-byte accesses where a thread's 8 elements are 16-byte aligned in C (and
//   in the residual); element accesses otherwise (odd ldc, a misaligned base, the last columns of a row).
// Knobs: BF16 (0), EPI_OP1 (0) .. EPI_OP4 (0): lab_epilogue.cuh's op codes, as in gemm_tc rung 06.
#include "lab_epilogue.cuh"

#include "lab_epilogue_knobs.cuh"  // BF16, EPI_OP1 .. EPI_OP4, each 0 unless given

#define IN_PLACE_THREADS 128
#define IN_PLACE_COLS 8

union LabHalf8 {
    uint4 v;
    unsigned short h[8];
};

extern "C" __global__ void __launch_bounds__(IN_PLACE_THREADS)
lab_epilogue_in_place(unsigned short* __restrict__ C, int M, int N, long long ldc, const __grid_constant__ LabEpilogue ep) {
    using U = LabEpiUses<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>;
    const int col0 = IN_PLACE_COLS * (blockIdx.x * blockDim.x + threadIdx.x);
    if (col0 >= N) return;
    for (int row = blockIdx.y; row < M; row += gridDim.y) {
        const LabEpiRow r = lab_epi_row<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, LAB_EPI_OUT_SAME, 0>(ep, row, M);
        unsigned short* p = C + (long long)row * ldc + col0;
        const unsigned short* res = nullptr;
        if constexpr (U::residual)
            res = static_cast<const unsigned short*>(ep.residual) + (long long)row * ep.ld_residual + col0;
        const bool vec = col0 + IN_PLACE_COLS <= N && (reinterpret_cast<unsigned long long>(p) & 15) == 0 &&
                         (!U::residual || (reinterpret_cast<unsigned long long>(res) & 15) == 0);
        if (vec) {
            LabHalf8 c, rv;
            c.v = *reinterpret_cast<const uint4*>(p);
            if constexpr (U::residual) rv.v = __ldg(reinterpret_cast<const uint4*>(res));
#pragma unroll
            for (int j = 0; j < IN_PLACE_COLS; ++j) {
                LabEpiElem e = lab_epi_col<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(ep, col0 + j, N);
                if constexpr (U::residual) e.residual = half_bits_to_float<BF16>(rv.h[j]);
                const float v = half_bits_to_float<BF16>(c.h[j]);
                c.h[j] = float_to_half_bits<BF16>(lab_epi_chain<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(v, e, r, ep));
            }
            *reinterpret_cast<uint4*>(p) = c.v;
            continue;
        }
        for (int j = 0; j < IN_PLACE_COLS && col0 + j < N; ++j) {
            LabEpiElem e = lab_epi_col<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(ep, col0 + j, N);
            lab_epi_residual<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, BF16>(e, ep, row, col0 + j, M, N);
            const float v = half_bits_to_float<BF16>(p[j]);
            p[j] = float_to_half_bits<BF16>(lab_epi_chain<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(v, e, r, ep));
        }
    }
}
