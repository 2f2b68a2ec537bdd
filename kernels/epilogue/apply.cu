// epilogue / apply — the epilogue chain alone, on an fp32 matrix Z instead of a GEMM's accumulators.
//
// What it is for: checking lab_epilogue.cuh's ops and quantizers bit for bit on chosen values (ties, saturation,
//   NaN, inf), which a GEMM's outputs would hit only by chance, and grading exercise 08's functor the same way.
//   It runs the very store the GEMM rungs run (lab_epi_store_half_pair) with alpha = 1, beta = 0 and the pair of
//   "accumulators" read from Z, so what passes here is what the fused GEMM stores.
// Launch: one thread per pair of adjacent columns; grid (ceil(ceil(N / 2) / 128), M), 128 threads.
// Requires: sm_80+ (the half conversions), sm_89+ for EPI_OUT = 2 (the launcher refuses it below).
// Knobs: BF16 (0), EPI_OP1 (0) .. EPI_OP4 (0), EPI_OUT (0), EPI_QROW (0), as in gemm_tc rung 06.
#include "lab_epilogue.cuh"

#include "lab_epilogue_knobs.cuh"  // BF16, EPI_OP1 .. EPI_OP4, EPI_OUT, EPI_QROW, each 0 unless given

extern "C" __global__ void __launch_bounds__(128)
lab_epilogue_apply(const float* __restrict__ Z, int M, int N, long long ldz, unsigned short* __restrict__ C, int ldc,
                   const __grid_constant__ LabEpilogue ep) {
    const int row = blockIdx.y;
    const int col = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (row >= M || col >= N) return;
    const float z0 = Z[row * ldz + col], z1 = col + 1 < N ? Z[row * ldz + col + 1] : 0.0f;
    const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(C) % 4 == 0);
    const LabEpiRow r = lab_epi_row<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT, EPI_QROW>(ep, row, M);
    LabEpiElem e0 = lab_epi_col<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(ep, col, N);
    LabEpiElem e1 = lab_epi_col<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4>(ep, col + 1, N);
    lab_epi_residual<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, BF16>(e0, ep, row, col, M, N);
    lab_epi_residual<EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, BF16>(e1, ep, row, col + 1, M, N);
    lab_epi_store_half_pair<BF16, EPI_OP1, EPI_OP2, EPI_OP3, EPI_OP4, EPI_OUT>(C, ldc, pairs, row, col, M, N, 1.0f,
                                                                             0.0f, z0, z1, r, e0, e1, ep);
}
