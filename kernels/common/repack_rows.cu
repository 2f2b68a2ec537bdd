// Not a rung: the generic fallback of the TMA rungs (gemm_tc 04 on). TMA reads a row-major operand only
// when its rows start 16 bytes apart (a leading dimension that is a multiple of 8 two-byte elements);
// this copies a rows x cols matrix of 2-byte elements with any leading dimension and alignment into one
// whose leading dimension ld_dst is a multiple of 8, zero-filling the columns past cols.
// One thread writes one 16-byte chunk of the destination and gathers its 8 source elements with 2-byte
// loads (the source rows may start at any even address); consecutive threads take consecutive chunks of a
// row, so a warp reads 512 contiguous source bytes and writes 512 contiguous destination bytes.
// scripts/gemm_tc_repack.py times it against CuPy's strided copy (dst[:, :cols] = src[:, :cols]) and the
// device copy of the same bytes, in the same run (results/h200/gemm_tc_repack.json, H200, cold L2; the table
// is in results/h200/gemm_tc_notes.md): the family launches this kernel because it ran near the device copy
// there, and CuPy's strided copy far below both.
// Requires: dst 16-byte aligned, ld_dst a multiple of 8 and >= cols; any src, ld_src >= cols.
extern "C" __global__ void lab_repack_rows(const unsigned short* __restrict__ src, long long ld_src,
                                           unsigned short* __restrict__ dst, long long ld_dst, int rows, int cols) {
    const long long chunks_per_row = ld_dst / 8;
    const long long chunk = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (chunk >= chunks_per_row * rows) return;
    const long long row = chunk / chunks_per_row;
    const int col = static_cast<int>(chunk - row * chunks_per_row) * 8;
    const unsigned short* s = src + row * ld_src + col;
    unsigned short e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = col + j < cols ? s[j] : 0;
    uint4 v;
    v.x = e[0] | (static_cast<unsigned>(e[1]) << 16);
    v.y = e[2] | (static_cast<unsigned>(e[3]) << 16);
    v.z = e[4] | (static_cast<unsigned>(e[5]) << 16);
    v.w = e[6] | (static_cast<unsigned>(e[7]) << 16);
    *reinterpret_cast<uint4*>(dst + row * ld_dst + col) = v;
}
