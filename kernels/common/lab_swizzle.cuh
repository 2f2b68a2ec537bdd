// XOR swizzle for unpadded shared-memory tiles of 16-bit elements (gemm_tc rung 03 on), any arch.
//
// The problem. Shared memory has 32 banks of 4 bytes: a 128-byte "line" touches each bank once, and a
// 16-byte chunk covers one group of 4 banks (8 groups per line). ldmatrix reads 8 rows of one 8x8
// matrix, one 16-byte chunk per row, at the same column of 8 consecutive tile rows; the read takes one
// wavefront only if those 8 chunks lie in 8 different bank groups. In an unpadded tile whose rows are
// R bytes long, row r's chunk starts at r * R (+ the column), so rows of 64 bytes (BK = 32 halves) hit
// 2 groups (a 4-way conflict), and rows of 128 or 256 bytes hit 1 (8-way).
//
// The fix. Store logical chunk `chunk` of tile row `row` (ROW_CHUNKS chunks per row) at physical chunk
//     l ^ key,   l = row * ROW_CHUNKS + chunk (the unpadded position),
//                key = (l / LINE) % 8,  LINE = max(ROW_CHUNKS, 8) chunks,
// i.e. XOR the chunk's position inside its 128-byte line (the low 3 bits of l) with 3 bits taken
// from the row:
//   * rows of 8 or more chunks (>= 128 bytes): key = row % 8. The 8 rows an ldmatrix reads (r0 .. r0+7,
//     r0 a multiple of 8) have 8 different keys, so the same logical chunk lands at 8 different
//     positions in its line: 8 bank groups. (For rows longer than 128 bytes the XOR stays inside the
//     chunk's own 128-byte line of the row.)
//   * rows of 4 chunks (64 bytes, BK = 32): two rows share a line, and key = (row / 2) % 8. Rows
//     r0 .. r0+7 lie in 4 lines with 4 different keys j (j = 0..3 or 4..7, the same bit 2); an even row
//     puts chunk c at c ^ j, an odd row at (c + 4) ^ j: 4 positions with bit 2 of c and 4 with it flipped,
//     8 in all.
// Writes stay conflict-free too: 8 threads that write 8 consecutive chunks of one line (the cp.async
// copies do) XOR them all with the same key, a permutation of the line's 8 groups. The mapping is a
// bijection (it permutes each aligned group of 8 chunks), so the tile needs no padding: BM * BK * 2
// bytes instead of BM * (BK + 8) * 2. This is the pattern CUTLASS and CuTe call Swizzle<3, 3, 3> in
// units of halves (XOR bits 3-5 of the element index with bits 6-8) for 128-byte rows.
// Shifting the row by a multiple of 16 (ROW_CHUNKS >= 4) leaves the key unchanged, so a warp's
// addresses for its other 16-row fragments are its first address plus a constant: the rungs compute
// one swizzled offset per lane and add immediates.
#pragma once

// The swizzled 16-byte chunk index (in the tile, from its start) of logical chunk `chunk` of `row`.
template <int ROW_CHUNKS>
__device__ __forceinline__ int swizzle_chunk(int row, int chunk) {
    static_assert(ROW_CHUNKS >= 4 && (ROW_CHUNKS & (ROW_CHUNKS - 1)) == 0,
                  "rows of a power-of-two number of 16-byte chunks, at least 4 (64 bytes)");
    constexpr int LINE = ROW_CHUNKS > 8 ? ROW_CHUNKS : 8;
    const int l = row * ROW_CHUNKS + chunk;
    return l ^ ((l / LINE) & 7);
}

// The same, as a byte offset from the tile's start.
template <int ROW_CHUNKS>
__device__ __forceinline__ unsigned swizzle_bytes(int row, int chunk) {
    return 16u * static_cast<unsigned>(swizzle_chunk<ROW_CHUNKS>(row, chunk));
}
