// transpose / rung 01 — naive: out[c][r] = in[r][c], straight from global memory.
//
// What it is: a (TILE x BLOCK_ROWS) block walks a TILE x TILE patch; each thread copies TILE/BLOCK_ROWS
//   elements. Reads are coalesced (a warp reads 32 consecutive floats of one row) but writes are not:
//   the warp's 32 stores land in 32 different output rows, 32 separate 32-byte sectors.
// Prediction: writes move 8x the useful bytes through L2 (a 32-byte sector for each 4-byte store);
//   L2 merges some of it before DRAM, so expect ~30-50% of the device copy, not 1/8.
// Requires: nothing (any rows, cols >= 1; sm_75+). Knobs: TILE (32), BLOCK_ROWS (8).
#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows,
                                           int cols) {
    const int c = blockIdx.x * TILE + threadIdx.x;
    const int r0 = blockIdx.y * TILE + threadIdx.y;
    if (c >= cols) return;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        const int r = r0 + k;
        if (r < rows) out[(long long)c * rows + r] = in[(long long)r * cols + c];
    }
}
