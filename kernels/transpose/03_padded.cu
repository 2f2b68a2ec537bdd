// transpose / rung 03 — padded shared memory: no bank conflicts.
//
// What changed: one word of padding per tile row, float tile[TILE][TILE + 1].
// Why: the row stride becomes TILE + 1 words (1 mod 32), so walking down a column steps one bank at a
//   time and the warp's 32 reads land in 32 different banks. Cost: TILE words of shared memory per tile.
// Prediction: shared-memory replays vanish (Nsight: bank conflicts ~0); the kernel should sit at
//   ~85-95% of the device copy, the remaining gap being the tile's barrier and the short per-thread
//   work (TILE/BLOCK_ROWS elements).
// Tails: as rung 02. Requires: any shape, sm_75+. Knobs: TILE (64), BLOCK_ROWS (4): 64-float rows give
//   DRAM 256-byte runs on both sides (chosen by scripts/knob_sweep.py; results/h200/knobs.json).
#ifndef TILE
#define TILE 64
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 4
#endif

extern "C" __global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out, int rows,
                                            int cols) {
    // BEGIN SOLUTION: stage the block's patch in a padded TILE x (TILE + 1) shared tile, sync, write it out transposed.
    __shared__ float tile[TILE][TILE + 1];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
        if (c < cols && r + k < rows) tile[threadIdx.y + k][threadIdx.x] = in[(long long)(r + k) * cols + c];
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;
    r = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
        if (c < rows && r + k < cols) out[(long long)(r + k) * rows + c] = tile[threadIdx.x][threadIdx.y + k];
    // END SOLUTION
}
