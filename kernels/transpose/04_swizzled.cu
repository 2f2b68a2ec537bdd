// transpose / rung 04 — swizzled shared memory: no conflicts and no padding.
//
// What changed (from rung 03, same knobs): the tile is float[TILE][TILE] again, but element (row, col)
//   is stored at column col ^ row (an XOR swizzle, TILE a power of two).
// Why: in any row the map col -> col ^ row is a permutation, so row writes stay conflict-free; down a
//   column (fixed col, 32 consecutive rows) the stored columns col ^ row are all different within one
//   32-word half of the row, so column reads hit 32 different banks too. Same effect as padding, with
//   no wasted words and with addresses that stay 16-byte aligned, which wide shared-memory accesses
//   (and later ldmatrix/TMA tiles in the GEMM ladders) need. Idea as in CUTLASS's swizzled layouts.
// Prediction: the same speed as rung 03 within noise, zero bank conflicts; the two differ in shared-
//   memory footprint, not in time.
// Tails: as rung 02. Requires: any shape, sm_75+; TILE a power of two, 32 or more for no conflicts.
// Knobs: TILE (64), BLOCK_ROWS (4), rung 03's, so that the swizzle is the only change.
#ifndef TILE
#define TILE 64
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 4
#endif
static_assert((TILE & (TILE - 1)) == 0, "the XOR swizzle needs TILE to be a power of two");

extern "C" __global__ void transpose_swizzled(const float* __restrict__ in, float* __restrict__ out, int rows,
                                              int cols) {
    // BEGIN SOLUTION: stage the block's patch in an XOR-swizzled shared tile, sync, write it out transposed, coalesced.
    __shared__ float tile[TILE][TILE];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        const int tr = threadIdx.y + k;
        if (c < cols && r + k < rows) tile[tr][threadIdx.x ^ tr] = in[(long long)(r + k) * cols + c];
    }
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;
    r = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        const int tc = threadIdx.y + k;  // the tile column this output row came from
        if (c < rows && r + k < cols) out[(long long)(r + k) * rows + c] = tile[threadIdx.x][tc ^ threadIdx.x];
    }
    // END SOLUTION
}
