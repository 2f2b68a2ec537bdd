// epilogue / plugin_numerics — exercise 08's functor (lab_plugin_store_pair, from lab_epilogue_plugin.cuh or a
// student's file in its place) on chosen accumulators instead of a GEMM's.
//
// What it is for: pinning the functor's int8 numerics down where a GEMM's outputs reach them only by chance and
//   an error bound lets either neighbour pass: exact ties of both signs (ties to even), saturation at 127 and
//   -128, a NaN accumulator (code 0). The values are chosen so that GELU leaves them exactly as they are in fp32
//   (v >= 10: the tanh is exactly 1) or makes them exactly 0 (v <= -10), so each code is fully determined and
//   checked exactly (lab/grading/plugin_numerics.py holds the table and the expected codes).
// Defined behaviour: thread `row` (one per row, rows < M) calls
//     lab_plugin_store_pair<BF16>(ep, row, 0, M, 2, acc[2 row], acc[2 row + 1], q_scale[row])
//   once, exactly as gemm_tc rung 06 calls it for a pair of adjacent columns: N = 2, so both columns are inside
//   N; ep.bias points at two zeros (v = acc + 0 = acc), ep.q_out at M rows of ld_q = 2 bytes (every pair at an
//   even address), ep.q_scale at the M per-row scales; the other pointers are null. It writes nothing itself.
// Launch: one thread per row; grid ceil(M / 128), 128 threads.
// Requires: what the plugin requires: sm_90a, as rung 06 (lab/grading/plugin_numerics.py builds it with rung 06's
//   plugin-rung knobs and arch).
// Knobs: those of gemm_tc rung 06, defined here with the same defaults before the plugin is included (EPI_OUT and
//   EPI_PLUGIN as the plugin rung sets them, EPI_QROW 1: one scale per row), and after the same lab headers
//   (lab_hopper_knobs.cuh among them, for the knobs rung 06 shares with rungs 05-08), so that a plugin sees here
//   what it sees in rung 06: a plugin that compiles there compiles here.
#include "lab_cp_async.cuh"
#include "lab_hopper_gemm.cuh"
#include "lab_tile_order.cuh"
#include "lab_epilogue.cuh"
#include "lab_hopper_knobs.cuh"  // as in rung 06: BF16, TN, BM, BN, BK, STAGES, GROUP_M, THREADS and what follows

#ifndef RASTER
#define RASTER 2
#endif
#ifndef EPI_OP1
#define EPI_OP1 0
#endif
#ifndef EPI_OP2
#define EPI_OP2 0
#endif
#ifndef EPI_OP3
#define EPI_OP3 0
#endif
#ifndef EPI_OP4
#define EPI_OP4 0
#endif
#ifndef EPI_OUT
#define EPI_OUT 1
#endif
#ifndef EPI_QROW
#define EPI_QROW 1
#endif
#ifndef EPI_PLUGIN
#define EPI_PLUGIN 1
#endif
#include "lab_epilogue_plugin.cuh"

extern "C" __global__ void __launch_bounds__(128)
lab_plugin_numerics(const float* __restrict__ acc, int M, const __grid_constant__ LabEpilogue ep) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float q_scale = __ldg(ep.q_scale + row);
    lab_plugin_store_pair<BF16>(ep, row, 0, M, 2, acc[2 * row], acc[2 * row + 1], q_scale);
}
