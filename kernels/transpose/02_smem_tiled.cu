// transpose / rung 02 — shared-memory tiled.
//
// What changed: the block loads a TILE x TILE patch into shared memory with coalesced row reads,
//   synchronizes, then writes the transposed patch with coalesced row writes, reading shared
//   memory down a column.
// Why: both global directions are now coalesced. But the column read of a float[TILE][TILE] tile hits
//   one bank again and again (the row stride, 64 words at the default TILE, is 0 mod 32 banks): a warp's
//   32 reads down a column are a 32-way bank conflict.
// Prediction: well above rung 01 (global writes are full sectors now), still short of the copy
//   ceiling because every shared-memory column read is replayed 32 times.
// Tails: threads outside the matrix neither load nor store; the tile's stale entries are never
//   written out. Requires: any shape, sm_75+. Knobs: TILE (64), BLOCK_ROWS (4).
#ifndef TILE
#define TILE 64
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 4
#endif

extern "C" __global__ void transpose_smem_tiled(const float* __restrict__ in, float* __restrict__ out, int rows,
                                                int cols) {
    // BEGIN SOLUTION: stage the block's patch in a TILE x TILE shared tile, sync, write it out transposed, coalesced.
    __shared__ float tile[TILE][TILE];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
        if (c < cols && r + k < rows) tile[threadIdx.y + k][threadIdx.x] = in[(long long)(r + k) * cols + c];
    __syncthreads();
    // The block's output patch: output row = input column.
    c = blockIdx.y * TILE + threadIdx.x;  // output column = input row
    r = blockIdx.x * TILE + threadIdx.y;  // output row = input column
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
        if (c < rows && r + k < cols) out[(long long)(r + k) * rows + c] = tile[threadIdx.x][threadIdx.y + k];
    // END SOLUTION
}
